//! From API objects to dataset rows: `managedFields` dropped, Secret values redacted, and
//! Kubernetes Events (core/v1 or events.k8s.io/v1) mapped onto the core/v1 fields of the events
//! table.

use schemas::tables::{ChangeType, EventRow, ObjectRow};
use serde_json::Value;

use crate::redact::Redactor;
use schemas::time::parse_rfc3339;

/// Identity of the kind a row is recorded under.
#[derive(Debug, Clone)]
pub struct KindInfo {
    pub api_version: String,
    pub kind: String,
}

/// Cleans an object as received: kind and apiVersion set (list items carry neither), managed
/// fields dropped, Secret values redacted.
pub fn clean(kind: &KindInfo, mut object: Value, redactor: &Redactor) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.insert("kind".into(), kind.kind.clone().into());
        map.insert("apiVersion".into(), kind.api_version.clone().into());
    }
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    if kind.kind == "Secret" && kind.api_version == "v1" {
        redactor.redact_secret(&mut object);
    }
    object
}

fn text(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// One row of the object timeline for a cleaned object.
pub fn object_row(
    kind: &KindInfo,
    object: &Value,
    change: ChangeType,
    observed_ns: i64,
) -> ObjectRow {
    ObjectRow {
        observed_ns,
        api_version: kind.api_version.clone(),
        kind: kind.kind.clone(),
        namespace: text(object, "/metadata/namespace"),
        name: text(object, "/metadata/name").unwrap_or_default(),
        uid: text(object, "/metadata/uid").unwrap_or_default(),
        resource_version: text(object, "/metadata/resourceVersion").unwrap_or_default(),
        change,
        object: object.to_string(),
    }
}

fn time(v: &Value, pointer: &str) -> Option<i64> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .and_then(parse_rfc3339)
}

/// An Event of either API as a row; `None` when it has no time at all to place it.
pub fn event_row(e: &Value) -> Option<EventRow> {
    // events.k8s.io/v1 names: regarding, note, reportingController, deprecated*.
    let newer = e.get("regarding").is_some() || e.get("note").is_some();
    let (involved, message, source, first, last, count) = if newer {
        (
            "/regarding",
            "/note",
            "/deprecatedSource",
            "/deprecatedFirstTimestamp",
            "/deprecatedLastTimestamp",
            "/deprecatedCount",
        )
    } else {
        (
            "/involvedObject",
            "/message",
            "/source",
            "/firstTimestamp",
            "/lastTimestamp",
            "/count",
        )
    };
    let last_ns = time(e, last)
        .or_else(|| time(e, "/series/lastObservedTime"))
        .or_else(|| time(e, "/eventTime"))
        .or_else(|| time(e, "/metadata/creationTimestamp"))?;
    let count = e
        .pointer(count)
        .and_then(Value::as_i64)
        .or_else(|| e.pointer("/series/count").and_then(Value::as_i64))
        .unwrap_or(1);
    let reporting = if newer {
        "/reportingController"
    } else {
        "/reportingComponent"
    };
    Some(EventRow {
        time_ns: last_ns,
        first_time_ns: time(e, first).or_else(|| time(e, "/eventTime")),
        namespace: text(e, "/metadata/namespace").unwrap_or_default(),
        name: text(e, "/metadata/name").unwrap_or_default(),
        uid: text(e, "/metadata/uid").unwrap_or_default(),
        event_type: text(e, "/type").unwrap_or_else(|| "Normal".into()),
        reason: text(e, "/reason").unwrap_or_default(),
        message: text(e, message).unwrap_or_default(),
        count: i32::try_from(count).unwrap_or(i32::MAX),
        involved_api_version: text(e, &format!("{involved}/apiVersion")),
        involved_kind: text(e, &format!("{involved}/kind")).unwrap_or_default(),
        involved_namespace: text(e, &format!("{involved}/namespace")),
        involved_name: text(e, &format!("{involved}/name")).unwrap_or_default(),
        involved_uid: text(e, &format!("{involved}/uid")),
        involved_field_path: text(e, &format!("{involved}/fieldPath")),
        source_component: text(e, &format!("{source}/component")),
        source_host: text(e, &format!("{source}/host")),
        reporting_controller: text(e, reporting),
        reporting_instance: text(e, "/reportingInstance"),
        action: text(e, "/action"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_event_apis_map_to_one_row_shape() {
        let core = json!({"metadata": {"name": "e1", "namespace": "ns", "uid": "u"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns"},
            "reason": "BackOff", "message": "Back-off restarting", "type": "Warning", "count": 3,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z",
            "source": {"component": "kubelet", "host": "node-1"}, "reportingComponent": ""});
        let newer = json!({"metadata": {"name": "e1", "namespace": "ns", "uid": "u"},
            "regarding": {"kind": "Pod", "name": "p", "namespace": "ns"},
            "reason": "BackOff", "note": "Back-off restarting", "type": "Warning", "deprecatedCount": 3,
            "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z", "deprecatedLastTimestamp": "2026-01-01T00:01:00Z",
            "deprecatedSource": {"component": "kubelet", "host": "node-1"}});
        let a = event_row(&core).unwrap();
        assert_eq!(a, event_row(&newer).unwrap());
        assert_eq!(a.count, 3);
        assert_eq!(a.time_ns - a.first_time_ns.unwrap(), 60_000_000_000);
        assert_eq!(a.reporting_controller, None);
        assert_eq!(a.source_host.as_deref(), Some("node-1"));
        assert!(event_row(&json!({"metadata": {"name": "x"}})).is_none());
    }

    #[test]
    fn clean_drops_managed_fields_and_redacts_secrets() {
        let r = Redactor::new(b"k");
        let secret = KindInfo {
            api_version: "v1".into(),
            kind: "Secret".into(),
        };
        let v = clean(
            &secret,
            json!({"metadata": {"name": "s", "managedFields": [{}]}, "data": {"p": "aHVudGVyMg=="}}),
            &r,
        );
        assert!(v["metadata"].get("managedFields").is_none());
        assert_eq!(v["kind"], "Secret");
        assert_ne!(v["data"]["p"], "aHVudGVyMg==");
        let cm = KindInfo {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let v = clean(
            &cm,
            json!({"metadata": {"name": "c"}, "data": {"p": "plain"}}),
            &r,
        );
        assert_eq!(v["data"]["p"], "plain");
    }
}
