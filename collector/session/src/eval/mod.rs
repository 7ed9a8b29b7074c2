//! `collector eval`: agents × problems × runs × noise, each cell one session ([`crate::run`]),
//! several at once. A finished cell is a run directory holding `run.json` (sessions publish a run
//! by renaming it into place), so an evaluation killed at any point resumes by running the cells
//! that have none; what a killed session left half-written sits in `<out>/.unfinished/` and is
//! cleared when the evaluation starts again. Replay evaluations first record one dataset per
//! (problem, seed, noise) under `<out>/.datasets/`, shared by every agent.

pub mod plan;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures_util::StreamExt;
use problems::{Catalog, Dur};
use tokio::sync::watch;

use crate as session;
use crate::{AgentSpec, Judging, SessionOptions, Target};
use plan::{AgentEntry, Cell};
use runner::problem::Options as RunOptions;

/// Live sessions (diagnose and mitigate) or replayed datasets (diagnose).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Live,
    Replay,
}

pub struct EvalOptions {
    pub agents: Vec<AgentEntry>,
    pub problems: Vec<String>,
    pub runs: u64,
    pub noise: Vec<bool>,
    pub mode: Mode,
    pub jobs: usize,
    pub out: PathBuf,
    pub time_limit: Duration,
    pub speed: f64,
    pub since_onset: Dur,
    pub judging: Judging,
    pub llm_upstream: Option<String>,
    /// Where each agent runs (each session sandboxed on its own when sandboxed).
    pub isolation: crate::Isolation,
}

/// What happened to each cell.
#[derive(Debug, Default)]
pub struct EvalReport {
    /// Cells run to the end now.
    pub ran: usize,
    /// Cells finished by an earlier invocation.
    pub resumed: usize,
    /// Cells that could not run, with why.
    pub failed: Vec<(PathBuf, String)>,
    pub interrupted: bool,
}

/// Called as cells finish: the cell and, when it failed, why.
pub type OnCell<'a> = &'a (dyn Fn(&Cell, Option<&str>) + Sync);

/// Runs every cell without a finished run.
pub async fn run(
    catalog: &Catalog,
    opts: &EvalOptions,
    on_cell: OnCell<'_>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<EvalReport> {
    let staging = opts.out.join(".unfinished");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("clearing {}", staging.display()))?;
    }
    let cells = plan::cells(
        &opts.agents,
        &opts.problems,
        opts.runs,
        &opts.noise,
        &opts.out,
    );
    let mut report = EvalReport::default();
    let mut todo = Vec::new();
    for c in cells {
        if c.dir.join(session::RUN_FILE).is_file() {
            report.resumed += 1;
            on_cell(&c, None);
        } else {
            todo.push(c);
        }
    }
    if opts.mode == Mode::Replay {
        record_datasets(catalog, opts, &todo).await?;
    }
    let results: Vec<(Cell, Result<(), String>)> = futures_util::stream::iter(todo)
        .map(|cell| {
            let mut stop = stop.clone();
            let staging = staging.clone();
            async move {
                let outcome = if *stop.borrow() {
                    Err("interrupted before it started".to_string())
                } else {
                    let interrupt = async move {
                        let _ = stop.wait_for(|s| *s).await;
                    };
                    run_cell(catalog, opts, &cell, staging, interrupt)
                        .await
                        .map_err(|e| format!("{e:#}"))
                };
                on_cell(&cell, outcome.as_ref().err().map(String::as_str));
                (cell, outcome)
            }
        })
        .buffer_unordered(opts.jobs.max(1))
        .collect()
        .await;
    for (cell, outcome) in results {
        match outcome {
            Ok(()) => report.ran += 1,
            Err(e) => report.failed.push((cell.dir, e)),
        }
    }
    report.interrupted = *stop.borrow();
    Ok(report)
}

async fn run_cell(
    catalog: &Catalog,
    opts: &EvalOptions,
    cell: &Cell,
    staging: PathBuf,
    interrupt: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let agent = &opts.agents[cell.agent];
    let prompt = match &agent.prompt {
        Some(p) => Some(
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?,
        ),
        None => None,
    };
    let target = match opts.mode {
        Mode::Live => Target::Live {
            problem: Box::new(
                catalog
                    .problem(&cell.problem)
                    .with_context(|| format!("no problem `{}`", cell.problem))?
                    .clone(),
            ),
            seed: cell.run,
            no_noise: !cell.noise,
            speed: opts.speed,
            since_onset: opts.since_onset,
        },
        Mode::Replay => Target::Replay {
            dataset: dataset_dir(&opts.out, cell).join("dataset"),
        },
    };
    let session = SessionOptions {
        agent: AgentSpec {
            name: agent.name.clone(),
            command: agent.command.clone(),
            env: agent.env.clone().into_iter().collect(),
            prompt,
        },
        target,
        time_limit: agent
            .time_limit
            .map_or(opts.time_limit, |d| Duration::from_millis(d.as_millis())),
        out: cell.dir.clone(),
        trial: cell.trial.clone(),
        echo: false,
        judging: opts.judging.clone(),
        staging: Some(staging),
        llm_upstream: agent
            .llm_upstream
            .clone()
            .or_else(|| opts.llm_upstream.clone()),
        isolation: opts.isolation.clone(),
        after_last_stage: agent.after_last_stage.map_or(crate::AFTER_LAST_STAGE, |d| {
            Duration::from_millis(d.as_millis())
        }),
    };
    if let Some(parent) = cell.dir.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    session::run(catalog, &session, interrupt).await.map(|_| ())
}

/// Where the dataset a replay cell is served from is recorded.
fn dataset_dir(out: &Path, cell: &Cell) -> PathBuf {
    out.join(".datasets").join(&cell.problem).join(format!(
        "{}-{}",
        if cell.noise { "noise" } else { "quiet" },
        cell.run
    ))
}

/// Records the datasets the replay cells need (each once, however many agents use it); a dataset
/// without its `evaluation.json` (written last) is unfinished and recorded again.
async fn record_datasets(
    catalog: &Catalog,
    opts: &EvalOptions,
    cells: &[Cell],
) -> anyhow::Result<()> {
    let mut wanted: Vec<(PathBuf, String, u64, bool)> = cells
        .iter()
        .map(|c| (dataset_dir(&opts.out, c), c.problem.clone(), c.run, c.noise))
        .filter(|(dir, ..)| !dir.join("evaluation.json").is_file())
        .collect();
    wanted.sort_by(|a, b| a.0.cmp(&b.0));
    wanted.dedup_by(|a, b| a.0 == b.0);
    let catalog = Arc::new(catalog.clone());
    let jobs = futures_util::stream::iter(wanted).map(|(dir, problem, seed, noise)| {
        let catalog = catalog.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            if dir.exists() {
                std::fs::remove_dir_all(&dir)?;
            }
            let spec = catalog
                .problem(&problem)
                .with_context(|| format!("no problem `{problem}`"))?;
            let run = RunOptions {
                seed,
                no_noise: !noise,
                ..RunOptions::default()
            };
            runner::snapshot::snapshot(&catalog, spec, &run, &dir, &mut |_, _| {})
                .with_context(|| format!("recording {}", dir.display()))?;
            Ok(())
        })
    });
    let results: Vec<_> = jobs.buffer_unordered(opts.jobs.max(1)).collect().await;
    for r in results {
        r.context("recording a dataset")??;
    }
    Ok(())
}
