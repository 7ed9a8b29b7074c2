//! `collector harbor export`: one Harbor task per (problem, seed), each written whole (a staging
//! folder renamed into place), with an index beside them that maps the opaque task names back to
//! problems for the person who exported them (it is not part of any task).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use problems::{Catalog, ProblemSpec};
use serde::Serialize;
use session::submit::AppInfo;

use crate::episode::{BASE_PORT, Episode, sha256_hex, token};
use crate::task::{self, Task};

/// The index of an export, beside its tasks.
pub const INDEX_FILE: &str = "faultline-index.json";

/// What to export.
pub struct Export<'a> {
    pub catalog: &'a Catalog,
    pub problems: Vec<&'a ProblemSpec>,
    /// Seeds 1..=seeds of each problem.
    pub seeds: u64,
    pub image: String,
    pub out: PathBuf,
    pub agent_timeout_secs: u64,
    pub verifier_timeout_secs: u64,
    pub since_onset_secs: u64,
    pub noise: bool,
    pub network: String,
    pub mcp: bool,
}

/// One exported task.
#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    pub name: String,
    pub problem: String,
    pub seed: u64,
}

/// What an export made, and the problems it left out (no reference fix through the API, so no
/// task's reference solution could score).
#[derive(Debug, Clone, Serialize)]
pub struct Index {
    pub tasks: Vec<Exported>,
    pub skipped: Vec<Skipped>,
}

/// A problem left out, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub problem: String,
    pub why: String,
}

pub fn export(e: &Export<'_>, progress: &mut dyn FnMut(u64)) -> anyhow::Result<Index> {
    std::fs::create_dir_all(&e.out).with_context(|| format!("creating {}", e.out.display()))?;
    // Names are a keyed hash: stable within an export, unrelated to any other export's, and
    // never the problem's id (an agent that learns its task's name learns nothing).
    let key = token();
    let mut index = Index {
        tasks: Vec::new(),
        skipped: Vec::new(),
    };
    for problem in &e.problems {
        if let Err(why) = problem.fix_commands() {
            index.skipped.push(Skipped {
                problem: problem.id.clone(),
                why,
            });
            continue;
        }
        let app = e
            .catalog
            .app(&problem.application)
            .with_context(|| format!("{}: no application `{}`", problem.id, problem.application))?;
        let app = AppInfo::of(app);
        for seed in 1..=e.seeds {
            let name = format!(
                "fl-{}",
                &sha256_hex(&format!("{key}/{}/{seed}", problem.id))[..12]
            );
            write_task(e, problem, seed, &name, &app)?;
            index.tasks.push(Exported {
                name,
                problem: problem.id.clone(),
                seed,
            });
            progress(1);
        }
    }
    let text = serde_json::to_string_pretty(&index)? + "\n";
    datasets::write_atomically(&e.out.join(INDEX_FILE), text.as_bytes())
        .with_context(|| format!("writing {}", e.out.join(INDEX_FILE).display()))?;
    Ok(index)
}

fn write_task(
    e: &Export<'_>,
    problem: &ProblemSpec,
    seed: u64,
    name: &str,
    app: &AppInfo,
) -> anyhow::Result<()> {
    let solution_token = token();
    let episode = Episode {
        problem: problem.id.clone(),
        seed,
        noise: e.noise,
        since_onset_secs: e.since_onset_secs,
        // The verifier ends the session; this is only a backstop for an environment left running.
        time_limit_secs: e.agent_timeout_secs + e.verifier_timeout_secs + 600,
        base_port: BASE_PORT,
        grade_token: token(),
        solution_token_sha256: sha256_hex(&solution_token),
    };
    let files = task::render(&Task {
        name,
        image: &e.image,
        app,
        episode: &episode,
        solution_token: &solution_token,
        agent_timeout_secs: e.agent_timeout_secs,
        verifier_timeout_secs: e.verifier_timeout_secs,
        network: &e.network,
        mcp: e.mcp,
    })?;
    let staging = e.out.join(format!(".unfinished-{name}"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    for f in &files {
        write_file(&staging.join(&f.path), &f.text, f.mode)?;
    }
    let to = e.out.join(name);
    std::fs::rename(&staging, &to).with_context(|| format!("moving {} into place", to.display()))
}

fn write_file(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

/// `collector harbor image`: the build context of the image every task starts from: `collector`
/// itself, kubectl, curl and jq on Debian.
pub fn image_context(out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let exe = std::env::current_exe().context("finding this collector")?;
    std::fs::copy(&exe, out.join("collector"))
        .with_context(|| format!("copying {} into {}", exe.display(), out.display()))?;
    write_file(&out.join("Dockerfile"), IMAGE_DOCKERFILE, 0o644)
}

const IMAGE_DOCKERFILE: &str = "# The base image of faultline's Harbor tasks (`collector harbor image`): the collector binary,\n\
# which runs each task's live system, and the tools an SRE agent expects.\n\
FROM debian:bookworm-slim\n\
RUN apt-get update \\\n\
    && apt-get install -y --no-install-recommends kubernetes-client curl jq ca-certificates procps python3 \\\n\
    && rm -rf /var/lib/apt/lists/*\n\
COPY collector /usr/local/bin/collector\n";
