//! Server-side printing: the Table columns and cells kubectl shows for each kind, computed as the
//! apiserver's printers compute them (pod status reasons, restarts with "(2m ago)", ages relative to
//! the server's now). Kinds without a printer get the apiserver's default Name / Created At table.

use serde_json::{Value, json};

use schemas::time::parse_rfc3339;

mod cluster;
mod config;
mod network;
mod workloads;

/// One column: name, OpenAPI type, format, priority (1 = only with `-o wide`).
pub struct Column {
    pub name: &'static str,
    pub kind: &'static str,
    pub format: &'static str,
    pub priority: u8,
    pub description: &'static str,
}

const fn col(name: &'static str, priority: u8, description: &'static str) -> Column {
    Column {
        name,
        kind: "string",
        format: "",
        priority,
        description,
    }
}

const fn int(name: &'static str, priority: u8, description: &'static str) -> Column {
    Column {
        name,
        kind: "integer",
        format: "",
        priority,
        description,
    }
}

const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: "Name must be unique within a namespace.",
};
const AGE: Column = col(
    "Age",
    0,
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

/// How one kind prints: its Table columns and the cells of one object's row under them.
pub struct Printer {
    pub columns: &'static [Column],
    /// The cells of an object's row, given the server's now (ages are relative to it).
    cells: fn(&Value, i64) -> Vec<Value>,
}

/// Kinds without a printer of their own get the apiserver's default table.
const DEFAULT: Printer = Printer {
    columns: &[
        NAME,
        Column {
            name: "Created At",
            kind: "date",
            format: "",
            priority: 0,
            description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
        },
    ],
    cells: |v, _| {
        vec![
            name_of(v).into(),
            s(v, "/metadata/creationTimestamp").into(),
        ]
    },
};

/// The printer of `kind`.
pub fn printer(kind: &str) -> &'static Printer {
    match kind {
        "Pod" => &workloads::POD,
        "Deployment" => &workloads::DEPLOYMENT,
        "ReplicaSet" => &workloads::REPLICA_SET,
        "StatefulSet" => &workloads::STATEFUL_SET,
        "DaemonSet" => &workloads::DAEMON_SET,
        "Service" => &network::SERVICE,
        "Endpoints" => &network::ENDPOINTS,
        "EndpointSlice" => &network::ENDPOINT_SLICE,
        "NetworkPolicy" => &network::NETWORK_POLICY,
        "ConfigMap" => &config::CONFIG_MAP,
        "Secret" => &config::SECRET,
        "ServiceAccount" => &config::SERVICE_ACCOUNT,
        "ResourceQuota" => &config::RESOURCE_QUOTA,
        "PersistentVolumeClaim" => &config::PERSISTENT_VOLUME_CLAIM,
        "Node" => &cluster::NODE,
        "Namespace" => &cluster::NAMESPACE,
        "Event" => &cluster::EVENT,
        _ => &DEFAULT,
    }
}

/// The columns of `kind`'s table.
pub fn columns(kind: &str) -> &'static [Column] {
    printer(kind).columns
}

/// The cells of one object's row.
pub fn cells(kind: &str, v: &Value, now_ns: i64) -> Vec<Value> {
    (printer(kind).cells)(v, now_ns)
}

/// The column definitions as Table JSON.
pub fn column_definitions(kind: &str) -> Value {
    Value::Array(
        columns(kind)
            .iter()
            .map(|c| {
                json!({"name": c.name, "type": c.kind, "format": c.format,
                       "description": c.description, "priority": c.priority})
            })
            .collect(),
    )
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn n(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn arr<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn or_none(x: String) -> String {
    if x.is_empty() { "<none>".into() } else { x }
}

/// Age of a timestamp field relative to `now_ns`, as kubectl prints it.
fn age(v: &Value, pointer: &str, now_ns: i64) -> String {
    match parse_rfc3339(s(v, pointer)) {
        Some(t) => human_duration((now_ns - t) / 1_000_000_000),
        None => "<unknown>".into(),
    }
}

/// kubectl's human-readable duration (apimachinery `duration.HumanDuration`), in seconds.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = hours / 24 % 365;
        return match days {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn labels_string(map: Option<&Value>) -> String {
    let parts: Vec<String> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    parts.join(",")
}

fn containers_and_images(v: &Value) -> (String, String) {
    let containers = arr(v, "/spec/template/spec/containers");
    let names: Vec<&str> = containers.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| s(c, "/image")).collect();
    (names.join(","), images.join(","))
}

fn selector_string(v: &Value) -> String {
    let mut parts: Vec<String> = v
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    for e in arr(v, "/spec/selector/matchExpressions") {
        let values: Vec<&str> = arr(e, "/values").iter().filter_map(Value::as_str).collect();
        let op = s(e, "/operator").to_lowercase();
        parts.push(match op.as_str() {
            "exists" => s(e, "/key").to_string(),
            "doesnotexist" => format!("!{}", s(e, "/key")),
            _ => format!("{} {op} ({})", s(e, "/key"), values.join(",")),
        });
    }
    or_none(parts.join(","))
}

fn name_of(v: &Value) -> String {
    s(v, "/metadata/name").to_string()
}

/// The object's age, as the Age column shows it.
fn created_age(v: &Value, now_ns: i64) -> String {
    age(v, "/metadata/creationTimestamp", now_ns)
}

fn or_unset(x: &str) -> String {
    if x.is_empty() {
        "<unset>".into()
    } else {
        x.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubectl() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60 * 5, "3h5m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 3600, "3d1h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn crash_looping_pod_prints_like_kubectl() {
        let now = parse_rfc3339("2026-01-01T01:00:00Z").unwrap();
        let pod = json!({
            "metadata": {"name": "geo-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "geo"}], "nodeName": "worker-1"},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [{
                "name": "geo", "ready": false, "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-01-01T00:58:00Z"}}
            }]}
        });
        let cells = cells("Pod", &pod, now);
        assert_eq!(
            cells,
            vec![
                json!("geo-1"),
                json!("0/1"),
                json!("CrashLoopBackOff"),
                json!("4 (2m ago)"),
                json!("60m"),
                json!("10.0.0.5"),
                json!("worker-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        assert_eq!(cells.len(), columns("Pod").len());
    }

    #[test]
    fn every_printer_fills_every_column() {
        let empty = json!({"metadata": {"name": "x"}});
        for kind in [
            "Pod",
            "Deployment",
            "ReplicaSet",
            "StatefulSet",
            "DaemonSet",
            "Service",
            "Endpoints",
            "EndpointSlice",
            "ConfigMap",
            "Secret",
            "Event",
            "Node",
            "Namespace",
            "PersistentVolumeClaim",
            "ServiceAccount",
            "NetworkPolicy",
            "ResourceQuota",
            "Lease",
        ] {
            assert_eq!(cells(kind, &empty, 0).len(), columns(kind).len(), "{kind}");
        }
    }
}
