//! Benchmark P2: latency of the SRE query mix, faultline vs a real Prometheus over the same
//! samples, same client, same run. Each query is timed on both servers back to back (who goes
//! first alternates), the median per query is kept, and the sums of medians give the
//! faultline/Prometheus ratio (goal ≤ 1.0×), for faultline's in-memory store and for its
//! disk-backed store over the same samples in a Parquet table (what replay serves; its first,
//! cold run is reported too). Needs Debian's `prometheus` package.
//!
//! Run: `CARGO_PROFILE_DEV_OPT_LEVEL=2 cargo bench --profile dev -p promql --bench p2_query_mix`
//! (`ROUNDS=N` changes the repetitions; a plain `cargo bench` works too but builds everything
//! with the release profile).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;

async fn time_one(client: &reqwest::Client, url: &str) -> Duration {
    let t = Instant::now();
    let r = client.get(url).send().await.expect("request");
    assert!(r.status().is_success(), "{url}: {}", r.status());
    let _ = r.bytes().await.expect("body");
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    let fams = generate();
    let samples: usize = fams
        .iter()
        .flat_map(|f| f.series.iter().map(|s| s.1.len()))
        .sum();
    let prom = start_prometheus(&fams).await;
    let ours = start_faultline(std::sync::Arc::new(build_storage(&fams))).await;
    // The same samples read on demand from a Parquet table, as replay serves them.
    let tmp = tempfile::tempdir().expect("tempdir");
    let disk = start_faultline(std::sync::Arc::new(build_disk_storage(
        &fams,
        tmp.path(),
        DATASET_LAYOUT,
        promql::DiskConfig::default(),
    )))
    .await;
    common::install_tls_provider();
    let client = reqwest::Client::new();
    let queries: Vec<(bool, String)> = query_mix()
        .into_iter()
        .map(|q| (true, q))
        .chain(range_mix().into_iter().map(|q| (false, q)))
        .collect();
    println!(
        "P2 query mix: {} queries ({samples} samples), {rounds} rounds",
        queries.len()
    );
    // Per query: Prometheus, faultline in memory, faultline from disk.
    let urls: Vec<[String; 3]> = queries
        .iter()
        .map(|(inst, q)| {
            [
                query_url(&prom.url, q, *inst),
                query_url(&ours.url, q, *inst),
                query_url(&disk.url, q, *inst),
            ]
        })
        .collect();
    // Warm all three (Prometheus loads chunks lazily, so does the disk store: its first run is
    // reported on its own).
    let mut first_disk = Duration::ZERO;
    for u in &urls {
        time_one(&client, &u[0]).await;
        time_one(&client, &u[1]).await;
        first_disk += time_one(&client, &u[2]).await;
    }
    let mut per_query: Vec<[Vec<Duration>; 3]> = vec![Default::default(); urls.len()];
    for round in 0..rounds {
        for (i, u) in urls.iter().enumerate() {
            // Rotate who goes first, so load bursts on a shared machine hit all alike.
            for k in 0..3 {
                let who = (round + k) % 3;
                per_query[i][who].push(time_one(&client, &u[who]).await);
            }
        }
    }
    let medians: Vec<(Duration, Duration, Duration)> = per_query
        .into_iter()
        .map(|[p, f, d]| (median(p), median(f), median(d)))
        .collect();
    let mut worst: Vec<(f64, String)> = medians
        .iter()
        .zip(&queries)
        .map(|((p, f, _), (inst, q))| {
            let r = f.as_secs_f64() / p.as_secs_f64();
            (
                r,
                format!("[{}] {q}", if *inst { "instant" } else { "range" }),
            )
        })
        .collect();
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("slowest relative to Prometheus (median per query):");
    for (r, q) in worst.iter().take(5) {
        println!("  {r:5.2}x  {q}");
    }
    let pm: Duration = medians.iter().map(|m| m.0).sum();
    let fm: Duration = medians.iter().map(|m| m.1).sum();
    let dm: Duration = medians.iter().map(|m| m.2).sum();
    println!(
        "whole mix, sum of per-query medians: prometheus {pm:?}, faultline {fm:?}, faultline from disk {dm:?} (its first run {first_disk:?})"
    );
    println!(
        "ratio faultline/prometheus: {:.2}x in memory, {:.2}x from disk (goal <= 1.0x)",
        fm.as_secs_f64() / pm.as_secs_f64(),
        dm.as_secs_f64() / pm.as_secs_f64()
    );
}
