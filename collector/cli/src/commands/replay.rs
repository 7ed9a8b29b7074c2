//! `collector replay DATASET`: serve a dataset through the Kubernetes API (and the other APIs) at its
//! virtual now, shifted so that the recording looks live (or frozen at recorded times with
//! `--frozen`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use apis::replay::{Replay, ReplayOptions, write_file};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  collector replay out/dataset --write-kubeconfig /tmp/replay.kubeconfig\n  KUBECONFIG=/tmp/replay.kubeconfig kubectl get pods -A\n  KUBECONFIG=/tmp/replay.kubeconfig kubectl top pods -A\n  collector replay out/dataset --listen 127.0.0.1:8080 --env-file /tmp/replay.env\n  collector replay out/dataset --frozen --at 2026-01-01T00:10:00Z   # times exactly as recorded"
)]
pub struct Args {
    /// The dataset directory (the one holding manifest.json).
    pub dataset: PathBuf,
    /// Address of the first API; the others take the following ports. Port 0 picks free ports.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Serve the system as it was at this RFC 3339 time instead of the dataset's virtual now.
    #[arg(long)]
    pub at: Option<String>,
    /// Serve times exactly as recorded, "now" being the dataset's virtual now. Without it every
    /// served time is moved so that the recording looks live: ages count from the real now, and
    /// clients that send the real current time (promtool, Grafana, MCP servers) see the incident.
    #[arg(long)]
    pub frozen: bool,
    /// Deprecated: replays look live by default now; accepted and ignored.
    #[arg(long, hide = true, conflicts_with = "frozen")]
    pub time_shift: bool,
    /// Write a kubeconfig for kubectl here.
    #[arg(long)]
    pub write_kubeconfig: Option<PathBuf>,
    /// Write the endpoints as KEY=URL lines here.
    #[arg(long)]
    pub env_file: Option<PathBuf>,
    /// Print the endpoints as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub limits: super::limits::LimitArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.time_shift {
        eprintln!(
            "warning: --time-shift is deprecated and has no effect: replays look live unless --frozen is given"
        );
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let replay = Replay::start(&ReplayOptions {
            dataset: args.dataset.clone(),
            listen: args.listen,
            at: args.at.clone(),
            time_shift: !args.frozen,
            limits: args.limits.limits()?,
        })
        .await?;
        let e = &replay.endpoints;
        if let Some(path) = &args.write_kubeconfig {
            write_file(path, &e.kubeconfig())?;
        }
        if let Some(path) = &args.env_file {
            write_file(path, &e.env_lines())?;
        }
        if args.json {
            println!("{}", serde_json::to_string(e)?);
        } else {
            let how = if args.frozen {
                "frozen"
            } else {
                "shifted to look live"
            };
            println!("replaying {} (read-only, {how})", args.dataset.display());
            print!("{}", e.env_lines());
            if let Some(path) = &args.write_kubeconfig {
                println!("kubeconfig: {}", path.display());
            }
            println!("press Ctrl-C to stop");
        }
        use std::io::Write;
        std::io::stdout().flush()?;
        replay.wait().await?;
        Ok(ExitCode::SUCCESS)
    })
}
