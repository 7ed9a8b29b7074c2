//! Real clusters: what flows through here is a problem on a real Kubernetes cluster. The
//! catalog's apps deployed (`deploy`), a problem's faults injected through the API and reverted
//! (`faults`), datasets made on a cluster (`snapshot`) and sessions run against one (`session`:
//! the agent's filtering proxy, `proxy` and `filter`; graded on the cluster's objects and its
//! Prometheus, `health`; the problem's noise played, `noise`; the cluster recorded for the
//! analysis tools, `recording`). The injection itself lives in
//! `inject::api`; this crate puts problems, schedules and sessions around it.

use std::path::PathBuf;

/// A cluster's observability stack: what a capture records and what an agent on the cluster reads.
#[derive(Debug, Clone, Default)]
pub struct Observability {
    /// Prometheus base URL: samples, metadata, alerts.
    pub prometheus: Option<String>,
    /// Jaeger query base URL: traces (api_v3, else v1).
    pub jaeger: Option<String>,
    /// Loki base URL: log lines with their stream; without it, logs come from the Kubernetes API
    /// alone.
    pub loki: Option<String>,
}

/// The real cluster a command runs on, its observability, and where its undo journal is.
#[derive(Debug, Clone)]
pub struct ClusterAccess {
    /// Its kubeconfig (current context); KUBECONFIG, ~/.kube/config or in-cluster when absent.
    pub kubeconfig: Option<PathBuf>,
    pub observability: Observability,
    /// The undo journal's directory.
    pub journal: PathBuf,
}

pub mod deploy;
pub mod faults;
pub mod filter;
pub mod health;
pub mod noise;
pub mod proxy;
pub mod recording;
pub mod session;
pub mod snapshot;
