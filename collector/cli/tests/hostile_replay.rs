//! `collector replay` against a hostile client, through the real binary: every request below
//! once crashed the process, answered 500 with a panic text, ran on after its client left, or
//! was accepted where the real server refuses it. Each now gets the API's own error shape, and
//! the server keeps answering.

#[path = "support/mod.rs"]
mod support;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;
use support::{Replay, collector, snapshot};

/// One short snapshot shared by the tests of this file.
fn dataset() -> &'static Path {
    static DATASET: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DATASET
        .get_or_init(|| {
            let tmp = tempfile::tempdir().expect("tempdir");
            let ds = snapshot("hotel-geo-target-port", "1m", &tmp.path().join("snap"));
            (tmp, ds)
        })
        .1
}

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        tokio::runtime::Runtime::new().expect("runtime")
    })
}

/// Sends a request built on a client that gives up after `wait`: the status and the body, or
/// `None` when the client gave up first.
fn send(
    wait: Duration,
    build: impl FnOnce(&reqwest::Client) -> reqwest::RequestBuilder,
) -> Option<(u16, String)> {
    let rt = runtime();
    let client = reqwest::Client::builder()
        .timeout(wait)
        .build()
        .expect("client");
    rt.block_on(async {
        let r = build(&client).send().await.ok()?;
        let status = r.status().as_u16();
        Some((status, r.text().await.ok()?))
    })
}

/// GET `url`: the status and the JSON body.
fn get(url: &str) -> (u16, Value) {
    let (status, text) = send(Duration::from_secs(60), |c| c.get(url)).expect("an answer");
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{url}: JSON expected, got {status} {text:?}: {e}"));
    (status, body)
}

fn prom_error(status: u16, body: &Value) -> (&str, &str) {
    assert_eq!(body["status"], "error", "{status} {body}");
    (
        body["errorType"].as_str().unwrap_or(""),
        body["error"].as_str().unwrap_or(""),
    )
}

#[test]
fn promql_nesting_bombs_are_refused_and_the_server_stays_up() {
    let replay = Replay::start(dataset(), &[]);
    let prom = replay.url("prometheus");
    let bombs = [
        format!("{}up{}", "sum(".repeat(500), ")".repeat(500)),
        format!("{}up{}", "(".repeat(2000), ")".repeat(2000)),
        format!("{}up{}", "max_over_time(".repeat(200), "[1m:])".repeat(200)),
        format!("{}up{}", "-(".repeat(5000), ")".repeat(5000)),
        format!("{}up{}", "abs(".repeat(5000), ")".repeat(5000)),
        format!("{}1", "1+".repeat(20_000)),
    ];
    for q in &bombs {
        // POST with a form body; GET too where the URL fits (hyper answers 414 past ~64 KiB).
        let (status, text) = send(Duration::from_secs(60), |c| {
            c.post(format!("{prom}/api/v1/query"))
                .form(&[("query", q.as_str())])
        })
        .expect("an answer");
        let body: Value = serde_json::from_str(&text).expect("JSON");
        let (kind, msg) = prom_error(status, &body);
        assert_eq!((status, kind), (400, "bad_data"), "{msg}");
        assert!(msg.contains("nests deeper than the limit of 128"), "{msg}");
        if q.len() < 20_000 {
            let (status, _) = get(&format!("{prom}/api/v1/query?query={}", enc(q)));
            assert_eq!(status, 400);
        }
    }
    let (status, body) = get(&format!("{prom}/api/v1/query?query=up"));
    assert_eq!((status, body["status"].as_str()), (200, Some("success")));
    // The depth is a flag.
    let deep = Replay::start(dataset(), &["--query-max-depth".as_ref(), "600".as_ref()]);
    let (status, _) = get(&format!(
        "{}/api/v1/query?query={}",
        deep.url("prometheus"),
        enc(&bombs[0])
    ));
    assert_eq!(status, 200, "sum( x500 is within a depth limit of 600");
}

#[test]
fn range_times_never_overflow() {
    let replay = Replay::start(dataset(), &[]);
    let prom = replay.url("prometheus");
    let (status, body) = get(&format!(
        "{prom}/api/v1/query_range?query=up&start=1e300&end=1e301&step=1e299"
    ));
    let (kind, msg) = prom_error(status, &body);
    assert_eq!((status, kind), (400, "bad_data"));
    assert!(msg.contains("invalid parameter \"start\""), "{msg}");
    // Times at the very end of the representable range: answered, never a 500.
    for q in [
        "query=up&start=9223372036854775&end=9223372036854775&step=1",
        "query=up&start=-9223372036854775&end=-9223372036854775&step=1",
        "query=up%20offset%20-100y&start=9223372036854775&end=9223372036854775&step=1",
        "query=up%20%40%201e300&start=0&end=1&step=1",
    ] {
        let (status, body) = get(&format!("{prom}/api/v1/query_range?{q}"));
        assert!(status < 500, "{q}: {status} {body}");
    }
}

#[test]
fn evaluation_stops_at_its_limits_and_when_its_client_leaves() {
    let replay_cmd = || {
        let mut c = collector();
        c.arg("replay")
            .arg(dataset())
            .args([
                "--json",
                "--query-timeout",
                "60s",
                "--query-max-samples",
                "100000",
            ])
            .env("RUST_LOG", "promql=info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let mut child = replay_cmd().spawn().expect("collector replay starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("endpoints");
    let endpoints: Value = serde_json::from_str(&line).expect("endpoints JSON");
    let prom = endpoints["prometheus"]
        .as_str()
        .expect("prometheus")
        .to_string();
    let (tx, logs) = mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(l);
        }
    });

    // 86 million instants: refused before any work.
    let (status, body) = get(&format!(
        "{prom}/api/v1/query?query={}",
        enc("max_over_time(up[1d:1ms])")
    ));
    let (kind, msg) = prom_error(status, &body);
    assert_eq!((status, kind), (422, "execution"), "{msg}");
    assert!(msg.contains("instants"), "{msg}");
    // The samples budget counts what subqueries compute.
    let (status, body) = get(&format!(
        "{prom}/api/v1/query?query={}",
        enc("{__name__=~\".+\"}[1h:1s]")
    ));
    let (_, msg) = prom_error(status, &body);
    assert_eq!(status, 422, "{msg}");
    assert!(msg.contains("too many samples"), "{msg}");
    // The request's own timeout ends an expensive query with Prometheus' timeout error.
    // Every step rates every series and keeps none: it never fills the samples budget.
    let heavy = enc("max_over_time(count(rate({__name__=~\".+\"}[5m]) > 1e300)[1d:1s])");
    let (status, body) = get(&format!("{prom}/api/v1/query?query={heavy}&timeout=1s"));
    let (kind, _) = prom_error(status, &body);
    assert_eq!((status, kind), (503, "timeout"));
    // A client that hangs up: the evaluation is cancelled, not run to its timeout.
    let gone = send(Duration::from_millis(300), |c| {
        c.get(format!("{prom}/api/v1/query?query={heavy}"))
    });
    assert!(gone.is_none(), "the client gave up first");
    let cancelled = std::iter::from_fn(|| logs.recv_timeout(Duration::from_secs(30)).ok())
        .find(|l| l.contains("query cancelled"));
    assert!(
        cancelled.is_some(),
        "the replay logs the cancelled query (a query ended by its 60 s timeout logs no cancellation)"
    );
    let (status, _) = get(&format!("{prom}/api/v1/query?query=up"));
    assert_eq!(status, 200);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_damaged_table_is_refused_at_start() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let copy = tmp.path().join("dataset");
    std::fs::create_dir(&copy).expect("mkdir");
    for e in std::fs::read_dir(dataset()).expect("dataset").flatten() {
        std::fs::copy(e.path(), copy.join(e.file_name())).expect("copy");
    }
    let metrics = copy.join("metrics.parquet");
    let len = std::fs::metadata(&metrics).expect("metrics").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&metrics)
        .expect("open");
    f.set_len(len / 2).expect("truncate");
    for args in [vec!["replay"], vec!["dataset", "inspect"]] {
        let out = collector()
            .args(&args)
            .arg(&copy)
            .output()
            .expect("collector runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("metrics.parquet") && err.contains("the manifest says"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn jaeger_searches_are_bounded() {
    let replay = Replay::start(dataset(), &[]);
    let jaeger = replay.url("jaeger");
    let (status, body) = get(&format!(
        "{jaeger}/api/traces?service=frontend&limit=1000000000"
    ));
    assert_eq!(status, 400, "{body}");
    let msg = body["errors"][0]["msg"].as_str().unwrap_or("");
    assert!(msg.contains("maximum of 1500 traces"), "{msg}");
    let (status, body) = get(&format!(
        "{jaeger}/api/v3/traces?query.service_name=frontend&query.start_time_min=2020-01-01T00:00:00Z&query.start_time_max=2030-01-01T00:00:00Z&query.num_traces=1000000000"
    ));
    assert_eq!(status, 400, "{body}");
    let (status, _) = get(&format!("{jaeger}/api/traces?service=frontend&limit=20"));
    assert_eq!(status, 200);
}

#[test]
fn kubernetes_refuses_what_the_apiserver_refuses() {
    let replay = Replay::start(dataset(), &[]);
    let kube = replay.url("kubernetes");
    for (query, says) in [
        ("limit=abc", "limit: Invalid value"),
        ("limit=-1", "must be greater than or equal to 0"),
        ("resourceVersionMatch=Bogus", "Unsupported value: \"Bogus\""),
        (
            "resourceVersionMatch=Exact",
            "forbidden unless resourceVersion",
        ),
        ("labelSelector=-x%3Dy", "invalid label key \"-x\""),
        ("labelSelector=a!%3Db!%3Dc", "invalid label value: \"b!=c\""),
        (
            "watch=1&resourceVersion=abc",
            "resourceVersion: Invalid value",
        ),
    ] {
        let (status, body) = get(&format!("{kube}/api/v1/pods?{query}"));
        assert_eq!(
            (status, body["kind"].as_str(), body["reason"].as_str()),
            (400, Some("Status"), Some("BadRequest")),
            "{query}: {body}"
        );
        let msg = body["message"].as_str().unwrap_or("");
        assert!(msg.contains(says), "{query}: {msg}");
    }
    let (status, body) = get(&format!(
        "{kube}/api/v1/pods?limit=2&labelSelector=app%3Dgeo"
    ));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn listen_and_at_flags_are_checked_as_given() {
    let out = collector()
        .arg("replay")
        .arg(dataset())
        .args(["--listen", "127.0.0.1:65535"])
        .output()
        .expect("collector runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("at most 65531"), "{err}");
    let out = collector()
        .arg("replay")
        .arg(dataset())
        .args(["--at", "9999-12-31T23:59:59Z"])
        .output()
        .expect("collector runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is outside the dataset's window"), "{err}");
}
