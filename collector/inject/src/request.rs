//! What an injection asks for, IO-free: a syscall failing with an errno or packets dropped, at a rate,
//! optionally only towards one peer; which BPF programs (hooks) carry it out and which tier of kernel
//! support that needs. Parsing and validation happen here so that a bad request fails before the
//! kernel is touched.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;

use serde::Serialize;

use crate::errno::Errno;

/// The kernel support a hook needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Cgroup BPF programs attached to a cgroup v2 directory (CONFIG_CGROUP_BPF; any cgroup v2 host).
    Cgroup,
    /// BPF LSM programs (CONFIG_BPF_LSM, `bpf` among the active LSMs, trampolines allowed).
    Lsm,
}

/// One program of faultline's BPF objects, named by where it attaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    Connect4,
    Connect6,
    Sendmsg4,
    Sendmsg6,
    Bind4,
    Bind6,
    SockCreate,
    SkbIngress,
    SkbEgress,
    FilePermission,
    FileOpen,
    MmapFile,
    TaskAlloc,
    SocketAccept,
}

impl Hook {
    pub const ALL: [Hook; 14] = [
        Hook::Connect4,
        Hook::Connect6,
        Hook::Sendmsg4,
        Hook::Sendmsg6,
        Hook::Bind4,
        Hook::Bind6,
        Hook::SockCreate,
        Hook::SkbIngress,
        Hook::SkbEgress,
        Hook::FilePermission,
        Hook::FileOpen,
        Hook::MmapFile,
        Hook::TaskAlloc,
        Hook::SocketAccept,
    ];

    /// The program's function name in the object (`bpf/*.bpf.c`).
    pub fn program(self) -> &'static str {
        match self {
            Hook::Connect4 => "fl_connect4",
            Hook::Connect6 => "fl_connect6",
            Hook::Sendmsg4 => "fl_sendmsg4",
            Hook::Sendmsg6 => "fl_sendmsg6",
            Hook::Bind4 => "fl_bind4",
            Hook::Bind6 => "fl_bind6",
            Hook::SockCreate => "fl_sock_create",
            Hook::SkbIngress => "fl_drop_ingress",
            Hook::SkbEgress => "fl_drop_egress",
            Hook::FilePermission => "fl_file_permission",
            Hook::FileOpen => "fl_file_open",
            Hook::MmapFile => "fl_mmap_file",
            Hook::TaskAlloc => "fl_task_alloc",
            Hook::SocketAccept => "fl_socket_accept",
        }
    }

    /// The ELF section, as libbpf and bpftool name the attach point.
    pub fn section(self) -> &'static str {
        match self {
            Hook::Connect4 => "cgroup/connect4",
            Hook::Connect6 => "cgroup/connect6",
            Hook::Sendmsg4 => "cgroup/sendmsg4",
            Hook::Sendmsg6 => "cgroup/sendmsg6",
            Hook::Bind4 => "cgroup/bind4",
            Hook::Bind6 => "cgroup/bind6",
            Hook::SockCreate => "cgroup/sock_create",
            Hook::SkbIngress => "cgroup_skb/ingress",
            Hook::SkbEgress => "cgroup_skb/egress",
            Hook::FilePermission => "lsm/file_permission",
            Hook::FileOpen => "lsm/file_open",
            Hook::MmapFile => "lsm/mmap_file",
            Hook::TaskAlloc => "lsm/task_alloc",
            Hook::SocketAccept => "lsm/socket_accept",
        }
    }

    /// The LSM hook name aya resolves as `bpf_lsm_<name>` in the kernel's BTF.
    pub fn lsm_hook(self) -> Option<&'static str> {
        match self {
            Hook::FilePermission => Some("file_permission"),
            Hook::FileOpen => Some("file_open"),
            Hook::MmapFile => Some("mmap_file"),
            Hook::TaskAlloc => Some("task_alloc"),
            Hook::SocketAccept => Some("socket_accept"),
            _ => None,
        }
    }

    pub fn tier(self) -> Tier {
        if self.lsm_hook().is_some() {
            Tier::Lsm
        } else {
            Tier::Cgroup
        }
    }
}

/// A system call (or family of calls) a syscall fault fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// connect() on TCP and UDP sockets, IPv4 and IPv6.
    Connect,
    /// sendto()/sendmsg() with a destination address (UDP).
    Sendmsg,
    /// DNS: connect() and sendmsg() to port 53, TCP and UDP.
    Dns,
    /// bind().
    Bind,
    /// socket() for IPv4/IPv6 sockets.
    Socket,
    /// read() and friends on files (BPF LSM `file_permission`, MAY_READ).
    Read,
    /// write() and friends on files (BPF LSM `file_permission`, MAY_WRITE).
    Write,
    /// open()/openat() (BPF LSM `file_open`).
    Open,
    /// mmap() of a file (BPF LSM `mmap_file`).
    Mmap,
    /// fork()/clone() (BPF LSM `task_alloc`).
    Fork,
    /// accept()/accept4() (BPF LSM `socket_accept`).
    Accept,
}

impl Op {
    pub const ALL: [Op; 11] = [
        Op::Connect,
        Op::Sendmsg,
        Op::Dns,
        Op::Bind,
        Op::Socket,
        Op::Read,
        Op::Write,
        Op::Open,
        Op::Mmap,
        Op::Fork,
        Op::Accept,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Connect => "connect",
            Op::Sendmsg => "sendmsg",
            Op::Dns => "dns",
            Op::Bind => "bind",
            Op::Socket => "socket",
            Op::Read => "read",
            Op::Write => "write",
            Op::Open => "open",
            Op::Mmap => "mmap",
            Op::Fork => "fork",
            Op::Accept => "accept",
        }
    }

    /// The hooks that carry the op out.
    pub fn hooks(self) -> &'static [Hook] {
        match self {
            Op::Connect => &[Hook::Connect4, Hook::Connect6],
            Op::Sendmsg => &[Hook::Sendmsg4, Hook::Sendmsg6],
            Op::Dns => &[
                Hook::Connect4,
                Hook::Connect6,
                Hook::Sendmsg4,
                Hook::Sendmsg6,
            ],
            Op::Bind => &[Hook::Bind4, Hook::Bind6],
            Op::Socket => &[Hook::SockCreate],
            Op::Read | Op::Write => &[Hook::FilePermission],
            Op::Open => &[Hook::FileOpen],
            Op::Mmap => &[Hook::MmapFile],
            Op::Fork => &[Hook::TaskAlloc],
            Op::Accept => &[Hook::SocketAccept],
        }
    }

    /// What a call fails with when the request names no errno.
    pub fn default_errno(self) -> Errno {
        let name = match self {
            Op::Connect | Op::Sendmsg | Op::Dns => "ECONNREFUSED",
            Op::Bind => "EADDRINUSE",
            Op::Socket | Op::Accept => "EMFILE",
            Op::Read | Op::Write | Op::Open | Op::Mmap => "EIO",
            Op::Fork => "EAGAIN",
        };
        Errno::parse(name).expect("a known errno")
    }

    fn takes_peer(self) -> bool {
        matches!(self, Op::Connect | Op::Sendmsg | Op::Bind)
    }

    fn takes_path(self) -> bool {
        matches!(self, Op::Read | Op::Write | Op::Open | Op::Mmap)
    }
}

impl FromStr for Op {
    type Err = String;

    fn from_str(s: &str) -> Result<Op, String> {
        Op::ALL
            .into_iter()
            .find(|op| op.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown op `{s}`: expected one of {}",
                    Op::ALL.map(Op::name).join(", ")
                )
            })
    }
}

/// A transport protocol filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Proto {
    #[default]
    Any,
    Tcp,
    Udp,
}

impl Proto {
    /// The IPPROTO number the programs compare with (0 = any).
    pub fn number(self) -> u32 {
        match self {
            Proto::Any => 0,
            Proto::Tcp => 6,
            Proto::Udp => 17,
        }
    }
}

impl FromStr for Proto {
    type Err = String;

    fn from_str(s: &str) -> Result<Proto, String> {
        match s {
            "any" => Ok(Proto::Any),
            "tcp" => Ok(Proto::Tcp),
            "udp" => Ok(Proto::Udp),
            _ => Err(format!("unknown protocol `{s}`: expected tcp, udp or any")),
        }
    }
}

/// Which calls or packets a fault applies to, by the remote end (the local port for bind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Peer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<IpAddr>,
    pub proto: Proto,
}

impl Peer {
    fn is_any(&self) -> bool {
        *self == Peer::default()
    }
}

/// A probability in [0, 1], written `0.3` or `30%`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
pub struct Rate(f64);

impl Rate {
    pub const ALWAYS: Rate = Rate(1.0);

    pub fn new(value: f64) -> Result<Rate, String> {
        if value.is_finite() && (0.0..=1.0).contains(&value) {
            Ok(Rate(value))
        } else {
            Err(format!("rate {value} is outside [0, 1]"))
        }
    }

    pub fn value(self) -> f64 {
        self.0
    }

    /// The programs fault a call when a uniform 32-bit random number is below this.
    pub fn threshold(self) -> u64 {
        (self.0 * 4_294_967_296.0).round() as u64
    }
}

impl FromStr for Rate {
    type Err = String;

    fn from_str(s: &str) -> Result<Rate, String> {
        let (number, scale) = match s.strip_suffix('%') {
            Some(percent) => (percent, 100.0),
            None => (s, 1.0),
        };
        let value: f64 = number
            .trim()
            .parse()
            .map_err(|_| format!("rate `{s}` is not a number: expected e.g. 0.3 or 30%"))?;
        Rate::new(value / scale)
    }
}

/// Which packets a drop fault loses, seen from the faulted processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Packets the processes receive.
    Ingress,
    /// Packets the processes send.
    Egress,
    /// Both: a request and its answer are each lost with the rate.
    #[default]
    Both,
}

impl FromStr for Direction {
    type Err = String;

    fn from_str(s: &str) -> Result<Direction, String> {
        match s {
            "ingress" => Ok(Direction::Ingress),
            "egress" => Ok(Direction::Egress),
            "both" => Ok(Direction::Both),
            _ => Err(format!(
                "unknown direction `{s}`: expected ingress, egress or both"
            )),
        }
    }
}

/// One fault, validated.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fault {
    /// A system call fails with an errno.
    Syscall {
        op: Op,
        errno: Errno,
        rate: Rate,
        #[serde(skip_serializing_if = "Peer::is_any")]
        peer: Peer,
        /// Only files at or under this directory (or this file), for file ops.
        #[serde(skip_serializing_if = "Option::is_none")]
        path: Option<PathBuf>,
    },
    /// Packets are dropped.
    Drop {
        rate: Rate,
        direction: Direction,
        #[serde(skip_serializing_if = "Peer::is_any")]
        peer: Peer,
    },
}

impl Fault {
    /// A syscall fault; `errno` defaults to the op's usual failure, DNS implies port 53.
    pub fn syscall(
        op: Op,
        errno: Option<Errno>,
        rate: Rate,
        mut peer: Peer,
        path: Option<PathBuf>,
    ) -> Result<Fault, String> {
        if op == Op::Dns {
            if peer.port.is_some_and(|p| p != 53) {
                return Err("--op dns always means port 53; use --op connect or sendmsg with --port for another port".into());
            }
            peer.port = Some(53);
        } else if !op.takes_peer() && (peer.port.is_some() || peer.addr.is_some()) {
            return Err(format!(
                "--port and --addr do not apply to --op {}: they filter connect, sendmsg, dns and bind",
                op.name()
            ));
        }
        if peer.proto != Proto::Any && !(op.takes_peer() || op == Op::Dns || op == Op::Socket) {
            return Err(format!("--proto does not apply to --op {}", op.name()));
        }
        if path.is_some() && !op.takes_path() {
            return Err(format!(
                "--path-prefix does not apply to --op {}: it filters read, write, open and mmap",
                op.name()
            ));
        }
        if let Some(path) = &path
            && !path.is_absolute()
        {
            return Err(format!(
                "--path-prefix {} must be an absolute path",
                path.display()
            ));
        }
        Ok(Fault::Syscall {
            op,
            errno: errno.unwrap_or_else(|| op.default_errno()),
            rate,
            peer,
            path,
        })
    }

    /// The hooks that carry the fault out.
    pub fn hooks(&self) -> Vec<Hook> {
        match self {
            Fault::Syscall { op, .. } => op.hooks().to_vec(),
            Fault::Drop { direction, .. } => match direction {
                Direction::Ingress => vec![Hook::SkbIngress],
                Direction::Egress => vec![Hook::SkbEgress],
                Direction::Both => vec![Hook::SkbIngress, Hook::SkbEgress],
            },
        }
    }

    /// The tier the fault needs: every hook of one fault is of one tier.
    pub fn tier(&self) -> Tier {
        self.hooks()[0].tier()
    }

    pub fn rate(&self) -> Rate {
        match self {
            Fault::Syscall { rate, .. } | Fault::Drop { rate, .. } => *rate,
        }
    }

    pub fn peer(&self) -> Peer {
        match self {
            Fault::Syscall { peer, .. } | Fault::Drop { peer, .. } => *peer,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Syscall {
                op,
                errno,
                rate,
                path,
                ..
            } => {
                write!(f, "{} fails with {errno} at rate {}", op.name(), rate.0)?;
                if let Some(path) = path {
                    write!(f, " under {}", path.display())?;
                }
            }
            Fault::Drop {
                rate, direction, ..
            } => write!(f, "packets dropped ({direction:?}) at rate {}", rate.0)?,
        }
        let peer = self.peer();
        if let Some(port) = peer.port {
            write!(f, ", port {port}")?;
        }
        if let Some(addr) = peer.addr {
            write!(f, ", peer {addr}")?;
        }
        if peer.proto != Proto::Any {
            write!(f, ", {:?}", peer.proto)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_map_to_thresholds() {
        assert_eq!("0.3".parse::<Rate>().unwrap().value(), 0.3);
        assert_eq!("30%".parse::<Rate>().unwrap().value(), 0.3);
        assert_eq!(Rate::ALWAYS.threshold(), 1 << 32);
        assert_eq!("0".parse::<Rate>().unwrap().threshold(), 0);
        assert!(
            "1.5"
                .parse::<Rate>()
                .unwrap_err()
                .contains("outside [0, 1]")
        );
        assert!("x".parse::<Rate>().unwrap_err().contains("not a number"));
    }

    #[test]
    fn dns_is_port_53_and_defaults_apply() {
        let fault = Fault::syscall(Op::Dns, None, Rate::ALWAYS, Peer::default(), None).unwrap();
        assert_eq!(fault.peer().port, Some(53));
        assert_eq!(fault.hooks().len(), 4);
        let Fault::Syscall { errno, .. } = fault else {
            panic!("a syscall fault")
        };
        assert_eq!(errno, Errno::ECONNREFUSED);
        let bad = Peer {
            port: Some(80),
            ..Peer::default()
        };
        assert!(Fault::syscall(Op::Dns, None, Rate::ALWAYS, bad, None).is_err());
    }

    #[test]
    fn filters_that_do_not_apply_are_refused() {
        let port = Peer {
            port: Some(80),
            ..Peer::default()
        };
        let err = Fault::syscall(Op::Read, None, Rate::ALWAYS, port, None).unwrap_err();
        assert!(err.contains("do not apply to --op read"), "{err}");
        let err = Fault::syscall(
            Op::Connect,
            None,
            Rate::ALWAYS,
            Peer::default(),
            Some("/data".into()),
        )
        .unwrap_err();
        assert!(err.contains("--path-prefix does not apply"), "{err}");
        let read = Fault::syscall(
            Op::Read,
            None,
            Rate::ALWAYS,
            Peer::default(),
            Some("/data".into()),
        )
        .unwrap();
        assert_eq!(read.tier(), Tier::Lsm);
    }
}
