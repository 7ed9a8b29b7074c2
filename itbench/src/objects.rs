//! `k8s_objects_raw.tsv`: OTel log rows whose Body is a whole Kubernetes object, pulled every few
//! minutes (or a watch event `{"object": ..., "type": "DELETED"}`). Each becomes an observed
//! version in the objects table: the first observation of an object is `added`, a watched
//! deletion `deleted`, every other one `modified`. As faultline records objects, managedFields
//! are dropped and Secret values redacted; chaos-mesh resources are left out, since they name
//! the injected fault. Back, versions are written pulled (bare objects), deletions as watch events.

use std::collections::HashSet;
use std::path::Path;

use capture::redact::Redactor;
use schemas::tables::{ChangeType, Labels, ObjectRow, Row};
use serde_json::{Value, json};

use crate::events::is_chaos;
use crate::logs::{COLUMNS, Record};
use crate::tsv::{Reader, Writer, parse_time};
use crate::{Error, Report, at};

/// Reads an objects file (raw OTel layout, or ITBench's processed one with a `body` column).
pub fn read(path: &Path, rows: &mut Vec<Row>, report: &mut Report) -> Result<(), Error> {
    let reader = Reader::open(path)?;
    let body_column = if reader.has("Body") { "Body" } else { "body" };
    let time_column = if reader.has("Timestamp") {
        "Timestamp"
    } else {
        "timestamp"
    };
    report.file("objects");
    let redactor = Redactor::random();
    let mut seen: HashSet<(String, Option<String>, String, String)> = HashSet::new();
    reader.for_each(|r| {
        let here = at(path, r.line);
        let Some(observed) = parse_time(r.text(time_column)) else {
            report.skip("object row without a readable Timestamp", here);
            return Ok(());
        };
        let body: Value = match serde_json::from_str(r.text(body_column)) {
            Ok(v) => v,
            Err(e) => {
                report.skip("object whose Body is not JSON", format!("{here}: {e}"));
                return Ok(());
            }
        };
        let (mut object, watched) = match (&body["object"], body["type"].as_str()) {
            (Value::Object(_), Some(t)) => (body["object"].clone(), Some(t.to_string())),
            _ => (body, None),
        };
        let meta = &object["metadata"];
        let (Some(kind), Some(name)) = (object["kind"].as_str(), meta["name"].as_str()) else {
            report.skip("object without kind or metadata.name", here);
            return Ok(());
        };
        let api_version = object["apiVersion"].as_str().unwrap_or("v1").to_string();
        if is_chaos(Some(&api_version)) {
            report.skip(
                "chaos-mesh resource (left out: it names the injected fault)",
                here,
            );
            return Ok(());
        }
        let (kind, name) = (kind.to_string(), name.to_string());
        let namespace = meta["namespace"].as_str().map(str::to_string);
        let uid = meta["uid"].as_str().unwrap_or_default().to_string();
        let resource_version = meta["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(m) = object["metadata"].as_object_mut()
            && m.remove("managedFields").is_some()
        {
            report.skip(
                "managedFields of an object (dropped, as faultline records objects)",
                &here,
            );
        }
        if kind == "Secret" {
            redactor.redact_secret(&mut object);
        }
        let first = seen.insert((kind.clone(), namespace.clone(), name.clone(), uid.clone()));
        let change = match watched.as_deref() {
            Some("DELETED") => ChangeType::Deleted,
            _ if first => ChangeType::Added,
            _ => ChangeType::Modified,
        };
        rows.push(Row::Object(ObjectRow {
            observed_ns: observed,
            api_version,
            kind,
            namespace,
            name,
            uid,
            resource_version,
            change,
            object: object.to_string(),
        }));
        Ok(())
    })
}

/// The resource name the k8sobjects receiver records a kind under (`pods`, `endpoints`,
/// `networkpolicies`).
pub fn resource_name(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') {
        lower
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// Writes the objects table as `k8s_objects_raw.tsv`.
pub fn write(path: &Path, objects: impl Iterator<Item = ObjectRow>) -> Result<u64, Error> {
    let mut w = Writer::create(path, &COLUMNS)?;
    for o in objects {
        let body = match o.change {
            ChangeType::Deleted => {
                let object: Value = serde_json::from_str(&o.object).unwrap_or(Value::Null);
                json!({"object": object, "type": "DELETED"}).to_string()
            }
            _ => o.object.clone(),
        };
        let resource: Labels = o
            .namespace
            .iter()
            .map(|ns| ("k8s.namespace.name".to_string(), ns.clone()))
            .collect();
        let attributes: Labels = [("k8s.resource.name".to_string(), resource_name(&o.kind))].into();
        w.row(Record::k8s(o.observed_ns, &body, &resource, &attributes).fields())?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_name_their_resources() {
        assert_eq!(resource_name("Pod"), "pods");
        assert_eq!(resource_name("Endpoints"), "endpoints");
        assert_eq!(resource_name("NetworkPolicy"), "networkpolicies");
    }
}
