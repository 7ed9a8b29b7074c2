//! Real clusters: a problem's faults injected through the Kubernetes API and reverted
//! (`faults`), the catalog's apps deployed (`deploy`), datasets made on a cluster (`snapshot`)
//! and sessions run against one (`session`). The injection itself lives in `inject::api`; this
//! module puts problems, schedules and the other commands' machinery around it.

use std::path::PathBuf;

use crate::commands::inject::JournalArg;

/// The real cluster a command runs on (`--env kube`), and its observability.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// With --env kube: the cluster's kubeconfig (its current context). Default: KUBECONFIG,
    /// ~/.kube/config, or in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// With --env kube: the cluster's Prometheus base URL.
    #[arg(long)]
    pub prometheus: Option<String>,
    /// With --env kube: the cluster's Jaeger query base URL.
    #[arg(long)]
    pub jaeger: Option<String>,
    /// With --env kube: the cluster's Loki base URL.
    #[arg(long)]
    pub loki: Option<String>,
    #[command(flatten)]
    pub journal: JournalArg,
}

pub mod faults;
pub mod filter;
pub mod proxy;
pub mod session;
pub mod snapshot;
