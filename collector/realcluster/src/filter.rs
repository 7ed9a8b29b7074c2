//! What an agent may not see of a real cluster: the namespaces of the injection plane (the node
//! agent's, a journal kept in a ConfigMap). A request naming one is answered as if it did not
//! exist; lists, tables and watch events drop what is in one. IO-free: the proxy (`proxy`)
//! carries requests and answers, this decides what they may say.

use std::collections::BTreeSet;

use apiserver::status::Failure;
use serde_json::Value;

/// Namespaces hidden from the agent.
#[derive(Debug, Clone, Default)]
pub struct Hidden {
    namespaces: BTreeSet<String>,
}

/// The namespace the injection plane uses on a cluster (node agent, optional journal).
pub const PLANE_NAMESPACE: &str = "faultline";

impl Hidden {
    pub fn new(namespaces: impl IntoIterator<Item = String>) -> Hidden {
        Hidden {
            namespaces: namespaces.into_iter().collect(),
        }
    }

    fn hides(&self, ns: &str) -> bool {
        self.namespaces.contains(ns)
    }

    /// The answer to a request for a path inside (or naming) a hidden namespace: the apiserver's
    /// 404 for a namespace that does not exist. `None`: forward it.
    pub fn refusal(&self, path: &str) -> Option<Failure> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let ns = match segments.as_slice() {
            ["api", _, "namespaces", ns, ..] | ["apis", _, _, "namespaces", ns, ..] => *ns,
            ["api", _, "watch", "namespaces", ns, ..]
            | ["apis", _, _, "watch", "namespaces", ns, ..] => *ns,
            _ => return None,
        };
        self.hides(ns)
            .then(|| Failure::not_found("namespaces", "", ns))
    }

    /// Whether an object (a list item, a table row's object, a watch event's) is in a hidden
    /// namespace, or, in a list of namespaces, is one.
    fn hidden_object(&self, o: &Value, namespaces: bool) -> bool {
        let m = &o["metadata"];
        let in_hidden = m["namespace"].as_str().is_some_and(|ns| self.hides(ns));
        let is_hidden = (namespaces || o["kind"] == "Namespace")
            && m["namespace"].is_null()
            && m["name"].as_str().is_some_and(|n| self.hides(n));
        in_hidden || is_hidden
    }

    /// Drops hidden objects from a list (`items`) or a table (`rows[].object`) read from
    /// `path`; whether anything was dropped.
    pub fn filter_list(&self, path: &str, body: &mut Value) -> bool {
        let namespaces = lists_namespaces(path);
        let before = self.count(body);
        if let Some(items) = body.get_mut("items").and_then(Value::as_array_mut) {
            items.retain(|o| !self.hidden_object(o, namespaces));
        }
        if let Some(rows) = body.get_mut("rows").and_then(Value::as_array_mut) {
            rows.retain(|r| !self.hidden_object(&r["object"], namespaces));
        }
        self.count(body) != before
    }

    fn count(&self, body: &Value) -> usize {
        ["items", "rows"]
            .iter()
            .filter_map(|k| body.get(*k).and_then(Value::as_array))
            .map(Vec::len)
            .sum()
    }

    /// Whether a watch event (one JSON line) may be passed on.
    pub fn keeps_event(&self, line: &[u8]) -> bool {
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            return true;
        };
        !self.hidden_object(&event["object"], false)
    }
}

/// Whether a path reads the namespaces themselves (`/api/v1/namespaces`, or its watch).
fn lists_namespaces(path: &str) -> bool {
    matches!(
        path.trim_end_matches('/'),
        "/api/v1/namespaces" | "/api/v1/watch/namespaces"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hidden() -> Hidden {
        Hidden::new([PLANE_NAMESPACE.to_string()])
    }

    #[test]
    fn paths_into_a_hidden_namespace_are_not_found() {
        let h = hidden();
        for path in [
            "/api/v1/namespaces/faultline",
            "/api/v1/namespaces/faultline/configmaps/journal",
            "/apis/apps/v1/namespaces/faultline/daemonsets",
            "/api/v1/watch/namespaces/faultline/pods",
        ] {
            let r = h
                .refusal(path)
                .unwrap_or_else(|| panic!("{path} forwarded"));
            assert_eq!(r.code, 404);
            assert_eq!(r.message, "namespaces \"faultline\" not found");
        }
        for path in [
            "/api/v1/namespaces/app/pods",
            "/api/v1/pods",
            "/api/v1/namespaces",
            "/apis/apps/v1/deployments",
            "/version",
        ] {
            assert!(h.refusal(path).is_none(), "{path} refused");
        }
    }

    #[test]
    fn lists_tables_and_events_lose_what_is_hidden() {
        let h = hidden();
        let mut pods = json!({"kind": "PodList", "items": [
            {"metadata": {"name": "a", "namespace": "app"}},
            {"metadata": {"name": "agent", "namespace": "faultline"}}]});
        assert!(h.filter_list("/api/v1/pods", &mut pods));
        assert_eq!(pods["items"].as_array().unwrap().len(), 1);
        assert_eq!(pods["items"][0]["metadata"]["name"], "a");
        let mut namespaces = json!({"kind": "NamespaceList", "items": [
            {"metadata": {"name": "app"}}, {"metadata": {"name": "faultline"}}]});
        assert!(h.filter_list("/api/v1/namespaces", &mut namespaces));
        assert_eq!(namespaces["items"].as_array().unwrap().len(), 1);
        let mut table = json!({"kind": "Table", "rows": [
        {"cells": ["app"], "object": {"kind": "PartialObjectMetadata", "metadata": {"name": "app"}}},
        {"cells": ["faultline"], "object": {"kind": "PartialObjectMetadata", "metadata": {"name": "faultline"}}},
        ]});
        assert!(h.filter_list("/api/v1/namespaces", &mut table));
        assert_eq!(table["rows"].as_array().unwrap().len(), 1);
        let mut all_pods = json!({"kind": "Table", "rows": [
            {"cells": ["a"], "object": {"kind": "PartialObjectMetadata", "metadata": {"name": "a", "namespace": "app"}}},
            {"cells": ["x"], "object": {"kind": "PartialObjectMetadata", "metadata": {"name": "x", "namespace": "faultline"}}}]});
        assert!(h.filter_list("/api/v1/pods", &mut all_pods));
        assert_eq!(all_pods["rows"].as_array().unwrap().len(), 1);
        // A cluster-scoped object named like the namespace is not a namespace.
        let mut nodes = json!({"kind": "NodeList", "items": [{"metadata": {"name": "faultline"}}]});
        assert!(!h.filter_list("/api/v1/nodes", &mut nodes));
        let mut untouched =
            json!({"kind": "PodList", "items": [{"metadata": {"name": "a", "namespace": "app"}}]});
        assert!(!h.filter_list("/api/v1/namespaces/app/pods", &mut untouched));
        assert!(!h.keeps_event(
            br#"{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"x","namespace":"faultline"}}}"#
        ));
        assert!(h.keeps_event(
            br#"{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"x","namespace":"app"}}}"#
        ));
    }
}
