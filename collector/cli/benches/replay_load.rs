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
use std::time::Duration;

use serde_json::Value;

#[path = "../tests/support/mod.rs"]
mod support;
use support::{Replay, bench_dataset, dir_bytes, env_num, memory_mib, percentile};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// The request mix: (path, Accept), in the proportions a few agents running kubectl produce.
async fn request_mix(client: &reqwest::Client, base: &str) -> Vec<(String, &'static str)> {
    let pods: Value = client
        .get(format!("{base}/api/v1/pods"))
        .send()
        .await
        .expect("list pods")
        .json()
        .await
        .expect("pods JSON");
    let items = pods["items"].as_array().expect("items");
    // The application's namespace: the one with the most pods.
    let mut per_ns: std::collections::BTreeMap<&str, Vec<&Value>> = Default::default();
    for p in items {
        per_ns
            .entry(p["metadata"]["namespace"].as_str().unwrap_or(""))
            .or_default()
            .push(p);
    }
    let (ns, ns_pods) = per_ns
        .into_iter()
        .max_by_key(|(_, v)| v.len())
        .expect("a namespace with pods");
    let mut mix = vec![
        (format!("/api/v1/namespaces/{ns}/pods?limit=500"), TABLE),
        (format!("/api/v1/namespaces/{ns}/pods?limit=500"), TABLE),
        (
            format!("/apis/apps/v1/namespaces/{ns}/deployments?limit=500"),
            TABLE,
        ),
        (format!("/api/v1/namespaces/{ns}/events?limit=500"), TABLE),
        (format!("/api/v1/namespaces/{ns}/services?limit=500"), TABLE),
        ("/api/v1/pods?limit=500".to_string(), TABLE),
        ("/api".to_string(), DISCOVERY),
        ("/apis".to_string(), DISCOVERY),
    ];
    for p in ns_pods.iter().take(4) {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let uid = p["metadata"]["uid"].as_str().unwrap_or_default();
        mix.push((
            format!("/api/v1/namespaces/{ns}/pods/{name}"),
            "application/json",
        ));
        mix.push((
            format!(
                "/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name%3D{name},involvedObject.namespace%3D{ns},involvedObject.uid%3D{uid}"
            ),
            "application/json",
        ));
        mix.push((
            format!("/api/v1/namespaces/{ns}/pods/{name}/log?tailLines=100"),
            "*/*",
        ));
    }
    mix
}

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
    let (mut latencies, errors, wall) = rt.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .build()
            .expect("client");
        let base = kube.clone();
        let mix = Arc::new(request_mix(&client, &base).await);
        let total = rate * secs;
        let period = Duration::from_secs_f64(1.0 / rate as f64);
        let started = tokio::time::Instant::now();
        let mut tasks = Vec::with_capacity(total as usize);
        for i in 0..total {
            let due = started + period * i as u32;
            tokio::time::sleep_until(due).await;
            let (client, mix, base) = (client.clone(), mix.clone(), base.clone());
            tasks.push(tokio::spawn(async move {
                let (path, accept) = &mix[i as usize % mix.len()];
                let ok = match client
                    .get(format!("{base}{path}"))
                    .header("Accept", *accept)
                    .send()
                    .await
                {
                    Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                    Err(_) => false,
                };
                (due.elapsed(), ok)
            }));
        }
        let mut latencies = Vec::with_capacity(tasks.len());
        let mut errors = 0usize;
        for t in tasks {
            let (d, ok) = t.await.expect("request task");
            latencies.push(d);
            errors += usize::from(!ok);
        }
        (latencies, errors, started.elapsed())
    });
    latencies.sort();
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
