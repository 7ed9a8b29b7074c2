//! What this kernel allows, measured: every program faultline has is loaded, and cgroup programs
//! attached to a scratch cgroup, and the kernel's answer recorded. A refused mechanism carries the
//! kernel's own error, so an injection that needs it fails with that reason.

use std::fs;
use std::path::PathBuf;

use serde::Serialize;

use crate::bpf::{Loaded, Params, Refusal};
use crate::cgroup::{self, Cgroup};
use crate::journal::{Entry, Journal};
use crate::request::{Fault, Hook, Op, Tier};
use crate::undo::Undo;

/// Facts about the kernel that explain refusals; read, never inferred.
#[derive(Debug, Clone, Serialize)]
pub struct Kernel {
    pub release: String,
    /// Where cgroup v2 is mounted, when it is.
    pub cgroup2: Option<PathBuf>,
    /// Whether the kernel exposes its BTF (`/sys/kernel/btf/vmlinux`), which LSM programs need.
    pub btf: bool,
    /// `/sys/kernel/security/lsm`: the active LSMs (BPF LSM needs `bpf` among them).
    pub lsm: Option<String>,
    /// `/sys/kernel/security/lockdown`.
    pub lockdown: Option<String>,
    pub euid: u32,
}

/// One program and what the kernel said to it.
#[derive(Debug, Clone, Serialize)]
pub struct Mechanism {
    pub hook: Hook,
    pub section: &'static str,
    pub tier: Tier,
    /// The ops (`collector inject syscall --op`, or `network` for drops) that need it.
    pub used_by: Vec<&'static str>,
    pub available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// Why it is unavailable, in one line with the kernel facts that bear on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The probe's findings.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub kernel: Kernel,
    pub mechanisms: Vec<Mechanism>,
}

impl Report {
    pub fn mechanism(&self, hook: Hook) -> Option<&Mechanism> {
        self.mechanisms.iter().find(|m| m.hook == hook)
    }

    /// Whether every program of the fault loads and attaches here, or the first refusal's reason.
    pub fn supports(&self, fault: &Fault) -> Result<(), String> {
        for hook in fault.hooks() {
            match self.mechanism(hook) {
                Some(m) if m.available => {}
                Some(m) => return Err(m.reason.clone().unwrap_or_default()),
                None => return Err(format!("{} was not probed", hook.section())),
            }
        }
        Ok(())
    }

    /// Whether every mechanism of a tier is available.
    pub fn tier_available(&self, tier: Tier) -> bool {
        self.mechanisms
            .iter()
            .filter(|m| m.tier == tier)
            .all(|m| m.available)
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

/// Reads the kernel facts.
pub fn kernel() -> Kernel {
    Kernel {
        release: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
        cgroup2: cgroup::hierarchy_root().ok(),
        btf: std::path::Path::new("/sys/kernel/btf/vmlinux").exists(),
        lsm: read_trimmed("/sys/kernel/security/lsm"),
        lockdown: read_trimmed("/sys/kernel/security/lockdown"),
        euid: rustix::process::geteuid().as_raw(),
    }
}

/// Explains a refusal with the facts that bear on its tier.
pub fn reason(refusal: &Refusal, kernel: &Kernel) -> String {
    let mut reason = refusal.summary();
    if kernel.euid != 0 {
        reason.push_str(&format!(
            "; not running as root (euid {}): loading BPF needs CAP_BPF and CAP_NET_ADMIN or CAP_SYS_ADMIN",
            kernel.euid
        ));
    }
    if refusal.hook.tier() == Tier::Lsm {
        let active = match kernel.lsm.as_deref() {
            Some(list) if list.split(',').any(|l| l == "bpf") => {
                format!("active LSMs `{list}` (bpf among them)")
            }
            Some(list) => {
                format!("active LSMs `{list}` (bpf not among them: boot with lsm=...,bpf)")
            }
            None => {
                "active LSMs unknown (securityfs is not mounted at /sys/kernel/security)".into()
            }
        };
        reason.push_str(&format!(
            "; BPF LSM: {active}, lockdown {}, kernel BTF {}",
            kernel
                .lockdown
                .as_deref()
                .map_or("unknown".into(), |l| format!("`{l}`")),
            if kernel.btf { "present" } else { "absent" },
        ));
    }
    reason
}

/// The ops that need a hook.
fn used_by(hook: Hook) -> Vec<&'static str> {
    let mut ops: Vec<&'static str> = Op::ALL
        .into_iter()
        .filter(|op| op.hooks().contains(&hook))
        .map(Op::name)
        .collect();
    if matches!(hook, Hook::SkbIngress | Hook::SkbEgress) {
        ops.push("network --drop");
    }
    ops
}

/// Tries every mechanism. Cgroup programs are attached to a scratch cgroup faultline creates (and
/// journals) under the cgroup v2 hierarchy and removes again; every program is loaded with
/// parameters that fault nothing.
pub fn probe(journal: &Journal) -> Report {
    let kernel = kernel();
    let scratch = kernel
        .cgroup2
        .as_ref()
        .ok_or_else(|| cgroup::CgroupError::NoHierarchy.to_string())
        .and_then(|root| ScratchCgroup::create(journal, root));
    let params = Params::default();
    let mechanisms = Hook::ALL
        .into_iter()
        .map(|hook| {
            let tried = Loaded::load(&[hook], &params).and_then(|mut loaded| {
                match (&scratch, hook.tier()) {
                    (Ok(scratch), _) => loaded.attach(Some(&scratch.cgroup)),
                    // LSM programs attach to their hook, not to a cgroup.
                    (Err(_), Tier::Lsm) => loaded.attach(None),
                    (Err(why), Tier::Cgroup) => Err(Refusal {
                        hook,
                        stage: "attach",
                        errno: None,
                        message: format!("no cgroup v2 directory to attach to: {why}"),
                        verifier_log: String::new(),
                    }),
                }
            });
            let refusal = tried.err();
            Mechanism {
                hook,
                section: hook.section(),
                tier: hook.tier(),
                used_by: used_by(hook),
                available: refusal.is_none(),
                reason: refusal.as_ref().map(|r| reason(r, &kernel)),
                refusal,
            }
        })
        .collect();
    if let Ok(scratch) = scratch {
        scratch.remove(journal);
    }
    Report { kernel, mechanisms }
}

/// The probe's cgroup, journaled like any other change so a killed probe leaves nothing behind.
struct ScratchCgroup {
    cgroup: Cgroup,
    entry: Entry<Undo>,
}

impl ScratchCgroup {
    fn create(journal: &Journal, root: &std::path::Path) -> Result<ScratchCgroup, String> {
        let path = root
            .join("faultline")
            .join(format!("probe-{}", uuid::Uuid::new_v4().simple()));
        let return_to = cgroup::own_cgroup().map_err(|e| e.to_string())?;
        let entry = Entry::new(
            format!("probe cgroup {}", path.display()),
            Undo::CgroupDir {
                path: path.clone(),
                return_to,
            },
        )
        .map_err(|e| e.to_string())?;
        journal.record(&entry).map_err(|e| e.to_string())?;
        match cgroup::create(&path) {
            Ok(cgroup) => Ok(ScratchCgroup { cgroup, entry }),
            Err(err) => {
                let _ = journal.remove(&entry.id);
                Err(err.to_string())
            }
        }
    }

    fn remove(self, journal: &Journal) {
        drop(self.cgroup);
        match self.entry.undo.revert_local() {
            Ok(_) => {
                if let Err(err) = journal.remove(&self.entry.id) {
                    tracing::warn!("{err}");
                }
            }
            Err(err) => tracing::warn!("probe cgroup left for `collector recover`: {err}"),
        }
    }
}
