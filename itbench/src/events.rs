//! `k8s_events_raw.tsv`: OTel log rows whose Body is a Kubernetes watch event
//! (`{"object": <Event>, "type": "ADDED"}`) of a core/v1 or an events.k8s.io/v1 Event, both
//! mapped onto the events table's core/v1 fields (`note` is the message, `regarding` the
//! involved object, the `deprecated*` fields the counts and times). ITBench's processed layout
//! (flat columns) is read too. Back, each row is a core/v1 Event in an ADDED watch event.

use std::collections::BTreeSet;
use std::path::Path;

use schemas::tables::{EventRow, Labels, Row};
use serde_json::{Map, Value, json};

use crate::logs::{COLUMNS, Record};
use crate::tsv::{Reader, Writer, parse_time};
use crate::{Error, Report, at};

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

fn time(v: &Value) -> Option<i64> {
    v.as_str().and_then(parse_time)
}

/// Whether a Kubernetes object reference names chaos-mesh's resources (the injected fault).
pub fn is_chaos(api_version: Option<&str>) -> bool {
    api_version.is_some_and(|a| a.starts_with("chaos-mesh.org/"))
}

/// An Event object (either API) as a row; `fallback` is the record's own time.
pub fn event_row(e: &Value, fallback: i64) -> Option<EventRow> {
    let meta = &e["metadata"];
    let involved = if e["involvedObject"].is_object() {
        &e["involvedObject"]
    } else {
        &e["regarding"]
    };
    let source = if e["source"].is_object() {
        &e["source"]
    } else {
        &e["deprecatedSource"]
    };
    let first = time(&e["firstTimestamp"]).or_else(|| time(&e["deprecatedFirstTimestamp"]));
    let last = time(&e["lastTimestamp"])
        .or_else(|| time(&e["deprecatedLastTimestamp"]))
        .or_else(|| time(&e["series"]["lastObservedTime"]))
        .or_else(|| time(&e["eventTime"]));
    let count = e["count"]
        .as_i64()
        .or_else(|| e["deprecatedCount"].as_i64())
        .or_else(|| e["series"]["count"].as_i64())
        .unwrap_or(1);
    Some(EventRow {
        time_ns: last.unwrap_or(fallback),
        first_time_ns: first,
        namespace: text(&meta["namespace"])
            .or_else(|| text(&involved["namespace"]))
            .unwrap_or_default(),
        name: text(&meta["name"])?,
        uid: text(&meta["uid"]).unwrap_or_default(),
        event_type: text(&e["type"]).unwrap_or_else(|| "Normal".into()),
        reason: text(&e["reason"]).unwrap_or_default(),
        message: text(&e["message"])
            .or_else(|| text(&e["note"]))
            .unwrap_or_default(),
        count: i32::try_from(count).unwrap_or(i32::MAX),
        involved_api_version: text(&involved["apiVersion"]),
        involved_kind: text(&involved["kind"]).unwrap_or_default(),
        involved_namespace: text(&involved["namespace"]),
        involved_name: text(&involved["name"]).unwrap_or_default(),
        involved_uid: text(&involved["uid"]),
        involved_field_path: text(&involved["fieldPath"]),
        source_component: text(&source["component"]),
        source_host: text(&source["host"]),
        reporting_controller: text(&e["reportingComponent"])
            .or_else(|| text(&e["reportingController"])),
        reporting_instance: text(&e["reportingInstance"]),
        action: text(&e["action"]),
    })
}

/// A row as a core/v1 Event.
pub fn event_json(r: &EventRow) -> Value {
    let rfc = schemas::time::rfc3339_nanos;
    let trim = |ns: i64| {
        // Whole seconds are written as Kubernetes writes metav1.Time; finer ones keep every digit.
        if ns.rem_euclid(1_000_000_000) == 0 {
            schemas::time::rfc3339(ns)
        } else {
            rfc(ns)
        }
    };
    let mut involved = Map::new();
    let put = |m: &mut Map<String, Value>, k: &str, v: &Option<String>| {
        if let Some(v) = v {
            m.insert(k.into(), v.clone().into());
        }
    };
    put(&mut involved, "apiVersion", &r.involved_api_version);
    involved.insert("kind".into(), r.involved_kind.clone().into());
    put(&mut involved, "namespace", &r.involved_namespace);
    involved.insert("name".into(), r.involved_name.clone().into());
    put(&mut involved, "uid", &r.involved_uid);
    put(&mut involved, "fieldPath", &r.involved_field_path);
    let mut e = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": r.name, "namespace": r.namespace, "uid": r.uid},
        "involvedObject": involved,
        "reason": r.reason,
        "message": r.message,
        "type": r.event_type,
        "count": r.count,
        "lastTimestamp": trim(r.time_ns),
    });
    let o = e.as_object_mut().expect("an object");
    if let Some(t) = r.first_time_ns {
        o.insert("firstTimestamp".into(), trim(t).into());
    }
    let mut source = Map::new();
    put(&mut source, "component", &r.source_component);
    put(&mut source, "host", &r.source_host);
    if !source.is_empty() {
        o.insert("source".into(), Value::Object(source));
    }
    put(o, "reportingComponent", &r.reporting_controller);
    put(o, "reportingInstance", &r.reporting_instance);
    put(o, "action", &r.action);
    e
}

/// Reads an events file; events about chaos-mesh resources are left out (they name the fault).
pub fn read(path: &Path, rows: &mut Vec<Row>, report: &mut Report) -> Result<(), Error> {
    let reader = Reader::open(path)?;
    let raw = reader.has("Body");
    report.file("events");
    let mut seen: BTreeSet<(String, String, i64, i32, String)> = BTreeSet::new();
    reader.for_each(|r| {
        let here = at(path, r.line);
        let fallback = parse_time(r.text(if raw { "Timestamp" } else { "timestamp" })).unwrap_or(0);
        let row = if raw {
            let body: Value = match serde_json::from_str(r.text("Body")) {
                Ok(v) => v,
                Err(e) => {
                    report.skip("event whose Body is not JSON", format!("{here}: {e}"));
                    return Ok(());
                }
            };
            let event = if body["object"].is_object() { &body["object"] } else { &body };
            if body["type"].is_string() {
                report.skip("watch type of an event (ADDED/MODIFIED: the events table keeps the event, not the watch)", &here);
            }
            event_row(event, fallback)
        } else {
            flat_row(&r, fallback)
        };
        let Some(row) = row else {
            report.skip("event without metadata.name", here);
            return Ok(());
        };
        if is_chaos(row.involved_api_version.as_deref()) {
            report.skip("event about a chaos-mesh resource (left out: it names the injected fault)", here);
            return Ok(());
        }
        // The same event observed twice (a watch's ADDED and MODIFIED with nothing changed).
        let key = (row.namespace.clone(), row.name.clone(), row.time_ns, row.count, row.message.clone());
        if !seen.insert(key) {
            report.skip("event observed again unchanged (kept once)", here);
            return Ok(());
        }
        rows.push(Row::Event(row));
        Ok(())
    })
}

/// ITBench's processed events layout (flat columns).
fn flat_row(r: &crate::tsv::Record<'_>, fallback: i64) -> Option<EventRow> {
    let name = r.text("object_name");
    if name.is_empty() {
        return None;
    }
    let time = parse_time(r.text("event_time")).unwrap_or(fallback);
    Some(EventRow {
        time_ns: time,
        namespace: r.text("namespace").to_string(),
        name: format!("{name}.{time:x}"),
        event_type: r.text("event_kind").to_string(),
        reason: r.text("reason").to_string(),
        message: r.text("message").to_string(),
        count: r.text("event_count").parse().unwrap_or(1),
        involved_kind: r.text("object_kind").to_string(),
        involved_namespace: Some(r.text("object_namespace").to_string()).filter(|s| !s.is_empty()),
        involved_name: name.to_string(),
        source_component: Some(r.text("source_component").to_string()).filter(|s| !s.is_empty()),
        ..EventRow::default()
    })
}

/// Writes the events table as `k8s_events_raw.tsv`.
pub fn write(path: &Path, events: impl Iterator<Item = EventRow>) -> Result<u64, Error> {
    let mut w = Writer::create(path, &COLUMNS)?;
    for e in events {
        let body = json!({"object": event_json(&e), "type": "ADDED"}).to_string();
        let resource: Labels = [("k8s.namespace.name".to_string(), e.namespace.clone())].into();
        let attributes: Labels = [
            ("event.domain".to_string(), "k8s".to_string()),
            ("event.name".to_string(), e.name.clone()),
            ("k8s.resource.name".to_string(), "events".to_string()),
        ]
        .into();
        w.row(Record::k8s(e.time_ns, &body, &resource, &attributes).fields())?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_event_apis_map_and_a_row_round_trips() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "p.1", "namespace": "ingress-nginx", "uid": "u"},
            "note": "NGINX reload", "reason": "RELOAD", "type": "Normal",
            "deprecatedCount": 13, "deprecatedFirstTimestamp": "2025-12-14T18:14:09Z",
            "deprecatedLastTimestamp": "2025-12-15T17:24:44Z", "eventTime": null,
            "deprecatedSource": {"component": "nginx-ingress-controller"},
            "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "ingress-nginx", "uid": "x"},
            "reportingController": "nginx-ingress-controller"});
        let row = event_row(&v1, 0).unwrap();
        assert_eq!(row.message, "NGINX reload");
        assert_eq!(row.count, 13);
        assert_eq!(row.involved_kind, "Pod");
        assert_eq!(
            row.source_component.as_deref(),
            Some("nginx-ingress-controller")
        );
        assert_eq!(row.time_ns, parse_time("2025-12-15T17:24:44Z").unwrap());
        let back = event_row(&event_json(&row), 0).unwrap();
        assert_eq!(back, row);
    }
}
