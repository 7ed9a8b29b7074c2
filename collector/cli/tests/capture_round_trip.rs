//! The main test of `collector capture`: a simulator snapshot A is served by `collector replay`
//! (the real binary, on loopback), captured back through the Kubernetes, Prometheus, Jaeger and
//! Loki APIs into dataset B, and every table of B is compared with A's.
//!
//! Normalisations (what a capture of a replay can see, documented in `capture`):
//! - scope: the capture is asked for A's namespaces, so A's objects in other namespaces (such as
//!   `default`) are left out of the comparison.
//! - objects: the API shows the cluster as of the virtual now (the window's end), so B holds one
//!   `added` row per object alive then, observed at the window's end; it is compared with A's
//!   state at the virtual now. Resource versions are the replay's own sequence and are not
//!   compared; Secret values are compared after redacting A's with the same key.
//! - events: each Event's last recorded version. The core/v1 shape served for a row without a
//!   first time, reporting controller or instance fills them from the last time and the source.
//! - logs, metric metadata, spans: equal as sets of rows.
//! - metrics: Prometheus's data model drops empty-valued labels and keeps one sample per series
//!   and time; A is compared under the same rules.
//! - alert states: `ALERTS` keeps time, name, state and labels; annotations and the value are
//!   compared where `/api/v1/alerts` still shows them (alerts active at the end).

use std::collections::{BTreeMap, BTreeSet};

use capture::redact::Redactor;
use datasets::Dataset;
use schemas::tables::{
    AlertRow, ChangeType, EventRow, Labels, MetricSample, ObjectRow, Row, Table,
};
use serde_json::Value;

mod support;
use support::{Replay, capture_of, run_capture, snapshot};

const KEY: &str = "round-trip-key";

fn rows(ds: &Dataset, table: Table) -> Vec<Row> {
    ds.read_rows(table).unwrap()
}

/// Compares two row sets, showing a few rows only one side has.
fn assert_same(table: &str, a: Vec<String>, b: Vec<String>) {
    let a_count = a.len();
    let (a, b): (BTreeSet<String>, BTreeSet<String>) =
        (a.into_iter().collect(), b.into_iter().collect());
    assert_eq!(a_count, a.len(), "{table}: A has duplicate rows");
    let only_a: Vec<&String> = a.difference(&b).take(3).collect();
    let only_b: Vec<&String> = b.difference(&a).take(3).collect();
    assert!(
        only_a.is_empty() && only_b.is_empty(),
        "{table}: {} rows only in A, {} only in B (A has {}, B {})\nonly in A: {only_a:#?}\nonly in B: {only_b:#?}",
        a.difference(&b).count(),
        b.difference(&a).count(),
        a.len(),
        b.len()
    );
    assert!(
        !a.is_empty(),
        "{table}: A has no rows, the comparison proves nothing"
    );
}

/// An object as compared: kind and apiVersion set, resourceVersion (the replay's sequence) out.
fn comparable(api_version: &str, kind: &str, object: &str, redactor: &Redactor) -> String {
    let mut v: Value = serde_json::from_str(object).unwrap();
    v["kind"] = kind.into();
    v["apiVersion"] = api_version.into();
    if let Some(meta) = v["metadata"].as_object_mut() {
        meta.remove("resourceVersion");
        meta.remove("managedFields");
    }
    if kind == "Secret" {
        redactor.redact_secret(&mut v);
    }
    format!("{api_version} {kind} {}", canonical(&v))
}

/// JSON text with every object's keys sorted, so equal objects print alike.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, String> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            let fields: Vec<String> = sorted
                .into_iter()
                .map(|(k, v)| format!("{}:{v}", Value::from(k.as_str())))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

fn objects_at(rows: Vec<Row>, t: i64) -> Vec<ObjectRow> {
    let mut last: BTreeMap<(String, String, Option<String>, String), ObjectRow> = BTreeMap::new();
    for r in rows {
        let Row::Object(o) = r else { unreachable!() };
        if o.observed_ns > t {
            continue;
        }
        let key = (
            o.api_version.clone(),
            o.kind.clone(),
            o.namespace.clone(),
            o.name.clone(),
        );
        if last
            .get(&key)
            .is_none_or(|p| p.observed_ns <= o.observed_ns)
        {
            last.insert(key, o);
        }
    }
    last.into_values()
        .filter(|o| o.change != ChangeType::Deleted)
        .collect()
}

/// An object as compared: where it is and its content without resource versions.
fn object_key(o: &ObjectRow, redactor: &Redactor) -> String {
    format!(
        "{:?} {} {}",
        o.namespace,
        o.name,
        comparable(&o.api_version, &o.kind, &o.object, redactor)
    )
}

fn event_key(e: &EventRow) -> String {
    format!("{e:?}")
}

#[test]
fn replayed_snapshot_captures_back_to_the_same_tables() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tmp = tempfile::tempdir().unwrap();
    let a_path = snapshot("hotel-geo-target-port", "3m", &tmp.path().join("a"));
    let a = Dataset::open(&a_path).unwrap();
    let manifest = a.manifest().clone();
    let kubeconfig = tmp.path().join("kubeconfig");
    let replay = Replay::with_kubeconfig(&a_path, &kubeconfig);

    let b_path = tmp.path().join("b");
    let stdout = run_capture(
        capture_of(&manifest, &kubeconfig)
            .args(["--prometheus", &replay.url("prometheus")])
            .args(["--jaeger", &replay.url("jaeger")])
            .args(["--loki", &replay.url("loki")])
            .args(["--redaction-key", KEY, "--json", "--out"])
            .arg(&b_path),
    );
    let summary: Value = serde_json::from_slice(&stdout).unwrap();
    let b = Dataset::open(&b_path).unwrap();
    assert_eq!(b.manifest().window, manifest.window);
    assert_eq!(b.manifest().environment, "kube");
    assert_eq!(summary["dataset"], b_path.to_str().unwrap());
    let report = datasets::validate(&b_path);
    assert!(report.is_valid(), "B is not a valid dataset: {report:?}");

    let now = manifest.virtual_now.timestamp_nanos_opt().unwrap();
    let end = manifest.window.end.timestamp_nanos_opt().unwrap();
    let redactor = Redactor::new(KEY.as_bytes());
    // The capture keeps the chosen namespaces (the manifest's) and cluster-scoped kinds.
    let chosen = |ns: &String| manifest.namespaces.contains(ns);
    let in_scope = |o: &ObjectRow| {
        o.namespace.as_ref().is_none_or(chosen) && (o.kind != "Namespace" || chosen(&o.name))
    };

    // Objects: A's state at the virtual now, B's rows all observed at the window's end.
    let b_objects: Vec<ObjectRow> = rows(&b, Table::Objects)
        .into_iter()
        .map(|r| match r {
            Row::Object(o) => o,
            _ => unreachable!(),
        })
        .collect();
    assert!(
        b_objects
            .iter()
            .all(|o| o.change == ChangeType::Added && o.observed_ns == end)
    );
    assert!(
        b_objects
            .iter()
            .all(|o| !o.object.contains("managedFields"))
    );
    let secrets = b_objects.iter().filter(|o| o.kind == "Secret").count();
    assert_same(
        "objects",
        objects_at(rows(&a, Table::Objects), now)
            .into_iter()
            .filter(in_scope)
            .map(|o| object_key(&o, &redactor))
            .collect(),
        b_objects.iter().map(|o| object_key(o, &redactor)).collect(),
    );
    eprintln!(
        "objects equal ({} rows, {secrets} secrets redacted)",
        b_objects.len()
    );

    // EndpointSlices are recorded beside Endpoints, and a replay of the capture serves them to
    // `kubectl describe svc`, which reads a Service's endpoints from its slices.
    let slices = b_objects
        .iter()
        .filter(|o| o.kind == "EndpointSlice")
        .count();
    let endpoints = b_objects.iter().filter(|o| o.kind == "Endpoints").count();
    assert!(
        slices >= endpoints && endpoints > 0,
        "{slices} slices, {endpoints} Endpoints"
    );
    describe_shows_endpoints(&b_path, &tmp.path().join("b-kubeconfig"));

    // Events: the last version of each.
    let mut last_events: BTreeMap<(String, String), EventRow> = BTreeMap::new();
    for r in rows(&a, Table::Events) {
        let Row::Event(mut e) = r else { unreachable!() };
        if e.time_ns > now {
            continue;
        }
        e.first_time_ns = e.first_time_ns.or(Some(e.time_ns));
        e.reporting_controller = e.reporting_controller.or(e.source_component.clone());
        e.reporting_instance = e.reporting_instance.or(e.source_host.clone());
        let key = (e.namespace.clone(), e.name.clone());
        if last_events.get(&key).is_none_or(|p| p.time_ns <= e.time_ns) {
            last_events.insert(key, e);
        }
    }
    assert_same(
        "events",
        last_events.values().map(event_key).collect(),
        rows(&b, Table::Events)
            .into_iter()
            .map(|r| match r {
                Row::Event(e) => event_key(&e),
                _ => unreachable!(),
            })
            .collect(),
    );

    // Logs, metadata and spans: equal as sets of rows.
    for table in [Table::Logs, Table::MetricMetadata, Table::Spans] {
        let show =
            |rows: Vec<Row>| -> Vec<String> { rows.iter().map(|r| format!("{r:?}")).collect() };
        assert_same(table.name(), show(rows(&a, table)), show(rows(&b, table)));
        eprintln!("{} equal", table.name());
    }

    // Metrics: Prometheus drops empty-valued labels and holds one sample per series and time, so
    // A's samples are compared with those labels left out, and where A has several samples of a
    // series at one time B must hold one of them.
    let sample_key = |m: &MetricSample| {
        let labels: Labels = m
            .labels
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        format!("{} {labels:?} {}", m.metric, m.time_ns)
    };
    let mut a_samples: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for r in rows(&a, Table::Metrics) {
        let Row::Metric(m) = r else { unreachable!() };
        a_samples
            .entry(sample_key(&m))
            .or_default()
            .insert(m.value.to_bits());
    }
    let mut b_samples: BTreeMap<String, u64> = BTreeMap::new();
    for r in rows(&b, Table::Metrics) {
        let Row::Metric(m) = r else { unreachable!() };
        assert!(
            b_samples
                .insert(sample_key(&m), m.value.to_bits())
                .is_none(),
            "B repeats {m:?}"
        );
    }
    assert_same(
        "metrics",
        a_samples.keys().cloned().collect(),
        b_samples.keys().cloned().collect(),
    );
    for (key, value) in &b_samples {
        assert!(
            a_samples[key].contains(value),
            "metrics: {key}: B's value is not one of A's"
        );
    }
    let clashes = a_samples.values().filter(|v| v.len() > 1).count();
    eprintln!(
        "metrics equal ({} samples; A has {clashes} series-times with several values)",
        b_samples.len()
    );

    // Alert states: every observation (time, name, state, labels, activeAt); annotations and the
    // value where Prometheus still shows them (the latest observation of alerts active at the end).
    let alert_key = |a: &AlertRow| {
        format!(
            "{} {} {} {:?} {:?}",
            a.time_ns, a.alertname, a.state, a.labels, a.active_at_ns
        )
    };
    let a_alerts: BTreeMap<String, AlertRow> = rows(&a, Table::Alerts)
        .into_iter()
        .map(|r| match r {
            Row::Alert(x) => (alert_key(&x), x),
            _ => unreachable!(),
        })
        .collect();
    let b_alerts: Vec<AlertRow> = rows(&b, Table::Alerts)
        .into_iter()
        .map(|r| match r {
            Row::Alert(x) => x,
            _ => unreachable!(),
        })
        .collect();
    assert_same(
        "alerts",
        a_alerts.keys().cloned().collect(),
        b_alerts.iter().map(alert_key).collect(),
    );
    let detailed: Vec<&AlertRow> = b_alerts.iter().filter(|x| x.value.is_some()).collect();
    assert!(
        !detailed.is_empty(),
        "no alert was active at the end: annotations are not compared"
    );
    for x in &detailed {
        let original = &a_alerts[&alert_key(x)];
        assert_eq!(
            (&x.annotations, x.value),
            (&original.annotations, original.value)
        );
    }
    eprintln!(
        "alerts equal ({} observations, {} with annotations and value)",
        b_alerts.len(),
        detailed.len()
    );
    drop(replay);
}

/// `kubectl describe svc search` on a replay of the captured dataset prints the address its
/// slice holds.
fn describe_shows_endpoints(dataset: &std::path::Path, kubeconfig: &std::path::Path) {
    let _replay = Replay::with_kubeconfig(dataset, kubeconfig);
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new("kubectl")
            .env("KUBECONFIG", kubeconfig)
            .args(args)
            .output()
            .expect("kubectl is installed (apt-get install kubectl, or bash tests/run)");
        assert!(out.status.success(), "kubectl {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ns = "hotel-reservation";
    let ip = kubectl(&[
        "-n",
        ns,
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=search",
        "-o",
        "jsonpath={.items[0].endpoints[0].addresses[0]}",
    ]);
    assert!(ip.starts_with("10.244."), "{ip}");
    let described = kubectl(&["-n", ns, "describe", "svc", "search"]);
    let squeezed = described.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        squeezed.contains(&format!("Endpoints: {ip}:")),
        "{described}"
    );
}
