//! The changes faultline makes to a real system and how each is undone, as journal entries hold
//! them: eBPF programs and the cgroups made for them on a host, and object changes made through a
//! cluster's Kubernetes API. One journal and one `collector recover` serve them all.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::api::recover::Reconnect;
use crate::api::{Change, ClusterId};
use crate::journal::{Revert, Reverted};

/// How to undo one change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Undo {
    /// BPF programs attached through links owned by the injector's file descriptors (never pinned):
    /// the kernel detaches them when the injector ends, however it ends. Undoing is checking that
    /// none of the programs is still loaded.
    BpfLinks {
        cgroup: PathBuf,
        /// ELF sections of the attached programs (`cgroup/connect4`, ...), for people.
        hooks: Vec<String>,
        /// Kernel program ids (never reused while the kernel runs).
        program_ids: Vec<u32>,
    },
    /// A cgroup faultline created for a command it started: processes left in it go back to
    /// `return_to`, then the directory is removed.
    CgroupDir { path: PathBuf, return_to: PathBuf },
    /// Objects changed, created or deleted through a cluster's Kubernetes API, in the order they
    /// were (or were to be) made; undone newest first.
    KubeApi {
        cluster: ClusterId,
        changes: Vec<Change>,
    },
}

/// How long the kernel may take to free programs after their last link closed.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

impl Undo {
    /// Records the uid of the object the `index`-th change created (once the server told it), so
    /// that undoing it never deletes another object of that name.
    pub fn set_created_uid(&mut self, index: usize, uid: Option<String>) {
        if let (Undo::KubeApi { changes, .. }, Some(uid)) = (self, uid)
            && let Some(Change::Create { uid: slot, .. }) = changes.get_mut(index)
        {
            *slot = Some(uid);
        }
    }

    /// Undoes a change of this host (eBPF programs, cgroups), which needs no connection.
    pub fn revert_local(&self) -> Result<String, String> {
        match self {
            Undo::BpfLinks { program_ids, .. } => {
                let left = crate::bpf::wait_released(program_ids, RELEASE_TIMEOUT);
                if left.is_empty() {
                    Ok(format!(
                        "programs {program_ids:?} are no longer loaded: their links closed with the injector"
                    ))
                } else {
                    Err(format!(
                        "programs {left:?} are still loaded although their injector ended: another \
                         reference holds them (see `bpftool prog show id {}` and `bpftool link`)",
                        left[0]
                    ))
                }
            }
            Undo::CgroupDir { path, return_to } => crate::cgroup::remove(path, return_to)
                .map(|()| format!("removed cgroup {}", path.display()))
                .map_err(|e| e.to_string()),
            Undo::KubeApi { cluster, .. } => Err(format!(
                "a change of cluster {} is undone through its API, not locally",
                cluster.server
            )),
        }
    }
}

impl Revert for Undo {
    type Context = Reconnect;

    fn revert(&self, cx: &mut Reconnect) -> Result<Reverted, String> {
        match self {
            Undo::KubeApi { cluster, changes } => cx.undo(cluster, changes),
            local => local.revert_local().map(Reverted::from),
        }
    }
}
