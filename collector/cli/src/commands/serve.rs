//! `collector serve openenv`: faultline's problems as an OpenEnv environment server (the
//! `openenv` crate), for RL training loops and evaluation harnesses with stock OpenEnv clients.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use problems::Dur;

use super::snapshot::load_catalog;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  collector serve openenv --listen 127.0.0.1:8000 --max-sessions 16 --out episodes/"
)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Debug, clap::Subcommand)]
pub enum What {
    /// An OpenEnv environment server: each WebSocket episode is a live session of one problem.
    Openenv(OpenEnvArgs),
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  collector serve openenv --listen 127.0.0.1:8000 --max-sessions 16 --out episodes/\n  collector serve openenv --problems 'hotel-*,social-*' --time-limit 10m --out episodes/\n\n\
Then, from Python (openenv-core or openenv):\n  from openenv.core.generic_client import GenericEnvClient\n  with GenericEnvClient(base_url=\"http://127.0.0.1:8000\").sync() as env:\n      obs = env.reset(suite=\"hotel-*\", seed=3).observation   # instruction, endpoints, tools\n      out = env.step({\"tool\": \"exec_kubectl_cmd_safely\", \"args\": {\"cmd\": \"kubectl get pods -A\"}})\n      env.step({\"tool\": \"submit\", \"args\": {\"ans\": \"the geo service's ...\"}})     # diagnosis\n      end = env.step({\"tool\": \"submit\", \"args\": {\"ans\": \"\"}})                     # once fixed: reward, done\n\n\
`reset` takes problem, suite (globs), seed, variant (noise | quiet) and episode_id; without a problem, the seed draws one of the suite's. The last submission grades the session (the diagnosis judged: by a checklist LLM when JUDGE_BASE_URL / JUDGE_MODEL / JUDGE_API_KEY are set; the mitigation on a fork of the system) and answers reward = mean of the stages' passes, with the run record in `metadata`. Each episode's run is written to OUT/<episode id>.\n\
Also served: GET /health, /metadata, /schema, /openapi.json; POST /mcp (openenv/session/create and close, tools/list and tools/call with session_id). Past --max-sessions, a new session is answered CAPACITY_REACHED. A client that disconnects frees its session."
)]
pub struct OpenEnvArgs {
    /// Address to listen on (port 0: any free port, printed on stderr).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// Sessions (connections with an episode slot) served at once.
    #[arg(long, default_value_t = 8)]
    pub max_sessions: usize,
    /// The problems offered: comma-separated globs over problem ids.
    #[arg(long, default_value = "*")]
    pub problems: String,
    /// Where each episode's run is written (OUT/<episode id>).
    #[arg(long, default_value = "openenv-episodes")]
    pub out: PathBuf,
    /// Wall-clock time an episode has (e.g. 20m).
    #[arg(long, default_value = "20m")]
    pub time_limit: Dur,
    /// How long the failure has been going on when an episode starts.
    #[arg(long, default_value = "5m")]
    pub since_onset: Dur,
    /// The agent's name in the runs' records.
    #[arg(long, default_value = "openenv")]
    pub agent_name: String,
    /// Also load specs from this catalog directory.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.what {
        What::Openenv(args) => openenv(args),
    }
}

fn openenv(args: OpenEnvArgs) -> anyhow::Result<ExitCode> {
    let catalog = load_catalog(args.catalog.as_deref())?;
    let offered = catalog
        .problems_matching(&args.problems)
        .map_err(|e| anyhow::anyhow!("--problems: {e}"))?
        .len();
    anyhow::ensure!(
        offered > 0,
        "--problems `{}` matches no problem (see `collector problems list`)",
        args.problems
    );
    anyhow::ensure!(args.max_sessions > 0, "--max-sessions must be at least 1");
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating --out {}", args.out.display()))?;
    let judging = session::Judging::from_env()?;
    eprintln!("judging diagnoses with: {}", judging.describe());
    let settings = openenv::Settings {
        catalog: Arc::new(catalog),
        offer: args.problems.clone(),
        out: args.out.clone(),
        time_limit: Duration::from_millis(args.time_limit.as_millis()),
        since_onset: args.since_onset,
        judging,
        agent: args.agent_name.clone(),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let local = listener.local_addr()?;
        eprintln!(
            "openenv: serving ws://{local}/ws ({offered} problems, at most {} sessions; runs in {})",
            args.max_sessions,
            args.out.display()
        );
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        axum::serve(listener, openenv::router(settings, args.max_sessions))
            .with_graceful_shutdown(shutdown)
            .await
            .context("serving")
    })?;
    Ok(ExitCode::SUCCESS)
}
