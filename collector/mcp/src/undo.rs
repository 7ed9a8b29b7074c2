//! What undoing a kubectl write means, with no IO: the objects a write targets (read from a
//! server dry run or a `kubectl get -o json`), the steps that put each one back, and whether a
//! dry run changes anything at all.
//!
//! An object that existed before the write is put back whole with `kubectl replace` (or
//! created again when the write deleted it); an object the write created is deleted. The saved
//! copy loses the fields the server owns (resourceVersion, uid, managedFields...) so that the
//! replace is unconditional: an undo must not fail because the object moved on since.

use serde_json::{Map, Value};

/// One step of an undo.
#[derive(Debug, Clone, PartialEq)]
pub enum Undo {
    /// Put this saved object back over the current one.
    Replace(Value),
    /// Create this saved object again (the write deleted it).
    Create(Value),
    /// Delete what the write created.
    Delete {
        reference: String,
        namespace: Option<String>,
    },
}

impl Undo {
    /// What the step does, for the agent: `replace deployment.v1.apps/geo -n hotel`.
    pub fn describe(&self) -> String {
        let (verb, reference, namespace) = match self {
            Undo::Replace(obj) => ("restore", reference_of(obj), namespace_of(obj)),
            Undo::Create(obj) => ("re-create", reference_of(obj), namespace_of(obj)),
            Undo::Delete {
                reference,
                namespace,
            } => ("delete", Some(reference.clone()), namespace.clone()),
        };
        let reference = reference.unwrap_or_else(|| "an object".into());
        match namespace {
            Some(ns) => format!("{verb} {reference} -n {ns}"),
            None => format!("{verb} {reference}"),
        }
    }
}

/// A write that can be undone: the command as the agent wrote it and the steps, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollback {
    pub cmd: String,
    pub steps: Vec<Undo>,
}

/// The objects in kubectl's JSON output: one object, or the items of a `List`.
pub fn objects(output: &str) -> Result<Vec<Value>, String> {
    if output.trim().is_empty() {
        return Ok(Vec::new());
    }
    let value: Value = serde_json::from_str(output)
        .map_err(|e| format!("kubectl's output is not one JSON object: {e}"))?;
    match value.get("kind").and_then(Value::as_str) {
        Some("List") => Ok(value
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()),
        Some(_) => Ok(vec![value]),
        None => Err("kubectl's output has no `kind`".into()),
    }
}

/// How kubectl names an object unambiguously: `deployment.v1.apps/geo`, `pod/geo-1` (core).
pub fn reference_of(obj: &Value) -> Option<String> {
    let kind = obj.get("kind")?.as_str()?.to_ascii_lowercase();
    let name = obj.pointer("/metadata/name")?.as_str()?;
    let api_version = obj.get("apiVersion")?.as_str()?;
    Some(match api_version.split_once('/') {
        Some((group, version)) => format!("{kind}.{version}.{group}/{name}"),
        None => format!("{kind}/{name}"),
    })
}

pub fn namespace_of(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Whether a controller owns the object (a ReplicaSet's Pod): deleting it is undone by the
/// controller itself, and creating a copy would leave one replica too many.
pub fn has_controller(obj: &Value) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
}

/// Server-owned metadata, dropped from a saved copy.
const SERVER_FIELDS: &[&str] = &[
    "resourceVersion",
    "uid",
    "managedFields",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The copy of an object to put back with `replace`: no server-owned metadata.
pub fn for_replace(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in SERVER_FIELDS {
            meta.remove(*field);
        }
    }
    obj
}

/// The copy of a deleted object to create again: also without status, which the cluster
/// rebuilds.
pub fn for_create(obj: &Value) -> Value {
    let mut obj = for_replace(obj);
    if let Some(map) = obj.as_object_mut() {
        map.remove("status");
    }
    obj
}

/// Whether a dry run's result is the live object unchanged: the same content once
/// server-owned metadata and status are set aside.
pub fn unchanged(live: &Value, dry_run: &Value) -> bool {
    content(live) == content(dry_run)
}

fn content(obj: &Value) -> Value {
    let mut obj = for_create(obj);
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        // `annotations: {}` and no annotations are the same object.
        drop_empty(meta);
    }
    obj
}

fn drop_empty(meta: &mut Map<String, Value>) {
    meta.retain(|_, v| !matches!(v, Value::Object(m) if m.is_empty()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "geo", "namespace": "hotel", "resourceVersion": "42", "uid": "u",
                         "generation": 3, "managedFields": [{}], "creationTimestamp": "t",
                         "labels": {"app": "geo"}},
            "spec": {"replicas": 1},
            "status": {"replicas": 1}
        })
    }

    #[test]
    fn objects_come_from_one_object_or_a_list() {
        let one = objects(&deployment().to_string()).unwrap();
        assert_eq!(one, [deployment()]);
        let list = json!({"kind": "List", "items": [deployment(), deployment()]});
        assert_eq!(objects(&list.to_string()).unwrap().len(), 2);
        assert!(objects("  \n").unwrap().is_empty());
        assert!(objects("deployment.apps/geo scaled").is_err());
        assert!(objects("{}").unwrap_err().contains("kind"));
    }

    #[test]
    fn references_name_the_group_and_version() {
        assert_eq!(
            reference_of(&deployment()).as_deref(),
            Some("deployment.v1.apps/geo")
        );
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        assert_eq!(reference_of(&pod).as_deref(), Some("pod/p"));
        assert_eq!(reference_of(&json!({"kind": "Pod"})), None);
        assert_eq!(namespace_of(&deployment()).as_deref(), Some("hotel"));
        assert_eq!(namespace_of(&pod), None);
    }

    #[test]
    fn saved_copies_lose_what_the_server_owns() {
        let r = for_replace(&deployment());
        let meta = r["metadata"].as_object().unwrap();
        assert_eq!(
            meta.keys().collect::<Vec<_>>(),
            ["name", "namespace", "labels"]
        );
        assert_eq!(r["status"], json!({"replicas": 1}));
        let c = for_create(&deployment());
        assert!(c.get("status").is_none());
        assert_eq!(c["spec"], json!({"replicas": 1}));
    }

    #[test]
    fn a_dry_run_that_changes_only_server_fields_is_unchanged() {
        let mut dry = deployment();
        dry["metadata"]["resourceVersion"] = json!("43");
        dry["status"] = json!({"replicas": 0});
        assert!(unchanged(&deployment(), &dry));
        dry["spec"]["replicas"] = json!(2);
        assert!(!unchanged(&deployment(), &dry));
        let mut labelled = deployment();
        labelled["metadata"]["labels"]["x"] = json!("y");
        assert!(!unchanged(&deployment(), &labelled));
    }

    #[test]
    fn controlled_objects_are_known() {
        let mut pod =
            json!({"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "controller": true}]}});
        assert!(has_controller(&pod));
        pod["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        assert!(!has_controller(&pod));
        assert!(!has_controller(&deployment()));
    }

    #[test]
    fn steps_describe_themselves() {
        assert_eq!(
            Undo::Replace(deployment()).describe(),
            "restore deployment.v1.apps/geo -n hotel"
        );
        assert_eq!(
            Undo::Delete {
                reference: "configmap/x".into(),
                namespace: None
            }
            .describe(),
            "delete configmap/x"
        );
    }
}
