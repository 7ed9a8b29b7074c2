//! `collector capture` end to end against the sum of the raw queries it needs (issue goal: at most
//! 1.2×, the capture adding little over the servers' own work), and its peak memory.
//!
//! 1. A dataset: `FAULTLINE_BENCH_DATASET=DIR`, or a fresh simulator snapshot of the largest
//!    application, astronomy-shop (`FAULTLINE_BENCH_MINUTES`, default 60), served by
//!    `collector replay`.
//! 2. Recording pass: a capture through a recording reverse proxy in front of each of the four
//!    APIs, which notes every request (method, path and query, headers).
//! 3. Timed pass: a capture straight against the replay, under `/usr/bin/time` for its peak
//!    resident memory; wall time from spawn to exit.
//! 4. Raw queries: every recorded request sent again, one after the other, on one keep-alive
//!    client, each timed from send to the last body byte; their sum is what the servers needed.
//!
//! Run: `cargo bench --profile dev -p collector --bench capture_speed` (the profile `cargo run`
//! uses).

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

#[path = "../tests/support/mod.rs"]
mod support;
use support::{Replay, bench_dataset, collector};

const APIS: [&str; 4] = ["kubernetes", "prometheus", "jaeger", "loki"];

/// One request the capture made.
#[derive(Clone)]
struct Recorded {
    api: usize,
    method: String,
    path: String,
    headers: Vec<(String, Vec<u8>)>,
}

struct Proxy {
    api: usize,
    target: String,
    client: reqwest::Client,
    log: Arc<Mutex<Vec<Recorded>>>,
}

/// Notes the request, forwards it to the target and streams the answer back unchanged.
async fn forward(State(proxy): State<Arc<Proxy>>, req: Request) -> Response {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let headers: Vec<(String, Vec<u8>)> = req
        .headers()
        .iter()
        .filter(|(k, _)| k.as_str() != "host")
        .map(|(k, v)| (k.as_str().to_string(), v.as_bytes().to_vec()))
        .collect();
    let method = req.method().as_str().to_string();
    proxy.log.lock().unwrap().push(Recorded {
        api: proxy.api,
        method: method.clone(),
        path: path.clone(),
        headers: headers.clone(),
    });
    let body = axum::body::to_bytes(req.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    let mut out = proxy
        .client
        .request(method.parse().unwrap(), format!("{}{path}", proxy.target));
    for (k, v) in &headers {
        out = out.header(k.as_str(), v.as_slice());
    }
    match out.body(body).send().await {
        Ok(resp) => {
            let mut answer = Response::builder().status(resp.status().as_u16());
            for (k, v) in resp.headers() {
                if !matches!(
                    k.as_str(),
                    "content-length" | "transfer-encoding" | "connection"
                ) {
                    answer = answer.header(k.as_str(), v.as_bytes());
                }
            }
            answer.body(Body::from_stream(resp.bytes_stream())).unwrap()
        }
        Err(e) => (axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

/// A recording proxy on 127.0.0.1:0 in front of `target`; returns its base URL.
async fn start_proxy(api: usize, target: &str, log: Arc<Mutex<Vec<Recorded>>>) -> String {
    let proxy = Arc::new(Proxy {
        api,
        target: target.trim_end_matches('/').to_string(),
        client: reqwest::Client::new(),
        log,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().fallback(forward).with_state(proxy);
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn capture(
    urls: &[String; 4],
    kubeconfig: &Path,
    window: (&str, &str),
    ns: &str,
    out: &Path,
) -> Command {
    let mut cmd = collector();
    cmd.arg("capture")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespaces", ns])
        .args(["--prometheus", &urls[1]])
        .args(["--jaeger", &urls[2]])
        .args(["--loki", &urls[3]])
        .args(["--since", window.0, "--until", window.1, "--json", "--out"])
        .arg(out);
    cmd
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tmp = tempfile::tempdir().unwrap();
    let data = bench_dataset("astro-payment-failure", tmp.path());
    let manifest = datasets::Dataset::open(&data).unwrap().manifest().clone();
    let (since, until) = (
        manifest.window.start.to_rfc3339(),
        manifest.window.end.to_rfc3339(),
    );
    let namespaces = manifest.namespaces.join(",");
    let kubeconfig = tmp.path().join("kubeconfig");
    let replay = Replay::with_kubeconfig(&data, &kubeconfig);
    let direct: [String; 4] = APIS.map(|a| replay.endpoints[a].as_str().unwrap().to_string());
    let runtime = tokio::runtime::Runtime::new().unwrap();

    // Recording pass, through the proxies.
    let log = Arc::new(Mutex::new(Vec::new()));
    let proxied: Vec<String> = runtime.block_on(async {
        let mut urls = Vec::new();
        for (i, target) in direct.iter().enumerate() {
            urls.push(start_proxy(i, target, log.clone()).await);
        }
        urls
    });
    let proxied: [String; 4] = proxied.try_into().unwrap();
    let proxied_kubeconfig = tmp.path().join("kubeconfig.proxied");
    std::fs::write(
        &proxied_kubeconfig,
        std::fs::read_to_string(&kubeconfig)
            .unwrap()
            .replace(&direct[0], &proxied[0]),
    )
    .unwrap();
    let out = capture(
        &proxied,
        &proxied_kubeconfig,
        (&since, &until),
        &namespaces,
        &tmp.path().join("recorded"),
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "recording capture failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = log.lock().unwrap().clone();

    // Timed pass, straight against the replay.
    assert!(
        Path::new("/usr/bin/time").exists(),
        "peak memory is read with /usr/bin/time: apt-get install time"
    );
    let peak_file = tmp.path().join("peak");
    let mut timed = Command::new("/usr/bin/time");
    timed.args(["-f", "%M", "-o"]).arg(&peak_file);
    let inner = capture(
        &direct,
        &kubeconfig,
        (&since, &until),
        &namespaces,
        &tmp.path().join("b"),
    );
    timed.arg(inner.get_program()).args(inner.get_args());
    let started = Instant::now();
    let out = timed.output().unwrap();
    let wall = started.elapsed();
    assert!(
        out.status.success(),
        "timed capture failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let peak_kib: f64 = std::fs::read_to_string(&peak_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    // Raw queries: the recorded requests again, one at a time.
    let mut per_api = [(0usize, Duration::ZERO, 0usize); 4];
    runtime.block_on(async {
        let client = reqwest::Client::new();
        for r in &requests {
            let mut req = client.request(
                r.method.parse().unwrap(),
                format!("{}{}", direct[r.api].trim_end_matches('/'), r.path),
            );
            for (k, v) in &r.headers {
                req = req.header(k.as_str(), v.as_slice());
            }
            let started = Instant::now();
            let resp = req.send().await.unwrap();
            let status = resp.status();
            let body = resp.bytes().await.unwrap();
            let took = started.elapsed();
            assert!(
                status.is_success() || status.as_u16() == 404,
                "{} {}: {status}",
                r.method,
                r.path
            );
            let e = &mut per_api[r.api];
            e.0 += 1;
            e.1 += took;
            e.2 += body.len();
        }
    });
    drop(replay);

    println!("rows captured: {}", summary["rows"]);
    let mut raw = Duration::ZERO;
    for (api, (n, took, bytes)) in APIS.iter().zip(per_api) {
        println!(
            "raw {api:<11} {n:>6} requests {:>8.3} s {:>9.1} MiB",
            took.as_secs_f64(),
            bytes as f64 / (1 << 20) as f64
        );
        raw += took;
    }
    println!("raw queries, sum:   {:.3} s", raw.as_secs_f64());
    println!("capture, wall:      {:.3} s", wall.as_secs_f64());
    println!(
        "ratio capture/raw:  {:.2}x (goal <= 1.2x)",
        wall.as_secs_f64() / raw.as_secs_f64()
    );
    println!("capture peak RSS:   {:.1} MiB", peak_kib / 1024.0);
}
