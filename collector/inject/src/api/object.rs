//! Kubernetes objects as the injector handles them: which object ([`ObjectRef`]), its desired
//! state without what the server manages ([`content`]), and the field-by-field difference between
//! two versions ([`diff`]) that a fault's journal entry records and its revert checks. IO-free.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The kinds the injector changes, creates or deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    Service,
    ConfigMap,
    Node,
    Deployment,
    StatefulSet,
    ResourceQuota,
    NetworkPolicy,
    ServiceAccount,
    Role,
    RoleBinding,
}

impl Kind {
    pub fn group(self) -> &'static str {
        match self {
            Kind::Deployment | Kind::StatefulSet => "apps",
            Kind::NetworkPolicy => "networking.k8s.io",
            Kind::Role | Kind::RoleBinding => "rbac.authorization.k8s.io",
            _ => "",
        }
    }

    pub fn api_version(self) -> &'static str {
        match self.group() {
            "" => "v1",
            "apps" => "apps/v1",
            "networking.k8s.io" => "networking.k8s.io/v1",
            _ => "rbac.authorization.k8s.io/v1",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            Kind::Service => "services",
            Kind::ConfigMap => "configmaps",
            Kind::Node => "nodes",
            Kind::Deployment => "deployments",
            Kind::StatefulSet => "statefulsets",
            Kind::ResourceQuota => "resourcequotas",
            Kind::NetworkPolicy => "networkpolicies",
            Kind::ServiceAccount => "serviceaccounts",
            Kind::Role => "roles",
            Kind::RoleBinding => "rolebindings",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Service => "Service",
            Kind::ConfigMap => "ConfigMap",
            Kind::Node => "Node",
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
            Kind::ResourceQuota => "ResourceQuota",
            Kind::NetworkPolicy => "NetworkPolicy",
            Kind::ServiceAccount => "ServiceAccount",
            Kind::Role => "Role",
            Kind::RoleBinding => "RoleBinding",
        }
    }

    pub fn namespaced(self) -> bool {
        self != Kind::Node
    }
}

/// One object: kind, namespace (none for cluster-scoped kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    pub kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    pub fn namespaced(kind: Kind, namespace: &str, name: &str) -> ObjectRef {
        ObjectRef {
            kind,
            namespace: Some(namespace.to_string()),
            name: name.to_string(),
        }
    }

    pub fn node(name: &str) -> ObjectRef {
        ObjectRef {
            kind: Kind::Node,
            namespace: None,
            name: name.to_string(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind.name(), self.name),
            None => write!(f, "{} {}", self.kind.name(), self.name),
        }
    }
}

/// Metadata the server sets and clients never choose: not part of an object's desired state.
const SERVER_METADATA: &[&str] = &[
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Annotations controllers write on the objects faults change.
const CONTROLLER_ANNOTATIONS: &[&str] = &["deployment.kubernetes.io/revision"];

/// The object's desired state: without `status`, the metadata the server sets, and the
/// annotations controllers write (`kind` and `apiVersion` stay).
pub fn content(object: &Value) -> Value {
    let mut v = object.clone();
    if let Some(map) = v.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in SERVER_METADATA {
                meta.remove(*field);
            }
            if let Some(notes) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                for a in CONTROLLER_ANNOTATIONS {
                    notes.remove(*a);
                }
                if notes.is_empty() {
                    meta.remove("annotations");
                }
            }
        }
    }
    v
}

/// An object's uid and resourceVersion, as read.
pub fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(Value::as_str)
}

pub fn resource_version(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

/// One field a change sets: its path (JSON pointer tokens) and its value before and after
/// (`None`: absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub path: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

impl Field {
    /// The path as a JSON pointer (`/spec/ports/0/targetPort`).
    pub fn pointer(&self) -> String {
        pointer(&self.path)
    }

    /// The path as people read it (`spec.ports[0].targetPort`).
    pub fn dotted(&self) -> String {
        let mut out = String::new();
        for token in &self.path {
            if token.parse::<usize>().is_ok() {
                out.push_str(&format!("[{token}]"));
            } else {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(token);
            }
        }
        out
    }
}

/// A JSON pointer from tokens, escaped as RFC 6901 says.
pub fn pointer(path: &[String]) -> String {
    path.iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The value at a path, if present.
pub fn get<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    v.pointer(&pointer(path))
}

/// The fields in which `after` differs from `before`, as deep as both sides are objects (or
/// arrays of the same length): changing one port's `targetPort` is that one field, not the
/// Service's spec. An array whose length changed is one field.
pub fn diff(before: &Value, after: &Value) -> Vec<Field> {
    let mut out = Vec::new();
    walk(&mut Vec::new(), Some(before), Some(after), &mut out);
    out
}

fn walk(path: &mut Vec<String>, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Field>) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                path.push(k.clone());
                walk(path, x.get(k), y.get(k), out);
                path.pop();
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                path.push(i.to_string());
                walk(path, Some(p), Some(q), out);
                path.pop();
            }
        }
        (x, y) if x == y => {}
        (x, y) => out.push(Field {
            path: path.clone(),
            before: x.cloned(),
            after: y.cloned(),
        }),
    }
}

/// Whether every field of `part` is in `whole` with the same value (arrays element by element,
/// of the same length): what a server that fills in defaults keeps of what a client wrote.
pub fn contained(part: &Value, whole: &Value) -> bool {
    match (part, whole) {
        (Value::Object(p), Value::Object(w)) => p
            .iter()
            .all(|(k, v)| w.get(k).is_some_and(|x| contained(v, x))),
        (Value::Array(p), Value::Array(w)) => {
            p.len() == w.len() && p.iter().zip(w).all(|(a, b)| contained(a, b))
        }
        (p, w) => p == w,
    }
}

/// RFC 6902 operations that take an object from each field's `from` side to its `to` side,
/// guarded by the resourceVersion the object was read at (the server refuses the patch with 409
/// Conflict when the object changed since).
pub fn patch_ops(
    fields: &[Field],
    resource_version: Option<&str>,
    forward: bool,
) -> json_patch::Patch {
    let mut ops = Vec::new();
    if let Some(rv) = resource_version {
        ops.push(
            serde_json::json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv}),
        );
    }
    for f in fields {
        let (from, to) = if forward {
            (&f.before, &f.after)
        } else {
            (&f.after, &f.before)
        };
        let path = f.pointer();
        ops.push(match (from, to) {
            (_, None) => serde_json::json!({"op": "remove", "path": path}),
            (None, Some(v)) => serde_json::json!({"op": "add", "path": path, "value": v}),
            (Some(_), Some(v)) => serde_json::json!({"op": "replace", "path": path, "value": v}),
        });
    }
    serde_json::from_value(Value::Array(ops)).expect("well-formed JSON patch operations")
}

/// An object ready to be created again from a saved version: without server-set metadata and
/// status (a Service keeps its cluster IP, which the server honours when it is free).
pub fn for_create(saved: &Value) -> Value {
    content(saved)
}

/// A mutable view of a JSON object's member, created (as an empty object) when absent.
pub fn member<'v>(v: &'v mut Value, key: &str) -> &'v mut Value {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut()
        .expect("an object")
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()))
}

/// A mutable view of a JSON array member, created (empty) when absent.
pub fn array<'v>(v: &'v mut Value, key: &str) -> &'v mut Vec<Value> {
    let slot = member(v, key);
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut().expect("an array")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_is_field_deep_and_patches_round_trip() {
        let before = json!({"metadata": {"name": "geo", "resourceVersion": "7"},
            "spec": {"ports": [{"port": 8083, "targetPort": 8083}], "selector": {"a": "b"}}});
        let mut after = before.clone();
        after["spec"]["ports"][0]["targetPort"] = json!(9999);
        after["spec"]["selector"]["x"] = json!("y");
        after["spec"]["ipFamilies"] = json!(["IPv4"]);
        let fields = diff(&content(&before), &content(&after));
        let dotted: Vec<String> = fields.iter().map(Field::dotted).collect();
        assert_eq!(
            dotted,
            [
                "spec.ipFamilies",
                "spec.ports[0].targetPort",
                "spec.selector.x"
            ]
        );
        let mut forward = before.clone();
        json_patch::patch(&mut forward, &patch_ops(&fields, Some("7"), true)).unwrap();
        assert_eq!(forward, after);
        let mut back = forward.clone();
        json_patch::patch(&mut back, &patch_ops(&fields, None, false)).unwrap();
        assert_eq!(back, before);
    }

    #[test]
    fn content_drops_what_the_server_manages_and_containment_allows_defaults() {
        let v = json!({"metadata": {"name": "a", "uid": "u", "generation": 3,
            "annotations": {"deployment.kubernetes.io/revision": "2"}}, "status": {"x": 1}, "spec": {}});
        assert_eq!(content(&v), json!({"metadata": {"name": "a"}, "spec": {}}));
        let written = json!({"spec": {"probe": {"httpGet": {"path": "/"}}}});
        let stored = json!({"spec": {"probe": {"httpGet": {"path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1}}});
        assert!(contained(&written, &stored));
        assert!(!contained(&stored, &written));
        let path = vec!["a/b".to_string(), "c~d".to_string()];
        assert_eq!(pointer(&path), "/a~1b/c~0d");
    }
}
