//! `collector deploy APP`: the catalog's application rendered to Kubernetes manifests (the images,
//! ports, env, probes and resources its TOML describes) and applied to a cluster, or printed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::json;

use super::snapshot::load_catalog;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    collector deploy hotel-reservation --kubeconfig ~/.kube/config\n  \
    collector deploy astronomy-shop --dry-run > shop.yaml && kubectl apply -f shop.yaml\n\n\
    --dry-run prints the objects as a YAML stream (each document JSON) for `kubectl apply -f`.\n\
    Applying creates each object, or merges the rendered fields into one that exists (a second\n\
    deploy changes nothing).\n\
    Exits 1 when an object is refused (the ones before it stay).")]
pub struct Args {
    /// The application (see `collector problems list`: each problem names its application).
    pub app: String,
    /// Kubeconfig of the cluster (its current context). Default: KUBECONFIG, ~/.kube/config, or
    /// in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Print the manifests instead of applying them.
    #[arg(long)]
    pub dry_run: bool,
    /// Also load specs from this catalog directory.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// One JSON line per object applied (`created`, `configured`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let catalog = load_catalog(args.catalog.as_deref())?;
    let Some(app) = catalog.app(&args.app) else {
        let known: Vec<&str> = catalog.apps().map(|a| a.name.as_str()).collect();
        anyhow::bail!(
            "no application `{}` in the catalog (known: {})",
            args.app,
            known.join(", ")
        );
    };
    let objects = problems::manifests::render(app);
    if args.dry_run {
        // A YAML stream whose documents are JSON (valid YAML): `kubectl apply -f` validates each
        // object against its own schema, which it does not for the items of a `List`.
        for o in &objects {
            println!("---\n{}", serde_json::to_string_pretty(o)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let cluster = inject::api::Cluster::connect(args.kubeconfig.as_deref()).await?;
        for o in &objects {
            let (what, outcome) = realcluster::deploy::apply(cluster.client(), o).await?;
            if args.json {
                println!("{}", json!({"object": what, "outcome": outcome}));
            } else {
                println!("{what} {outcome}");
            }
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
