//! Undoing journaled Kubernetes API changes from a blocking caller (`collector recover`): the
//! connection to each cluster an entry names, made once and kept for the entries after it.

use std::collections::HashMap;
use std::path::PathBuf;

use super::change::Change;
use super::cluster::{Cluster, ClusterId};
use crate::crash;
use crate::journal::Reverted;

/// Connections to the clusters journal entries name. Use it outside an async runtime: it runs
/// its own.
pub struct Reconnect {
    /// The kubeconfig `collector recover --kubeconfig` was given: it must reach the cluster an
    /// entry names; without it, each entry's own kubeconfig (or the inferred one) is used.
    kubeconfig: Option<PathBuf>,
    runtime: Option<tokio::runtime::Runtime>,
    clusters: HashMap<String, Cluster>,
}

impl Reconnect {
    pub fn new(kubeconfig: Option<PathBuf>) -> Reconnect {
        Reconnect {
            kubeconfig,
            runtime: None,
            clusters: HashMap::new(),
        }
    }

    fn runtime(&mut self) -> Result<&tokio::runtime::Runtime, String> {
        if self.runtime.is_none() {
            self.runtime = Some(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("starting an async runtime: {e}"))?,
            );
        }
        Ok(self.runtime.as_ref().expect("just made"))
    }

    fn cluster(&mut self, id: &ClusterId) -> Result<Cluster, String> {
        if let Some(c) = self.clusters.get(&id.server) {
            return Ok(c.clone());
        }
        let kubeconfig = self.kubeconfig.clone().or_else(|| id.kubeconfig.clone());
        let cluster = self
            .runtime()?
            .block_on(Cluster::connect(kubeconfig.as_deref()))
            .map_err(|e| format!("cannot reach cluster {}: {e}", id.server))?;
        if cluster.id.server != id.server {
            return Err(format!(
                "the change was made in cluster {}, but {} reaches {}: give that cluster's \
                 kubeconfig (--kubeconfig)",
                id.server,
                kubeconfig
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "the default kubeconfig".into()),
                cluster.id.server
            ));
        }
        self.clusters.insert(id.server.clone(), cluster.clone());
        Ok(cluster)
    }

    /// Undoes the changes of one entry, newest first.
    pub fn undo(&mut self, id: &ClusterId, changes: &[Change]) -> Result<Reverted, String> {
        let cluster = self.cluster(id)?;
        let runtime = self.runtime()?;
        let mut done = Vec::new();
        let mut kept = Vec::new();
        for change in changes.iter().rev() {
            let undone = runtime
                .block_on(cluster.undo(change))
                .map_err(|e| e.to_string())?;
            crash::point("recovered change");
            done.push(undone.done);
            kept.extend(undone.kept);
        }
        Ok(Reverted {
            detail: done.join("; "),
            kept,
        })
    }
}
