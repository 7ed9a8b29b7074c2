//! `collector eval`: every agent of an agents file on every selected problem, several runs, with
//! and without noise, in parallel; resumable and shardable over a results store (a directory or
//! object storage); then the board (Diag %, Mitig %, E2E %, TTD, TTM, tokens, pass@k) written by
//! the judge's report. `collector eval board` writes the board of a store, shards still running or
//! not; `--emit-job` / `--on-cluster` run the evaluation as a Kubernetes Indexed Job ([`super::job`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use problems::Dur;

use super::job::JobArgs;
use super::shard::{OUT_HELP, ShardArgs, open_store, progress, retry};
use super::snapshot::load_catalog;
use session::Judging;
use session::eval::{self, EvalOptions, plan};

#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Examples:\n  collector eval --agents agents.toml --problems 'hotel-*' --runs 3 --noise on,off --jobs 8 --out runs/board\n  \
collector eval --agents agents.toml --problems '*' --runs 5 --out s3://evals/board-1 --shard-index 0 --shard-count 40\n  \
collector eval --agents agents.toml --problems '*' --runs 5 --out s3://evals/board-1 --emit-job --shards 40 > job.yaml\n  \
collector eval --agents agents.toml --problems '*' --runs 5 --out s3://evals/board-1 --on-cluster --shards 40 --wait\n  \
collector eval board --from s3://evals/board-1 --out board/\n\n\
agents.toml:\n  [[agents]]\n  name = \"my-agent\"\n  command = \"./my-agent.sh\"      # run from this directory, like `collector live --agent`\n  prompt = \"prompt.md\"            # optional template (relative to agents.toml)\n  env = { MODEL = \"small\" }        # optional\n  time_limit = \"10m\"              # optional, overrides --time-limit\n\n\
Each session's agent runs in a sandbox of its own (see `collector live --help`; --no-sandbox is recorded and the board warns of it).\n\
Runs land in OUT/<agent>/<problem>/<noise|quiet>-<run>/; run k uses seed k. Killed or interrupted, the same command resumes: finished runs are kept. \
Shards (--shard-index/--shard-count, or JOB_COMPLETION_INDEX in an Indexed Job's pods) each run every N-th run of the same list; `collector eval board` gathers them.\n\
Exit codes: 0 every run of this shard finished (whatever its grade); 1 bad input; 75 some runs could not run or be stored (another try runs just those); 130 interrupted."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<EvalCommand>,
    /// The agents file (TOML, [[agents]] tables).
    #[arg(long, required = true)]
    pub agents: Option<PathBuf>,
    /// Problem ids or glob patterns, comma-separated (`hotel-*,astro-ad-*`).
    #[arg(long, required = true)]
    pub problems: Option<String>,
    /// Runs per agent, problem and noise setting (run k uses seed k).
    #[arg(long, default_value_t = 1)]
    pub runs: u64,
    /// Noise settings: on, off or on,off.
    #[arg(long, default_value = "on", value_parser = plan::parse_noise)]
    pub noise: std::vec::Vec<bool>,
    /// Live sessions (diagnose and mitigate) or replayed datasets (diagnose only).
    #[arg(long, value_enum, default_value = "live")]
    pub mode: ModeArg,
    /// Sessions at once.
    #[arg(long, short = 'j', default_value_t = 4)]
    pub jobs: usize,
    #[arg(long, required = true, help = OUT_HELP)]
    pub out: Option<String>,
    #[command(flatten)]
    pub shard: ShardArgs,
    /// Each agent's wall-clock time per session (an agent's own time_limit wins).
    #[arg(long, default_value = "20m")]
    pub time_limit: Dur,
    /// Virtual seconds per wall-clock second in live sessions.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// How long the failure has been going on when an agent starts.
    #[arg(long, default_value = "5m")]
    pub since_onset: Dur,
    /// Send agents' LLM calls through a counting proxy to this OpenAI- or Anthropic-compatible API
    /// (see `collector live --help`); an agent's own `llm_upstream` wins.
    #[arg(long)]
    pub llm_upstream: Option<String>,
    #[command(flatten)]
    pub sandbox: super::sandbox::SandboxArgs,
    /// pass@k of the board (default: the number of runs).
    #[arg(long)]
    pub k: Option<usize>,
    /// Print one JSON line per finished run and the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also load specs from this catalog directory.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    #[command(flatten)]
    pub job: JobArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum EvalCommand {
    /// Write the board of an evaluation's store (its shards done or still running), with how many
    /// runs are missing.
    #[command(
        after_help = "Example:\n  collector eval board --from s3://evals/board-1 --out board/\n\n\
Runs of an object store are downloaded (and checked against their markers' SHA-256) into --cache, default OUT/.runs; a second board reads them from there.\n\
Exit codes: 0 the board is written (missing runs are reported, not an error); 1 no evaluation there."
    )]
    Board(BoardArgs),
}

#[derive(Debug, clap::Args)]
pub struct BoardArgs {
    /// The evaluation's --out: a directory or a store URL.
    #[arg(long)]
    pub from: String,
    /// Directory for board.json and index.html.
    #[arg(long, value_parser = schemas::paths::output_dir)]
    pub out: PathBuf,
    /// Where an object store's runs are downloaded (default: OUT/.runs).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// pass@k of the board (default: the evaluation's runs).
    #[arg(long)]
    pub k: Option<usize>,
    /// Print the board as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--mode`: what a cell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    Live,
    Replay,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(EvalCommand::Board(b)) = args.command {
        return board(b);
    }
    let (Some(agents_file), Some(problems), Some(out)) = (&args.agents, &args.problems, &args.out)
    else {
        anyhow::bail!("--agents, --problems and --out are required");
    };
    let catalog = load_catalog(args.catalog.as_deref())?;
    let agents = plan::read_agents(agents_file)?;
    let problems: Vec<String> = catalog
        .problems_matching(problems)
        .map_err(|e| anyhow::anyhow!("--problems: {e}"))?
        .into_iter()
        .map(|p| p.id.clone())
        .collect();
    anyhow::ensure!(
        !problems.is_empty(),
        "--problems `{}` matches no problem (see `collector problems list`)",
        args.problems.as_deref().unwrap_or_default()
    );
    anyhow::ensure!(args.runs >= 1, "--runs: expected at least 1");
    if args.job.emit_job || args.job.on_cluster {
        return super::job::run(&args, agents_file, &agents, &problems);
    }
    let store = std::sync::Arc::new(open_store(out, session::RUN_FILE)?);
    let shard = args.shard.shard()?;
    let opts = EvalOptions {
        agents,
        problems,
        runs: args.runs,
        noise: args.noise.clone(),
        mode: match args.mode {
            ModeArg::Live => eval::Mode::Live,
            ModeArg::Replay => eval::Mode::Replay,
        },
        jobs: args.jobs,
        scratch: store.scratch(shard)?,
        datasets: match store.local_root() {
            Some(root) => root.join(".datasets"),
            None => std::env::temp_dir().join(format!("faultline-datasets-{}", std::process::id())),
        },
        store: store.clone(),
        shard,
        time_limit: Duration::from_millis(args.time_limit.as_millis()),
        speed: args.speed,
        since_onset: args.since_onset,
        judging: Judging::from_env()?,
        llm_upstream: args.llm_upstream.clone(),
        isolation: args.sandbox.isolation()?,
    };
    let total = shard.take(0..eval::plan(&opts).work.len()).len();
    let bar = progress(args.json, total as u64, "runs");
    bar.set_message(format!("judge: {}", opts.judging.describe()));
    let on_cell = |cell: &plan::Cell, failed: Option<&str>| {
        bar.inc(1);
        if args.json {
            let line = serde_json::json!({"run": cell.key, "error": failed});
            println!("{line}");
        } else if let Some(e) = failed {
            bar.suspend(|| eprintln!("{}: {e}", cell.key));
        }
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let report = runtime.block_on(async {
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                let _ = stop_tx.send(true);
            }
        });
        eval::run(&catalog, &opts, &on_cell, stop).await
    });
    bar.finish_and_clear();
    let _ = std::fs::remove_dir(&opts.scratch);
    if store.local_root().is_none() {
        let _ = std::fs::remove_dir_all(&opts.scratch);
        let _ = std::fs::remove_dir_all(&opts.datasets);
    }
    let report = report.map_err(retry)?;
    if !args.json {
        for (key, e) in &report.failed {
            eprintln!("failed: {key}: {e}");
        }
    }
    eprintln!(
        "{}{} runs: {} ran now, {} finished before, {} made first by another shard, {} could not run{}",
        if shard.is_all() {
            String::new()
        } else {
            format!("{shard}: ")
        },
        total,
        report.ran,
        report.resumed,
        report.raced,
        report.failed.len(),
        if report.interrupted {
            " (interrupted: run the same command to resume)"
        } else {
            ""
        }
    );
    match store.local_root() {
        Some(root) if shard.is_all() => {
            let board = judge::cli::report(judge::cli::ReportArgs {
                runs: vec![root.to_path_buf()],
                out: root.join("board"),
                metric: None,
                k: args.k.or(Some(args.runs as usize)),
                json: args.json,
            });
            match board {
                Ok(_) => {}
                Err(e) if report.ran + report.resumed + report.raced == 0 => {
                    eprintln!("no board: {e:#}");
                }
                Err(e) => return Err(e).context("writing the board"),
            }
        }
        _ => eprintln!(
            "the board, once the runs are in: collector eval board --from {out} --out board"
        ),
    }
    Ok(if report.interrupted {
        ExitCode::from(130)
    } else if report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(results::EXIT_RETRY)
    })
}

/// `collector eval board`.
pub(crate) fn board(args: BoardArgs) -> anyhow::Result<ExitCode> {
    let store = open_store(&args.from, session::RUN_FILE)?;
    let cache = args.cache.clone().unwrap_or_else(|| args.out.join(".runs"));
    let bar = progress(args.json, 0, "runs at hand");
    let runtime = tokio::runtime::Runtime::new()?;
    let gathered = runtime
        .block_on(eval::gather(&store, &cache, &|total| {
            bar.set_length(total as u64);
            bar.inc(1);
        }))
        .with_context(|| format!("reading {}", args.from))?;
    bar.finish_and_clear();
    let total = gathered.run_files.len() + gathered.missing.len();
    eprintln!(
        "{} of {total} runs in {}; {} missing",
        gathered.run_files.len(),
        args.from,
        gathered.missing.len()
    );
    anyhow::ensure!(
        !gathered.run_files.is_empty(),
        "{} holds no finished run yet",
        args.from
    );
    judge::cli::report(judge::cli::ReportArgs {
        runs: gathered.run_files,
        out: args.out.clone(),
        metric: None,
        k: args.k.or(gathered.runs),
        json: args.json,
    })?;
    let missing = serde_json::json!({"total": total, "missing": gathered.missing});
    let path = args.out.join("missing.json");
    datasets::write_atomically(&path, &serde_json::to_vec_pretty(&missing)?)?;
    Ok(ExitCode::SUCCESS)
}
