//! A small recorded cluster for API tests, written as a real dataset: a node, a namespace, a
//! Deployment with its ReplicaSet and two Pods (one crash-looping after OOM kills), a Service with its
//! Endpoints, a ConfigMap, Events and container logs across restarts. Independent of the simulator,
//! so the facades are tested against hand-checked objects.

use std::path::Path;

use chrono::{DateTime, Utc};
use datasets::{DatasetInfo, DatasetWriter};
use schemas::TimeWindow;
use schemas::tables::{ChangeType, EventRow, LogRow, ObjectRow, Row, SpanRow};
use serde_json::{Value, json};

/// 2026-01-01T00:00:00Z
pub const T0: i64 = 1_767_225_600_000_000_000;
pub const SEC: i64 = 1_000_000_000;
/// The virtual now: one hour into the recording.
pub const NOW: i64 = T0 + 3600 * SEC;
pub const NS: &str = "shop";

pub fn ts(offset_s: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(T0 + offset_s * SEC)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn object(t: i64, change: ChangeType, v: Value) -> Row {
    Row::Object(ObjectRow {
        observed_ns: T0 + t * SEC,
        api_version: v["apiVersion"].as_str().unwrap().into(),
        kind: v["kind"].as_str().unwrap().into(),
        namespace: v["metadata"]["namespace"].as_str().map(str::to_string),
        name: v["metadata"]["name"].as_str().unwrap().into(),
        uid: v["metadata"]["uid"].as_str().unwrap().into(),
        resource_version: "1".into(),
        change,
        object: v.to_string(),
    })
}

fn pod(name: &str, uid: &str, status: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": uid, "creationTimestamp": ts(0),
                     "generateName": "cart-5d8f7c9b4-", "labels": {"app": "cart", "pod-template-hash": "5d8f7c9b4"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "cart-5d8f7c9b4",
                                          "uid": "rs-1", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"nodeName": "worker-1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                 "serviceAccountName": "default",
                 "containers": [{"name": "cart", "image": "ghcr.io/shop/cart:1.4.2",
                                 "ports": [{"containerPort": 7070, "protocol": "TCP"}],
                                 "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "50m", "memory": "64Mi"}}}]},
        "status": status,
    })
}

fn running_status(ip: &str) -> Value {
    json!({"phase": "Running", "podIP": ip, "hostIP": "10.0.0.11", "startTime": ts(0), "qosClass": "Burstable",
           "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ts(5)},
                          {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(0)}],
           "containerStatuses": [{"name": "cart", "ready": true, "restartCount": 0, "image": "ghcr.io/shop/cart:1.4.2",
                                  "imageID": "", "containerID": "containerd://a1", "started": true,
                                  "state": {"running": {"startedAt": ts(3)}}}]})
}

fn crashloop_status(restarts: i64, last_finished: i64) -> Value {
    json!({"phase": "Running", "podIP": "10.244.1.8", "hostIP": "10.0.0.11", "startTime": ts(0), "qosClass": "Burstable",
           "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": ts(last_finished)},
                          {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(0)}],
           "containerStatuses": [{"name": "cart", "ready": false, "restartCount": restarts, "image": "ghcr.io/shop/cart:1.4.2",
                                  "imageID": "", "containerID": "containerd://b2", "started": false,
                                  "state": {"waiting": {"reason": "CrashLoopBackOff",
                                            "message": "back-off 40s restarting failed container=cart pod=cart-5d8f7c9b4-x2x9z"}},
                                  "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                                                 "startedAt": ts(last_finished - 20), "finishedAt": ts(last_finished)}}}]})
}

fn event(
    name: &str,
    t: i64,
    count: i32,
    ty: &str,
    reason: &str,
    (kind, obj, uid): (&str, &str, &str),
    msg: &str,
) -> Row {
    Row::Event(EventRow {
        time_ns: T0 + t * SEC,
        first_time_ns: Some(T0 + (t - 60 * (count as i64 - 1)).max(0) * SEC),
        namespace: NS.into(),
        name: name.into(),
        uid: format!("ev-{name}"),
        event_type: ty.into(),
        reason: reason.into(),
        message: msg.into(),
        count,
        involved_api_version: Some(if kind == "Pod" { "v1" } else { "apps/v1" }.into()),
        involved_kind: kind.into(),
        involved_namespace: Some(NS.into()),
        involved_name: obj.into(),
        involved_uid: Some(uid.into()),
        involved_field_path: (kind == "Pod").then(|| "spec.containers{cart}".to_string()),
        source_component: Some(
            if kind == "Pod" {
                "kubelet"
            } else {
                "deployment-controller"
            }
            .into(),
        ),
        source_host: (kind == "Pod").then(|| "worker-1".to_string()),
        ..EventRow::default()
    })
}

fn log(pod: &str, t: i64, restart: i32, line: &str) -> Row {
    Row::Log(LogRow {
        time_ns: T0 + t * SEC,
        namespace: NS.into(),
        pod: pod.into(),
        container: "cart".into(),
        restart,
        stream: "stdout".into(),
        line: line.into(),
    })
}

/// Every row of the recorded cluster.
pub fn cluster_rows() -> Vec<Row> {
    let healthy = "cart-5d8f7c9b4-q7k2m";
    let crashing = "cart-5d8f7c9b4-x2x9z";
    let mut rows = vec![
        object(
            0,
            ChangeType::Added,
            json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NS, "uid": "ns-1", "creationTimestamp": ts(0), "labels": {"kubernetes.io/metadata.name": NS}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        ),
        object(
            0,
            ChangeType::Added,
            json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "worker-1", "uid": "node-1", "creationTimestamp": ts(0),
                         "labels": {"kubernetes.io/hostname": "worker-1", "node-role.kubernetes.io/worker": ""}},
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                                       "lastHeartbeatTime": ts(3590), "lastTransitionTime": ts(0)}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}, {"type": "Hostname", "address": "worker-1"}],
                       "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian GNU/Linux 12 (bookworm)", "kernelVersion": "6.1.0-27-amd64",
                                    "containerRuntimeVersion": "containerd://1.7.24", "operatingSystem": "linux", "architecture": "amd64"}}}),
        ),
        object(
            0,
            ChangeType::Added,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "cart", "namespace": NS, "uid": "dep-1", "generation": 1, "creationTimestamp": ts(0),
                         "labels": {"app": "cart"}, "annotations": {"deployment.kubernetes.io/revision": "1"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "cart"}},
                     "template": {"metadata": {"labels": {"app": "cart"}},
                                  "spec": {"containers": [{"name": "cart", "image": "ghcr.io/shop/cart:1.4.2"}]}},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}},
            "status": {"replicas": 2, "updatedReplicas": 2, "readyReplicas": 1, "availableReplicas": 1, "unavailableReplicas": 1,
                       "conditions": [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                                       "message": "Deployment does not have minimum availability.", "lastUpdateTime": ts(400), "lastTransitionTime": ts(400)}]}}),
        ),
        object(
            0,
            ChangeType::Added,
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "cart-5d8f7c9b4", "namespace": NS, "uid": "rs-1", "creationTimestamp": ts(0),
                         "labels": {"app": "cart", "pod-template-hash": "5d8f7c9b4"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "cart", "uid": "dep-1", "controller": true}]},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "cart", "pod-template-hash": "5d8f7c9b4"}},
                     "template": {"metadata": {"labels": {"app": "cart", "pod-template-hash": "5d8f7c9b4"}},
                                  "spec": {"containers": [{"name": "cart", "image": "ghcr.io/shop/cart:1.4.2"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1}}),
        ),
        object(
            1,
            ChangeType::Added,
            pod(healthy, "pod-1", running_status("10.244.1.7")),
        ),
        object(
            1,
            ChangeType::Added,
            pod(crashing, "pod-2", running_status("10.244.1.8")),
        ),
        object(
            600,
            ChangeType::Modified,
            pod(crashing, "pod-2", crashloop_status(2, 590)),
        ),
        object(
            3300,
            ChangeType::Modified,
            pod(crashing, "pod-2", crashloop_status(5, 3290)),
        ),
        object(
            0,
            ChangeType::Added,
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "cart", "namespace": NS, "uid": "svc-1", "creationTimestamp": ts(0), "labels": {"app": "cart"}},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.12.34", "clusterIPs": ["10.96.12.34"], "selector": {"app": "cart"},
                     "ports": [{"name": "grpc", "port": 7070, "targetPort": 7070, "protocol": "TCP"}], "sessionAffinity": "None"}}),
        ),
        object(
            5,
            ChangeType::Added,
            json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "cart", "namespace": NS, "uid": "ep-1", "creationTimestamp": ts(0), "labels": {"app": "cart"}},
            "subsets": [{"addresses": [{"ip": "10.244.1.7", "targetRef": {"kind": "Pod", "name": healthy, "namespace": NS}}],
                         "notReadyAddresses": [{"ip": "10.244.1.8", "targetRef": {"kind": "Pod", "name": crashing, "namespace": NS}}],
                         "ports": [{"name": "grpc", "port": 7070, "protocol": "TCP"}]}]}),
        ),
        object(
            0,
            ChangeType::Added,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cart-config", "namespace": NS, "uid": "cm-1", "creationTimestamp": ts(0)},
            "data": {"CACHE_ADDR": "valkey-cart:6379", "LOG_LEVEL": "info"}}),
        ),
        object(
            0,
            ChangeType::Added,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "old-config", "namespace": NS, "uid": "cm-2", "creationTimestamp": ts(0)},
            "data": {"x": "y"}}),
        ),
        object(
            1200,
            ChangeType::Deleted,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "old-config", "namespace": NS, "uid": "cm-2", "creationTimestamp": ts(0)},
            "data": {"x": "y"}}),
        ),
        event(
            "cart.1",
            1,
            1,
            "Normal",
            "ScalingReplicaSet",
            ("Deployment", "cart", "dep-1"),
            "Scaled up replica set cart-5d8f7c9b4 to 2",
        ),
        event(
            &format!("{crashing}.1"),
            3290,
            5,
            "Warning",
            "OOMKilling",
            ("Pod", crashing, "pod-2"),
            "Memory cgroup out of memory: Killed process 4242 (cart)",
        ),
        event(
            &format!("{crashing}.2"),
            3300,
            12,
            "Warning",
            "BackOff",
            ("Pod", crashing, "pod-2"),
            "Back-off restarting failed container cart in pod cart-5d8f7c9b4-x2x9z_shop(pod-2)",
        ),
        event(
            &format!("{healthy}.1"),
            3,
            1,
            "Normal",
            "Started",
            ("Pod", healthy, "pod-1"),
            "Started container cart",
        ),
    ];
    for i in 0..50 {
        rows.push(log(
            healthy,
            10 + i * 60,
            0,
            &format!("info: GetCart user_id={i} items=3 took=2ms"),
        ));
    }
    for (restart, start) in [(0, 10), (1, 300), (2, 590), (3, 1400), (4, 2300), (5, 3295)] {
        rows.push(log(
            crashing,
            start,
            restart,
            &format!("info: cart service starting, instance {restart}"),
        ));
        if restart < 5 {
            rows.push(log(
                crashing,
                start + 5,
                restart,
                "warn: cache warm-up allocating 96MiB",
            ));
        }
    }
    rows
}

/// Writes the recorded cluster as a dataset at `dir`.
pub fn write_cluster(dir: &Path) {
    write_dataset(dir, cluster_rows(), NOW);
}

/// Writes rows as a dataset whose window runs from `T0` to `window_end`, seen at `NOW`.
fn write_dataset(dir: &Path, rows: Vec<Row>, window_end: i64) {
    let mut w = DatasetWriter::create(dir).unwrap();
    w.extend(rows).unwrap();
    let start = DateTime::<Utc>::from_timestamp_nanos(T0);
    let end = DateTime::<Utc>::from_timestamp_nanos(window_end);
    w.finish(DatasetInfo {
        environment: "sim".into(),
        application: Some("shop".into()),
        namespaces: vec![NS.into()],
        window: TimeWindow { start, end },
        virtual_now: DateTime::<Utc>::from_timestamp_nanos(NOW),
    })
    .unwrap();
}

// ---- Traces and application logs, for the Jaeger and Loki APIs ----

/// Ids of the recorded traces: `A` a cart read, `B` a failed cart read, `C` a slow checkout,
/// `E` an early page load, `LATER` a trace that starts after the virtual now.
pub const TRACE_A: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub const TRACE_B: &str = "5c0a3f4688c45eb7b4df03af1f1f5847";
pub const TRACE_C: &str = "6d1b405799d56fc8c5e014b020206958";
pub const TRACE_E: &str = "7e2c5168aae670d9d6f125c131317a69";
pub const TRACE_LATER: &str = "8f3d6279bbf781eae70236d242428b7a";
/// A pod with JSON logs and no Pod object (its `service_name` falls back to the container).
pub const CHECKOUT_POD: &str = "checkout-7c9f8d6b5-k2j4h";

#[allow(clippy::too_many_arguments)]
fn span(
    trace: &str,
    id: &str,
    parent: Option<&str>,
    service: &str,
    name: &str,
    kind: &str,
    start_ms: i64,
    duration_ms: i64,
    error: Option<&str>,
    attributes: &[(&str, &str)],
) -> Row {
    let resource = [
        ("service.name", service.to_string()),
        ("service.namespace", NS.to_string()),
        ("k8s.namespace.name", NS.to_string()),
        ("k8s.deployment.name", service.to_string()),
    ];
    Row::Span(SpanRow {
        trace_id: trace.into(),
        span_id: id.into(),
        parent_span_id: parent.map(str::to_string),
        service: service.into(),
        name: name.into(),
        kind: kind.into(),
        start_ns: T0 + start_ms * 1_000_000,
        duration_ns: duration_ms * 1_000_000,
        status_code: if error.is_some() { "error" } else { "unset" }.into(),
        status_message: error.map(str::to_string),
        resource_attributes: resource
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        attributes: attributes
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    })
}

/// Spans of five traces across frontend, checkout and cart (valkey is seen through cart's
/// client spans only).
#[rustfmt::skip]
pub fn trace_rows() -> Vec<Row> {
    let get = [("http.method", "GET"), ("http.route", "/api/cart"), ("http.status_code", "200")];
    let grpc = |code| {
        [("rpc.system", "grpc"), ("rpc.service", "cart.CartService"), ("rpc.method", "GetCart"), ("rpc.grpc.status_code", code)]
    };
    vec![
        // A: frontend -> cart -> valkey, at 3000 s.
        span(TRACE_A, "a000000000000001", None, "frontend", "GET /api/cart", "server", 3_000_000, 30, None, &get),
        span(TRACE_A, "a000000000000002", Some("a000000000000001"), "frontend", "cart.CartService/GetCart", "client", 3_000_002, 25, None, &grpc("0")),
        span(TRACE_A, "a000000000000003", Some("a000000000000002"), "cart", "cart.CartService/GetCart", "server", 3_000_004, 20, None, &grpc("0")),
        span(TRACE_A, "a000000000000004", Some("a000000000000003"), "cart", "HGET", "client", 3_000_010, 2, None,
             &[("db.system", "redis"), ("net.peer.name", "valkey-cart"), ("net.peer.port", "6379")]),
        // B: the cart call is refused; 2.1 s of retries, at 3300 s.
        span(TRACE_B, "b000000000000001", None, "frontend", "GET /api/cart", "server", 3_300_000, 2_100,
             Some("upstream connect error"), &[("http.method", "GET"), ("http.route", "/api/cart"), ("http.status_code", "500")]),
        span(TRACE_B, "b000000000000002", Some("b000000000000001"), "frontend", "cart.CartService/GetCart", "client", 3_300_001, 2_050,
             Some("connection refused"), &grpc("14")),
        // C: a slow checkout, at 3500 s.
        span(TRACE_C, "c000000000000001", None, "frontend", "POST /api/checkout", "server", 3_500_000, 1_500, None,
             &[("http.method", "POST"), ("http.route", "/api/checkout"), ("http.status_code", "200")]),
        span(TRACE_C, "c000000000000002", Some("c000000000000001"), "checkout", "checkout.CheckoutService/PlaceOrder", "server", 3_500_010, 1_400, None,
             &[("rpc.system", "grpc"), ("rpc.method", "PlaceOrder")]),
        span(TRACE_C, "c000000000000003", Some("c000000000000002"), "checkout", "cart.CartService/GetCart", "client", 3_500_020, 300, None, &grpc("0")),
        span(TRACE_C, "c000000000000004", Some("c000000000000003"), "cart", "cart.CartService/GetCart", "server", 3_500_030, 250, None, &grpc("0")),
        // E: an early page load, at 100 s.
        span(TRACE_E, "e000000000000001", None, "frontend", "GET /", "server", 100_000, 5, None,
             &[("http.method", "GET"), ("http.route", "/"), ("http.status_code", "200")]),
        // After the virtual now.
        span(TRACE_LATER, "f000000000000001", None, "frontend", "GET /api/later", "server", 3_700_000, 5, None, &get),
    ]
}

/// JSON log lines of the checkout service (stdout) and one stderr line.
#[rustfmt::skip]
pub fn app_log_rows() -> Vec<Row> {
    let line = |t: i64, stream: &str, text: &str| {
        Row::Log(LogRow {
            time_ns: T0 + t * SEC,
            namespace: NS.into(),
            pod: CHECKOUT_POD.into(),
            container: "checkout".into(),
            restart: 0,
            stream: stream.into(),
            line: text.into(),
        })
    };
    vec![
        line(3000, "stdout", r#"{"level":"info","msg":"order placed","order_id":"o-1","duration_ms":120}"#),
        line(3100, "stdout", r#"{"level":"error","msg":"payment failed","order_id":"o-2","duration_ms":2300,"error":"card declined"}"#),
        line(3200, "stdout", r#"{"level":"warn","msg":"slow cart response","duration_ms":950}"#),
        line(3400, "stdout", r#"{"level":"error","msg":"cart unavailable","order_id":"o-3","duration_ms":3000,"error":"rpc error: code = Unavailable"}"#),
        line(3450, "stderr", "panic: assignment to entry in nil map"),
        line(3590, "stdout", r#"{"level":"info","msg":"order placed","order_id":"o-4","duration_ms":180}"#),
        line(3700, "stdout", r#"{"level":"error","msg":"written after the virtual now"}"#),
    ]
}

/// The recorded cluster with traces and application logs; its window runs ten minutes past the
/// virtual now, so some rows exist that the APIs must not show yet.
pub fn write_observed_cluster(dir: &Path) {
    let mut rows = cluster_rows();
    rows.extend(trace_rows());
    rows.extend(app_log_rows());
    write_dataset(dir, rows, NOW + 600 * SEC);
}

/// A running `collector replay` of a dataset, stopped when dropped.
pub struct ReplayProcess {
    child: std::process::Child,
    /// The endpoints JSON line it printed (`kubernetes`, `prometheus`, `jaeger`, `loki`).
    pub endpoints: Value,
}

impl ReplayProcess {
    /// Starts `collector replay DIR --json EXTRA..` and waits for its endpoints line.
    pub fn start(dir: &Path, extra: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(crate::binary("collector"))
            .arg("replay")
            .arg(dir)
            .arg("--json")
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("collector runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("endpoints line");
        let endpoints = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("endpoints JSON expected, got {line:?}: {e}"));
        ReplayProcess { child, endpoints }
    }

    pub fn url(&self, api: &str) -> String {
        self.endpoints[api]
            .as_str()
            .unwrap_or_else(|| panic!("no {api} endpoint in {}", self.endpoints))
            .to_string()
    }
}

impl Drop for ReplayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
