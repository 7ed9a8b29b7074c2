//! `--sandbox` and `--agent-bind` of the commands that start agents, and `collector agent-sandbox
//! probe`: what this host allows of the agent's sandbox (`session::sandbox`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use session::Isolation;

/// Where the agents of a command run.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    /// Run the agent in a sandbox: its own user, PID, mount and network namespaces (bubblewrap),
    /// the system's tools read-only, a home with its task and kubeconfig, and only the session's
    /// endpoints on its loopback; nothing of collector, the catalog or other runs. Refused, with
    /// the reason, where this host cannot build it (`collector agent-sandbox probe`).
    #[arg(long)]
    pub sandbox: bool,
    /// With --sandbox: a path the agent may read (its own code, tools installed outside /usr),
    /// bound read-only at the same path (repeatable).
    #[arg(long = "agent-bind", requires = "sandbox")]
    pub agent_binds: Vec<PathBuf>,
}

impl SandboxArgs {
    /// The isolation asked for, once this host is known to allow it.
    pub fn isolation(&self) -> anyhow::Result<Isolation> {
        if !self.sandbox {
            return Ok(Isolation::None);
        }
        session::sandbox::check(&self.agent_binds)?;
        Ok(Isolation::Sandbox {
            binds: self.agent_binds.clone(),
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
    Probe {
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
