//! The changes faultline makes to a real system and how each is undone, as journal entries hold
//! them. Issue-specific injectors add variants here (a Kubernetes API fault, ...); the journal and
//! `collector recover` stay the same.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::journal::Revert;

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
}

/// How long the kernel may take to free programs after their last link closed.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

impl Revert for Undo {
    fn revert(&self) -> Result<String, String> {
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
        }
    }
}
