//! A small recorded system the API targets serve: a namespace with a Deployment, its Pod, a
//! Service and a Node; an hour of metrics; a few hundred log lines. Enough for selectors,
//! queries and pipelines to find something, small enough that an input costs microseconds.

use std::sync::Arc;

use apis::kube::feed::ObjectFeed;
use promql::{MemStorage, StorageBuilder};
use schemas::tables::{ChangeType, LogRow, ObjectRow};
use schemas::time::Clock;
use stores::logs::{LogStore, MemLogs};
use stores::objects::ObjectTimeline;

/// 2026-01-01T01:00:00Z, the served "now".
pub const NOW_NS: i64 = 1_767_229_200_000_000_000;
pub const NOW_MS: i64 = NOW_NS / 1_000_000;
const HOUR_MS: i64 = 3_600_000;

pub struct World {
    pub metrics: Arc<MemStorage>,
    pub objects: Arc<ObjectFeed>,
    pub logs: Arc<LogStore>,
    pub clock: Clock,
}

impl World {
    pub fn new() -> Self {
        World {
            metrics: Arc::new(metrics()),
            objects: Arc::new(ObjectFeed::fixed(objects(), NOW_NS)),
            logs: Arc::new(MemLogs::new(logs())),
            clock: Clock::frozen(NOW_NS),
        }
    }
}

fn metrics() -> MemStorage {
    let mut b = StorageBuilder::new();
    b.set_metadata("http_requests_total", "counter", "Requests served.", "");
    let start = NOW_MS - HOUR_MS;
    for k in 0..240 {
        let t = start + k * 15_000;
        for (pod, code) in [("geo-1", "200"), ("geo-1", "500"), ("rate-1", "200")] {
            b.add_sample(
                "http_requests_total",
                [("job", "app"), ("pod", pod), ("code", code)],
                t,
                (k * 3) as f64,
            );
        }
        b.add_sample("up", [("job", "app"), ("pod", "geo-1")], t, 1.0);
        for le in ["0.1", "0.5", "+Inf"] {
            b.add_sample(
                "http_request_duration_seconds_bucket",
                [("job", "app"), ("le", le)],
                t,
                k as f64 * le.len() as f64,
            );
        }
        b.add_sample("memory_bytes", [("pod", "geo-1")], t, 1e8 + (k % 7) as f64);
    }
    b.build()
}

fn object(
    kind: &str,
    api: &str,
    ns: Option<&str>,
    name: &str,
    json: serde_json::Value,
) -> ObjectRow {
    ObjectRow {
        observed_ns: NOW_NS - 3_000_000_000_000,
        api_version: api.into(),
        kind: kind.into(),
        namespace: ns.map(str::to_string),
        name: name.into(),
        uid: format!("uid-{kind}-{name}"),
        resource_version: "1".into(),
        change: ChangeType::Added,
        object: json.to_string(),
    }
}

fn objects() -> ObjectTimeline {
    let meta = |name: &str, ns: Option<&str>| {
        serde_json::json!({
            "name": name, "namespace": ns, "uid": format!("uid-{name}"),
            "labels": {"app": "geo", "tier": "backend"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        })
    };
    let ns = Some("hotel");
    let rows = vec![
        object(
            "Namespace",
            "v1",
            None,
            "hotel",
            serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": meta("hotel", None),
            "status": {"phase": "Active"}}),
        ),
        object(
            "Node",
            "v1",
            None,
            "node-1",
            serde_json::json!({
            "apiVersion": "v1", "kind": "Node", "metadata": meta("node-1", None),
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        ),
        object(
            "Pod",
            "v1",
            ns,
            "geo-1",
            serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": meta("geo-1", ns),
            "spec": {"nodeName": "node-1", "containers": [{"name": "geo", "image": "geo:1"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5",
                       "containerStatuses": [{"name": "geo", "ready": true, "restartCount": 2}]}}),
        ),
        object(
            "Service",
            "v1",
            ns,
            "geo",
            serde_json::json!({
            "apiVersion": "v1", "kind": "Service", "metadata": meta("geo", ns),
            "spec": {"selector": {"app": "geo"}, "ports": [{"port": 8083, "targetPort": 8083}]}}),
        ),
        object(
            "Deployment",
            "apps/v1",
            ns,
            "geo",
            serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("geo", ns),
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "geo"}}},
            "status": {"replicas": 1, "readyReplicas": 1}}),
        ),
    ];
    let mut t = ObjectTimeline::default();
    t.add_objects(rows).expect("fixture objects parse");
    t.seal();
    t
}

fn logs() -> Vec<LogRow> {
    (0..300)
        .map(|i| LogRow {
            time_ns: NOW_NS - (300 - i) * 10_000_000_000,
            namespace: "hotel".into(),
            pod: if i % 3 == 0 { "rate-1" } else { "geo-1" }.into(),
            container: "app".into(),
            restart: (i / 200) as i32,
            stream: if i % 5 == 0 { "stderr" } else { "stdout" }.into(),
            line: match i % 3 {
                0 => format!(r#"{{"level":"error","msg":"dial tcp 10.0.0.{i}:8083: connection refused","latency_ms":{i}}}"#),
                1 => format!("level=info msg=\"served request\" status=200 duration={i}ms"),
                _ => format!("2026-01-01T00:00:{:02}Z WARN slow query took {i}ms", i % 60),
            },
        })
        .collect()
}
