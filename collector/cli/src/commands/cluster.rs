//! The flags that name a real cluster (`--env kube`, `capture`): its kubeconfig, its
//! observability stack and the undo journal, parsed into `realcluster`'s plain options.

use std::path::PathBuf;

use problems::Dur;
use realcluster::{ClusterAccess, Observability};

use super::inject::JournalArg;

/// A cluster's observability stack: what `capture` records and what an agent on the cluster
/// reads.
#[derive(Debug, Clone, clap::Args)]
pub struct ObservabilityArgs {
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

impl ObservabilityArgs {
    pub fn options(&self) -> Observability {
        Observability {
            prometheus: self.prometheus.clone(),
            jaeger: self.jaeger.clone(),
            loki: self.loki.clone(),
        }
    }
}

/// The real cluster a command runs on (`--env kube`), and its observability.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// With --env kube: the cluster's kubeconfig (its current context). Default: KUBECONFIG,
    /// ~/.kube/config, or in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub observability: ObservabilityArgs,
    #[command(flatten)]
    pub journal: JournalArg,
}

impl ClusterArgs {
    pub fn access(&self) -> ClusterAccess {
        ClusterAccess {
            kubeconfig: self.kubeconfig.clone(),
            observability: self.observability.options(),
            journal: self.journal.journal.clone(),
        }
    }
}

/// The real cluster a snapshot runs on (`--env kube`).
#[derive(Debug, Clone, clap::Args)]
pub struct KubeSnapshotArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// With --env kube: how long the healthy cluster is captured before the faults.
    #[arg(long, default_value = "1m")]
    pub baseline: Dur,
    /// With --env kube: how long the faults stay in effect (captured) before they are reverted.
    #[arg(long, default_value = "5m")]
    pub hold: Dur,
}

impl KubeSnapshotArgs {
    pub fn options(&self) -> realcluster::snapshot::KubeOptions {
        realcluster::snapshot::KubeOptions {
            cluster: self.cluster.access(),
            baseline: self.baseline,
            hold: self.hold,
        }
    }
}
