//! What the fault programs cost processes they do not fault: loopback TCP connects per second and
//! loopback TCP throughput, measured in one run for this process in a cgroup with no programs and
//! then with the connect and packet-drop programs attached (filters that match nothing, so every
//! connect and packet runs the programs' full checks and none is faulted). Rounds alternate to
//! spread drift evenly; the ratio of medians is printed. Goal: under 5% overhead.
//!
//! Both rates are given per wall second and per CPU second of this process (client and server
//! threads, and the loopback's kernel work, which runs in their context): on a machine shared with
//! other work the wall rates swing with the neighbours' load, the CPU rates measure what the
//! programs add.
//!
//!     cargo bench -p inject --bench overhead        (as root)

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Instant;

use inject::bpf::{Loaded, Params};
use inject::cgroup::{self, Cgroup};
use inject::{Direction, Fault, Op, Peer, Proto, Rate};

const ROUNDS: usize = 15;
const CONNECTS: usize = 1_000;
const STREAM_BYTES: usize = 256 << 20;

fn main() {
    assert!(
        rustix::process::geteuid().is_root(),
        "the overhead benchmark attaches BPF programs to a cgroup: run it as root"
    );
    let root = cgroup::hierarchy_root().expect("a cgroup v2 hierarchy");
    let dir = root
        .join("faultline-bench")
        .join(uuid::Uuid::new_v4().simple().to_string());
    let home = cgroup::own_cgroup().expect("this process's cgroup");
    let cg = cgroup::create(&dir).expect("creating the bench cgroup");
    cgroup::move_process(&dir, std::process::id()).expect("moving into the bench cgroup");

    let result = std::panic::catch_unwind(|| measure(&cg));
    cgroup::move_process(&home, std::process::id()).expect("moving back");
    drop(cg);
    cgroup::remove(&dir, &home).expect("removing the bench cgroup");
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// A port nothing uses: the filters match no connect and no packet.
const ELSEWHERE: Peer = Peer {
    port: Some(1),
    addr: None,
    proto: Proto::Tcp,
};

fn attach_all(cg: &Cgroup) -> Vec<Loaded> {
    let connect = Fault::syscall(Op::Connect, None, Rate::ALWAYS, ELSEWHERE, None).unwrap();
    let drop = Fault::Drop {
        rate: Rate::ALWAYS,
        direction: Direction::Both,
        peer: ELSEWHERE,
    };
    [connect, drop]
        .iter()
        .map(|fault| {
            let mut loaded = Loaded::load(&fault.hooks(), &Params::of(fault, 0, cg.id(), None))
                .unwrap_or_else(|r| panic!("{}", r.summary()));
            loaded
                .attach(Some(cg))
                .unwrap_or_else(|r| panic!("{}", r.summary()));
            loaded
        })
        .collect()
}

fn measure(cg: &Cgroup) {
    // One listener that only accepts (for connects), one that drains (for throughput), so that
    // neither waits for the other's work.
    let accept_only = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = accept_only.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in accept_only.incoming() {
            drop(conn);
        }
    });
    let draining = TcpListener::bind("127.0.0.1:0").unwrap();
    let stream_addr = draining.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in draining.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut buf = vec![0u8; 1 << 16];
            while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
        }
    });
    let connects = || {
        let clock = Clock::start();
        for _ in 0..CONNECTS {
            drop(TcpStream::connect(addr).unwrap());
        }
        clock.rates(CONNECTS as f64)
    };
    let throughput = || {
        let mut stream = TcpStream::connect(stream_addr).unwrap();
        let chunk = vec![7u8; 1 << 16];
        let clock = Clock::start();
        let mut sent = 0;
        while sent < STREAM_BYTES {
            stream.write_all(&chunk).unwrap();
            sent += chunk.len();
        }
        drop(stream);
        clock.rates(sent as f64 / (1 << 20) as f64)
    };
    // Warm up sockets, the listener thread and the page cache of the programs' objects.
    connects();
    throughput();

    let (mut c_off, mut c_on, mut t_off, mut t_on) = (vec![], vec![], vec![], vec![]);
    for round in 0..ROUNDS {
        c_off.push(connects());
        t_off.push(throughput());
        let attached = attach_all(cg);
        c_on.push(connects());
        t_on.push(throughput());
        let counts: u64 = attached.iter().map(|l| l.counts().faulted).sum();
        assert_eq!(counts, 0, "nothing may be faulted");
        drop(attached);
        eprintln!(
            "round {}: connects per CPU s {:.0} without, {:.0} with; MiB per CPU s {:.0} without, {:.0} with",
            round + 1,
            c_off[round].cpu,
            c_on[round].cpu,
            t_off[round].cpu,
            t_on[round].cpu
        );
    }
    report("loopback TCP connects", &c_off, &c_on);
    report("loopback TCP throughput (MiB)", &t_off, &t_on);
    println!(
        "(programs: cgroup/connect4, cgroup/connect6, cgroup_skb/ingress, cgroup_skb/egress on {}; filters matching nothing)",
        PathBuf::from(cg.path()).display()
    );
}

/// Wall and CPU time of this process since a start.
struct Clock {
    wall: Instant,
    cpu: f64,
}

/// A rate per wall second and per CPU second.
#[derive(Clone, Copy)]
struct Rates {
    wall: f64,
    cpu: f64,
}

fn cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

impl Clock {
    fn start() -> Clock {
        Clock {
            wall: Instant::now(),
            cpu: cpu_seconds(),
        }
    }

    fn rates(&self, work: f64) -> Rates {
        Rates {
            wall: work / self.wall.elapsed().as_secs_f64(),
            cpu: work / (cpu_seconds() - self.cpu),
        }
    }
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn report(what: &str, off: &[Rates], on: &[Rates]) {
    for (unit, pick) in [
        ("per wall s", (|r: &Rates| r.wall) as fn(&Rates) -> f64),
        ("per CPU s", |r: &Rates| r.cpu),
    ] {
        let (off, on) = (median(off.iter().map(pick)), median(on.iter().map(pick)));
        let ratio = on / off;
        println!(
            "{what} {unit}: without programs {off:.0}, with programs attached {on:.0}, ratio {ratio:.3} (overhead {:.1}%, goal < 5%)",
            (1.0 - ratio) * 100.0
        );
    }
}
