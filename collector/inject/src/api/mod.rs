//! The catalog's faults on a real cluster, through the Kubernetes API (kube-rs): every primitive
//! that is a Kubernetes or application-configuration change, with an exact revert, every change
//! journaled before it is sent.
//!
//! - [`plan`]: what a primitive changes, from the objects as read (IO-free);
//! - [`object`]: objects as JSON, their desired state and field-by-field differences (IO-free);
//! - [`change`]: a change as the journal keeps it, and how undoing it is decided from the object
//!   as it stands now, never overwriting someone else's later change (IO-free);
//! - [`cluster`]: the API calls: reads, server dry runs, guarded writes, undo, pod restarts;
//! - [`recover`]: undoing journaled changes from `collector recover` (a blocking context).
//!
//! An injection ([`Injector::inject`]) refuses a primitive that needs more than the API before it
//! reads anything ([`refusal`]); plans it; sends each change as a server dry run so that the
//! journal records exactly what the server will store; writes the journal entry and fsyncs it;
//! then makes the changes, each guarded by the resourceVersion it was planned on, and marks the
//! entry applied. A kill -9 at any point leaves an entry `collector recover` finishes.

pub mod change;
pub mod cluster;
pub mod object;
pub mod plan;
pub mod recover;

use problems::Primitive;
use problems::app::AppSpec;
use serde::Serialize;

use crate::catalog::{Realization, realize};
use crate::crash;
use crate::journal::{Entry, Journal, JournalError, State};
use crate::request::Tier;
use crate::undo::Undo;
pub use change::Change;
pub use cluster::{ApiError, Cluster, ClusterId, Undone};
use plan::Planned;

/// Why a primitive cannot be injected through the Kubernetes API, and what it needs instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub primitive: &'static str,
    /// The missing capability (`node-agent: cgroup BPF`, `database session`, ...).
    pub needs: String,
    pub detail: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` is not a Kubernetes API change: it needs {} ({})",
            self.primitive, self.needs, self.detail
        )
    }
}

const NODE_AGENT: &str = "the faultline node agent (the privileged DaemonSet that runs `collector \
                          inject` on every node, see docs/ARCHITECTURE.md)";

/// Whether `p` needs more than the Kubernetes API, and what: decided before anything is read.
pub fn refusal(p: &Primitive, app: &AppSpec) -> Option<Refusal> {
    let refuse = |needs: String, detail: String| {
        Some(Refusal {
            primitive: p.name(),
            needs,
            detail,
        })
    };
    match p {
        Primitive::NodeCpuStress { node, .. } => refuse(
            format!("{NODE_AGENT} with host process control"),
            format!("CPU stressors run as processes on node {node}"),
        ),
        Primitive::KubeletDown { node } => refuse(
            format!("{NODE_AGENT} with host process control"),
            format!("the kubelet is a host service of node {node}, stopped and started there"),
        ),
        Primitive::DatabaseAuth { service, .. } | Primitive::DatabaseLock { service, .. } => {
            refuse(
                "a database session".into(),
                format!(
                    "it changes {service}'s own state (users, roles, TLS, a held lock) through a \
                     client inside its pod, not any Kubernetes object"
                ),
            )
        }
        _ => match realize(p, app) {
            Realization::KubernetesApi => None,
            Realization::Node { requests } => {
                let tier = match requests.first().map(|r| r.fault.tier()) {
                    Some(Tier::Lsm) => "BPF LSM programs",
                    _ => "cgroup BPF programs",
                };
                let what: Vec<String> = requests
                    .iter()
                    .map(|r| format!("{} in the pods of {}", r.fault, r.service))
                    .collect();
                refuse(format!("{NODE_AGENT} with {tier}"), what.join("; "))
            }
            Realization::Unsupported { reason } => refuse(NODE_AGENT.into(), reason),
        },
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// Needs more than the API: nothing was read or changed.
    #[error("{0}; nothing was changed")]
    Refused(Refusal),
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("{0}")]
    Other(String),
}

/// An injection in effect: its journal entry (which holds how to undo it).
#[derive(Debug, Clone)]
pub struct Injected {
    pub entry: Entry<Undo>,
    /// Pods deleted so that the change takes effect, by service.
    pub restarted: Vec<(String, usize)>,
}

impl Injected {
    /// The changes made, for people.
    pub fn changes(&self) -> Vec<String> {
        match &self.entry.undo {
            Undo::KubeApi { changes, .. } => changes.iter().map(Change::describe).collect(),
            _ => Vec::new(),
        }
    }
}

/// What reverting an injection did.
#[derive(Debug, Clone, Serialize)]
pub struct Reverted {
    pub id: String,
    pub undone: Vec<Undone>,
}

impl Reverted {
    /// Someone else's later changes, left as found.
    pub fn kept(&self) -> Vec<String> {
        self.undone.iter().flat_map(|u| u.kept.clone()).collect()
    }
}

/// How many times an injection is planned again after a 409 Conflict.
const INJECT_ATTEMPTS: usize = 5;

/// Injects and reverts faults on one cluster, journaling each change first.
#[derive(Clone)]
pub struct Injector {
    pub cluster: Cluster,
    pub journal: Journal,
}

impl Injector {
    /// Applies a primitive of `app`; `label` says what it is in the journal (for people). An
    /// object that changes between its read and the guarded write (a controller updating its
    /// status is enough) makes the write a 409 Conflict: whatever was made is undone and the
    /// injection is planned again from a fresh read, a few times.
    pub async fn inject(
        &self,
        p: &Primitive,
        app: &AppSpec,
        label: String,
    ) -> Result<Injected, InjectError> {
        if let Some(r) = refusal(p, app) {
            return Err(InjectError::Refused(r));
        }
        let mut attempt = 1;
        loop {
            match self.inject_once(p, app, label.clone()).await {
                Err(InjectError::Api(e)) if e.conflict && attempt < INJECT_ATTEMPTS => {
                    tracing::info!("attempt {attempt}: {e}; planning again");
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    async fn inject_once(
        &self,
        p: &Primitive,
        app: &AppSpec,
        label: String,
    ) -> Result<Injected, InjectError> {
        let plan = self.cluster.plan(p, app).await?;
        let mut changes = Vec::with_capacity(plan.changes.len());
        for planned in &plan.changes {
            changes.push(self.cluster.dry_run(planned).await?);
        }
        crash::point("planned");
        let undo = Undo::KubeApi {
            cluster: self.cluster.id.clone(),
            changes,
        };
        let mut entry = Entry::new(label, undo).map_err(|e| InjectError::Other(e.to_string()))?;
        self.journal.record(&entry)?;
        crash::point("journaled");
        for (i, planned) in plan.changes.iter().enumerate() {
            match self.cluster.apply(planned).await {
                Ok(uid) => entry.undo.set_created_uid(i, uid),
                Err(e) => {
                    // Undo what was made (the entry stays until that worked).
                    return Err(match self.revert(entry).await {
                        Ok(_) => InjectError::Api(e),
                        Err(undo) => InjectError::Other(format!(
                            "{e}; undoing what was made failed too ({undo}): run `collector recover`"
                        )),
                    });
                }
            }
            crash::point("changed");
        }
        self.journal.set_state(&mut entry, State::Applied)?;
        crash::point("applied");
        match self.take_effect(&plan, app).await {
            Ok(restarted) => Ok(Injected { entry, restarted }),
            // The fault is made but cannot be brought to every pod: undone, not left half made.
            Err(e) => Err(match self.revert(entry).await {
                Ok(_) => InjectError::Api(e),
                Err(undo) => InjectError::Other(format!(
                    "{e}; undoing the change failed too ({undo}): run `collector recover`"
                )),
            }),
        }
    }

    /// Brings made changes to the pods: a changed pod template to every pod at once, a changed
    /// ConfigMap to its readers (their pods restarted); the pods restarted, by service.
    async fn take_effect(
        &self,
        plan: &plan::Plan,
        app: &AppSpec,
    ) -> Result<Vec<(String, usize)>, ApiError> {
        for planned in &plan.changes {
            if let Planned::Modify {
                target,
                before,
                after,
            } = planned
                && before["spec"]["template"] != after["spec"]["template"]
            {
                self.cluster.roll_out_at_once(target).await?;
            }
        }
        let mut restarted = Vec::new();
        for s in &plan.restart {
            restarted.push((s.clone(), self.cluster.restart(app, s).await?));
        }
        Ok(restarted)
    }

    /// Undoes an injection, newest change first, and removes its journal entry; someone else's
    /// later changes are left as found and reported.
    pub async fn revert(&self, injected_entry: Entry<Undo>) -> Result<Reverted, InjectError> {
        let Undo::KubeApi { changes, .. } = &injected_entry.undo else {
            return Err(InjectError::Other(format!(
                "journal entry {} is not a Kubernetes API change",
                injected_entry.id
            )));
        };
        let mut undone = Vec::with_capacity(changes.len());
        for change in changes.iter().rev() {
            undone.push(self.cluster.undo(change).await?);
            crash::point("undone");
        }
        self.journal.remove(&injected_entry.id)?;
        crash::point("removed");
        Ok(Reverted {
            id: injected_entry.id,
            undone,
        })
    }
}
