//! `collector env up`: a problem running live in the simulator behind writable APIs, without an
//! agent (the base of `collector live`, and useful on its own to people building agents).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use problems::Dur;

use super::snapshot::load_catalog;
use apis::replay::write_file;
use live::{LiveEnv, LiveOptions};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  collector env up --problem hotel-geo-target-port --write-kubeconfig /tmp/kc --for 10m --out out/geo-live"
)]
pub struct Args {
    #[command(subcommand)]
    pub command: EnvCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum EnvCommand {
    /// Start a problem live: simulate its history, open the APIs, then run with the wall clock.
    Up(UpArgs),
}

#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("what").required(true).args(["problem", "app"])),
    after_help = "Example:\n  collector env up --problem hotel-geo-target-port --seed 3 --write-kubeconfig /tmp/kc --env-file /tmp/env\n  KUBECONFIG=/tmp/kc kubectl -n hotel-reservation patch svc geo -p '{\"spec\":{\"ports\":[{\"port\":8083,\"targetPort\":8083}]}}'\n  KUBECONFIG=/tmp/kc kubectl -n hotel-reservation get endpoints geo -w\n  collector env up --app hotel-reservation --write-kubeconfig /tmp/kc        # healthy: a cluster to inject into\n  collector env up --app hotel-reservation --bare --write-kubeconfig /tmp/kc # nodes only: `collector deploy` onto it\n\nStops on Ctrl-C or after --for; with --out the whole run is written as a dataset."
)]
pub struct UpArgs {
    /// Problem id (see `collector problems list`).
    #[arg(long)]
    pub problem: Option<String>,
    /// Instead of a problem: this application, healthy, with nothing injected.
    #[arg(long, conflicts_with = "problem")]
    pub app: Option<String>,
    /// With --app: the cluster the app runs on without the app's objects (deploy them with
    /// `collector deploy`; the simulator runs the programs their images name).
    #[arg(long, requires = "app")]
    pub bare: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Virtual seconds per wall-clock second (e.g. 10 for quick experiments).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// How long the failure has been going on when the APIs open (e.g. 5m, 90s).
    #[arg(long, default_value = "5m")]
    pub since_onset: Dur,
    /// Stop after this long (wall clock), e.g. 10m; otherwise run until Ctrl-C.
    #[arg(long = "for")]
    pub run_for: Option<Dur>,
    /// Write the run (history, fault, changes, recovery) as a dataset here, ground truth beside it.
    #[arg(long, value_parser = schemas::paths::output_dir)]
    pub out: Option<PathBuf>,
    /// Address of the Kubernetes API (plain HTTP); Prometheus, Jaeger and Loki take the next
    /// ports, and the Kubernetes API over TLS the one after (the kubeconfig's server, with its
    /// CA). Port 0 picks free ports.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Write a kubeconfig for kubectl here (HTTPS, with the environment's certificate authority).
    #[arg(long)]
    pub write_kubeconfig: Option<PathBuf>,
    /// Write the endpoints as KEY=URL lines here.
    #[arg(long)]
    pub env_file: Option<PathBuf>,
    /// Run without the problem's noise profile.
    #[arg(long)]
    pub no_noise: bool,
    /// Also load specs from this catalog directory.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Print the ready line as one JSON object (the endpoints and the startup time).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub limits: super::limits::LimitArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        EnvCommand::Up(up) => run_up(up),
    }
}

fn run_up(args: UpArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let catalog = load_catalog(args.catalog.as_deref())?;
    let problem = match (&args.problem, &args.app) {
        (Some(id), _) => catalog
            .problem(id)
            .with_context(|| {
                format!("no problem `{id}` in the catalog (see `collector problems list`)")
            })?
            .clone(),
        (None, Some(app)) => {
            if catalog.app(app).is_none() {
                let known: Vec<&str> = catalog.apps().map(|a| a.name.as_str()).collect();
                anyhow::bail!(
                    "no application `{app}` in the catalog (known: {})",
                    known.join(", ")
                );
            }
            problems::ProblemSpec::healthy(app)
        }
        (None, None) => anyhow::bail!("give --problem or --app"),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let env = LiveEnv::start(
            &catalog,
            &problem,
            &LiveOptions {
                seed: args.seed,
                speed: args.speed,
                since_onset: args.since_onset,
                no_noise: args.no_noise,
                listen: args.listen,
                out: args.out.clone(),
                record: false,
                bare: args.bare,
                limits: args.limits.limits()?,
            },
        )
        .await?;
        let e = &env.endpoints;
        if let Some(path) = &args.write_kubeconfig {
            write_file(path, &e.kubeconfig())?;
        }
        if let Some(path) = &args.env_file {
            write_file(path, &e.env_lines())?;
        }
        let ready_secs = started.elapsed().as_secs_f64();
        if args.json {
            let mut v = serde_json::to_value(e)?;
            v["ready_secs"] = ready_secs.into();
            println!("{v}");
        } else {
            println!(
                "ready in {ready_secs:.2}s: kubernetes {} prometheus {} jaeger {} loki {}",
                e.kubernetes, e.prometheus, e.jaeger, e.loki
            );
        }
        use std::io::Write;
        std::io::stdout().flush()?;
        // Ctrl-C stops early even with --for: the run is still written.
        let ctrl_c = tokio::signal::ctrl_c();
        match args.run_for {
            Some(d) => {
                let run_for = std::time::Duration::from_millis(d.as_millis());
                tokio::select! {
                    _ = tokio::time::sleep(run_for) => {}
                    stopped = ctrl_c => stopped.context("waiting for Ctrl-C")?,
                }
            }
            None => ctrl_c.await.context("waiting for Ctrl-C")?,
        }
        if let Some(dir) = env.stop().await?.dataset {
            eprintln!("dataset written: {}", dir.display());
        }
        Ok(ExitCode::SUCCESS)
    })
}
