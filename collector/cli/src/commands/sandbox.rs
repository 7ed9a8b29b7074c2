//! `--no-sandbox`, `--agent-bind` and `--agent-network` of the commands that start agents, and
//! `collector agent-sandbox probe`: what this host allows of the agent's sandbox
//! (`session::sandbox`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use session::Isolation;
use session::sandbox::AgentNetwork;

/// Where the agents of a command run.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    /// Run the agent beside collector, as this user, seeing all this user sees (the catalog, the
    /// binary, other runs: the answers). By default the agent runs in a sandbox: its own user,
    /// PID, mount and network namespaces (bubblewrap), the system's tools read-only, a home with
    /// its task and kubeconfig, and only the session's endpoints on its loopback. A run without
    /// it is recorded as `agent_sandbox: none` and the board warns of it.
    #[arg(long)]
    pub no_sandbox: bool,
    /// A path the sandboxed agent may read (its own code, tools installed outside /usr), bound
    /// read-only at the same path (repeatable).
    #[arg(long = "agent-bind", conflicts_with = "no_sandbox")]
    pub agent_binds: Vec<PathBuf>,
    /// What the sandboxed agent reaches beside the session's endpoints: `session`, nothing;
    /// `public`, the internet (never this host) through an HTTP proxy its HTTPS_PROXY names, for
    /// an agent that calls its model's API itself.
    #[arg(
        long,
        value_enum,
        default_value = "session",
        conflicts_with = "no_sandbox"
    )]
    pub agent_network: NetworkArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NetworkArg {
    Session,
    Public,
}

impl SandboxArgs {
    /// The isolation asked for, once this host is known to allow it: refused with the reason
    /// where it cannot build the sandbox, never silently run without it.
    pub fn isolation(&self) -> anyhow::Result<Isolation> {
        if self.no_sandbox {
            eprintln!(
                "warning: --no-sandbox: the agent runs as this user and can read what this user \
                 can (the catalog, the answers); its runs are recorded as unsandboxed"
            );
            return Ok(Isolation::None);
        }
        session::sandbox::check(&self.agent_binds)?;
        Ok(Isolation::Sandbox {
            binds: self.agent_binds.clone(),
            network: match self.agent_network {
                NetworkArg::Session => AgentNetwork::Session,
                NetworkArg::Public => AgentNetwork::Public,
            },
        })
    }
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  collector agent-sandbox probe\n  collector agent-sandbox probe --json\n\n\
    Exits 0 when this host can build the sandbox, 1 when it cannot (the reason is printed)."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: SandboxCommand,
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Whether this host can build the agent's sandbox: bubblewrap, the relay, and the
    /// namespaces the kernel allows.
    #[command(after_help = "Example:\n  collector agent-sandbox probe --json\n\n\
        Exits 0 when this host can build the sandbox, 1 when it cannot (the reason is printed).")]
    Probe {
        /// Print the findings as JSON (with `usable`).
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let SandboxCommand::Probe { json } = args.command;
    let probe = session::sandbox::probe();
    let refusal = probe.refusal_reason();
    if json {
        let mut value = serde_json::to_value(&probe)?;
        value["usable"] = refusal.is_none().into();
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        let shown = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or_else(|| "missing".to_string(), |p| p.display().to_string())
        };
        println!("bwrap       {}", shown(&probe.bwrap));
        println!("netrelay    {}", shown(&probe.relay));
        println!(
            "namespaces  {}",
            probe
                .namespaces_refused
                .as_deref()
                .map_or_else(|| "allowed".to_string(), |e| format!("refused: {e}"))
        );
        match &refusal {
            None => println!("the agent sandbox can be used"),
            Some(reason) => println!("the agent sandbox cannot be used: {reason}"),
        }
    }
    Ok(match refusal {
        None => ExitCode::SUCCESS,
        Some(_) => ExitCode::from(crate::EXIT_FAILURE),
    })
}
