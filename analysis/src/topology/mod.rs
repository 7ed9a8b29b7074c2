//! `build_topology` and `topology_analysis`: the operational topology of what a source recorded.
//!
//! Nodes are every Kubernetes object as last seen (not deleted), its Namespace and Node, and one
//! `App` node per service that reports spans. Edges are ITBench's relations: `contains`
//! (namespace → object, owner → owned, Service → Endpoints → Pod, Node → Pod), `depends_on`
//! (Pod → ServiceAccount, ConfigMap, Secret, PVC it mounts or reads, and → a Service whose name
//! an environment value addresses), `is_alias` (App → the Service of its name) and `calls`
//! (App → App, with protocol and count).
//!
//! ITBench builds the same graph from an architecture file and the objects in its processed
//! format; on raw snapshots everything collapses into one node. Here the calls come from the
//! traces themselves (no architecture file, no hard-coded alias map for one demo application),
//! and node ids keep the namespace (`namespace/Kind/name`), so objects of the same name in two
//! namespaces stay two nodes.

mod calls;
mod query;

use std::collections::{BTreeMap, HashMap, HashSet};

use polars::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::frame::{collect, strings, strings_or_empty};
use crate::params::entity_id;
use crate::{Result, Source};
pub use calls::calls;
pub(crate) use query::Graph;
pub use query::{AnalysisParams, analysis};
use schemas::tables::Table;

pub const BUILD: &str = "Builds the operational topology of the session's system: nodes for every Kubernetes object (id namespace/Kind/name), Namespace, Node and App (a service seen in traces); edges contains (namespace, owners, Service -> Endpoints -> Pod, Node -> Pod), depends_on (ServiceAccount, ConfigMap, Secret, PVC, Services addressed in env), is_alias (App -> Service) and calls (App -> App from traces, with protocol). Answers node and edge counts by kind; topology_analysis queries it (no file needed).";

pub const ANALYSIS: &str = "Everything about one entity in the operational topology in one call: kind, namespace, aliases, direct relationships, relationships by type, backing infrastructure (Namespace -> Deployment -> ReplicaSet -> Pod -> Node), callers and callees, call chains from entry services and to leaves, and the pods and workloads that depend on it. Example: topology_analysis(entity='checkout'). Example: topology_analysis(entity='otel-demo/Service/cart').";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BuildParams {
    /// Ignored: the calls come from the session's traces.
    #[serde(default, rename = "arch_file")]
    pub _arch_file: Option<Value>,
    /// Ignored: the objects are the session's.
    #[serde(default, rename = "k8s_objects_file")]
    pub _k8s_objects_file: Option<Value>,
    /// Ignored by the tools (`collector analyze build_topology DATASET --param output_file=F`
    /// writes the graph there).
    #[serde(default, rename = "output_file")]
    pub _output_file: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    pub id: String,
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edge {
    pub source: String,
    pub relation: String,
    pub target: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// The graph, nodes and edges deduplicated in the order found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Topology {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    #[serde(skip)]
    node_ids: HashSet<String>,
    #[serde(skip)]
    edge_ids: HashSet<(String, String, String)>,
}

impl Topology {
    fn node(&mut self, kind: &str, name: &str, namespace: Option<&str>, id: String) {
        if self.node_ids.insert(id.clone()) {
            self.nodes.push(Node {
                id,
                kind: kind.to_string(),
                name: name.to_string(),
                namespace: namespace.map(str::to_string),
            });
        }
    }

    fn edge(&mut self, source: &str, relation: &str, target: &str, meta: Option<Value>) {
        if self
            .edge_ids
            .insert((source.to_string(), relation.to_string(), target.to_string()))
        {
            self.edges.push(Edge {
                source: source.to_string(),
                relation: relation.to_string(),
                target: target.to_string(),
                meta,
            });
        }
    }

    /// Node counts by kind and edge counts by relation.
    pub fn counts(&self) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
        let mut kinds = BTreeMap::new();
        for n in &self.nodes {
            *kinds.entry(n.kind.clone()).or_insert(0) += 1;
        }
        let mut relations = BTreeMap::new();
        for e in &self.edges {
            *relations.entry(e.relation.clone()).or_insert(0) += 1;
        }
        (kinds, relations)
    }
}

/// One object as last seen.
struct Object {
    kind: String,
    namespace: Option<String>,
    name: String,
    body: Value,
}

impl Object {
    fn id(&self) -> String {
        entity_id(&self.kind, self.namespace.as_deref(), &self.name)
    }
}

/// Every object's latest version, unless that version is its deletion.
fn latest_objects(source: &Source) -> Result<Vec<Object>> {
    use schemas::tables::columns::objects as c;
    // Stable, so that of two versions seen at one instant the later row is the latest.
    let by_time = || SortMultipleOptions::default().with_maintain_order(true);
    let lf = source
        .scan(Table::Objects)?
        .group_by([col(c::KIND), col(c::NAMESPACE), col(c::NAME)])
        .agg([
            col(c::OBJECT).sort_by([col(c::OBSERVED)], by_time()).last(),
            col(c::CHANGE).sort_by([col(c::OBSERVED)], by_time()).last(),
        ])
        .filter(col(c::CHANGE).neq(lit("deleted")))
        .sort(
            [c::KIND, c::NAMESPACE, c::NAME],
            SortMultipleOptions::default(),
        );
    let df = collect(lf)?;
    let kinds = strings_or_empty(&df, c::KIND)?;
    let namespaces = strings(&df, c::NAMESPACE)?;
    let names = strings_or_empty(&df, c::NAME)?;
    let bodies = strings_or_empty(&df, c::OBJECT)?;
    Ok((0..df.height())
        .map(|i| Object {
            kind: kinds[i].clone(),
            namespace: namespaces[i].clone().filter(|n| !n.is_empty()),
            name: names[i].clone(),
            body: serde_json::from_str(&bodies[i]).unwrap_or(Value::Null),
        })
        .collect())
}

/// A service name addressed in a value: the name as a whole DNS-label token.
fn addresses(value: &str, service: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    value.match_indices(service).any(|(at, _)| {
        let before = value[..at].chars().next_back();
        let after = value[at + service.len()..].chars().next();
        before.is_none_or(|c| !is_name(c)) && after.is_none_or(|c| !is_name(c))
    })
}

/// Objects a pod spec depends on: (kind, name).
fn pod_dependencies(spec: &Value) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let name = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    if let Some(sa) = name(spec, "serviceAccountName") {
        out.push(("ServiceAccount", sa));
    }
    for vol in spec["volumes"].as_array().into_iter().flatten() {
        if let Some(n) = name(&vol["configMap"], "name") {
            out.push(("ConfigMap", n));
        }
        if let Some(n) = name(&vol["secret"], "secretName") {
            out.push(("Secret", n));
        }
        if let Some(n) = name(&vol["persistentVolumeClaim"], "claimName") {
            out.push(("PersistentVolumeClaim", n));
        }
        for src in vol["projected"]["sources"].as_array().into_iter().flatten() {
            if let Some(n) = name(&src["configMap"], "name") {
                out.push(("ConfigMap", n));
            }
            if let Some(n) = name(&src["secret"], "name") {
                out.push(("Secret", n));
            }
        }
    }
    let containers = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(spec["initContainers"].as_array().into_iter().flatten());
    for container in containers {
        for env in container["env"].as_array().into_iter().flatten() {
            if let Some(n) = name(&env["valueFrom"]["configMapKeyRef"], "name") {
                out.push(("ConfigMap", n));
            }
            if let Some(n) = name(&env["valueFrom"]["secretKeyRef"], "name") {
                out.push(("Secret", n));
            }
        }
        for from in container["envFrom"].as_array().into_iter().flatten() {
            if let Some(n) = name(&from["configMapRef"], "name") {
                out.push(("ConfigMap", n));
            }
            if let Some(n) = name(&from["secretRef"], "name") {
                out.push(("Secret", n));
            }
        }
    }
    out
}

/// Environment values of a pod spec's containers.
fn env_values(spec: &Value) -> Vec<&str> {
    spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(spec["initContainers"].as_array().into_iter().flatten())
        .flat_map(|c| c["env"].as_array().into_iter().flatten())
        .filter_map(|e| e["value"].as_str())
        .collect()
}

/// The topology of everything the source recorded.
pub fn topology(source: &Source) -> Result<Topology> {
    let objects = latest_objects(source)?;
    let mut t = Topology::default();
    for o in &objects {
        if let Some(ns) = &o.namespace {
            t.node("Namespace", ns, None, format!("Namespace/{ns}"));
        }
        let ns = o.namespace.as_deref();
        t.node(&o.kind, &o.name, ns, o.id());
    }
    let services: HashMap<(String, String), String> = objects
        .iter()
        .filter(|o| o.kind == "Service")
        .map(|o| {
            (
                (o.namespace.clone().unwrap_or_default(), o.name.clone()),
                o.id(),
            )
        })
        .collect();
    let ids: HashSet<String> = objects.iter().map(Object::id).collect();
    for o in &objects {
        let id = o.id();
        let ns = o.namespace.as_deref();
        if let Some(ns) = ns {
            t.edge(&format!("Namespace/{ns}"), "contains", &id, None);
        }
        for r in o.body["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let (Some(kind), Some(name)) = (r["kind"].as_str(), r["name"].as_str()) {
                let owner_ns = if matches!(kind, "Node" | "Namespace") {
                    None
                } else {
                    ns
                };
                t.edge(&entity_id(kind, owner_ns, name), "contains", &id, None);
            }
        }
        match o.kind.as_str() {
            "Service" => {
                let endpoints = entity_id("Endpoints", ns, &o.name);
                if ids.contains(&endpoints) {
                    t.edge(&id, "contains", &endpoints, None);
                }
            }
            "Endpoints" => {
                for subset in o.body["subsets"].as_array().into_iter().flatten() {
                    let addresses = subset["addresses"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .chain(subset["notReadyAddresses"].as_array().into_iter().flatten());
                    for a in addresses {
                        if a["targetRef"]["kind"].as_str() == Some("Pod")
                            && let Some(pod) = a["targetRef"]["name"].as_str()
                        {
                            t.edge(&id, "contains", &entity_id("Pod", ns, pod), None);
                        }
                    }
                }
            }
            "Pod" => pod_edges(&mut t, o, &id, &services),
            _ => {}
        }
    }
    let calls = calls(source)?;
    let apps: std::collections::BTreeSet<&String> =
        calls.keys().flat_map(|(a, b)| [a, b]).collect();
    let namespaces: Vec<String> = {
        let mut v: Vec<String> = objects.iter().filter_map(|o| o.namespace.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    for app in apps {
        t.node("App", app, None, app.clone());
        for ns in &namespaces {
            if let Some(svc) = services.get(&(ns.clone(), app.clone())) {
                t.edge(app, "is_alias", svc, None);
            }
        }
    }
    for ((from, to), (protocol, n)) in &calls {
        let mut meta = json!({"spans": n});
        if !protocol.is_empty() {
            meta["protocol"] = protocol.clone().into();
        }
        t.edge(from, "calls", to, Some(meta));
    }
    Ok(t)
}

fn pod_edges(t: &mut Topology, o: &Object, id: &str, services: &HashMap<(String, String), String>) {
    let ns = o.namespace.as_deref();
    let spec = &o.body["spec"];
    if let Some(node) = spec["nodeName"].as_str() {
        t.node("Node", node, None, format!("Node/{node}"));
        t.edge(&format!("Node/{node}"), "contains", id, None);
    }
    for (kind, name) in pod_dependencies(spec) {
        t.edge(id, "depends_on", &entity_id(kind, ns, &name), None);
    }
    let values = env_values(spec);
    let own_ns = ns.unwrap_or_default();
    for ((svc_ns, svc), svc_id) in services {
        if svc_ns == own_ns && values.iter().any(|v| addresses(v, svc)) {
            t.edge(id, "depends_on", svc_id, None);
        }
    }
}

/// The topology as kept for queries until the objects or the spans change.
pub(crate) fn graph(source: &Source) -> Result<std::sync::Arc<Graph>> {
    source.derived()
}

pub fn build(source: &Source, _p: BuildParams) -> Result<Value> {
    let g = graph(source)?;
    let t = &g.t;
    let (kinds, relations) = t.counts();
    Ok(json!({
        "nodes": t.nodes.len(),
        "edges": t.edges.len(),
        "node_types": kinds,
        "edge_types": relations,
        "note": "Built from the session's objects and traces; topology_analysis and get_context_contract read it directly (topology_file is not needed).",
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_are_addressed_as_whole_names() {
        assert!(addresses("mongodb-geo:27017", "mongodb-geo"));
        assert!(!addresses("mongodb-geo:27017", "geo"));
        assert!(addresses("http://geo:8083/x", "geo"));
        assert!(!addresses("geography", "geo"));
    }

    #[test]
    fn pod_specs_name_what_they_depend_on() {
        let spec = json!({
            "serviceAccountName": "sa",
            "volumes": [{"configMap": {"name": "cm"}}, {"projected": {"sources": [{"secret": {"name": "s"}}]}}],
            "containers": [{"envFrom": [{"configMapRef": {"name": "env"}}],
                            "env": [{"valueFrom": {"secretKeyRef": {"name": "k"}}}, {"value": "x"}]}],
        });
        let deps = pod_dependencies(&spec);
        assert_eq!(
            deps,
            [
                ("ServiceAccount", "sa".to_string()),
                ("ConfigMap", "cm".into()),
                ("Secret", "s".into()),
                ("Secret", "k".into()),
                ("ConfigMap", "env".into())
            ]
        );
    }
}
