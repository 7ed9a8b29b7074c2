//! Benchmark P2: latency of the SRE query mix, faultline vs a real Prometheus over the same
//! samples, same client, same run. Each query is timed on both servers back to back (who goes
//! first alternates), the median per query is kept, and the sums of medians give the
//! faultline/Prometheus ratio (goal ≤ 1.0×). Needs Debian's `prometheus` package.
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
    let urls: Vec<(String, String)> = queries
        .iter()
        .map(|(inst, q)| {
            (
                query_url(&prom.url, q, *inst),
                query_url(&ours.url, q, *inst),
            )
        })
        .collect();
    // Warm both (Prometheus loads chunks lazily).
    for (p, f) in &urls {
        time_one(&client, p).await;
        time_one(&client, f).await;
    }
    let mut per_query: Vec<(Vec<Duration>, Vec<Duration>)> = vec![(vec![], vec![]); urls.len()];
    for round in 0..rounds {
        for (i, (p, f)) in urls.iter().enumerate() {
            // Alternate who goes first, so load bursts on a shared machine hit both alike.
            if round % 2 == 0 {
                per_query[i].0.push(time_one(&client, p).await);
                per_query[i].1.push(time_one(&client, f).await);
            } else {
                per_query[i].1.push(time_one(&client, f).await);
                per_query[i].0.push(time_one(&client, p).await);
            }
        }
    }
    let medians: Vec<(Duration, Duration)> = per_query
        .into_iter()
        .map(|(p, f)| (median(p), median(f)))
        .collect();
    let mut worst: Vec<(f64, String)> = medians
        .iter()
        .zip(&queries)
        .map(|((p, f), (inst, q))| {
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
    println!("whole mix, sum of per-query medians: prometheus {pm:?}, faultline {fm:?}");
    println!(
        "ratio faultline/prometheus: {:.2}x (goal <= 1.0x)",
        fm.as_secs_f64() / pm.as_secs_f64()
    );
}
