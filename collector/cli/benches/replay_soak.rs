//! A bounded soak of `collector replay` with hostile requests mixed into a normal load, and the
//! same normal load alone as the peer, in one run.
//!
//! Each phase starts its own replay of the same dataset and sends the normal mix (kubectl-style
//! Kubernetes reads, Prometheus instant and dashboard range queries, Jaeger searches, Loki
//! queries) as an open loop at `FAULTLINE_BENCH_RATE` requests/s (default 50) for
//! `FAULTLINE_BENCH_SECS` s (default 150). The mixed phase adds `FAULTLINE_BENCH_HOSTILE_RATE`
//! hostile requests/s (default 5): the nesting bombs, overflowing ranges, oversized subqueries and
//! limits, malformed parameters of every API, and expensive queries whose client hangs up after
//! 300 ms (the server must cancel them). Printed: the normal requests' latency (p50, p99, max)
//! and errors in both phases, the p99 ratio, the hostile requests' statuses, and the replay's
//! RSS every 15 s.
//!
//! Run: `cargo bench --profile dev -p collector --bench replay_soak`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "../tests/support/mod.rs"]
mod support;
use support::load::request_mix;
use support::{Replay, bench_dataset, env_num, memory_mib, percentile};

/// One request of a mix: the URL, its Accept header, and how long the client waits for it.
#[derive(Clone)]
struct Req {
    url: String,
    accept: &'static str,
    client_timeout: Duration,
}

fn req(url: String) -> Req {
    Req {
        url,
        accept: "application/json",
        client_timeout: Duration::from_secs(30),
    }
}

/// `s` percent-encoded as a query parameter value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The normal mix over all four APIs.
async fn normal_mix(client: &reqwest::Client, replay: &Replay) -> Vec<Req> {
    let kube = replay.url("kubernetes");
    let (prom, jaeger, loki) = (
        replay.url("prometheus"),
        replay.url("jaeger"),
        replay.url("loki"),
    );
    let mut mix: Vec<Req> = request_mix(client, &kube)
        .await
        .into_iter()
        .map(|(path, accept)| Req {
            url: format!("{kube}{path}"),
            accept,
            client_timeout: Duration::from_secs(30),
        })
        .collect();
    let now: serde_json::Value = client
        .get(format!("{prom}/api/v1/query?query=time()"))
        .send()
        .await
        .expect("time()")
        .json()
        .await
        .expect("JSON");
    let t = now["data"]["result"][0].as_f64().unwrap_or(0.0);
    for q in [
        "sum by (service) (rate(http_requests_total[5m]))",
        "up",
        "histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))",
    ] {
        mix.push(req(format!("{prom}/api/v1/query?query={}", enc(q))));
    }
    mix.push(req(format!(
        "{prom}/api/v1/query_range?query={}&start={}&end={t}&step=30",
        enc("sum by (service) (rate(http_requests_total[5m]))"),
        t - 3600.0
    )));
    mix.push(req(format!("{jaeger}/api/services")));
    let services: serde_json::Value = client
        .get(format!("{jaeger}/api/services"))
        .send()
        .await
        .expect("services")
        .json()
        .await
        .expect("JSON");
    if let Some(s) = services["data"][0].as_str() {
        mix.push(req(format!("{jaeger}/api/traces?service={s}&limit=20")));
    }
    mix.push(req(format!(
        "{loki}/loki/api/v1/query_range?query={}&limit=100&since=15m",
        enc("{namespace=~\".+\"} |= \"error\"")
    )));
    mix.push(req(format!("{loki}/loki/api/v1/labels")));
    mix
}

/// What an agent trying anything sends: refused at once, or cancelled when its client leaves.
fn hostile_mix(replay: &Replay) -> Vec<Req> {
    let (kube, prom, jaeger, loki) = (
        replay.url("kubernetes"),
        replay.url("prometheus"),
        replay.url("jaeger"),
        replay.url("loki"),
    );
    let deep = format!("{}up{}", "sum(".repeat(500), ")".repeat(500));
    let mut mix = vec![
        req(format!("{prom}/api/v1/query?query={}", enc(&deep))),
        req(format!(
            "{prom}/api/v1/query?query={}",
            enc(&format!("{}1", "1+".repeat(20_000)))
        )),
        req(format!(
            "{prom}/api/v1/query_range?query=up&start=1e300&end=1e301&step=1e299"
        )),
        req(format!(
            "{prom}/api/v1/query?query={}",
            enc("max_over_time(up[1d:1ms])")
        )),
        req(format!(
            "{prom}/api/v1/query?query={}",
            enc("max_over_time(up[100y:1ms])")
        )),
        req(format!(
            "{loki}/loki/api/v1/query?query={}",
            enc(&format!(
                "{}{{a=\"b\"}}{}",
                "(".repeat(5000),
                ")".repeat(5000)
            ))
        )),
        req(format!(
            "{loki}/loki/api/v1/query_range?query={}&limit=1000000000",
            enc("{namespace=~\".+\"}")
        )),
        req(format!("{jaeger}/api/traces?service=x&limit=1000000000")),
        req(format!("{kube}/api/v1/pods?limit=abc")),
        req(format!(
            "{kube}/api/v1/pods?labelSelector={}",
            enc("a!=b!=c")
        )),
        req(format!("{kube}/api/v1/pods?watch=1&resourceVersion=abc")),
    ];
    // Expensive but legal, and the client hangs up: the server must stop working on it.
    for q in [
        "max_over_time({__name__=~\".+\"}[1h:1s])",
        "count(count_over_time({__name__=~\".+\"}[1h]) > 0) + sum(rate({__name__=~\".+\"}[1h]))",
    ] {
        mix.push(Req {
            url: format!("{prom}/api/v1/query?query={}", enc(q)),
            accept: "application/json",
            client_timeout: Duration::from_millis(300),
        });
    }
    mix
}

/// What a phase measured.
struct Phase {
    normal: Vec<Duration>,
    normal_errors: usize,
    hostile: BTreeMap<String, usize>,
    rss: Vec<(u64, f64)>,
}

async fn send(client: &reqwest::Client, r: &Req) -> Result<u16, String> {
    let fut = async {
        let resp = client
            .get(&r.url)
            .header("Accept", r.accept)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        resp.bytes().await.map_err(|e| e.to_string())?;
        Ok(status)
    };
    match tokio::time::timeout(r.client_timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err("client gave up".into()),
    }
}

/// Runs the normal mix (and the hostile one when given) as open loops for `secs` s.
async fn phase(
    normal: Arc<Vec<Req>>,
    hostile: Option<Arc<Vec<Req>>>,
    rate: u64,
    hostile_rate: u64,
    secs: u64,
    pid: u32,
) -> Phase {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .expect("client");
    let statuses: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let started = tokio::time::Instant::now();
    let hostile_loop = hostile.map(|mix| {
        let (client, statuses) = (client.clone(), statuses.clone());
        tokio::spawn(async move {
            let period = Duration::from_secs_f64(1.0 / hostile_rate.max(1) as f64);
            let mut tasks = Vec::new();
            for i in 0..hostile_rate * secs {
                tokio::time::sleep_until(started + period * i as u32).await;
                let (client, mix, statuses) = (client.clone(), mix.clone(), statuses.clone());
                tasks.push(tokio::spawn(async move {
                    let r = &mix[i as usize % mix.len()];
                    let what = match send(&client, r).await {
                        Ok(s) => s.to_string(),
                        Err(e) if e == "client gave up" => e,
                        Err(_) => "connection error".into(),
                    };
                    *statuses.lock().expect("lock").entry(what).or_default() += 1;
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
        })
    });
    let sampler = tokio::spawn(async move {
        let mut rss = Vec::new();
        for k in 0..=secs / 15 {
            tokio::time::sleep_until(started + Duration::from_secs(k * 15)).await;
            rss.push((k * 15, memory_mib(pid).0));
        }
        rss
    });
    let period = Duration::from_secs_f64(1.0 / rate as f64);
    let mut tasks = Vec::new();
    for i in 0..rate * secs {
        let due = started + period * i as u32;
        tokio::time::sleep_until(due).await;
        let (client, mix) = (client.clone(), normal.clone());
        tasks.push(tokio::spawn(async move {
            let ok = matches!(send(&client, &mix[i as usize % mix.len()]).await, Ok(s) if s < 400);
            (due.elapsed(), ok)
        }));
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (d, ok) = t.await.expect("request task");
        latencies.push(d);
        errors += usize::from(!ok);
    }
    latencies.sort();
    if let Some(h) = hostile_loop {
        let _ = h.await;
    }
    let rss = sampler.await.expect("sampler");
    let hostile = statuses.lock().expect("lock").clone();
    Phase {
        normal: latencies,
        normal_errors: errors,
        hostile,
        rss,
    }
}

fn report(name: &str, p: &Phase) -> f64 {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p99 = ms(percentile(&p.normal, 0.99));
    println!(
        "{name}: {} normal requests, {} errors; latency p50 {:.2} ms  p99 {p99:.2} ms  max {:.2} ms",
        p.normal.len(),
        p.normal_errors,
        ms(percentile(&p.normal, 0.5)),
        ms(percentile(&p.normal, 1.0)),
    );
    if !p.hostile.is_empty() {
        let statuses: Vec<String> = p.hostile.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        println!("{name}: hostile requests answered {}", statuses.join(", "));
    }
    let rss: Vec<String> = p.rss.iter().map(|(t, m)| format!("{t}s {m:.0}")).collect();
    println!("{name}: RSS MiB over time: {}", rss.join(", "));
    p99
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dataset = bench_dataset("hotel-geo-target-port", tmp.path());
    let rate = env_num("FAULTLINE_BENCH_RATE", 50).max(1);
    let hostile_rate = env_num("FAULTLINE_BENCH_HOSTILE_RATE", 5).max(1);
    let secs = env_num("FAULTLINE_BENCH_SECS", 150).max(15);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut p99s = Vec::new();
    for (name, with_hostile) in [("normal only", false), ("normal + hostile", true)] {
        let replay = Replay::start(&dataset, &[]);
        let pid = replay.child.id();
        let t0 = Instant::now();
        let p = rt.block_on(async {
            let client = reqwest::Client::new();
            let normal = Arc::new(normal_mix(&client, &replay).await);
            let hostile = with_hostile.then(|| Arc::new(hostile_mix(&replay)));
            phase(normal, hostile, rate, hostile_rate, secs, pid).await
        });
        println!(
            "{name}: {rate} normal req/s{} for {secs} s ({:.0} s)",
            if with_hostile {
                format!(" + {hostile_rate} hostile req/s")
            } else {
                String::new()
            },
            t0.elapsed().as_secs_f64()
        );
        p99s.push(report(name, &p));
        // The replay still answers after the soak.
        let alive = rt.block_on(async {
            reqwest::get(format!("{}/version", replay.url("kubernetes")))
                .await
                .is_ok_and(|r| r.status().is_success())
        });
        println!("{name}: replay alive after the soak: {alive}");
    }
    println!(
        "normal p99 with hostile traffic / without: {:.2} ms / {:.2} ms = {:.2}x   goal: p99 <= 50 ms, RSS flat",
        p99s[1],
        p99s[0],
        p99s[1] / p99s[0].max(1e-9)
    );
}
