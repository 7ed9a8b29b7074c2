//! `collector replay` under load: cold start, resident memory, and a bounded kubectl-style request
//! mix against the Kubernetes API facade.
//!
//! 1. A dataset: `FAULTLINE_BENCH_DATASET=DIR`, or a fresh simulator snapshot of hotel-reservation
//!    (`FAULTLINE_BENCH_MINUTES`, default 60).
//! 2. Cold start: wall time from spawning `collector replay` to its endpoints line (every listener
//!    up, every table loaded), and its resident memory then.
//! 3. Load: an open loop at `FAULTLINE_BENCH_RATE` requests/s (default 1000) for
//!    `FAULTLINE_BENCH_SECS` s (default 30) of the requests kubectl sends for `get` (Tables, `-A`),
//!    `describe` (the object, then its events by field selector), `logs --tail` and discovery.
//!    Latency counts from each request's scheduled time, so a server that falls behind is charged
//!    for the queue it builds (no coordinated omission).
//!
//! Run: `cargo bench --profile dev -p collector --bench replay_load` (the profile `cargo run` uses).

use std::sync::Arc;

#[path = "../tests/support/mod.rs"]
mod support;
use support::load::{open_loop, request_mix};
use support::{Replay, bench_dataset, dir_bytes, env_num, memory_mib, percentile};

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dataset = bench_dataset("hotel-geo-target-port", tmp.path());
    println!(
        "dataset {} ({:.1} MiB of files)",
        dataset.display(),
        dir_bytes(&dataset) as f64 / 1048576.0
    );

    let replay = Replay::start(&dataset, &[]);
    let (ready, kube) = (replay.ready_after, replay.url("kubernetes"));
    let pid = replay.child.id();
    let (rss, hwm) = memory_mib(pid);
    println!(
        "cold start: {:.3} s to serving; RSS {rss:.0} MiB (peak {hwm:.0} MiB)   goal <= 1 s, <= 500 MiB",
        ready.as_secs_f64()
    );

    let rate = env_num("FAULTLINE_BENCH_RATE", 1000).max(1);
    let secs = env_num("FAULTLINE_BENCH_SECS", 30).max(1);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let m = rt.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .build()
            .expect("client");
        let mix = Arc::new(request_mix(&client, &kube).await);
        open_loop(&client, &kube, mix, rate, secs).await
    });
    let (latencies, errors, wall) = (m.latencies, m.errors, m.wall);
    let (rss_after, hwm_after) = memory_mib(pid);
    println!(
        "load: {} requests at {rate}/s for {secs} s in {:.2} s ({:.0} req/s achieved), {errors} errors",
        latencies.len(),
        wall.as_secs_f64(),
        latencies.len() as f64 / wall.as_secs_f64()
    );
    println!(
        "latency: p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.90).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        percentile(&latencies, 1.0).as_secs_f64() * 1e3,
    );
    println!("replay memory after load: RSS {rss_after:.0} MiB (peak {hwm_after:.0} MiB)");
    drop(replay);
}
