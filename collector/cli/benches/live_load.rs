//! `collector env up` under a mixed read/write load, against `collector replay` of the same
//! problem as the peer, in the same run:
//!
//! 1. Startup: from spawning `collector env up` to the first answered `kubectl get pods` (real
//!    kubectl). Goal: at most 1 s.
//! 2. Mixed load on the live environment: the kubectl-style read loop of `replay_load`
//!    (`FAULTLINE_BENCH_RATE`, default 1000 requests/s, for `FAULTLINE_BENCH_SECS`, default 30)
//!    while writes arrive at `FAULTLINE_BENCH_WRITES` per second (default 6) in the shapes kubectl
//!    sends them: a strategic-merge `patch` of a Service, a server-side `apply` of a ConfigMap, and
//!    a `rollout restart` of a Deployment (which starts a rollout the cluster then works through).
//!    Each write's latency and each read's are reported as p50/p99.
//! 3. The same read loop against `collector replay` of a snapshot of the same problem; the ratio
//!    of the live p99 to replay's is printed.
//!
//! Run: `cargo bench --profile dev -p collector --bench live_load`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../tests/support/mod.rs"]
mod support;
use support::load::{Measured, open_loop, request_mix};
use support::{LiveEnv, Replay, bench_dataset, env_num, percentile};

const PROBLEM: &str = "hotel-geo-target-port";
const NS: &str = "hotel-reservation";

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn summary(name: &str, sorted: &[Duration]) -> String {
    format!(
        "{name:<16} n={:<6} p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms",
        sorted.len(),
        ms(percentile(sorted, 0.5)),
        ms(percentile(sorted, 0.99)),
        ms(percentile(sorted, 1.0))
    )
}

/// A write as kubectl sends it: (label, path, content type, body).
fn write(
    kind: usize,
    i: u64,
    deployments: &[String],
) -> (&'static str, String, &'static str, String) {
    match kind % 3 {
        0 => (
            "patch",
            format!("/api/v1/namespaces/{NS}/services/geo?fieldManager=kubectl-patch"),
            "application/strategic-merge-patch+json",
            json!({"metadata": {"annotations": {"bench/seq": i.to_string()}}}).to_string(),
        ),
        1 => (
            "apply",
            format!(
                "/api/v1/namespaces/{NS}/configmaps/bench-config?fieldManager=kubectl&force=true"
            ),
            "application/apply-patch+yaml",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "bench-config", "namespace": NS},
                   "data": {"seq": i.to_string()}})
            .to_string(),
        ),
        _ => {
            let d = &deployments[(i as usize / 3) % deployments.len()];
            (
                "rollout restart",
                format!(
                    "/apis/apps/v1/namespaces/{NS}/deployments/{d}?fieldManager=kubectl-rollout"
                ),
                "application/strategic-merge-patch+json",
                json!({"spec": {"template": {"metadata": {"annotations": {
                    "kubectl.kubernetes.io/restartedAt": format!("2026-01-01T00:00:{:02}Z", i % 60)
                }}}}})
                .to_string(),
            )
        }
    }
}

/// Writes at `rate` per second for `secs` s, open loop: latencies per kind, and failures.
async fn write_loop(
    client: &reqwest::Client,
    base: &str,
    rate: u64,
    secs: u64,
) -> ([Vec<Duration>; 3], usize) {
    let list: Value = client
        .get(format!("{base}/apis/apps/v1/namespaces/{NS}/deployments"))
        .send()
        .await
        .expect("list deployments")
        .json()
        .await
        .expect("deployments JSON");
    let deployments: Vec<String> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|d| d["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let deployments = Arc::new(deployments);
    let period = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let started = tokio::time::Instant::now();
    let mut tasks = vec![];
    for i in 0..rate * secs {
        let due = started + period * i as u32;
        tokio::time::sleep_until(due).await;
        let (client, base, deployments) = (client.clone(), base.to_string(), deployments.clone());
        tasks.push(tokio::spawn(async move {
            let (_, path, ct, body) = write(i as usize, i, &deployments);
            let ok = match client
                .patch(format!("{base}{path}"))
                .header("Content-Type", ct)
                .header("Accept", "application/json")
                .body(body)
                .send()
                .await
            {
                Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                Err(_) => false,
            };
            (i as usize % 3, due.elapsed(), ok)
        }));
    }
    let mut out: [Vec<Duration>; 3] = Default::default();
    let mut failed = 0;
    for t in tasks {
        let (kind, d, ok) = t.await.expect("write task");
        out[kind].push(d);
        failed += usize::from(!ok);
    }
    for v in &mut out {
        v.sort();
    }
    (out, failed)
}

fn startup(tmp: &std::path::Path) -> (Duration, Duration) {
    let started = Instant::now();
    let env = LiveEnv::start(PROBLEM, tmp, &[]);
    let ready = env.ready_after;
    let out = std::process::Command::new("kubectl")
        .env("KUBECONFIG", &env.kubeconfig)
        .args(["get", "pods", "-n", NS])
        .output()
        .expect("kubectl is installed (apt-get install kubectl)");
    assert!(out.status.success(), "kubectl get pods failed");
    (ready, started.elapsed())
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tmp = tempfile::tempdir().expect("tempdir");
    let (rate, secs) = (
        env_num("FAULTLINE_BENCH_RATE", 1000).max(1),
        env_num("FAULTLINE_BENCH_SECS", 30).max(1),
    );
    let writes = env_num("FAULTLINE_BENCH_WRITES", 6).max(1);

    let mut first = vec![];
    for i in 0..3 {
        let dir = tmp.path().join(format!("start{i}"));
        std::fs::create_dir_all(&dir).expect("dir");
        first.push(startup(&dir));
    }
    for (ready, get) in &first {
        println!(
            "startup: ready line {:.3} s, first kubectl get pods answered {:.3} s   goal <= 1 s",
            ready.as_secs_f64(),
            get.as_secs_f64()
        );
    }

    let env = LiveEnv::start(PROBLEM, tmp.path(), &[]);
    let kube = env.url("kubernetes");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .expect("client");
    let (live, (w, failed)) = rt.block_on(async {
        let mix = Arc::new(request_mix(&client, &kube).await);
        tokio::join!(
            open_loop(&client, &kube, mix, rate, secs),
            write_loop(&client, &kube, writes, secs)
        )
    });
    drop(env);
    println!(
        "live env, {rate} reads/s and {writes} writes/s for {secs} s: {} read errors, {failed} write errors",
        live.errors
    );
    println!("{}", summary("reads", &live.latencies));
    for (name, v) in ["patch", "apply", "rollout restart"].iter().zip(&w) {
        println!("{}", summary(name, v));
    }

    let dataset = bench_dataset(PROBLEM, tmp.path());
    let replay = Replay::start(&dataset, &[]);
    let base = replay.url("kubernetes");
    let peer: Measured = rt.block_on(async {
        let mix = Arc::new(request_mix(&client, &base).await);
        open_loop(&client, &base, mix, rate, secs).await
    });
    drop(replay);
    println!(
        "replay (peer), {rate} reads/s for {secs} s: {} errors",
        peer.errors
    );
    println!("{}", summary("reads", &peer.latencies));
    let p99 = |v: &[Duration]| ms(percentile(v, 0.99));
    println!(
        "live / replay read p99: {:.2}x   writes p99: patch {:.2} ms, apply {:.2} ms, rollout restart {:.2} ms",
        p99(&live.latencies) / p99(&peer.latencies).max(1e-6),
        p99(&w[0]),
        p99(&w[1]),
        p99(&w[2])
    );
}
