//! Replay serves metrics from disk: the disk-backed series store answers exactly as the
//! in-memory one built from the same dataset, on a real simulator snapshot rewritten with row
//! groups small enough that reads skip most of the file, at the dataset's virtual now and at an
//! earlier `--at` (later samples hidden); and `collector replay` answers the Prometheus API as the
//! in-memory store does.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;

use std::collections::BTreeMap;

use apis::prometheus::{ALERT_FRESHNESS_NS, RecordedAlerts, disk_storage, router, storage};
use datasets::{Dataset, DatasetInfo, DatasetWriter, WriteOptions, WriterConfig};
use promql::storage::SampleBuf;
use promql::{Engine, Storage, StorageBuilder, parse};
use schemas::tables::{AlertRow, Labels, MetricMeta, Row, Table};
use schemas::time::Clock;
use support::{Replay, snapshot};

fn typed<T: TryFrom<Row>>(rows: Vec<Row>) -> Vec<T> {
    rows.into_iter().filter_map(|r| r.try_into().ok()).collect()
}

fn samples(st: &dyn Storage, id: u32, lo: i64, hi: i64) -> Vec<(i64, u64)> {
    let mut buf = SampleBuf::default();
    st.read_samples(id, lo, hi, &mut buf);
    buf.ts
        .iter()
        .zip(&buf.vals)
        .filter(|(t, _)| (lo..=hi).contains(*t))
        .map(|(&t, v)| (t, v.to_bits()))
        .collect()
}

const QUERIES: &[&str] = &[
    "sum by (namespace, pod) (rate(container_cpu_usage_seconds_total[5m]))",
    "topk(5, container_memory_working_set_bytes)",
    "increase(kube_pod_container_status_restarts_total[10m])",
    "kube_deployment_spec_replicas - kube_deployment_status_replicas_available",
    "histogram_quantile(0.9, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))",
    "{__name__=~\"kube_pod_status_.*\", namespace!=\"kube-system\"}",
    "count by (__name__) ({namespace=\"kube-system\"})",
    "ALERTS",
];

/// The alert states streamed from the table (in batches of 7 rows too, so that alerts span
/// batches) are what reading every row gives: the latest observation of each alert up to now if
/// still fresh, the first row of each alert name, and an `ALERTS` sample per observation.
fn alerts_streamed_as_read_whole(ds: &Dataset, now_ns: i64) {
    let rows: Vec<AlertRow> = typed(ds.read_rows(Table::Alerts).unwrap());
    assert!(rows.len() > 20, "the snapshot records alert states");
    let mut latest: BTreeMap<(String, Labels), AlertRow> = BTreeMap::new();
    let mut rules: BTreeMap<String, AlertRow> = BTreeMap::new();
    let mut reference = StorageBuilder::new();
    for a in &rows {
        rules
            .entry(a.alertname.clone())
            .or_insert_with(|| a.clone());
        if a.time_ns > now_ns {
            continue;
        }
        let slot = latest
            .entry((a.alertname.clone(), a.labels.clone()))
            .or_insert_with(|| a.clone());
        if a.time_ns >= slot.time_ns {
            *slot = a.clone();
        }
        let mut labels = a.labels.clone();
        labels.insert("alertname".into(), a.alertname.clone());
        labels.insert("alertstate".into(), a.state.clone());
        reference.add_sample(
            "ALERTS",
            labels.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            a.time_ns.div_euclid(1_000_000),
            1.0,
        );
    }
    let current: Vec<AlertRow> = latest
        .into_values()
        .filter(|a| now_ns - a.time_ns <= ALERT_FRESHNESS_NS)
        .collect();
    let reference = reference.build();
    for batch_rows in [7, 16 * 1024] {
        let mut b = StorageBuilder::new();
        let streamed = RecordedAlerts::stream_batches(ds, now_ns, &mut b, batch_rows).unwrap();
        assert_eq!(
            streamed.current(),
            current.as_slice(),
            "batches of {batch_rows}"
        );
        assert_eq!(
            streamed.rules().collect::<Vec<_>>(),
            rules.values().collect::<Vec<_>>()
        );
        let built = b.build();
        let (x, y) = (reference.select(&[]), built.select(&[]));
        assert_eq!(x.len(), y.len());
        for (&i, &j) in x.iter().zip(&y) {
            assert_eq!(reference.series_labels(i), built.series_labels(j));
            assert_eq!(
                samples(&reference, i, i64::MIN, i64::MAX),
                samples(&built, j, i64::MIN, i64::MAX)
            );
        }
    }
}

#[test]
fn metrics_from_disk_equal_metrics_in_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let snap = snapshot("astro-ad-high-cpu", "12m", &tmp.path().join("snap"));
    let original = Dataset::open(&snap).unwrap();

    // The same rows, with row groups of 3000 rows (pages are at most that).
    let dir = tmp.path().join("small-groups");
    let config = WriterConfig {
        file: WriteOptions {
            row_group_rows: 3000,
            ..WriteOptions::default()
        },
        ..WriterConfig::default()
    };
    let mut w = DatasetWriter::with_config(&dir, config).unwrap();
    for t in Table::ALL {
        w.extend(original.read_rows(t).unwrap()).unwrap();
    }
    let m = original.manifest();
    w.finish(DatasetInfo {
        environment: m.environment.clone(),
        application: m.application.clone(),
        namespaces: m.namespaces.clone(),
        window: m.window,
        virtual_now: m.virtual_now,
    })
    .unwrap();
    let ds = Dataset::open(&dir).unwrap();
    assert!(
        ds.entry(Table::Metrics).unwrap().rows > 30_000,
        "enough samples for many row groups"
    );
    let metadata: Vec<MetricMeta> = typed(ds.read_rows(Table::MetricMetadata).unwrap());

    let end_ns = m.window.end.timestamp_nanos_opt().unwrap();
    let start_ns = m.window.start.timestamp_nanos_opt().unwrap();
    for now_ns in [end_ns, start_ns + (end_ns - start_ns) * 2 / 3] {
        alerts_streamed_as_read_whole(&ds, now_ns);
        let (mem, _) = storage(&ds, &metadata, now_ns).unwrap();
        let (disk, _) = disk_storage(&ds, &metadata, now_ns).unwrap();
        disk.open().unwrap();
        let now_ms = now_ns / 1_000_000;

        let (a, b) = (mem.select(&[]), disk.select(&[]));
        let names = |st: &dyn Storage, ids: &[u32]| -> Vec<String> {
            ids.iter()
                .map(|&i| st.series_labels(i).to_string())
                .collect()
        };
        assert!(a.len() > 100, "a real snapshot has many series");
        assert_eq!(names(&mem, &a), names(&disk, &b));
        assert_eq!(mem.label_names(), disk.label_names());
        for n in mem.label_names() {
            assert_eq!(mem.label_values(&n), disk.label_values(&n), "values of {n}");
        }
        assert_eq!(mem.metadata(), disk.metadata());
        for (&x, &y) in a.iter().zip(&b) {
            let name = mem.series_labels(x).to_string();
            assert_eq!(mem.time_bounds(x), disk.time_bounds(y), "{name}");
            for (lo, hi) in [
                (i64::MIN, i64::MAX),
                (now_ms - 300_000, now_ms),
                (now_ms - 61_000, now_ms - 59_000),
            ] {
                assert_eq!(
                    samples(&mem, x, lo, hi),
                    samples(&disk, y, lo, hi),
                    "{name}"
                );
            }
        }
        let engine = Engine::default();
        let mut non_empty = 0;
        for q in QUERIES {
            let e = parse(q).unwrap();
            let (x, y) = (
                engine.instant(&mem, &e, now_ms),
                engine.instant(&disk, &e, now_ms),
            );
            assert_eq!(format!("{x:?}"), format!("{y:?}"), "{q}");
            non_empty += usize::from(matches!(&x, Ok(promql::Value::Vector(v)) if !v.is_empty()));
            let (x, y) = (
                engine.range(&mem, &e, now_ms - 600_000, now_ms, 30_000),
                engine.range(&disk, &e, now_ms - 600_000, now_ms, 30_000),
            );
            assert_eq!(format!("{x:?}"), format!("{y:?}"), "{q} over 10 minutes");
        }
        assert!(non_empty >= QUERIES.len() - 2, "the queries find data");
    }

    // Through HTTP: `collector replay` (disk) answers byte for byte as the Prometheus router over
    // the in-memory store at the same virtual now.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let replay = Replay::start(&dir, &["--frozen".as_ref()]);
    let (mem, alerts) = storage(&ds, &metadata, end_ns).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let app = router(
            Arc::new(mem),
            Arc::new(std::sync::RwLock::new(alerts)),
            Clock::frozen(end_ns),
            &apis::limits::Limits::default(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let reference = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = reqwest::Client::new();
        let now = end_ns / 1_000_000_000;
        let enc = |q: &str| -> String { form_urlencoded::byte_serialize(q.as_bytes()).collect() };
        let mut paths: Vec<String> = vec![
            "/api/v1/labels".into(),
            "/api/v1/label/__name__/values".into(),
            "/api/v1/label/pod/values".into(),
            "/api/v1/metadata".into(),
            "/api/v1/alerts".into(),
            format!(
                "/api/v1/series?match[]={}",
                enc("{namespace=\"kube-system\"}")
            ),
            format!(
                "/api/v1/series?match[]={}&start={}&end={now}",
                enc("{__name__=~\"kube_pod_.*\"}"),
                now - 300
            ),
            format!("/api/v1/labels?match[]={}", enc("ALERTS")),
        ];
        for q in QUERIES {
            paths.push(format!("/api/v1/query?query={}", enc(q)));
            paths.push(format!(
                "/api/v1/query_range?query={}&start={}&end={now}&step=30",
                enc(q),
                now - 900
            ));
        }
        for path in &paths {
            let get = |base: String| {
                let client = client.clone();
                let url = format!("{base}{path}");
                async move {
                    let r = client.get(&url).send().await.unwrap();
                    (r.status(), r.text().await.unwrap())
                }
            };
            let (a, b) = (
                get(reference.clone()).await,
                get(replay.url("prometheus")).await,
            );
            assert_eq!(a.0, b.0, "{path}");
            assert!(a.0.is_success(), "{path}: {}", a.1);
            assert_eq!(a.1, b.1, "{path}");
        }
    });
}
