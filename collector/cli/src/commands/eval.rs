//! `collector eval`: every agent of an agents file on every selected problem, several runs, with
//! and without noise, in parallel; resumable; then the board (Diag %, Mitig %, E2E %, TTD, TTM,
//! tokens, pass@k) written by the judge's report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use problems::Dur;

use super::snapshot::load_catalog;
use session::Judging;
use session::eval::{self, EvalOptions, plan};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  collector eval --agents agents.toml --problems 'hotel-*' --runs 3 --noise on,off --jobs 8 --out runs/board\n  judge report runs/board --out board/\n\n\
agents.toml:\n  [[agents]]\n  name = \"my-agent\"\n  command = \"./my-agent.sh\"      # run from this directory, like `collector live --agent`\n  prompt = \"prompt.md\"            # optional template (relative to agents.toml)\n  env = { MODEL = \"small\" }        # optional\n  time_limit = \"10m\"              # optional, overrides --time-limit\n\n\
Each session's agent runs in a sandbox of its own (see `collector live --help`; --no-sandbox is recorded and the board warns of it).\n\
Runs land in OUT/<agent>/<problem>/<noise|quiet>-<run>/; run k uses seed k. Killed or interrupted, the same command resumes: finished runs are kept.\n\
Exit codes: 0 every run finished; 1 some runs could not run (listed); 130 interrupted."
)]
pub struct Args {
    /// The agents file (TOML, [[agents]] tables).
    #[arg(long)]
    pub agents: PathBuf,
    /// Problem ids or glob patterns, comma-separated (`hotel-*,astro-ad-*`).
    #[arg(long)]
    pub problems: String,
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
    #[arg(long, value_parser = schemas::paths::output_dir)]
    pub out: PathBuf,
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
}

/// `--mode`: what a cell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    Live,
    Replay,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let catalog = load_catalog(args.catalog.as_deref())?;
    let agents = plan::read_agents(&args.agents)?;
    let problems: Vec<String> = catalog
        .problems_matching(&args.problems)
        .map_err(|e| anyhow::anyhow!("--problems: {e}"))?
        .into_iter()
        .map(|p| p.id.clone())
        .collect();
    anyhow::ensure!(
        !problems.is_empty(),
        "--problems `{}` matches no problem (see `collector problems list`)",
        args.problems
    );
    anyhow::ensure!(args.runs >= 1, "--runs: expected at least 1");
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
        out: args.out.clone(),
        time_limit: Duration::from_millis(args.time_limit.as_millis()),
        speed: args.speed,
        since_onset: args.since_onset,
        judging: Judging::from_env()?,
        llm_upstream: args.llm_upstream.clone(),
        isolation: args.sandbox.isolation()?,
    };
    let total = opts.agents.len() * opts.problems.len() * opts.runs as usize * opts.noise.len();
    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total as u64)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{bar:30}] {pos}/{len} runs ({elapsed}, eta {eta}) {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_message(format!("judge: {}", opts.judging.describe()));
    let on_cell = |cell: &plan::Cell, failed: Option<&str>| {
        bar.inc(1);
        if args.json {
            let line = serde_json::json!({"run": cell.dir, "error": failed});
            println!("{line}");
        } else if let Some(e) = failed {
            bar.suspend(|| eprintln!("{}: {e}", cell.dir.display()));
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
    })?;
    bar.finish_and_clear();
    let board = judge::cli::report(judge::cli::ReportArgs {
        runs: vec![args.out.clone()],
        out: args.out.join("board"),
        metric: None,
        k: args.k.or(Some(args.runs as usize)),
        json: args.json,
    });
    let summary = format!(
        "{} runs: {} ran now, {} finished before, {} could not run{}",
        total,
        report.ran,
        report.resumed,
        report.failed.len(),
        if report.interrupted {
            " (interrupted: run the same command to resume)"
        } else {
            ""
        }
    );
    if !args.json {
        for (dir, e) in &report.failed {
            eprintln!("failed: {}: {e}", dir.display());
        }
    }
    eprintln!("{summary}");
    match board {
        Ok(_) => {}
        Err(e) if report.ran + report.resumed == 0 => {
            eprintln!("no board: {e:#}");
        }
        Err(e) => return Err(e).context("writing the board"),
    }
    Ok(if report.interrupted {
        ExitCode::from(130)
    } else if report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
