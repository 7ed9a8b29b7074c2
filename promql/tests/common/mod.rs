//! Shared by the side-by-side test and the P2 benchmark: a synthetic Kubernetes-shaped metrics
//! set, its OpenMetrics export, a real Prometheus over the same samples (blocks built by
//! `promtool tsdb create-blocks-from openmetrics`), faultline's router on loopback, and the SRE
//! query mix run against both.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use promql::{DiskConfig, DiskStorage, MemStorage, PromApi, Storage, StorageBuilder};

/// 2026-01-10T00:00:00Z: start of the generated window.
pub const T0_MS: i64 = 1_768_003_200_000;
/// 100 minutes of samples.
pub const WINDOW_MS: i64 = 100 * 60_000;
pub const SCRAPE_MS: i64 = 15_000;

/// A generated series: labels (a `__suffix` pseudo-label picks `_sum`/`_count`) and points.
pub type GenSeries = (Vec<(String, String)>, Vec<(i64, f64)>);

pub struct Family {
    pub name: String,
    pub kind: &'static str,
    pub help: String,
    pub series: Vec<GenSeries>,
}

/// Deterministic xorshift, so both servers see the same bytes on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const SERVICES: [&str; 4] = ["frontend", "checkout", "payments", "catalog"];
const BUCKETS: [&str; 8] = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "1", "+Inf"];

/// Scrape times of series number `i`: every 15 s with a per-series millisecond phase, so no
/// sample ever sits exactly on a whole-second query time or window boundary.
fn scrape_times(i: usize, stop_at: Option<i64>) -> Vec<i64> {
    let phase = 113 + (i as i64 * 37) % 900;
    let end = stop_at.unwrap_or(T0_MS + WINDOW_MS);
    (0..)
        .map(|k| T0_MS + phase + k * SCRAPE_MS)
        .take_while(|t| *t < end)
        .collect()
}

pub fn generate() -> Vec<Family> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut fams: Vec<Family> = Vec::new();
    let mut idx = 0usize;
    let mut next_idx = || {
        idx += 1;
        idx
    };
    let stop = T0_MS + 60 * 60_000;
    let pods: Vec<(String, &str, Option<i64>)> = SERVICES
        .iter()
        .flat_map(|s| {
            let mut v = vec![
                (format!("{s}-7d9f-a1"), *s, None),
                (format!("{s}-7d9f-b2"), *s, None),
            ];
            if *s == "checkout" {
                v.push(("checkout-old-1".to_string(), *s, Some(stop)));
            }
            v
        })
        .collect();

    let mut req = Family {
        name: "http_requests_total".into(),
        kind: "counter",
        help: "HTTP requests.".into(),
        series: vec![],
    };
    for (pod, svc, stop_at) in &pods {
        for (code, base) in [
            ("200", 20.0),
            ("500", if *svc == "payments" { 3.0 } else { 0.2 }),
        ] {
            for method in ["GET", "POST"] {
                let i = next_idx();
                let mut v = 1000.0 * rng.next();
                let pts = scrape_times(i, *stop_at)
                    .into_iter()
                    .enumerate()
                    .map(|(k, t)| {
                        // A process restart resets the counter once, half-way.
                        if *svc == "catalog" && pod.ends_with("a1") && k == 200 {
                            v = 0.0;
                        }
                        v += base * 15.0 * (0.5 + rng.next());
                        (t, v.round())
                    })
                    .collect();
                let l = labels(&[
                    ("namespace", "shop"),
                    ("service", svc),
                    ("pod", pod),
                    ("code", code),
                    ("method", method),
                    ("job", "kubernetes-pods"),
                ]);
                req.series.push((l, pts));
            }
        }
    }
    fams.push(req);

    let mut hist = Family {
        name: "http_request_duration_seconds".into(),
        kind: "histogram",
        help: "Request latency.".into(),
        series: vec![],
    };
    for svc in SERVICES {
        let i = next_idx();
        let times = scrape_times(i, None);
        let slow = if svc == "payments" { 4.0 } else { 1.0 };
        let mut counts = [0.0f64; 8];
        let mut sum = 0.0;
        let mut bucket_pts: Vec<Vec<(i64, f64)>> = vec![Vec::new(); 8];
        let mut sum_pts = Vec::new();
        for &t in &times {
            for _ in 0..20 {
                let lat = 0.004 * slow * (1.0 + 10.0 * rng.next() * rng.next());
                sum += lat;
                for (b, ub) in BUCKETS.iter().enumerate() {
                    let ub: f64 = if *ub == "+Inf" {
                        f64::INFINITY
                    } else {
                        ub.parse().expect("bucket")
                    };
                    if lat <= ub {
                        counts[b] += 1.0;
                    }
                }
            }
            for b in 0..8 {
                bucket_pts[b].push((t, counts[b]));
            }
            sum_pts.push((t, sum));
        }
        for (b, ub) in BUCKETS.iter().enumerate() {
            let l = labels(&[("namespace", "shop"), ("service", svc), ("le", ub)]);
            hist.series.push((l, bucket_pts[b].clone()));
        }
        let cnt: Vec<(i64, f64)> = bucket_pts[7].clone();
        hist.series.push((
            labels(&[
                ("namespace", "shop"),
                ("service", svc),
                ("__suffix", "_sum"),
            ]),
            sum_pts,
        ));
        hist.series.push((
            labels(&[
                ("namespace", "shop"),
                ("service", svc),
                ("__suffix", "_count"),
            ]),
            cnt,
        ));
    }
    fams.push(hist);

    let mut restarts = Family {
        name: "kube_pod_container_status_restarts_total".into(),
        kind: "counter",
        help: "Container restarts.".into(),
        series: vec![],
    };
    let mut mem = Family {
        name: "container_memory_working_set_bytes".into(),
        kind: "gauge",
        help: "Working set.".into(),
        series: vec![],
    };
    let mut limits = Family {
        name: "kube_pod_container_resource_limits".into(),
        kind: "gauge",
        help: "Limits.".into(),
        series: vec![],
    };
    let mut cpu = Family {
        name: "container_cpu_usage_seconds_total".into(),
        kind: "counter",
        help: "CPU.".into(),
        series: vec![],
    };
    let mut thr = Family {
        name: "container_cpu_cfs_throttled_periods_total".into(),
        kind: "counter",
        help: "Throttled periods.".into(),
        series: vec![],
    };
    let mut per = Family {
        name: "container_cpu_cfs_periods_total".into(),
        kind: "counter",
        help: "CFS periods.".into(),
        series: vec![],
    };
    let mut info = Family {
        name: "kube_pod_info".into(),
        kind: "gauge",
        help: "Pod info.".into(),
        series: vec![],
    };
    for (pod, svc, stop_at) in &pods {
        let l = labels(&[("namespace", "shop"), ("pod", pod), ("container", svc)]);
        let leaky = *svc == "payments";
        let (mut r, mut m, mut c, mut th, mut pe) = (
            0.0,
            2.0e8 * (1.0 + rng.next()),
            100.0 * rng.next(),
            0.0,
            0.0,
        );
        let times = scrape_times(next_idx(), *stop_at);
        let (mut rp, mut mp, mut cp, mut tp, mut pp, mut ip) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        for (k, &t) in times.iter().enumerate() {
            if leaky && k % 90 == 89 {
                r += 1.0;
                m = 2.0e8;
            }
            m += if leaky {
                1.0e6 * (1.0 + rng.next())
            } else {
                1.0e5 * (rng.next() - 0.5)
            };
            c += 15.0 * (0.1 + 0.4 * rng.next());
            let periods = 150.0;
            pe += periods;
            th += (periods
                * if *svc == "frontend" {
                    0.3 * rng.next()
                } else {
                    0.02 * rng.next()
                })
            .round();
            rp.push((t, r));
            mp.push((t, m.round()));
            cp.push((t, c));
            tp.push((t, th));
            pp.push((t, pe));
            ip.push((t, 1.0));
        }
        restarts.series.push((l.clone(), rp));
        mem.series.push((l.clone(), mp));
        cpu.series.push((l.clone(), cp));
        thr.series.push((l.clone(), tp));
        per.series.push((l.clone(), pp));
        let mut ll = l.clone();
        ll.extend(labels(&[("resource", "memory"), ("unit", "byte")]));
        let lim_pts = times.iter().map(|&t| (t, 5.0e8)).collect();
        limits.series.push((ll, lim_pts));
        let node = if pod.ends_with("a1") {
            "node-1"
        } else {
            "node-2"
        };
        info.series.push((
            labels(&[
                ("namespace", "shop"),
                ("pod", pod),
                ("node", node),
                ("created_by_kind", "ReplicaSet"),
            ]),
            ip,
        ));
    }
    fams.extend([restarts, mem, limits, cpu, thr, per, info]);

    let mut up = Family {
        name: "up".into(),
        kind: "gauge",
        help: "Target up.".into(),
        series: vec![],
    };
    let mut spec = Family {
        name: "kube_deployment_spec_replicas".into(),
        kind: "gauge",
        help: "Desired replicas.".into(),
        series: vec![],
    };
    let mut avail = Family {
        name: "kube_deployment_status_replicas_available".into(),
        kind: "gauge",
        help: "Available replicas.".into(),
        series: vec![],
    };
    for (n, svc) in SERVICES.iter().enumerate() {
        let times = scrape_times(next_idx(), None);
        let down = *svc == "payments";
        up.series.push((
            labels(&[
                ("job", svc),
                ("instance", &format!("10.0.0.{}:8080", n + 10)),
            ]),
            times
                .iter()
                .enumerate()
                .map(|(k, &t)| {
                    (
                        t,
                        if down && (200..260).contains(&k) {
                            0.0
                        } else {
                            1.0
                        },
                    )
                })
                .collect(),
        ));
        spec.series.push((
            labels(&[("namespace", "shop"), ("deployment", svc)]),
            times.iter().map(|&t| (t, 2.0)).collect(),
        ));
        avail.series.push((
            labels(&[("namespace", "shop"), ("deployment", svc)]),
            times
                .iter()
                .enumerate()
                .map(|(k, &t)| (t, if down && k % 90 > 80 { 1.0 } else { 2.0 }))
                .collect(),
        ));
    }
    fams.extend([up, spec, avail]);
    fams
}

/// The sample name of a series: the family name plus the suffix the generator tagged it with.
fn sample_name(f: &Family, l: &[(String, String)]) -> String {
    let suffix = l
        .iter()
        .find(|(k, _)| k == "__suffix")
        .map(|(_, v)| v.as_str());
    match (f.kind, suffix) {
        (_, Some(s)) => format!("{}{s}", f.name),
        ("histogram", None) => format!("{}_bucket", f.name),
        _ => f.name.clone(),
    }
}

fn real_labels(l: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    l.iter()
        .filter(|(k, _)| k != "__suffix")
        .map(|(k, v)| (k.as_str(), v.as_str()))
}

pub fn build_storage(fams: &[Family]) -> MemStorage {
    let mut b = StorageBuilder::new();
    for f in fams {
        b.set_metadata(&f.name, f.kind, &f.help, "");
        for (l, pts) in &f.series {
            let h = b.series(&sample_name(f, l), real_labels(l));
            for &(t, v) in pts {
                b.push(h, t, v);
            }
        }
    }
    b.build()
}

/// One row of a Parquet table of samples: metric, labels as recorded, time (ns), value.
pub type SampleRow = (String, BTreeMap<String, String>, i64, f64);

/// The generated samples as rows of a sample table.
pub fn sample_rows(fams: &[Family]) -> Vec<SampleRow> {
    let mut rows = Vec::new();
    for f in fams {
        for (l, pts) in &f.series {
            let labels: BTreeMap<String, String> = real_labels(l)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            for &(t, v) in pts {
                rows.push((sample_name(f, l), labels.clone(), t * 1_000_000, v));
            }
        }
    }
    rows
}

/// Writes rows as a Parquet table of samples sorted by metric, labels and time (equal keys keep
/// their order), with page statistics, `group_rows` rows per row group and pages of at most
/// `page_rows` rows, as faultline's `metrics` table is laid out.
pub fn write_samples(path: &Path, rows: &[SampleRow], group_rows: usize, page_rows: usize) {
    use arrow_array::builder::{Float64Builder, MapBuilder, MapFieldNames, StringBuilder};
    use arrow_array::{Array, ArrayRef, RecordBatch, TimestampNanosecondArray};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::{EnabledStatistics, WriterProperties};

    let mut sorted: Vec<&SampleRow> = rows.iter().collect();
    sorted.sort_by(|a, b| (&a.0, &a.1, a.2).cmp(&(&b.0, &b.1, b.2)));
    let mut metric = StringBuilder::new();
    let names = MapFieldNames {
        entry: "entries".into(),
        key: "key".into(),
        value: "value".into(),
    };
    let mut labels = MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new());
    let mut value = Float64Builder::new();
    for r in &sorted {
        metric.append_value(&r.0);
        for (k, v) in &r.1 {
            labels.keys().append_value(k);
            labels.values().append_value(v);
        }
        labels.append(true).expect("map entry");
        value.append_value(r.3);
    }
    let time = TimestampNanosecondArray::from(sorted.iter().map(|r| r.2).collect::<Vec<_>>())
        .with_timezone("UTC");
    let labels = labels.finish();
    let schema = Arc::new(Schema::new(vec![
        Field::new("metric", DataType::Utf8, false),
        Field::new("labels", labels.data_type().clone(), false),
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        Field::new("value", DataType::Float64, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(metric.finish()),
        Arc::new(labels),
        Arc::new(time),
        Arc::new(value.finish()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).expect("batch");
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level")))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(group_rows))
        .set_data_page_row_count_limit(page_rows)
        .set_write_batch_size(page_rows.min(1024))
        .build();
    let file = std::fs::File::create(path).expect("create the sample file");
    let mut w = ArrowWriter::try_new(file, schema, Some(props)).expect("writer");
    w.write(&batch).expect("write samples");
    w.close().expect("close the sample file");
}

/// Row groups and pages of 256 Ki and 20 000 rows, as faultline's dataset files have.
pub const DATASET_LAYOUT: (usize, usize) = (256 * 1024, 20_000);
/// Row groups and pages small enough that reads of the generated samples really skip.
pub const SMALL_LAYOUT: (usize, usize) = (4096, 256);

/// A disk-backed store over the generated samples written to `dir` with `(rows per row group,
/// rows per page)`, with the same metadata as [`build_storage`].
pub fn build_disk_storage(
    fams: &[Family],
    dir: &Path,
    layout: (usize, usize),
    config: DiskConfig,
) -> DiskStorage {
    let path = dir.join("metrics.parquet");
    write_samples(&path, &sample_rows(fams), layout.0, layout.1);
    let metadata = build_storage(fams).metadata().clone();
    DiskStorage::new(&path, i64::MAX, MemStorage::default(), metadata, config)
}

/// OpenMetrics text with a timestamp on every sample, as promtool's backfill requires.
pub fn to_openmetrics(fams: &[Family]) -> String {
    let mut out = String::new();
    for f in fams {
        let family = if f.kind == "counter" {
            f.name.trim_end_matches("_total")
        } else {
            f.name.as_str()
        };
        let _ = writeln!(out, "# HELP {family} {}", f.help);
        let _ = writeln!(out, "# TYPE {family} {}", f.kind);
        for (l, pts) in &f.series {
            let name = sample_name(f, l);
            let ls: Vec<String> = real_labels(l)
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect();
            for &(t, v) in pts {
                let _ = writeln!(
                    out,
                    "{name}{{{}}} {v} {}.{:03}",
                    ls.join(","),
                    t / 1000,
                    t % 1000
                );
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A real Prometheus serving blocks built from the samples; killed on drop.
pub struct RealPrometheus {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for RealPrometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn tool_available(name: &str) -> bool {
    Command::new(name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub async fn start_prometheus(fams: &[Family]) -> RealPrometheus {
    assert!(
        tool_available("prometheus") && tool_available("promtool"),
        "install Debian's `prometheus` package (apt-get install -y prometheus) for this test"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let om = dir.path().join("samples.om");
    std::fs::write(&om, to_openmetrics(fams)).expect("write openmetrics");
    let data = dir.path().join("data");
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&om)
        .arg(&data)
        .output()
        .expect("run promtool");
    assert!(
        out.status.success(),
        "promtool failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(&cfg, "global:\n  scrape_interval: 15s\n").expect("write config");
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg("--storage.tsdb.retention.time=100y")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    let p = RealPrometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    wait_ready(
        &format!("{}/-/ready", p.url),
        &p._dir.path().join("prometheus.log"),
    )
    .await;
    p
}

/// In a workspace build reqwest is compiled with `rustls-no-provider` (the judge needs it), so the
/// process picks its TLS provider before building any client, even for plain http.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

async fn wait_ready(url: &str, log: &Path) {
    install_tls_provider();
    let client = reqwest::Client::new();
    for _ in 0..600 {
        if let Ok(r) = client.get(url).send().await
            && r.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "prometheus not ready at {url}; log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// faultline's router on loopback; the server stops when the handle drops.
pub struct Faultline {
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Faultline {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

pub async fn start_faultline(storage: Arc<dyn promql::StorageSource>) -> Faultline {
    let api = PromApi::new(
        storage,
        promql::Clock::frozen((T0_MS + WINDOW_MS) * 1_000_000),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, promql::router(api))
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
            .expect("serve");
    });
    Faultline {
        url,
        stop: Some(tx),
    }
}

/// Instant time used by the query mix: 80 minutes into the window, on a whole second.
pub const EVAL_MS: i64 = T0_MS + 80 * 60_000;
pub const RANGE: (i64, i64, i64) = (T0_MS + 30 * 60_000, T0_MS + 95 * 60_000, 60_000);

/// Queries an SRE agent typically runs.
pub fn query_mix() -> Vec<String> {
    let at = EVAL_MS / 1000 - 1800;
    [
        "sum by (service) (rate(http_requests_total[5m]))",
        r#"sum by (service) (rate(http_requests_total{code=~"5.."}[5m])) / sum by (service) (rate(http_requests_total[5m]))"#,
        "histogram_quantile(0.99, sum by (le, service) (rate(http_request_duration_seconds_bucket[5m])))",
        "histogram_quantile(0.5, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))",
        "sum(rate(http_request_duration_seconds_sum[5m])) by (service) / sum(rate(http_request_duration_seconds_count[5m])) by (service)",
        "increase(kube_pod_container_status_restarts_total[1h])",
        "sum by (namespace, pod) (container_memory_working_set_bytes) / sum by (namespace, pod) (kube_pod_container_resource_limits{resource=\"memory\"})",
        "container_memory_working_set_bytes / on(namespace, pod, container) group_left kube_pod_container_resource_limits{resource=\"memory\"}",
        "sum by (pod) (rate(container_cpu_cfs_throttled_periods_total[5m])) / sum by (pod) (rate(container_cpu_cfs_periods_total[5m]))",
        "topk(3, sum by (pod) (rate(container_cpu_usage_seconds_total[5m])))",
        "bottomk(2, avg by (service) (rate(http_requests_total[5m])))",
        r#"absent(up{job="billing"})"#,
        r#"absent(up{job="payments"})"#,
        "up == 0",
        "rate(http_requests_total{service=\"checkout\"}[5m] offset 10m)",
        "max_over_time(container_memory_working_set_bytes[30m])",
        "avg_over_time(container_memory_working_set_bytes[10m])",
        "max_over_time(sum by (service) (rate(http_requests_total[1m]))[30m:1m])",
        "irate(http_requests_total{service=\"checkout\"}[2m])",
        "delta(container_memory_working_set_bytes[15m])",
        "deriv(container_memory_working_set_bytes[10m])",
        "predict_linear(container_memory_working_set_bytes[30m], 3600)",
        "changes(kube_deployment_status_replicas_available[30m])",
        "resets(http_requests_total[30m])",
        "count by (node) (kube_pod_info)",
        "sum without (pod, method) (rate(http_requests_total[5m]))",
        "quantile(0.9, rate(http_requests_total[5m]))",
        "stddev by (service) (rate(http_requests_total[5m]))",
        "count_values(\"replicas\", kube_deployment_status_replicas_available)",
        "kube_deployment_spec_replicas - kube_deployment_status_replicas_available",
        "kube_deployment_spec_replicas != kube_deployment_status_replicas_available",
        "sum by (service) (rate(http_requests_total[5m])) > bool 10",
        "rate(container_cpu_usage_seconds_total[5m]) and on(pod) (container_memory_working_set_bytes > 3e8)",
        "up unless on(instance) (up == 0)",
        r#"label_replace(up, "host", "$1", "instance", "([^:]+):.*")"#,
        r#"label_join(kube_pod_info, "where", "/", "node", "pod")"#,
        "clamp_max(rate(http_requests_total[5m]), 30)",
        "round(container_memory_working_set_bytes / 1024 / 1024)",
        "sort_desc(sum by (service) (rate(http_requests_total[5m])))",
        "time() - max by (job) (timestamp(up))",
        r#"last_over_time(container_memory_working_set_bytes{pod="checkout-old-1"}[30m])"#,
        r#"absent_over_time(container_memory_working_set_bytes{pod="checkout-old-1"}[5m])"#,
        "quantile_over_time(0.95, container_memory_working_set_bytes[30m])",
        "stddev_over_time(container_memory_working_set_bytes[30m])",
        &format!("container_memory_working_set_bytes @ {at}"),
        "group by (namespace) (kube_pod_info)",
        "count(up) - sum(up)",
        "sum by (code) (increase(http_requests_total[1h]))",
        r#"{__name__=~"kube_deployment_.*", deployment="checkout"}"#,
        "sum(rate(http_requests_total[5m])) by (service) * on(service) group_left(deployment) label_replace(kube_deployment_spec_replicas, \"service\", \"$1\", \"deployment\", \"(.*)\")",
        "rate(http_requests_total{pod=\"checkout-old-1\"}[5m])",
        "min_over_time(up[1h])",
        "sum_over_time(up[10m]) / count_over_time(up[10m])",
        "abs(delta(kube_deployment_status_replicas_available[10m]))",
        "avg by (resource) (kube_pod_container_resource_limits)",
        "max by (service) (rate(http_requests_total{code=\"500\"}[5m])) > 0.1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Queries also run as range queries over [`RANGE`].
pub fn range_mix() -> Vec<String> {
    query_mix()
        .into_iter()
        .filter(|q| !q.contains('@') && !q.starts_with("sort_desc"))
        .step_by(2)
        .collect()
}

pub fn query_url(base: &str, q: &str, instant: bool) -> String {
    let enc: String = form_urlencoded::byte_serialize(q.as_bytes()).collect();
    if instant {
        format!(
            "{base}/api/v1/query?query={enc}&time={}",
            EVAL_MS as f64 / 1000.0
        )
    } else {
        format!(
            "{base}/api/v1/query_range?query={enc}&start={}&end={}&step={}",
            RANGE.0 / 1000,
            RANGE.1 / 1000,
            RANGE.2 / 1000
        )
    }
}
