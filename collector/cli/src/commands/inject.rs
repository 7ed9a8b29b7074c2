//! `collector inject probe | syscall | network | catalog` and `collector recover`: eBPF faults into
//! real processes, scoped to a cgroup v2 directory. The logic lives in the `inject` crate; this
//! module parses arguments, runs the injection on a runtime and prints.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use inject::injection::{self, Injection, Outcome, Ready, Scope};
use inject::journal::{self, Journal};
use inject::undo::Undo;
use inject::{Direction, Errno, Fault, Op, Peer, Proto, Rate};
use problems::Dur;

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  collector inject probe\n  \
    collector inject syscall --cgroup /sys/fs/cgroup/unified/app --op connect --errno ECONNREFUSED --rate 0.3 --for 10m\n\n\
    Needs root. Every change is journaled first (--journal); `collector recover` reverts what a killed injection left.")]
pub struct Args {
    #[command(subcommand)]
    pub command: InjectCommand,
}

/// Where the journal is: every injection and recovery of one host must use the same.
#[derive(Debug, Clone, clap::Args)]
pub struct JournalArg {
    /// The undo journal's directory.
    #[arg(long, env = "FAULTLINE_JOURNAL", default_value = journal::DEFAULT_DIR)]
    pub journal: PathBuf,
}

impl JournalArg {
    pub fn open(&self) -> anyhow::Result<Journal> {
        Ok(Journal::open(&self.journal)?)
    }
}

#[derive(Debug, Subcommand)]
pub enum InjectCommand {
    /// Which fault mechanisms this kernel allows, measured by loading (and attaching) each BPF
    /// program, and for each refused one the kernel's answer.
    #[command(
        after_help = "Example:\n  collector inject probe\n  collector inject probe --json | jq '.mechanisms[] | select(.available | not) | .reason'\n\n\
        Exits 0 when the probe ran (whatever it found), 1 when it could not run."
    )]
    Probe {
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        journal: JournalArg,
    },
    /// Make a system call fail with an errno for the processes of a cgroup.
    #[command(after_help = "Examples:\n  \
        collector inject syscall --cgroup /sys/fs/cgroup/unified/kubepods/pod1/ctr --op connect --errno ECONNREFUSED --rate 0.3 --for 10m\n  \
        collector inject syscall --cgroup /sys/fs/cgroup/app --op dns --for 5m     # UDP and TCP to :53 fail; resolvers report a temporary failure (EAI_AGAIN)\n  \
        collector inject syscall --op connect --port 5432 -- ./client --check       # a cgroup of its own for the command\n  \
        collector inject syscall --cgroup /sys/fs/cgroup/db --op read --path-prefix /data/db --errno EIO   # needs BPF LSM\n\n\
        Ops: connect, sendmsg, dns, bind, socket (cgroup programs); read, write, open, mmap, fork, accept (BPF LSM).\n\
        Runs until --for ends, Ctrl-C, SIGTERM or the command exits (a command still running then gets SIGTERM);\n\
        then detaches and checks the kernel released every program.\n\
        With a command, exits with its exit code. A mechanism the kernel refuses fails at once (exit 1) with the probe's reason, changing nothing.")]
    Syscall(SyscallArgs),
    /// Drop packets of the processes of a cgroup at a rate (packet loss without netem).
    #[command(after_help = "Examples:\n  \
        collector inject network --cgroup /sys/fs/cgroup/unified/app --drop 0.2 --for 5m\n  \
        collector inject network --cgroup /sys/fs/cgroup/app --drop 40% --direction egress --port 8080 --proto tcp\n\n\
        Each packet in the chosen direction is dropped with the rate: with --direction both (the default) a\n\
        request and its answer are each at risk. Sent UDP datagrams vanish silently; TCP retransmits.")]
    Network(NetworkArgs),
    /// A catalog problem's faults on a real cluster through its Kubernetes API, journaled, held
    /// for a window, then reverted.
    Kube(super::inject_kube::KubeArgs),
    /// Which catalog problems this host can run: the node-level primitives (packet loss, syscall
    /// failures, disk read errors) mapped onto injector requests and checked against the probe.
    #[command(
        after_help = "Example:\n  collector inject catalog\n  collector inject catalog --problems 'social-*' --json\n\n\
        Problems whose faults are Kubernetes API changes need no node agent and are runnable."
    )]
    Catalog {
        /// Comma-separated glob patterns over problem ids.
        #[arg(long)]
        problems: Option<String>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        journal: JournalArg,
    },
}

/// Which processes, for how long, how to report.
#[derive(Debug, Clone, clap::Args)]
pub struct ScopeArgs {
    /// The cgroup v2 directory whose processes (now and later, and those of its sub-cgroups) are
    /// faulted; or give a command after `--` to run in a cgroup faultline creates.
    #[arg(long, conflicts_with = "command")]
    pub cgroup: Option<PathBuf>,
    /// How long the fault lasts (e.g. 30s, 10m); until Ctrl-C when absent.
    #[arg(long = "for")]
    pub window: Option<Dur>,
    /// Print one JSON line when the fault is in effect and one when it ended (with counts).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalArg,
    /// The command to run faulted, in a cgroup of its own.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Which peer the fault applies to.
#[derive(Debug, Clone, clap::Args)]
pub struct PeerArgs {
    /// Only this remote port (the local port for bind).
    #[arg(long)]
    pub port: Option<u16>,
    /// Only this remote address.
    #[arg(long)]
    pub addr: Option<IpAddr>,
    /// Only tcp or udp.
    #[arg(long, default_value = "any", value_parser = parse_proto)]
    pub proto: Proto,
}

impl PeerArgs {
    fn peer(&self) -> Peer {
        Peer {
            port: self.port,
            addr: self.addr,
            proto: self.proto,
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct SyscallArgs {
    /// The call to fail.
    #[arg(long, value_parser = parse_op)]
    pub op: Op,
    /// The errno (a name such as ECONNREFUSED, or a number); each op has a usual default.
    #[arg(long, value_parser = parse_errno)]
    pub errno: Option<Errno>,
    /// The share of matching calls that fail: 0.3 or 30%.
    #[arg(long, default_value = "1", value_parser = parse_rate)]
    pub rate: Rate,
    /// read, write, open, mmap: only files at or under this directory.
    #[arg(long)]
    pub path_prefix: Option<PathBuf>,
    #[command(flatten)]
    pub peer: PeerArgs,
    #[command(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct NetworkArgs {
    /// The share of packets dropped: 0.2 or 20%.
    #[arg(long, value_parser = parse_rate)]
    pub drop: Rate,
    /// ingress (received), egress (sent) or both.
    #[arg(long, default_value = "both", value_parser = parse_direction)]
    pub direction: Direction,
    #[command(flatten)]
    pub peer: PeerArgs,
    #[command(flatten)]
    pub scope: ScopeArgs,
}

fn parse_op(s: &str) -> Result<Op, String> {
    s.parse()
}
fn parse_errno(s: &str) -> Result<Errno, String> {
    Errno::parse(s)
}
fn parse_rate(s: &str) -> Result<Rate, String> {
    s.parse()
}
fn parse_proto(s: &str) -> Result<Proto, String> {
    s.parse()
}
fn parse_direction(s: &str) -> Result<Direction, String> {
    s.parse()
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        InjectCommand::Probe { json, journal } => probe(json, &journal.open()?),
        InjectCommand::Syscall(args) => {
            let fault = Fault::syscall(
                args.op,
                args.errno,
                args.rate,
                args.peer.peer(),
                args.path_prefix,
            )
            .map_err(anyhow::Error::msg)?;
            inject(fault, args.scope)
        }
        InjectCommand::Network(args) => inject(
            Fault::Drop {
                rate: args.drop,
                direction: args.direction,
                peer: args.peer.peer(),
            },
            args.scope,
        ),
        InjectCommand::Catalog {
            problems,
            json,
            journal,
        } => catalog(problems.as_deref(), json, &journal.open()?),
        InjectCommand::Kube(args) => super::inject_kube::run(args),
    }
}

fn probe(json: bool, journal: &Journal) -> anyhow::Result<ExitCode> {
    let report = inject::probe::probe(journal);
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let k = &report.kernel;
    println!("kernel {}", k.release);
    println!(
        "cgroup v2: {}",
        k.cgroup2
            .as_ref()
            .map_or("not mounted".into(), |p| p.display().to_string())
    );
    println!(
        "active LSMs: {}; lockdown: {}; BTF: {}",
        k.lsm.as_deref().unwrap_or("unknown"),
        k.lockdown.as_deref().unwrap_or("unknown"),
        if k.btf { "present" } else { "absent" }
    );
    for m in &report.mechanisms {
        let state = if m.available { "available" } else { "refused" };
        println!("{:<22} {:<9} {}", m.section, state, m.used_by.join(", "));
        if let Some(reason) = &m.reason {
            println!("    {reason}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn catalog(pattern: Option<&str>, json: bool, journal: &Journal) -> anyhow::Result<ExitCode> {
    let catalog = problems::Catalog::builtin()?;
    let report = inject::probe::probe(journal);
    let verdicts =
        inject::catalog::verdicts(&catalog, pattern, &report).map_err(anyhow::Error::msg)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&verdicts)?);
        return Ok(ExitCode::SUCCESS);
    }
    for v in &verdicts {
        let level = if v.node_level { "node" } else { "api" };
        println!("{:<40} {:<12} {level}", v.problem, v.status);
        for reason in &v.reasons {
            println!("    {reason}");
        }
    }
    let runnable = verdicts.iter().filter(|v| v.status == "runnable").count();
    println!("{runnable} of {} problems can run here", verdicts.len());
    Ok(ExitCode::SUCCESS)
}

fn inject(fault: Fault, scope: ScopeArgs) -> anyhow::Result<ExitCode> {
    let journal = scope.journal.open()?;
    let target = match (scope.cgroup, scope.command.is_empty()) {
        (Some(cgroup), true) => Scope::Cgroup(cgroup),
        (None, false) => Scope::Command(scope.command),
        _ => anyhow::bail!(
            "say which processes to fault: --cgroup DIR, or a command after `--` (e.g. `-- ./client`)"
        ),
    };
    let injection = Injection {
        fault,
        scope: target,
        window: scope.window.map(Dur::to_std),
    };
    let json = scope.json;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let outcome = runtime.block_on(injection::run(injection, &journal, |ready| {
        print_ready(ready, json)
    }))?;
    print_outcome(&outcome, json)?;
    Ok(match outcome.command_exit {
        Some(code) => ExitCode::from(code.clamp(0, 255) as u8),
        None => ExitCode::SUCCESS,
    })
}

fn print_ready(ready: &Ready, json: bool) {
    if json {
        println!("{}", serde_json::to_string(ready).unwrap_or_default());
    } else {
        let until = ready.until.map_or("until Ctrl-C".into(), |t| {
            format!("until {}", t.to_rfc3339())
        });
        println!(
            "{} in {} (programs {:?}), {until}",
            ready.fault,
            ready.cgroup.display(),
            ready.program_ids
        );
    }
}

fn print_outcome(outcome: &Outcome, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(outcome)?);
    } else {
        let left = if outcome.released {
            "detached, nothing left attached"
        } else {
            "detached, but the kernel still held programs: run `collector recover`"
        };
        println!(
            "ended ({}): {} of {} matching calls or packets faulted; {left}",
            outcome.ended.name(),
            outcome.counts.faulted,
            outcome.counts.matched
        );
    }
    Ok(())
}

/// `collector recover`: reverts whatever the journal still lists.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  collector recover\n  collector recover --kubeconfig ~/.kube/config --json\n  collector recover --journal /var/lib/faultline/journal\n\n\
    A change whose injector still runs is ended first (SIGTERM, then --grace). Idempotent: a second run finds\n\
    nothing. A Kubernetes field someone else changed after the fault is left as found and listed.\n\
    Exits 1 when something could not be reverted (it stays listed)."
)]
pub struct RecoverArgs {
    #[command(flatten)]
    pub journal: JournalArg,
    /// Kubeconfig of the cluster whose journaled Kubernetes API changes are reverted (it must
    /// reach the cluster each entry names); default: the kubeconfig each entry was made with.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// How long a running injector gets to undo its own changes after SIGTERM.
    #[arg(long, default_value = "10s")]
    pub grace: Dur,
    #[arg(long)]
    pub json: bool,
}

pub fn recover(args: RecoverArgs) -> anyhow::Result<ExitCode> {
    let journal = open_existing(&args.journal.journal)?;
    let Some(journal) = journal else {
        if args.json {
            println!("[]");
        } else {
            println!(
                "nothing to recover: {} does not exist",
                args.journal.journal.display()
            );
        }
        return Ok(ExitCode::SUCCESS);
    };
    let mut reconnect = inject::api::recover::Reconnect::new(args.kubeconfig.clone());
    let done = journal::recover::<Undo>(&journal, args.grace.to_std(), &mut reconnect)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&done)?);
    } else if done.is_empty() {
        println!("nothing to recover in {}", journal.dir().display());
    } else {
        for r in &done {
            let state = if r.reverted { "reverted" } else { "FAILED" };
            println!("{state} {}: {}\n    {}", r.id, r.change, r.detail);
            for k in &r.kept {
                println!("    left as found: {k}");
            }
        }
    }
    Ok(if done.iter().all(|r| r.reverted) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::EXIT_FAILURE)
    })
}

/// A journal that was never created has nothing to recover; recovery does not create one.
fn open_existing(dir: &Path) -> anyhow::Result<Option<Journal>> {
    if dir.exists() {
        Ok(Some(Journal::open(dir)?))
    } else {
        Ok(None)
    }
}
