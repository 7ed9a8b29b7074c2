//! Benchmark P4: 500 judgments against the local OpenAI-compatible server at 100 ms latency and
//! concurrency 16, compared with the ideal wall time N·latency/C; then the cached re-judge rate.
//!
//! Run: `cargo bench -p judge --bench p4_judge_throughput`
//! Goals: wall-time efficiency (ideal / measured) ≥ 0.95; cached re-judge ≥ 10,000 verdicts/s.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::server::{Config, Server};
use judge::runner;

const N: usize = 500;
const LATENCY: Duration = Duration::from_millis(100);
const CONCURRENCY: usize = 16;

fn main() {
    common::setup();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let outputs = dir.path().join("outputs");
        common::write_outputs(&outputs, 44, 12, |_, _| String::new());
        let mut items = common::items(&outputs, "bench");
        items.truncate(N);
        assert_eq!(items.len(), N);
        let srv = Server::start(Config { latency: LATENCY, ..Config::default() }).await;
        let cache = dir.path().join("cache");

        let mut cfg = common::run_config(common::llm_config(&srv.base_url()), &dir.path().join("cold"), Some(&cache));
        cfg.concurrency = CONCURRENCY;
        let start = Instant::now();
        let (_, report) = runner::run(items.clone(), cfg).await.unwrap();
        let wall = start.elapsed().as_secs_f64();
        assert_eq!((report.judged, report.judge_errors, report.requests as usize), (N, 0, N));
        let ideal = N as f64 * LATENCY.as_secs_f64() / CONCURRENCY as f64;
        let judging = report.judging.as_secs_f64();
        println!("P4 cold: {N} judgments, latency {} ms, concurrency {CONCURRENCY}; peer = the ideal N*latency/C = {ideal:.3} s", LATENCY.as_millis());
        println!("  whole run (judging + results.json + evaluation_results.json): {wall:.3} s, ideal/wall {:.3} (goal >= 0.95)", ideal / wall);
        println!("  judging alone: {judging:.3} s, ideal/judging {:.3}", ideal / judging);
        // Each of the C workers judges whole items one after another, so the best any runner can do is
        // ceil(N/C) rounds of the latency; the ideal above is a little under that.
        let rounds = N.div_ceil(CONCURRENCY) as f64 * LATENCY.as_secs_f64();
        println!("  (ceil(N/C)*latency = {rounds:.3} s bounds what is reachable: ideal/that = {:.3})", ideal / rounds);

        let mut whole = Vec::new();
        let mut judging = Vec::new();
        for round in 0..7 {
            let mut cfg = common::run_config(common::llm_config(&srv.base_url()), &dir.path().join(format!("warm{round}")), Some(&cache));
            cfg.concurrency = CONCURRENCY;
            let before = srv.requests();
            let start = Instant::now();
            let (_, report) = runner::run(items.clone(), cfg).await.unwrap();
            let wall = start.elapsed().as_secs_f64();
            assert_eq!((report.from_cache, srv.requests()), (N, before));
            whole.push(N as f64 / wall);
            judging.push(N as f64 / report.judging.as_secs_f64());
        }
        whole.sort_by(f64::total_cmp);
        judging.sort_by(f64::total_cmp);
        println!("P4 cached re-judge: {N} verdicts from the cache, 0 requests, 7 rounds (median, best, worst)");
        println!("  verdicts/s while judging: {:.0} ({:.0}, {:.0}); goal >= 10000", judging[3], judging[6], judging[0]);
        println!("  verdicts/s for the whole run incl. result files: {:.0} ({:.0}, {:.0})", whole[3], whole[6], whole[0]);
        println!("  machine load average while measuring: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    });
}
