//! Benchmark P2: latency of the SRE query mix, faultline vs a real Prometheus over the same
//! samples, same client, same run. Prints per-kind medians and the faultline/Prometheus ratio
//! (goal ≤ 1.0×). Needs Debian's `prometheus` package.
//!
//! Run: `cargo bench -p promql --bench p2_query_mix` (ROUNDS=N to change the repetitions).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;

async fn time_mix(
    client: &reqwest::Client,
    base: &str,
    queries: &[(bool, String)],
) -> Vec<Duration> {
    let mut out = Vec::with_capacity(queries.len());
    for (instant, q) in queries {
        let url = query_url(base, q, *instant);
        let t = Instant::now();
        let r = client.get(&url).send().await.expect("request");
        assert!(r.status().is_success(), "{url}: {}", r.status());
        let _ = r.bytes().await.expect("body");
        out.push(t.elapsed());
    }
    out
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
    let ours = start_faultline(build_storage(&fams)).await;
    let client = reqwest::Client::new();
    let queries: Vec<(bool, String)> = query_mix()
        .into_iter()
        .map(|q| (true, q))
        .chain(range_mix().into_iter().map(|q| (false, q)))
        .collect();
    println!(
        "P2 query mix: {} queries ({} samples), {rounds} rounds, interleaved",
        queries.len(),
        samples
    );
    // Warm both (Prometheus loads chunks lazily).
    time_mix(&client, &prom.url, &queries).await;
    time_mix(&client, &ours.url, &queries).await;
    let (mut p_tot, mut f_tot) = (Vec::new(), Vec::new());
    let mut per_query: Vec<(Vec<Duration>, Vec<Duration>)> = vec![(vec![], vec![]); queries.len()];
    for _ in 0..rounds {
        let p = time_mix(&client, &prom.url, &queries).await;
        let f = time_mix(&client, &ours.url, &queries).await;
        p_tot.push(p.iter().sum::<Duration>());
        f_tot.push(f.iter().sum::<Duration>());
        for (i, (a, b)) in p.into_iter().zip(f).enumerate() {
            per_query[i].0.push(a);
            per_query[i].1.push(b);
        }
    }
    let mut worst: Vec<(f64, String)> = per_query
        .into_iter()
        .zip(&queries)
        .map(|((p, f), (inst, q))| {
            let r = median(f).as_secs_f64() / median(p).as_secs_f64();
            (
                r,
                format!("[{}] {q}", if *inst { "instant" } else { "range" }),
            )
        })
        .collect();
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("slowest relative to Prometheus:");
    for (r, q) in worst.iter().take(5) {
        println!("  {r:5.2}x  {q}");
    }
    let (pm, fm) = (median(p_tot), median(f_tot));
    println!("whole mix, median of {rounds} rounds: prometheus {pm:?}, faultline {fm:?}");
    println!(
        "ratio faultline/prometheus: {:.2}x (goal <= 1.0x)",
        fm.as_secs_f64() / pm.as_secs_f64()
    );
}
