//! The cost of idle live environments: `collector env up` processes running at 1x with full
//! telemetry and no client, in groups of 1, 10 and 50 (`FAULTLINE_BENCH_ENVS`, comma-separated).
//! For each group: CPU used per environment over `FAULTLINE_BENCH_SECS` (default 30) s of wall
//! time, as a share of one core, and resident memory per environment, beside one idle
//! `collector replay` of the same problem measured the same way in the same run (the floor of a
//! server that only answers requests: what the simulator's ticking adds is the difference). Goal: under 2% of a core per environment, so that 50
//! fit on this 2-core machine.
//!
//! Run: `cargo bench --profile dev -p collector --bench live_cpu`.

use std::time::{Duration, Instant};

#[path = "../tests/support/mod.rs"]
mod support;
use support::{LiveEnv, Replay, bench_dataset, cpu_time, env_num, memory_mib};

const PROBLEM: &str = "hotel-geo-target-port";

/// CPU share of one core per process and mean RSS (MiB) over `secs` of wall time.
fn measure(pids: &[u32], secs: u64) -> (f64, f64) {
    let before: Vec<Duration> = pids.iter().map(|p| cpu_time(*p)).collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let wall = started.elapsed().as_secs_f64();
    let used: f64 = pids
        .iter()
        .zip(&before)
        .map(|(p, b)| (cpu_time(*p).saturating_sub(*b)).as_secs_f64())
        .sum();
    let rss: f64 = pids.iter().map(|p| memory_mib(*p).0).sum();
    (used / wall / pids.len() as f64, rss / pids.len() as f64)
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let secs = env_num("FAULTLINE_BENCH_SECS", 30).max(1);
    let groups: Vec<usize> = std::env::var("FAULTLINE_BENCH_ENVS")
        .unwrap_or_else(|_| "1,10,50".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();

    let dataset = bench_dataset(PROBLEM, tmp.path());
    let replay = Replay::start(&dataset, &[]);
    let (peer_cpu, peer_rss) = measure(&[replay.child.id()], secs);
    drop(replay);
    println!(
        "replay (peer), idle: {:.2}% of a core, RSS {peer_rss:.0} MiB",
        peer_cpu * 100.0
    );

    for n in groups {
        let started = Instant::now();
        let envs: Vec<LiveEnv> = (0..n)
            .map(|i| {
                let dir = tmp.path().join(format!("env{n}-{i}"));
                std::fs::create_dir_all(&dir).expect("dir");
                LiveEnv::start(PROBLEM, &dir, &["--seed", &(i + 1).to_string()])
            })
            .collect();
        let up = started.elapsed().as_secs_f64();
        let pids: Vec<u32> = envs.iter().map(|e| e.child.id()).collect();
        let (cpu, rss) = measure(&pids, secs);
        println!(
            "{n:>3} live env(s) at 1x (all up in {up:.1} s): {:.2}% of a core each ({:.1}% in all), RSS {rss:.0} MiB each (idle replay: {:.2}%, {peer_rss:.0} MiB)   goal < 2% each",
            cpu * 100.0,
            cpu * 100.0 * n as f64,
            peer_cpu * 100.0
        );
        drop(envs);
    }
}
