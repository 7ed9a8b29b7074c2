//! faultline's Prometheus API against a real Prometheus (Debian `prometheus` package) over the
//! same samples: every query of the SRE mix must give the same answer at the same times, and
//! `promtool query` must work against faultline.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;

use common::*;
use promql::DiskConfig;
use serde_json::Value as Json;

/// A query answer reduced to comparable form: result type, and per label set the points.
#[derive(Debug)]
struct Answer {
    status: String,
    result_type: String,
    series: BTreeMap<String, Vec<(f64, String)>>,
}

fn reduce(body: &Json) -> Answer {
    let status = body["status"].as_str().unwrap_or("").to_string();
    let result_type = body["data"]["resultType"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let mut series = BTreeMap::new();
    let point = |p: &Json| {
        (
            p[0].as_f64().unwrap_or(f64::NAN),
            p[1].as_str().unwrap_or("").to_string(),
        )
    };
    match &body["data"]["result"] {
        Json::Array(items) if result_type == "vector" || result_type == "matrix" => {
            for it in items {
                let key = serde_json::to_string(&it["metric"]).unwrap_or_default();
                let pts = match (&it["value"], &it["values"]) {
                    (Json::Array(_), _) => vec![point(&it["value"])],
                    (_, Json::Array(vs)) => vs.iter().map(point).collect(),
                    _ => vec![],
                };
                series.insert(key, pts);
            }
        }
        Json::Array(p) if p.len() == 2 => {
            series.insert(String::new(), vec![point(&body["data"]["result"])]);
        }
        _ => {}
    }
    Answer {
        status,
        result_type,
        series,
    }
}

fn close(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-12) * 1000.0,
        _ => false,
    }
}

fn diff(reference: &Answer, ours: &Answer) -> Option<String> {
    if reference.status != ours.status || reference.result_type != ours.result_type {
        return Some(format!(
            "status/type {}/{} vs ours {}/{}",
            reference.status, reference.result_type, ours.status, ours.result_type
        ));
    }
    let rk: Vec<&String> = reference.series.keys().collect();
    let ok: Vec<&String> = ours.series.keys().collect();
    if rk != ok {
        return Some(format!(
            "label sets differ:\n  prometheus {rk:?}\n  faultline  {ok:?}"
        ));
    }
    for (k, rp) in &reference.series {
        let op = &ours.series[k];
        if rp.len() != op.len() {
            return Some(format!("{k}: {} points vs ours {}", rp.len(), op.len()));
        }
        for (a, b) in rp.iter().zip(op) {
            if (a.0 - b.0).abs() > 1e-6 || !close(&a.1, &b.1) {
                return Some(format!("{k}: prometheus {a:?} vs faultline {b:?}"));
            }
        }
    }
    None
}

async fn get(client: &reqwest::Client, url: &str) -> Json {
    let r = client
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    r.json()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: body is not JSON: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_mix_matches_real_prometheus() {
    common::install_tls_provider();
    let fams = generate();
    let prom = start_prometheus(&fams).await;
    let ours = start_faultline(Arc::new(build_storage(&fams))).await;
    // The same samples served from a Parquet file with small row groups and pages, small time
    // blocks and a cache too small to hold them: every way a disk read can go wrong is exercised.
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = DiskConfig {
        block_ms: 10 * 60_000,
        cache_bytes: 256 << 10,
        batch_rows: 1000,
    };
    let disk = start_faultline(Arc::new(build_disk_storage(
        &fams,
        tmp.path(),
        SMALL_LAYOUT,
        config,
    )))
    .await;
    let client = reqwest::Client::new();

    let queries = query_mix();
    assert!(queries.len() >= 40, "the mix must hold at least 40 queries");
    let mut failures = Vec::new();
    let mut non_empty = 0;
    let mut checked = 0;
    for (instant, list) in [(true, queries.clone()), (false, range_mix())] {
        for q in &list {
            let r = reduce(&get(&client, &query_url(&prom.url, q, instant)).await);
            checked += 1;
            if !r.series.is_empty() {
                non_empty += 1;
            }
            for (store, url) in [("memory", &ours.url), ("disk", &disk.url)] {
                let o = reduce(&get(&client, &query_url(url, q, instant)).await);
                if let Some(d) = diff(&r, &o) {
                    failures.push(format!(
                        "[{}, {store}] {q}\n  {d}",
                        if instant { "instant" } else { "range" }
                    ));
                }
            }
        }
    }
    println!("{checked} queries compared, {non_empty} with non-empty answers");
    assert!(
        failures.is_empty(),
        "{} of {checked} answers differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // A mix of empty answers would prove nothing.
    assert!(
        non_empty * 10 >= checked * 8,
        "only {non_empty} of {checked} answers are non-empty"
    );

    // Metadata endpoints agree on what exists.
    for path in [
        "/api/v1/labels".to_string(),
        "/api/v1/label/service/values".to_string(),
        format!(
            "/api/v1/series?match[]={}",
            form_urlencoded::byte_serialize(b"up").collect::<String>()
        ),
        format!(
            "/api/v1/series?match[]={}&start={}&end={}",
            form_urlencoded::byte_serialize(
                br#"{__name__=~"kube_pod_info|up",pod=~"checkout.*|"}"#
            )
            .collect::<String>(),
            EVAL_MS / 1000 - 600,
            EVAL_MS / 1000
        ),
    ] {
        let mut a = get(&client, &format!("{}{path}", prom.url)).await;
        let mut b = get(&client, &format!("{}{path}", ours.url)).await;
        let c = get(&client, &format!("{}{path}", disk.url)).await;
        // Memory and disk agree exactly, order included.
        assert_eq!(b, c, "{path}: memory vs disk");
        for v in [&mut a, &mut b] {
            if let Json::Array(items) = &mut v["data"] {
                items.sort_by_key(|x| x.to_string());
            }
        }
        assert_eq!(a, b, "{path}");
    }

    // Errors: same errorType for the same bad request.
    for (path, kind) in [
        ("/api/v1/query?query=sum(", "bad_data"),
        (
            "/api/v1/query_range?query=up&start=0&end=100000&step=1",
            "bad_data",
        ),
        (
            "/api/v1/query_range?query=up&start=10&end=0&step=1",
            "bad_data",
        ),
        ("/api/v1/query?query=up&time=notatime", "bad_data"),
    ] {
        let a = get(&client, &format!("{}{path}", prom.url)).await;
        let b = get(&client, &format!("{}{path}", ours.url)).await;
        assert_eq!(a["status"], "error", "{path}");
        assert_eq!(b["status"], "error", "{path}: {b}");
        assert_eq!(a["errorType"], kind, "{path}");
        assert_eq!(b["errorType"], kind, "{path}: {b}");
    }

    // promtool as a client: the same printed answer from both servers.
    for args in [
        vec![
            "query",
            "instant",
            "--time",
            &format!("{}", EVAL_MS / 1000),
            "URL",
            "sum by (service) (rate(http_requests_total[5m]))",
        ],
        vec![
            "query",
            "range",
            "--start",
            &format!("{}", RANGE.0 / 1000),
            "--end",
            &format!("{}", RANGE.0 / 1000 + 600),
            "--step",
            "60s",
            "URL",
            "max by (job) (up)",
        ],
    ] {
        let run = |url: &str| {
            let a: Vec<&str> = args
                .iter()
                .map(|x| if *x == "URL" { url } else { x })
                .collect();
            let out = Command::new("promtool")
                .args(&a)
                .output()
                .expect("run promtool");
            assert!(
                out.status.success(),
                "promtool {a:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(String::from)
                .collect();
            lines.sort();
            lines
        };
        let from_prom = run(&prom.url);
        let from_ours = run(&ours.url);
        assert!(
            !from_ours.is_empty(),
            "promtool printed nothing for {args:?}"
        );
        assert_eq!(from_prom.len(), from_ours.len(), "promtool {args:?}");
        // Lines read `{labels} => value @[time]` (instant) or a series header then `value @[time]`.
        for (a, b) in from_prom.iter().zip(&from_ours) {
            let split = |l: &str| -> (String, String) {
                let (head, val) = l.rsplit_once(" => ").unwrap_or(("", l));
                (
                    head.to_string(),
                    val.split(" @[").next().unwrap_or("").trim().to_string(),
                )
            };
            let (ha, va) = split(a);
            let (hb, vb) = split(b);
            assert!(
                ha == hb && (close(&va, &vb) || a == b),
                "promtool {args:?}:\n  {a}\n  {b}"
            );
        }
    }
    drop(ours);
    drop(prom);
}
