//! `collector harbor`: faultline's problems as Harbor tasks (the `harbor` crate). `export` and
//! `image` run on the user's machine; `up`, `grade` and `solve` run inside a task's environment
//! (its healthcheck, verifier and reference solution).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use problems::Dur;

use super::snapshot::load_catalog;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  collector harbor export --problems 'hotel-*' --seeds 2 --image you/faultline-harbor:0.1.0 --out tasks/\n  collector harbor image --out image/ && docker build -t you/faultline-harbor:0.1.0 image/\n  harbor run -p tasks/ -a oracle -e docker -n 4"
)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Debug, clap::Subcommand)]
pub enum What {
    /// Write one Harbor task per (problem, seed): task.toml, instruction.md, environment/,
    /// tests/test.sh, solution/solve.sh.
    Export(ExportArgs),
    /// Write the build context of the image the tasks start from (collector, kubectl, curl, jq).
    Image(ImageArgs),
    /// Inside a task's environment (its healthcheck): start the live system once and wait until
    /// it answers.
    Up(EpisodeArgs),
    /// Inside a task's environment (its verifier, as root): grade the session and write Harbor's
    /// reward.json, with the run beside it.
    Grade(GradeArgs),
    /// Inside a task's environment (its reference solution): present the solution token.
    Solve(SolveArgs),
    /// The live system of a task's environment (started by `up`).
    #[command(
        hide = true,
        after_help = "Example (started by `collector harbor up`):\n  collector harbor daemon"
    )]
    Daemon(EpisodeArgs),
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  collector harbor export --problems 'hotel-*' --seeds 2 --image ghcr.io/you/faultline-harbor:0.1.0 --out tasks/\n  collector harbor image --out image/ && docker build -t ghcr.io/you/faultline-harbor:0.1.0 image/\n  harbor run -p tasks/ -a claude-code -m anthropic/claude-sonnet-4 -e docker -n 4\n  harbor run -p tasks/ -a oracle --env faultline_harbor.namespace:NamespaceEnvironment   # no Docker: Linux namespaces (integrations/harbor)\n\n\
Task names are opaque (faultline/fl-<hash>); tasks/faultline-index.json maps them to problems and seeds for you, and is not part of any task. The problem and the grading token live in a root-only file of the environment; the agent works as the unprivileged user `agent` with KUBECONFIG, PROMETHEUS_URL, JAEGER_URL, LOKI_URL, FAULTLINE_SUBMIT_URL and an MCP server (SREGym's variables too). The reward is the mean of the diagnosis (judged deterministically, or by an LLM when the host has JUDGE_BASE_URL / JUDGE_MODEL / JUDGE_API_KEY, passed to the verifier only) and the mitigation (graded on the system): reward.json {\"reward\", \"diagnosis\", \"mitigation\"}.\n\
Problems whose reference fix needs more than the Kubernetes API are left out (listed in the index as skipped): no reference solution could score them."
)]
pub struct ExportArgs {
    /// The problems: comma-separated globs over problem ids.
    #[arg(long, default_value = "*")]
    pub problems: String,
    /// Seeds 1..=N of each problem, each its own task.
    #[arg(long, default_value_t = 1)]
    pub seeds: u64,
    /// The image with collector, kubectl, curl and jq that the tasks' Dockerfiles start FROM
    /// (see `collector harbor image`).
    #[arg(long)]
    pub image: String,
    /// Where the task folders go.
    #[arg(long)]
    pub out: PathBuf,
    /// The agent's time (Harbor's [agent].timeout_sec).
    #[arg(long, default_value = "20m")]
    pub agent_timeout: Dur,
    /// The verifier's time (grading takes seconds; an LLM judge longer).
    #[arg(long, default_value = "10m")]
    pub verifier_timeout: Dur,
    /// How long the failure has been going on when the agent starts.
    #[arg(long, default_value = "5m")]
    pub since_onset: Dur,
    /// Run the problems without their background noise.
    #[arg(long)]
    pub no_noise: bool,
    /// The agent's network: `public` (it can reach its model's API) or `no-network`.
    #[arg(long, default_value = "public", value_parser = ["public", "no-network"])]
    pub network: String,
    /// Don't offer the session's MCP server in task.toml: Harbor refuses agents that do not
    /// declare MCP support on a task that offers one (the oracle and nop run either way).
    #[arg(long)]
    pub no_mcp: bool,
    /// Print the index as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also load specs from this catalog directory.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  collector harbor image --out image/ && docker build -t faultline-harbor:0.1.0 image/"
)]
pub struct ImageArgs {
    /// The build context to write (Dockerfile and this collector binary).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Example (a task's healthcheck):\n  collector harbor up")]
pub struct EpisodeArgs {
    /// The episode file (root's alone).
    #[arg(long, default_value = harbor::episode::EPISODE_FILE)]
    pub episode: PathBuf,
    /// Also load specs from this catalog directory.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example (a task's tests/test.sh):\n  collector harbor grade --logs /logs/verifier\n\nExit codes: 0 graded (reward.json written); 1 grading failed (nothing written: Harbor reports an error, not a 0)."
)]
pub struct GradeArgs {
    /// The episode file (root's alone).
    #[arg(long, default_value = harbor::episode::EPISODE_FILE)]
    pub episode: PathBuf,
    /// Where reward.json, run.json and run/ go.
    #[arg(long, default_value = "/logs/verifier")]
    pub logs: PathBuf,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example (a task's solution/solve.sh, given FAULTLINE_SOLUTION_TOKEN by Harbor):\n  collector harbor solve"
)]
pub struct SolveArgs {
    /// The token of the task's [solution].env.
    #[arg(
        long,
        env = "FAULTLINE_SOLUTION_TOKEN",
        hide_env_values = true,
        default_value = ""
    )]
    pub token: String,
    /// The session's first port.
    #[arg(long, default_value_t = harbor::episode::BASE_PORT)]
    pub base_port: u16,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.what {
        What::Export(a) => export(a),
        What::Image(a) => {
            harbor::export::image_context(&a.out)?;
            println!(
                "docker build -t faultline-harbor:{} {}",
                env!("CARGO_PKG_VERSION"),
                a.out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        What::Up(a) => {
            harbor::control::up(&a.episode)?;
            Ok(ExitCode::SUCCESS)
        }
        What::Daemon(a) => {
            let catalog = load_catalog(a.catalog.as_deref())?;
            harbor::daemon::run(&catalog, &a.episode)?;
            Ok(ExitCode::SUCCESS)
        }
        What::Grade(a) => {
            let graded = harbor::control::grade(&a.episode, &a.logs)?;
            println!("{}", serde_json::to_string(&graded.reward)?);
            Ok(ExitCode::SUCCESS)
        }
        What::Solve(a) => {
            print!("{}", harbor::control::solve(&a.token, a.base_port)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn export(a: ExportArgs) -> anyhow::Result<ExitCode> {
    let catalog = load_catalog(a.catalog.as_deref())?;
    let problems = catalog
        .problems_matching(&a.problems)
        .map_err(|e| anyhow::anyhow!("--problems: {e}"))?;
    anyhow::ensure!(
        !problems.is_empty(),
        "--problems `{}` matches no problem (see `collector problems list`)",
        a.problems
    );
    anyhow::ensure!(a.seeds > 0, "--seeds must be at least 1");
    let total = problems.len() as u64 * a.seeds;
    let bar = indicatif::ProgressBar::new(total).with_message("tasks");
    let exp = harbor::export::Export {
        catalog: &catalog,
        problems,
        seeds: a.seeds,
        image: a.image.clone(),
        out: a.out.clone(),
        agent_timeout_secs: a.agent_timeout.to_std().as_secs(),
        verifier_timeout_secs: a.verifier_timeout.to_std().as_secs(),
        since_onset_secs: a.since_onset.to_std().as_secs(),
        noise: !a.no_noise,
        network: a.network.clone(),
        mcp: !a.no_mcp,
    };
    let index = harbor::export::export(&exp, &mut |n| bar.inc(n))
        .with_context(|| format!("exporting into {}", a.out.display()))?;
    bar.finish_and_clear();
    if a.json {
        println!("{}", serde_json::to_string(&index)?);
    } else {
        println!(
            "{} tasks in {} (index: {}); {} problems left out",
            index.tasks.len(),
            a.out.display(),
            a.out.join(harbor::export::INDEX_FILE).display(),
            index.skipped.len()
        );
        for s in &index.skipped {
            println!("  left out {}: {}", s.problem, s.why);
        }
    }
    Ok(ExitCode::SUCCESS)
}
