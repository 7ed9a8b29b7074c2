//! Real clusters: a problem's faults injected through the Kubernetes API and reverted
//! (`faults`), the catalog's apps deployed (`deploy`), datasets made on a cluster (`snapshot`)
//! and sessions run against one (`session`, graded on the cluster's objects and its Prometheus:
//! `health`). The injection itself lives in `inject::api`; this
//! module puts problems, schedules and the other commands' machinery around it.

use std::path::PathBuf;

use crate::commands::inject::JournalArg;

/// A cluster's observability stack: what `capture` records and what an agent on the cluster
/// reads.
#[derive(Debug, Clone, clap::Args)]
pub struct Observability {
    /// Prometheus base URL (e.g. http://localhost:9090): samples, metadata, alerts.
    #[arg(long)]
    pub prometheus: Option<String>,
    /// Jaeger query base URL (e.g. http://localhost:16686): traces (api_v3, else v1).
    #[arg(long)]
    pub jaeger: Option<String>,
    /// Loki base URL (e.g. http://localhost:3100): log lines with their stream; without it, logs
    /// come from the Kubernetes API alone.
    #[arg(long)]
    pub loki: Option<String>,
}

/// The real cluster a command runs on (`--env kube`), and its observability.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// With --env kube: the cluster's kubeconfig (its current context). Default: KUBECONFIG,
    /// ~/.kube/config, or in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub observability: Observability,
    #[command(flatten)]
    pub journal: JournalArg,
}

pub mod faults;
pub mod filter;
pub mod health;
pub mod noise;
pub mod proxy;
pub mod recording;
pub mod session;
pub mod snapshot;
