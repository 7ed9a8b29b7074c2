//! The mitigation proof of one problem: its reference fix, run with real `kubectl` against a live
//! environment, must make the problem recover (graded on a fast-forwarded fork), and the same
//! problem left alone must not. This is what tells a catalog author that a problem is fair: it
//! can be fixed through the API an agent has, and it does not heal by itself.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use problems::{Catalog, ProblemSpec};
use serde::Serialize;

use super::mitigation::{self, StateCheck, Verdict};
use super::{LiveEnv, LiveOptions};

/// What one reference command did.
#[derive(Debug, Clone, Serialize)]
pub struct CommandRun {
    pub command: String,
    pub ok: bool,
    /// Its stdout and stderr, trimmed.
    pub output: String,
}

/// The proof of one problem.
#[derive(Debug, Clone, Serialize)]
pub struct FixProof {
    pub problem: String,
    /// The fix recovers the problem and the unfixed problem does not.
    pub passed: bool,
    /// Why the problem has no fix through the API (then nothing was run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<String>,
    pub commands: Vec<CommandRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_alone: Option<Verdict>,
    pub secs: f64,
}

/// The install hint for a missing kubectl or jq (the shell's exit code 127).
pub const KUBECTL_MISSING: &str = "a reference fix needs kubectl and jq on PATH: `apt-get install kubectl jq` (or `bash tests/run`, which installs them)";

/// Runs the proof of `problem` on a live environment of seed `seed`.
pub async fn prove(
    catalog: &Catalog,
    problem: &ProblemSpec,
    opts: &LiveOptions,
    state: StateCheck<'_>,
) -> anyhow::Result<FixProof> {
    let started = Instant::now();
    let mut proof = FixProof {
        problem: problem.id.clone(),
        passed: false,
        unreachable: None,
        commands: vec![],
        fixed: None,
        left_alone: None,
        secs: 0.0,
    };
    let commands = match problem.fix_commands() {
        Ok(commands) => commands,
        Err(why) => {
            proof.unreachable = Some(why);
            return Ok(proof);
        }
    };
    let dir = tempfile::tempdir().context("creating a directory for the kubeconfig")?;
    let kubeconfig = dir.path().join("kubeconfig");
    let env = LiveEnv::start(catalog, problem, opts).await?;
    let outcome = async {
        std::fs::write(&kubeconfig, env.endpoints.kubeconfig())
            .with_context(|| format!("writing {}", kubeconfig.display()))?;
        let left_alone = mitigation::grade(&env.fork(), state)?;
        let mut all_ok = true;
        for c in commands {
            let run = kubectl(c, &kubeconfig).await?;
            all_ok &= run.ok;
            proof.commands.push(run);
            if !all_ok {
                break;
            }
        }
        let fixed = mitigation::grade(&env.fork(), state)?;
        proof.passed = all_ok && fixed.passed && !left_alone.passed;
        proof.fixed = Some(fixed);
        proof.left_alone = Some(left_alone);
        anyhow::Ok(())
    }
    .await;
    env.stop().await?;
    outcome?;
    proof.secs = started.elapsed().as_secs_f64();
    Ok(proof)
}

/// Runs one command line of a reference fix through `sh -c` with the environment's kubeconfig
/// (a missing kubectl or jq is an error that says how to install them).
pub async fn kubectl(command: &str, kubeconfig: &Path) -> anyhow::Result<CommandRun> {
    // kubectl talks to this process's servers: run it off the async threads.
    let (cmd, kc) = (command.to_string(), kubeconfig.to_path_buf());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .env("KUBECONFIG", &kc)
            .output()
    })
    .await?
    .context("running sh")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.code() == Some(127) {
        anyhow::bail!("{KUBECTL_MISSING}");
    }
    Ok(CommandRun {
        command: command.to_string(),
        ok: out.status.success(),
        output: text.trim().to_string(),
    })
}
