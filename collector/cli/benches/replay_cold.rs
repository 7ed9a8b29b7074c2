//! Cold start of `collector replay`: time from spawning the real binary until every listener
//! answers, resident memory (peak and current), the first query on each API, and the latency of
//! an SRE-style PromQL mix on the dataset, cold (first run) and warm (median of later runs).
//!
//! 1. A dataset: `FAULTLINE_BENCH_DATASET=DIR` (e.g. the 1 GB tiled astronomy-shop dataset made by
//!    the `tile_dataset` example), or a fresh simulator snapshot of astronomy-shop
//!    (`FAULTLINE_BENCH_MINUTES`, default 60).
//! 2. Ready: the endpoints line is printed once every listener is bound; the bench then sends one
//!    cheap request to each API and counts until all four have answered.
//! 3. First queries: one typical request per API (pods Table, a PromQL aggregation, a trace
//!    search, a log query), each timed.
//! 4. The PromQL mix: `FAULTLINE_BENCH_ROUNDS` rounds (default 5) of instant and range queries
//!    over the last hour before the virtual now.
//!
//! Run: `cargo bench --profile dev -p collector --bench replay_cold` (`FAULTLINE_COLLECTOR_BIN`
//! runs another build of `collector`). Goal on a 1 GB dataset: ready in <= 1 s, <= 500 MiB
//! resident.

use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "../tests/support/mod.rs"]
mod support;
use support::{Replay, bench_dataset, dir_bytes, env_num, memory_mib, percentile};

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// GETs `url`; the time taken and the JSON body (Null if not JSON). A failed request panics:
/// the bench measures a working server.
async fn timed(client: &reqwest::Client, url: &str) -> (Duration, Value) {
    let t = Instant::now();
    let r = client
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = r.status();
    let body = r.bytes().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let took = t.elapsed();
    assert!(
        status.is_success(),
        "GET {url}: {status}: {}",
        String::from_utf8_lossy(&body[..body.len().min(300)])
    );
    (took, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// PromQL an SRE agent runs first on a Kubernetes application.
const MIX: &[&str] = &[
    "sum by (namespace, pod) (rate(container_cpu_usage_seconds_total[5m]))",
    "topk(5, sum by (pod) (container_memory_working_set_bytes))",
    "sum by (pod) (increase(kube_pod_container_status_restarts_total[1h]))",
    "kube_deployment_spec_replicas - kube_deployment_status_replicas_available",
    "sum by (service_name) (rate(traces_span_metrics_calls_total{status_code=\"STATUS_CODE_ERROR\"}[5m]))",
    "histogram_quantile(0.99, sum by (le, service_name) (rate(traces_span_metrics_duration_milliseconds_bucket[5m])))",
    "sum by (pod) (rate(container_cpu_usage_seconds_total[5m])) / sum by (pod) (container_spec_cpu_quota / container_spec_cpu_period)",
    "sum by (namespace, pod, container) (container_memory_working_set_bytes) / on(namespace, pod, container) sum by (namespace, pod, container) (kube_pod_container_resource_limits{resource=\"memory\"})",
    "kube_pod_status_phase{phase!=\"Running\"} == 1",
    "max_over_time(container_memory_working_set_bytes[30m])",
    "sum by (service_name) (rate(traces_span_metrics_calls_total[5m]))",
    "{__name__=~\"kube_deployment_status_.*\"}",
    "count by (node) (kube_pod_info)",
    "ALERTS",
];

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dataset = bench_dataset("astro-ad-high-cpu", tmp.path());
    let manifest = datasets::reader::read_manifest(&dataset).expect("a dataset");
    println!(
        "dataset {} ({:.1} MiB of files, window {} .. {})",
        dataset.display(),
        dir_bytes(&dataset) as f64 / 1048576.0,
        manifest.window.start.to_rfc3339(),
        manifest.window.end.to_rfc3339()
    );
    let rounds = env_num("FAULTLINE_BENCH_ROUNDS", 5).max(1);
    let rt = tokio::runtime::Runtime::new().expect("runtime");

    let started = Instant::now();
    // Frozen at the recorded times: the mix asks for the hour before the manifest's virtual now.
    let replay = Replay::start(&dataset, &[std::ffi::OsStr::new("--frozen")]);
    let pid = replay.child.id();
    let (kube, prom, jaeger, loki) = (
        replay.url("kubernetes"),
        replay.url("prometheus"),
        replay.url("jaeger"),
        replay.url("loki"),
    );
    let client = reqwest::Client::new();
    rt.block_on(async {
        // Every listener answering a cheap request.
        let probes = [
            format!("{kube}/version"),
            format!("{prom}/api/v1/status/buildinfo"),
            format!("{jaeger}/api/services"),
            format!("{loki}/loki/api/v1/labels"),
        ];
        for url in &probes {
            timed(&client, url).await;
        }
        let serving = started.elapsed();
        let (rss, hwm) = memory_mib(pid);
        println!(
            "cold start: endpoints after {:.3} s, every API answering after {:.3} s; RSS {rss:.0} MiB (peak {hwm:.0} MiB)   goal <= 1 s, <= 500 MiB",
            replay.ready_after.as_secs_f64(),
            serving.as_secs_f64()
        );

        let now = manifest.virtual_now.timestamp();
        let ns = manifest.namespaces.first().cloned().unwrap_or_default();
        let (_, services) = timed(&client, &format!("{jaeger}/api/services")).await;
        let service = services["data"][0].as_str().unwrap_or("frontend").to_string();
        let first = [
            (
                "kubernetes: pods Table",
                format!("{kube}/api/v1/namespaces/{ns}/pods?limit=500"),
            ),
            (
                "prometheus: sum by pod of working set",
                format!(
                    "{prom}/api/v1/query?query={}",
                    enc("sum by (pod) (container_memory_working_set_bytes)")
                ),
            ),
            (
                "jaeger: trace search",
                format!(
                    "{jaeger}/api/traces?service={service}&limit=20&start={}&end={}",
                    (now - 3600) * 1_000_000,
                    now * 1_000_000
                ),
            ),
            (
                "loki: last 100 lines of a namespace",
                format!(
                    "{loki}/loki/api/v1/query_range?query={}&limit=100&start={}&end={}",
                    enc(&format!("{{namespace=\"{ns}\"}}")),
                    (now - 3600) * 1_000_000_000,
                    now * 1_000_000_000
                ),
            ),
        ];
        for (what, url) in &first {
            let (took, _) = timed(&client, url).await;
            println!("first query, {what}: {:.1} ms", ms(took));
        }
        let (rss, hwm) = memory_mib(pid);
        println!("after first queries: RSS {rss:.0} MiB (peak {hwm:.0} MiB)");

        let urls: Vec<(String, String)> = MIX
            .iter()
            .flat_map(|q| {
                [
                    (format!("instant {q}"), format!("{prom}/api/v1/query?query={}&time={now}", enc(q))),
                    (
                        format!("range   {q}"),
                        format!(
                            "{prom}/api/v1/query_range?query={}&start={}&end={now}&step=60",
                            enc(q),
                            now - 3600
                        ),
                    ),
                ]
            })
            .collect();
        let mut cold = Duration::ZERO;
        let mut per_query: Vec<Vec<Duration>> = vec![Vec::new(); urls.len()];
        let mut empty: Vec<&str> = Vec::new();
        for round in 0..rounds {
            for (k, (_, url)) in urls.iter().enumerate() {
                let (took, body) = timed(&client, url).await;
                if round == 0 {
                    cold += took;
                    if body["data"]["result"].as_array().is_none_or(|r| r.is_empty()) {
                        empty.push(&urls[k].0);
                    }
                } else {
                    per_query[k].push(took);
                }
            }
        }
        let mut medians: Vec<Duration> = per_query
            .iter_mut()
            .map(|v| {
                v.sort();
                percentile(v, 0.5)
            })
            .collect();
        let warm: Duration = medians.iter().sum();
        println!(
            "PromQL mix: {} queries ({} empty answers); first run {:.1} ms in all, warm (median of {} rounds) {:.1} ms in all",
            urls.len(),
            empty.len(),
            ms(cold),
            rounds.saturating_sub(1),
            ms(warm)
        );
        for q in &empty {
            println!("  empty: {q}");
        }
        if rounds > 1 {
            let slowest = medians
                .iter()
                .enumerate()
                .max_by_key(|(_, d)| **d)
                .map(|(k, d)| (urls[k].0.clone(), *d));
            if let Some((q, d)) = slowest {
                println!("slowest warm query: {:.1} ms  {q}", ms(d));
            }
            medians.sort();
            println!(
                "warm per query: p50 {:.2} ms  p90 {:.2} ms  max {:.2} ms",
                ms(percentile(&medians, 0.5)),
                ms(percentile(&medians, 0.9)),
                ms(percentile(&medians, 1.0))
            );
        }
        let (rss, hwm) = memory_mib(pid);
        println!("after the mix: RSS {rss:.0} MiB (peak {hwm:.0} MiB)");
    });
    drop(replay);
}
