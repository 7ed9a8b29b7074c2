//! The `collector` command line: argument parsing, printing and exit codes, one module per
//! subcommand in [`commands`], each with its own `Args` and `run`, over the libraries that do the
//! work: the problem runner ([`runner`]), live environments ([`live`]), replay ([`apis::replay`]),
//! real clusters ([`realcluster`]), sessions and evaluation boards ([`session`]), capture
//! ([`capture`]). [`conceal`] keeps the command line of a command that starts agents out of their
//! sight.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod commands;
pub mod conceal;

use commands::{
    capture, dataset, env as env_cmd, eval as eval_cmd, live as live_cmd, problems, snapshot, sweep,
};

/// Exit code for a failed command (bad input, IO error, invalid dataset).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code for a command line clap could not parse (clap's own convention).
pub const EXIT_USAGE: u8 = 2;

/// Marks an error as worth another try (a results store that did not answer): the command then
/// exits with [`results::EXIT_RETRY`], which an Indexed Job retries, instead of failing for good.
#[derive(Debug)]
pub struct Retry;

impl std::fmt::Display for Retry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "temporary failure (exit {})", results::EXIT_RETRY)
    }
}

/// The exit code of a failed command: [`results::EXIT_RETRY`] for a [`Retry`], else
/// [`EXIT_FAILURE`].
pub fn exit_code_of(err: &anyhow::Error) -> u8 {
    // anyhow finds a context type under later contexts too.
    if err.downcast_ref::<Retry>().is_some() {
        results::EXIT_RETRY
    } else {
        EXIT_FAILURE
    }
}

/// faultline's collector: make RCA datasets from SRE problems, serve them back through real APIs.
#[derive(Debug, Parser)]
#[command(
    name = "collector",
    version,
    after_help = "Example:\n  collector dataset inspect out/dataset\n\nLogs: set RUST_LOG (e.g. RUST_LOG=debug)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Whether this host can sandbox agents (live and eval sandbox them unless --no-sandbox).
    AgentSandbox(commands::sandbox::Args),
    /// Run an SRE analysis tool (ITBench's names) over a dataset.
    Analyze(commands::analyze::Args),
    /// Record a running system (a cluster, or a replay) into a dataset.
    Capture(capture::Args),
    /// Inspect, validate, export and import datasets (ITBench snapshots in and out).
    Dataset(dataset::Args),
    /// Deploy a catalog application to a cluster (its real manifests), or print them.
    Deploy(commands::deploy::Args),
    /// Run a problem live in the simulator, behind writable Kubernetes and read APIs.
    Env(env_cmd::Args),
    /// Evaluate agents × problems × runs × noise in parallel, resumable, and write the board.
    Eval(Box<eval_cmd::Args>),
    /// The problems as Harbor tasks: export them; inside a task, start, grade and solve it.
    Harbor(commands::harbor::Args),
    /// Fault real processes through eBPF, scoped to a cgroup: failing syscalls, packet loss; what
    /// this kernel allows; which catalog problems this host can run.
    Inject(commands::inject::Args),
    /// Evaluate an agent on one problem: it diagnoses and mitigates a live failure (or diagnoses a
    /// replayed dataset), judged and graded, written as a run.
    Live(Box<live_cmd::Args>),
    /// Serve a session's kubectl, Prometheus, Jaeger and Loki as MCP tools (stdio or HTTP).
    Mcp(commands::mcp::Args),
    /// List, show and validate the problem catalog.
    Problems(problems::Args),
    /// Revert whatever the undo journal still lists (faults left by a killed injector).
    Recover(commands::inject::RecoverArgs),
    /// Serve a dataset through the Kubernetes, Prometheus, Jaeger and Loki APIs, read-only.
    Replay(commands::replay::Args),
    /// Serve the problems to other harnesses: `serve openenv`, an OpenEnv environment server.
    Serve(commands::serve::Args),
    /// Run a problem in the embedded simulator and write its dataset and ground truth.
    Snapshot(snapshot::Args),
    /// Run many problems and seeds in parallel into a directory or object storage, sharded and
    /// resumable, with an index.
    Sweep(sweep::Args),
}

impl Cli {
    /// Whether the command starts agents, who could read what it runs off its command line
    /// (problem ids, a dataset's path): see [`conceal`].
    pub fn starts_agents(&self) -> bool {
        matches!(self.command, Command::Live(_) | Command::Eval(_))
    }
}

/// Runs a parsed command line.
pub fn execute(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::AgentSandbox(args) => commands::sandbox::run(args),
        Command::Analyze(args) => commands::analyze::run(args),
        Command::Capture(args) => capture::run(args),
        Command::Dataset(args) => dataset::run(args),
        Command::Deploy(args) => commands::deploy::run(args),
        Command::Env(args) => env_cmd::run(args),
        Command::Eval(args) => eval_cmd::run(*args),
        Command::Harbor(args) => commands::harbor::run(args),
        Command::Inject(args) => commands::inject::run(args),
        Command::Live(args) => live_cmd::run(*args),
        Command::Mcp(args) => commands::mcp::run(args),
        Command::Problems(args) => problems::run(args),
        Command::Recover(args) => commands::inject::recover(args),
        Command::Replay(args) => commands::replay::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Sweep(args) => sweep::run(args),
    }
}

/// Logs go to stderr, filtered by `RUST_LOG` (default: warnings), so stdout stays for results.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
