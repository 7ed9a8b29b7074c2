//! `collector eval`: agents × problems × runs × noise, each cell one session ([`crate::run`]),
//! several at once, each cell a run of a results store ([`results::Store`]: a directory or object
//! storage) under the key `<agent>/<problem>/<trial>`. A finished cell is a published run holding
//! `run.json`, so an evaluation killed at any point resumes by running the cells the store lacks;
//! the cells are split into shards ([`results::Shard`]) that every shard computes alike, so Indexed
//! Job pods (or processes on one machine) share one board. In a directory store a session is made
//! under `<out>/.unfinished/shard-K-of-N/` and renamed into place; for an object store in a scratch
//! directory and uploaded. Replay evaluations first record one dataset per (problem, seed, noise),
//! shared by every agent of the shard.

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
    /// Where the runs go.
    pub store: Arc<results::Store>,
    /// This process's share of the cells.
    pub shard: results::Shard,
    /// This shard's private directory for sessions in the making ([`results::Store::scratch`]).
    pub scratch: PathBuf,
    /// Where replay cells' datasets are recorded (a directory store's `.datasets/`, kept for a
    /// resumed evaluation; for an object store, under the scratch directory).
    pub datasets: PathBuf,
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
    /// Cells that could not run (or not be stored), by key, with why.
    pub failed: Vec<(String, String)>,
    /// Cells another writer had stored first (a retried shard racing its first try).
    pub raced: usize,
    pub interrupted: bool,
}

/// Called as cells finish: the cell and, when it failed, why.
pub type OnCell<'a> = &'a (dyn Fn(&Cell, Option<&str>) + Sync);

/// The plan every shard of this evaluation shares: its cells' keys, and what their runs depend
/// on (agents' names and commands, not their environments, which may hold keys).
pub fn plan(opts: &EvalOptions) -> results::Plan {
    let cells = plan::cells(&opts.agents, &opts.problems, opts.runs, &opts.noise);
    let agents: Vec<_> = opts
        .agents
        .iter()
        .map(|a| {
            serde_json::json!({
                "name": a.name,
                "command": a.command,
                "time_limit": a.time_limit.map(|d| d.to_string()),
            })
        })
        .collect();
    results::Plan {
        kind: "eval".into(),
        settings: serde_json::json!({
            "agents": agents,
            "runs": opts.runs,
            "mode": match opts.mode { Mode::Live => "live", Mode::Replay => "replay" },
            "time_limit_secs": opts.time_limit.as_secs_f64(),
            "speed": opts.speed,
            "since_onset": opts.since_onset.to_string(),
        }),
        work: cells.into_iter().map(|c| c.key).collect(),
    }
}

/// Runs this shard's cells that the store lacks.
pub async fn run(
    catalog: &Catalog,
    opts: &EvalOptions,
    on_cell: OnCell<'_>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<EvalReport> {
    let staging = opts.scratch.clone();
    opts.store.put_plan(&plan(opts)).await?;
    let cells = opts.shard.take(plan::cells(
        &opts.agents,
        &opts.problems,
        opts.runs,
        &opts.noise,
    ));
    let keys: Vec<String> = cells.iter().map(|c| c.key.clone()).collect();
    let stored = opts.store.completed(&keys).await?;
    let mut report = EvalReport::default();
    let mut todo = Vec::new();
    for c in cells {
        if stored.contains(&c.key) {
            report.resumed += 1;
            on_cell(&c, None);
        } else {
            todo.push(c);
        }
    }
    if opts.mode == Mode::Replay {
        record_datasets(catalog, opts, &todo).await?;
    }
    let results: Vec<(Cell, Result<results::Published, String>)> = futures_util::stream::iter(todo)
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
            Ok(results::Published::Mine) => report.ran += 1,
            Ok(results::Published::AlreadyThere) => report.raced += 1,
            Err(e) => report.failed.push((cell.key, e)),
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
) -> anyhow::Result<results::Published> {
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
            dataset: dataset_dir(&opts.datasets, cell).join("dataset"),
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
        out: match opts.store.local_root() {
            Some(root) => root.join(&cell.key),
            // Named at random: while the agent runs no path of this process names the problem.
            None => opts.scratch.join(uuid::Uuid::new_v4().simple().to_string()),
        },
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
        listen: crate::any_port(),
    };
    if let Some(parent) = session.out.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    session::run(catalog, &session, interrupt).await?;
    match opts.store.local_root() {
        // The session renamed its run into place itself.
        Some(_) => Ok(results::Published::Mine),
        None => opts.store.publish(&cell.key, &session.out).await,
    }
}

/// Where the dataset a replay cell is served from is recorded.
fn dataset_dir(datasets: &Path, cell: &Cell) -> PathBuf {
    datasets.join(&cell.problem).join(format!(
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
        .map(|c| {
            (
                dataset_dir(&opts.datasets, c),
                c.problem.clone(),
                c.run,
                c.noise,
            )
        })
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

/// The runs of an evaluation's store, gathered for its board.
#[derive(Debug)]
pub struct Gathered {
    /// Each stored run's `run.json`, local (downloaded into the cache for an object store).
    pub run_files: Vec<PathBuf>,
    /// The plan's runs not in the store (yet).
    pub missing: Vec<String>,
    /// Runs per (agent, problem, noise) in the plan: the board's default k.
    pub runs: Option<usize>,
}

/// Gathers the stored runs of the evaluation in `store` (some shards may still be running);
/// `fetched` is called as each run is at hand, with how many there are to fetch.
pub async fn gather(
    store: &results::Store,
    cache: &Path,
    fetched: &(dyn Fn(usize) + Sync),
) -> anyhow::Result<Gathered> {
    let progress = store.progress("eval").await?;
    let total = progress.done.len();
    let dirs: Vec<PathBuf> = futures_util::stream::iter(&progress.done)
        .map(|k| async move {
            let dir = store.local_copy(k, cache).await;
            fetched(total);
            dir
        })
        .buffered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    Ok(Gathered {
        run_files: dirs
            .into_iter()
            .map(|d| d.join(session::RUN_FILE))
            .collect(),
        runs: progress.plan.settings["runs"].as_u64().map(|n| n as usize),
        missing: progress.missing,
    })
}
