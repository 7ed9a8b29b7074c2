//! `collector inject kube`: a catalog problem's faults on a real cluster, through its Kubernetes
//! API, held for a window, then reverted exactly (someone else's later changes left as found).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use inject::api::{Cluster, Injector};
use problems::Dur;
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};

use super::inject::JournalArg;
use super::snapshot::load_catalog;
use realcluster::faults;

/// Exit code when a revert left someone else's later change as found (reported).
pub const EXIT_KEPT: u8 = 3;

#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:\n  \
    collector inject kube --kubeconfig ~/.kube/config --problem hotel-geo-target-port --for 10m\n  \
    collector inject kube --problem astro-payment-netpol --only 0 --json     # until Ctrl-C\n\n\
    Every change is written to the undo journal and fsynced before it is sent; a killed injector's\n\
    changes are reverted by `collector recover --kubeconfig KC`. Node and kernel faults (packet loss,\n\
    syscall and disk errors, CPU stress, a stopped kubelet) and database-session faults are refused\n\
    before anything is read, naming what they need.\n\
    Exits 0 when reverted, 3 when reverted but someone else's later changes were left as found\n\
    (listed), 1 on an error.")]
pub struct KubeArgs {
    /// Kubeconfig of the cluster (its current context). Default: KUBECONFIG, ~/.kube/config, or
    /// in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The problem whose faults (and decoys) are injected.
    #[arg(long)]
    pub problem: String,
    /// Only these injections, by index among the problem's faults then decoys (repeatable).
    #[arg(long)]
    pub only: Vec<usize>,
    /// How long the faults stay (e.g. 30s, 10m); until Ctrl-C or SIGTERM when absent.
    #[arg(long = "for")]
    pub window: Option<Dur>,
    /// Also load specs from this catalog directory.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// One JSON line when the faults are in effect, one when they are reverted.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub journal: JournalArg,
}

pub fn run(args: KubeArgs) -> anyhow::Result<ExitCode> {
    let catalog = load_catalog(args.catalog.as_deref())?;
    let problem = catalog
        .problem(&args.problem)
        .with_context(|| format!("no problem `{}` in the catalog", args.problem))?
        .clone();
    let app = catalog
        .app(&problem.application)
        .with_context(|| format!("problem {} names no known app", problem.id))?
        .clone();
    let journal = args.journal.open()?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
        let cluster = Cluster::connect(args.kubeconfig.as_deref()).await?;
        let injector = Injector { cluster, journal };
        let started = std::time::Instant::now();
        let active = faults::inject_all(&injector, &problem, &app, &args.only).await?;
        let inject_ms = started.elapsed().as_secs_f64() * 1000.0;
        let entries: Vec<serde_json::Value> = active
            .iter()
            .map(|a| {
                json!({"index": a.index, "primitive": a.primitive, "decoy": a.decoy,
                       "id": a.injected.entry.id, "changes": a.injected.changes(),
                       "restarted": a.injected.restarted})
            })
            .collect();
        if args.json {
            println!(
                "{}",
                json!({"event": "in_effect", "injections": entries, "inject_ms": inject_ms})
            );
        } else {
            for e in &entries {
                println!("in effect: #{} {} ({}): {}", e["index"], e["primitive"], e["id"], e["changes"]);
            }
        }
        use std::io::Write;
        std::io::stdout().flush()?;
        let window = async {
            match args.window {
                Some(d) => tokio::time::sleep(d.to_std()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = window => {}
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        let started = std::time::Instant::now();
        let reverted = faults::revert_all(&injector, active).await?;
        let revert_ms = started.elapsed().as_secs_f64() * 1000.0;
        let kept: Vec<String> = reverted.iter().flat_map(|r| r.kept()).collect();
        let mut done = json!({"event": "reverted", "kept": kept, "revert_ms": revert_ms,
            "undone": reverted.iter().flat_map(|r| r.undone.iter().map(|u| u.done.clone())).collect::<Vec<_>>()});
        if std::env::var_os(inject::crash::CRASH_AT).is_some() {
            done["crash_points"] = inject::crash::passed().into();
        }
        if args.json {
            println!("{done}");
        } else {
            println!("reverted");
            for k in &kept {
                println!("  left as found: {k}");
            }
        }
        Ok(if kept.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(EXIT_KEPT)
        })
    })
}
