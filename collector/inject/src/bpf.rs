//! Loading faultline's BPF objects (compiled from `bpf/*.bpf.c` by build.rs) with aya, with one
//! injection's parameters baked in, and attaching them. Links are file descriptors this process
//! holds and never pins: they detach when the [`Loaded`] is dropped, or when the process dies, even
//! by kill -9.

use std::net::IpAddr;
use std::time::Duration;

use aya::maps::Array;
use aya::programs::{
    CgroupAttachMode, CgroupSkb, CgroupSkbAttachType, CgroupSock, CgroupSockAddr, Lsm, ProgramError,
};
use aya::{Btf, Ebpf, EbpfLoader};
use serde::Serialize;

use crate::cgroup::Cgroup;
use crate::request::{Fault, Hook, Tier};

static CGROUP_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/cgroup.bpf.o"));
static LSM_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/lsm.bpf.o"));

/// The values an injection bakes into its programs (read-only globals of `bpf/common.h` and the
/// objects). The defaults fault nothing.
#[derive(Debug, Clone, Default)]
pub struct Params {
    pub threshold: u64,
    pub deadline_ns: u64,
    pub errno: u32,
    pub port: u32,
    pub proto: u32,
    pub addr4: u32,
    pub addr6: [u32; 4],
    pub has_addr: u32,
    /// LSM programs: the cgroup whose processes are faulted.
    pub cgroup_id: u64,
    /// LSM file programs: the directory's kernel dev_t and inode (0: every file).
    pub dev: u32,
    pub ino: u64,
    /// LSM `file_permission`: MAY_READ (4) and/or MAY_WRITE (2).
    pub mask: u32,
}

impl Params {
    /// The parameters of a fault; the deadline comes from [`deadline_after`].
    pub fn of(fault: &Fault, deadline_ns: u64, cgroup_id: u64, file: Option<FileId>) -> Params {
        let peer = fault.peer();
        let mut params = Params {
            threshold: fault.rate().threshold(),
            deadline_ns,
            port: peer.port.map_or(0, u32::from),
            proto: peer.proto.number(),
            cgroup_id,
            ..Params::default()
        };
        match peer.addr {
            Some(IpAddr::V4(v4)) => {
                params.addr4 = u32::from_ne_bytes(v4.octets());
                params.has_addr = 1;
            }
            Some(IpAddr::V6(v6)) => {
                let octets = v6.octets();
                for (word, chunk) in params.addr6.iter_mut().zip(octets.chunks_exact(4)) {
                    *word = u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                }
                params.has_addr = 1;
            }
            None => {}
        }
        if let Fault::Syscall { op, errno, .. } = fault {
            params.errno = errno.number();
            params.mask = match op {
                crate::request::Op::Read => 4,
                crate::request::Op::Write => 2,
                _ => 0,
            };
        }
        if let Some(file) = file {
            params.dev = file.kernel_dev;
            params.ino = file.ino;
        }
        params
    }
}

/// A directory (or file) as the kernel names it in `struct super_block` and `struct inode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FileId {
    pub kernel_dev: u32,
    pub ino: u64,
}

impl FileId {
    pub fn of(path: &std::path::Path) -> std::io::Result<FileId> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path)?;
        Ok(FileId {
            kernel_dev: kernel_dev(meta.dev()),
            ino: meta.ino(),
        })
    }
}

/// glibc's dev_t encoding to the kernel's internal one (major << 20 | minor).
fn kernel_dev(dev: u64) -> u32 {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    ((major << 20) | minor) as u32
}

/// CLOCK_MONOTONIC nanoseconds `window` from now, the clock `bpf_ktime_get_ns` reads.
pub fn deadline_after(window: Duration) -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let now_ns = now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64;
    now_ns.saturating_add(window.as_nanos().min(u64::MAX as u128) as u64)
}

/// Why a program could not be loaded or attached: what the kernel said, nothing guessed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub hook: Hook,
    /// `object`, `load` or `attach`.
    pub stage: &'static str,
    /// The errno the kernel returned, when it was a syscall that failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    pub message: String,
    /// The verifier's log, when it wrote one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub verifier_log: String,
}

impl Refusal {
    fn new(hook: Hook, stage: &'static str, err: &(dyn std::error::Error + 'static)) -> Refusal {
        let (errno, verifier_log) = match err.downcast_ref::<ProgramError>() {
            Some(ProgramError::LoadError {
                io_error,
                verifier_log,
            }) => (io_error.raw_os_error(), verifier_log.to_string()),
            Some(ProgramError::SyscallError(e)) => (e.io_error.raw_os_error(), String::new()),
            _ => (None, String::new()),
        };
        let mut message = err.to_string();
        let mut source = err.source();
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        Refusal {
            hook,
            stage,
            errno,
            message,
            verifier_log: verifier_log.trim().to_owned(),
        }
    }

    /// One line: the hook, the stage and the kernel's answer.
    pub fn summary(&self) -> String {
        let errno = match self.errno {
            Some(n) => format!(
                "{} ({})",
                crate::errno::Errno::parse(&n.to_string())
                    .map(|e| e.to_string())
                    .unwrap_or_else(|_| n.to_string()),
                std::io::Error::from_raw_os_error(n)
            ),
            None => self.message.clone(),
        };
        let log = if self.stage == "load" && self.errno.is_some() && self.verifier_log.is_empty() {
            ", empty verifier log: refused before verification"
        } else {
            ""
        };
        format!(
            "{} ({}) refused at {}: {errno}{log}",
            self.hook.program(),
            self.hook.section(),
            self.stage
        )
    }
}

/// One injection's programs, loaded into the kernel (not yet attached, or attached).
pub struct Loaded {
    ebpf: Ebpf,
    hooks: Vec<Hook>,
    program_ids: Vec<u32>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("hooks", &self.hooks)
            .field("program_ids", &self.program_ids)
            .finish()
    }
}

impl Loaded {
    /// Loads the programs of `hooks` (all of one tier) with `params`. Nothing is attached: loading
    /// changes no behaviour of the system.
    pub fn load(hooks: &[Hook], params: &Params) -> Result<Loaded, Refusal> {
        let first = *hooks.first().expect("at least one hook");
        let tier = first.tier();
        let mut loader = EbpfLoader::new();
        loader
            .override_global("fl_threshold", &params.threshold, true)
            .override_global("fl_deadline_ns", &params.deadline_ns, true)
            .override_global("fl_errno", &params.errno, true);
        let object = match tier {
            Tier::Cgroup => {
                loader
                    .override_global("fl_port", &params.port, true)
                    .override_global("fl_proto", &params.proto, true)
                    .override_global("fl_addr4", &params.addr4, true)
                    .override_global("fl_addr6", &params.addr6, true)
                    .override_global("fl_has_addr", &params.has_addr, true);
                CGROUP_OBJECT
            }
            Tier::Lsm => {
                loader
                    .override_global("fl_cgroup_id", &params.cgroup_id, true)
                    .override_global("fl_dev", &params.dev, true)
                    .override_global("fl_ino", &params.ino, true)
                    .override_global("fl_mask", &params.mask, true);
                LSM_OBJECT
            }
        };
        let mut ebpf = loader
            .load(object)
            .map_err(|e| Refusal::new(first, "object", &e))?;
        let btf = match tier {
            Tier::Lsm => Some(Btf::from_sys_fs().map_err(|e| Refusal::new(first, "load", &e))?),
            Tier::Cgroup => None,
        };
        let mut program_ids = Vec::new();
        for &hook in hooks {
            let program = ebpf.program_mut(hook.program()).ok_or_else(|| Refusal {
                hook,
                stage: "object",
                errno: None,
                message: format!("no program {} in the object", hook.program()),
                verifier_log: String::new(),
            })?;
            let loaded = match hook.lsm_hook() {
                Some(name) => <&mut Lsm>::try_from(&mut *program)
                    .and_then(|p| p.load(name, btf.as_ref().expect("LSM tier has BTF"))),
                None => load_cgroup_program(program),
            };
            loaded.map_err(|e| Refusal::new(hook, "load", &e))?;
            let info = program.info().map_err(|e| Refusal::new(hook, "load", &e))?;
            program_ids.push(info.id());
        }
        Ok(Loaded {
            ebpf,
            hooks: hooks.to_vec(),
            program_ids,
        })
    }

    /// Attaches every program: cgroup programs to `cgroup` as links (beside any others, so a
    /// container's own programs keep running), LSM programs to their hooks (they pick processes by cgroup id).
    pub fn attach(&mut self, cgroup: Option<&Cgroup>) -> Result<(), Refusal> {
        for &hook in &self.hooks {
            let Some(cgroup) = cgroup.filter(|_| hook.tier() == Tier::Cgroup) else {
                if hook.tier() == Tier::Cgroup {
                    return Err(Refusal {
                        hook,
                        stage: "attach",
                        errno: None,
                        message: "no cgroup to attach to".into(),
                        verifier_log: String::new(),
                    });
                }
                let program = self
                    .ebpf
                    .program_mut(hook.program())
                    .expect("loaded before");
                <&mut Lsm>::try_from(program)
                    .and_then(|p| p.attach().map(drop))
                    .map_err(|e| Refusal::new(hook, "attach", &e))?;
                continue;
            };
            let program = self
                .ebpf
                .program_mut(hook.program())
                .expect("loaded before");
            // A link (what aya creates on Linux >= 5.7) must be created without attach flags; the
            // kernel always runs a cgroup's links beside its other programs, as if ALLOW_MULTI.
            let mode = CgroupAttachMode::Single;
            let attached = match hook {
                Hook::SkbIngress | Hook::SkbEgress => {
                    let kind = if hook == Hook::SkbIngress {
                        CgroupSkbAttachType::Ingress
                    } else {
                        CgroupSkbAttachType::Egress
                    };
                    <&mut CgroupSkb>::try_from(program)
                        .and_then(|p| p.attach(cgroup, kind, mode).map(drop))
                }
                Hook::SockCreate => <&mut CgroupSock>::try_from(program)
                    .and_then(|p| p.attach(cgroup, mode).map(drop)),
                _ => <&mut CgroupSockAddr>::try_from(program)
                    .and_then(|p| p.attach(cgroup, mode).map(drop)),
            };
            attached.map_err(|e| Refusal::new(hook, "attach", &e))?;
        }
        Ok(())
    }

    pub fn hooks(&self) -> &[Hook] {
        &self.hooks
    }

    /// The kernel's ids of the loaded programs: once none of them is loaded, nothing of this
    /// injection is attached anywhere.
    pub fn program_ids(&self) -> &[u32] {
        &self.program_ids
    }

    /// Calls that matched the filter, and of those the calls faulted, so far.
    pub fn counts(&self) -> Counts {
        let read = || -> Option<Counts> {
            let map = self.ebpf.map("fl_stats")?;
            let array = Array::<_, u64>::try_from(map).ok()?;
            Some(Counts {
                matched: array.get(&0, 0).ok()?,
                faulted: array.get(&1, 0).ok()?,
            })
        };
        read().unwrap_or_default()
    }
}

fn load_cgroup_program(program: &mut aya::programs::Program) -> Result<(), ProgramError> {
    use aya::programs::Program;
    match program {
        Program::CgroupSkb(p) => p.load(),
        Program::CgroupSock(p) => p.load(),
        Program::CgroupSockAddr(p) => p.load(),
        _ => Err(ProgramError::UnexpectedProgramType),
    }
}

/// What the programs counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub matched: u64,
    pub faulted: u64,
}

/// The ids among `ids` of programs still loaded in the kernel.
pub fn still_loaded(ids: &[u32]) -> Vec<u32> {
    let loaded: std::collections::HashSet<u32> = aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .map(|info| info.id())
        .collect();
    ids.iter()
        .copied()
        .filter(|id| loaded.contains(id))
        .collect()
}

/// Waits (up to `timeout`) for the kernel to release programs whose last reference was closed: a
/// link is freed by a kernel work item shortly after its file descriptor closes.
pub fn wait_released(ids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = still_loaded(ids);
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_t_is_converted_to_the_kernel_encoding() {
        // 8:1 (sda1) and 259:3 (nvme0n1p3) in glibc's encoding.
        assert_eq!(kernel_dev((8 << 8) | 1), (8 << 20) | 1);
        // Majors above 255 keep their low 12 bits at bit 8 (the kernel has no majors above 4095).
        let nvme = (259u64 << 8) | 3;
        assert_eq!(kernel_dev(nvme), (259 << 20) | 3);
    }
}
