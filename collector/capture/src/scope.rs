//! What a capture keeps: the chosen namespaces, minus excluded namespaces and objects whose labels
//! match an exclusion pattern (the observability stack, the injection machinery), so that nothing
//! in the dataset names the fault.

use std::collections::BTreeSet;

use serde_json::Value;

/// A label pattern: `key` (the label is present) or `key=value`; `*` in the value matches any run
/// of characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelPattern {
    pub key: String,
    pub value: Option<String>,
}

impl std::str::FromStr for LabelPattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (key, value) = match s.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (s.trim(), None),
        };
        if key.is_empty() {
            return Err(format!(
                "label pattern `{s}`: expected KEY or KEY=VALUE (VALUE may contain *)"
            ));
        }
        Ok(LabelPattern {
            key: key.to_string(),
            value,
        })
    }
}

impl LabelPattern {
    fn matches(&self, labels: &serde_json::Map<String, Value>) -> bool {
        let Some(actual) = labels.get(&self.key).and_then(Value::as_str) else {
            return false;
        };
        self.value.as_deref().is_none_or(|p| wildcard(p, actual))
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Only these namespaces; every namespace when empty.
    pub namespaces: BTreeSet<String>,
    pub exclude_namespaces: BTreeSet<String>,
    pub exclude_labels: Vec<LabelPattern>,
}

impl Scope {
    pub fn namespace_ok(&self, ns: &str) -> bool {
        (self.namespaces.is_empty() || self.namespaces.contains(ns))
            && !self.exclude_namespaces.contains(ns)
    }

    /// Whether an object (Kubernetes JSON) is kept: its namespace (or, for a Namespace, its name)
    /// is in scope and no exclusion pattern matches its labels.
    pub fn object_ok(&self, kind: &str, object: &Value) -> bool {
        let meta = &object["metadata"];
        let ns = match kind {
            "Namespace" => meta["name"].as_str(),
            _ => meta["namespace"].as_str(),
        };
        if ns.is_some_and(|ns| !self.namespace_ok(ns)) {
            return false;
        }
        match meta["labels"].as_object() {
            Some(labels) => !self.exclude_labels.iter().any(|p| p.matches(labels)),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wildcards() {
        assert!(wildcard("chaos-*", "chaos-mesh"));
        assert!(wildcard("*mesh", "chaos-mesh"));
        assert!(wildcard("a*b*c", "aXXbYc"));
        assert!(!wildcard("a*b*c", "aXXcYb"));
        assert!(wildcard("exact", "exact"));
        assert!(!wildcard("exact", "exactly"));
        assert!(!wildcard("ab*ba", "aba"));
    }

    #[test]
    fn scope_keeps_chosen_namespaces_and_drops_excluded_labels() {
        let scope = Scope {
            namespaces: ["app".to_string()].into(),
            exclude_namespaces: ["chaos".to_string()].into(),
            exclude_labels: vec![
                "app.kubernetes.io/part-of=chaos-*".parse().unwrap(),
                "injector".parse().unwrap(),
            ],
        };
        let obj =
            |ns: &str, labels: Value| json!({"metadata": {"namespace": ns, "labels": labels}});
        assert!(scope.object_ok("Pod", &obj("app", json!({"app": "geo"}))));
        assert!(!scope.object_ok("Pod", &obj("other", json!({}))));
        assert!(!scope.object_ok(
            "Pod",
            &obj("app", json!({"app.kubernetes.io/part-of": "chaos-mesh"}))
        ));
        assert!(!scope.object_ok("Pod", &obj("app", json!({"injector": "x"}))));
        assert!(scope.object_ok("Node", &json!({"metadata": {"name": "n1"}})));
        assert!(scope.object_ok("Namespace", &json!({"metadata": {"name": "app"}})));
        assert!(!scope.object_ok("Namespace", &json!({"metadata": {"name": "chaos"}})));
        assert!("=x".parse::<LabelPattern>().is_err());
    }
}
