//! `topology_analysis`: one entity's place in the topology, as ITBench's tool answers it.

use std::collections::{BTreeMap, BTreeSet};

use polars::prelude::PlHashMap;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use schemas::tables::Table;

use super::{Topology, topology};
use crate::cache::Derived;
use crate::{Error, Result, Source};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AnalysisParams {
    /// Ignored: the topology is built from the session's data.
    #[serde(default, rename = "topology_file")]
    pub _topology_file: Option<Value>,
    /// The entity: a node id (otel-demo/Service/cart), a name (cart) or part of one.
    pub entity: String,
}

/// Most call chains listed each way, and how deep a chain may go.
const MAX_CHAINS: usize = 20;
const MAX_DEPTH: usize = 10;

/// A topology indexed for queries: nodes by id, by lowercased id and by lowercased name (each in
/// node order), edges by their source and by their target (in the order found), and the entry
/// services (Apps nobody calls).
#[derive(Debug)]
pub(crate) struct Graph {
    pub t: Topology,
    by_id: PlHashMap<String, usize>,
    by_lower_id: PlHashMap<String, usize>,
    by_lower_name: PlHashMap<String, Vec<usize>>,
    lower_ids: Vec<String>,
    out: PlHashMap<String, Vec<usize>>,
    inc: PlHashMap<String, Vec<usize>>,
    roots: Vec<usize>,
}

impl Derived for Graph {
    const TABLES: &'static [Table] = &[Table::Objects, Table::Spans];

    fn derive(source: &Source) -> Result<Graph> {
        Ok(Graph::new(topology(source)?))
    }
}

impl Graph {
    pub fn new(mut t: Topology) -> Graph {
        // Only the building needed the sets that kept nodes and edges unique.
        t.node_ids = Default::default();
        t.edge_ids = Default::default();
        let by_id = t
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.clone(), i))
            .collect();
        let mut out: PlHashMap<String, Vec<usize>> = PlHashMap::default();
        let mut inc: PlHashMap<String, Vec<usize>> = PlHashMap::default();
        for (i, e) in t.edges.iter().enumerate() {
            out.entry(e.source.clone()).or_default().push(i);
            inc.entry(e.target.clone()).or_default().push(i);
        }
        let lower_ids: Vec<String> = t.nodes.iter().map(|n| n.id.to_ascii_lowercase()).collect();
        let mut by_lower_id = PlHashMap::default();
        let mut by_lower_name: PlHashMap<String, Vec<usize>> = PlHashMap::default();
        for (i, n) in t.nodes.iter().enumerate() {
            by_lower_id.entry(lower_ids[i].clone()).or_insert(i);
            by_lower_name
                .entry(n.name.to_ascii_lowercase())
                .or_default()
                .push(i);
        }
        let called = |id: &str| {
            inc.get(id)
                .is_some_and(|edges| edges.iter().any(|e| t.edges[*e].relation == "calls"))
        };
        let roots = (0..t.nodes.len())
            .filter(|i| t.nodes[*i].kind == "App" && !called(&t.nodes[*i].id))
            .collect();
        Graph {
            t,
            by_id,
            by_lower_id,
            by_lower_name,
            lower_ids,
            out,
            inc,
            roots,
        }
    }

    /// The edges from a node: (target, relation), in the order found.
    pub fn outgoing<'g>(&'g self, id: &str) -> impl Iterator<Item = (&'g str, &'g str)> + 'g {
        let edges = self.out.get(id).map_or(&[][..], Vec::as_slice);
        edges.iter().map(|i| {
            let e = &self.t.edges[*i];
            (e.target.as_str(), e.relation.as_str())
        })
    }

    /// The edges into a node: (source, relation), in the order found.
    pub fn incoming<'g>(&'g self, id: &str) -> impl Iterator<Item = (&'g str, &'g str)> + 'g {
        let edges = self.inc.get(id).map_or(&[][..], Vec::as_slice);
        edges.iter().map(|i| {
            let e = &self.t.edges[*i];
            (e.source.as_str(), e.relation.as_str())
        })
    }

    /// The analysis of one entity (`get_context_contract` asks about an entity, its pods and
    /// its dependencies).
    pub fn analyse(&self, entity: &str) -> Result<Value> {
        analyse(self, entity)
    }

    pub fn kind(&self, id: &str) -> &str {
        self.by_id
            .get(id)
            .map_or("", |i| self.t.nodes[*i].kind.as_str())
    }

    pub fn name<'b>(&'b self, id: &'b str) -> &'b str {
        self.by_id
            .get(id)
            .map_or(id, |i| self.t.nodes[*i].name.as_str())
    }

    fn targets(&self, id: &str, relation: &str) -> Vec<&str> {
        self.outgoing(id)
            .filter(|(_, r)| *r == relation)
            .map(|(t, _)| t)
            .collect()
    }

    fn sources(&self, id: &str, relation: &str) -> Vec<&str> {
        self.incoming(id)
            .filter(|(_, r)| *r == relation)
            .map(|(s, _)| s)
            .collect()
    }

    /// A node by id, case-insensitive id, name (Apps, Services, workloads and Pods first), or
    /// part of an id.
    pub fn find(&self, query: &str) -> Option<&str> {
        let q = query.trim();
        let lower = q.to_ascii_lowercase();
        let nodes = &self.t.nodes;
        let id = |i: usize| Some(nodes[i].id.as_str());
        if let Some(i) = self.by_id.get(q).or_else(|| self.by_lower_id.get(&lower)) {
            return id(*i);
        }
        if let Some(named) = self.by_lower_name.get(&lower) {
            for kind in [
                "App",
                "Service",
                "Deployment",
                "StatefulSet",
                "DaemonSet",
                "Pod",
                "ReplicaSet",
            ] {
                if let Some(i) = named.iter().find(|i| nodes[**i].kind == kind) {
                    return id(*i);
                }
            }
            return named.first().and_then(|i| id(*i));
        }
        self.lower_ids
            .iter()
            .position(|n| n.contains(&lower))
            .and_then(id)
    }

    pub fn aliases<'g>(&'g self, id: &'g str) -> BTreeSet<&'g str> {
        let mut set = BTreeSet::from([id]);
        set.extend(self.targets(id, "is_alias"));
        set.extend(self.sources(id, "is_alias"));
        set
    }

    /// The App a Service is an alias of (calls are between Apps).
    fn app_of<'g>(&'g self, id: &'g str) -> &'g str {
        self.sources(id, "is_alias").first().copied().unwrap_or(id)
    }

    /// The workload a Pod rolls up to, through its owners.
    fn workload_of<'g>(&'g self, pod: &'g str) -> &'g str {
        let mut at = pod;
        for _ in 0..4 {
            match self
                .sources(at, "contains")
                .into_iter()
                .find(|s| !matches!(self.kind(s), "Namespace" | "Node" | "Endpoints"))
            {
                Some(owner) => at = owner,
                None => break,
            }
        }
        at
    }

    pub fn callees(&self, app: &str) -> Vec<&str> {
        self.targets(app, "calls")
    }

    pub fn callers(&self, app: &str) -> Vec<&str> {
        self.sources(app, "calls")
    }
}

/// Chains of calls from every entry service (one nobody calls) down to `targets`.
fn chains_to(g: &Graph, targets: &BTreeSet<&str>) -> Vec<String> {
    let roots = g.roots.iter().map(|i| g.t.nodes[*i].id.as_str());
    let mut out = Vec::new();
    fn walk<'g>(
        g: &'g Graph,
        at: &'g str,
        path: &mut Vec<&'g str>,
        targets: &BTreeSet<&str>,
        out: &mut Vec<String>,
    ) {
        if out.len() >= 200 || path.len() > MAX_DEPTH {
            return;
        }
        if targets.contains(at) {
            out.push(
                path.iter()
                    .map(|p| g.name(p))
                    .collect::<Vec<_>>()
                    .join(" -> "),
            );
            return;
        }
        for next in g.callees(at) {
            if !path.contains(&next) {
                path.push(next);
                walk(g, next, path, targets, out);
                path.pop();
            }
        }
    }
    for root in roots {
        walk(g, root, &mut vec![root], targets, &mut out);
    }
    out
}

/// Chains of calls from `sources` down to services that call nobody.
fn chains_from(g: &Graph, sources: &BTreeSet<&str>) -> Vec<String> {
    let mut out = Vec::new();
    fn walk<'g>(g: &'g Graph, at: &'g str, path: &mut Vec<&'g str>, out: &mut Vec<String>) {
        if out.len() >= 200 || path.len() > MAX_DEPTH {
            return;
        }
        let next: Vec<&str> = g
            .callees(at)
            .into_iter()
            .filter(|n| !path.contains(n))
            .collect();
        if next.is_empty() {
            if path.len() > 1 {
                out.push(
                    path.iter()
                        .map(|p| g.name(p))
                        .collect::<Vec<_>>()
                        .join(" -> "),
                );
            }
            return;
        }
        for n in next {
            path.push(n);
            walk(g, n, path, out);
            path.pop();
        }
    }
    for s in sources {
        walk(g, s, &mut vec![s], &mut out);
    }
    out
}

fn label(g: &Graph, id: &str) -> String {
    if g.kind(id) == "App" {
        format!("App/{id}")
    } else {
        id.to_string()
    }
}

/// The analysis of one entity (shared with `get_context_contract`).
pub(crate) fn analyse(g: &Graph, query: &str) -> Result<Value> {
    let start = g.find(query).ok_or_else(|| {
        let some: Vec<&str> =
            g.t.nodes
                .iter()
                .filter(|n| matches!(n.kind.as_str(), "App" | "Service" | "Deployment"))
                .take(20)
                .map(|n| n.id.as_str())
                .collect();
        Error::param(format!(
            "entity `{query}` not found; some entities: {}",
            some.join(", ")
        ))
    })?;
    let node = &g.t.nodes[g.by_id[start]];
    let aliases = g.aliases(start);
    let mut direct = BTreeSet::new();
    let mut by_type: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for a in &aliases {
        for (target, rel) in g.outgoing(a) {
            direct.insert(format!("{} --{rel}--> {}", label(g, a), label(g, target)));
            by_type
                .entry(format!("--{rel}-->"))
                .or_default()
                .insert(label(g, target));
        }
        for (source, rel) in g.incoming(a) {
            direct.insert(format!("{} --{rel}--> {}", label(g, source), label(g, a)));
            by_type
                .entry(format!("<--{rel}--"))
                .or_default()
                .insert(label(g, source));
        }
    }
    let mut result = json!({
        "entity": node.name,
        "id": node.id,
        "kind": node.kind,
        "name": node.name,
        "namespace": node.namespace,
        "aliases": aliases.iter().filter(|a| **a != start).collect::<Vec<_>>(),
        "direct_relationships": direct,
        "relationships_by_type": by_type,
    });
    let infra = backing_infrastructure(g, &aliases);
    if !infra.is_empty() {
        result["backing_infrastructure"] = json!(infra);
    }
    let apps: BTreeSet<&str> = aliases.iter().map(|a| g.app_of(a)).collect();
    let mut callers: BTreeSet<String> = apps
        .iter()
        .flat_map(|a| g.callers(a))
        .map(|c| g.name(c).to_string())
        .collect();
    let callees: BTreeSet<String> = apps
        .iter()
        .flat_map(|a| g.callees(a))
        .map(|c| g.name(c).to_string())
        .collect();
    let dependent_pods: BTreeSet<&str> = aliases
        .iter()
        .flat_map(|a| g.sources(a, "depends_on"))
        .filter(|s| g.kind(s) == "Pod")
        .collect();
    let workloads: BTreeSet<String> = dependent_pods
        .iter()
        .map(|p| g.name(g.workload_of(p)).to_string())
        .collect();
    callers.extend(workloads.iter().cloned());
    let mut to_root = chains_to(g, &apps);
    if to_root.is_empty() && !workloads.is_empty() {
        to_root = workloads
            .iter()
            .map(|w| format!("{w} -> {} (infra)", node.name))
            .collect();
    }
    let to_leaf = chains_from(g, &apps);
    result["callers"] = json!(callers);
    result["callees"] = json!(callees);
    result["call_chains_to_root"] = json!(
        to_root
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .take(MAX_CHAINS)
            .collect::<Vec<_>>()
    );
    result["call_chains_to_leaf"] = json!(
        to_leaf
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .take(MAX_CHAINS)
            .collect::<Vec<_>>()
    );
    if !dependent_pods.is_empty() {
        result["used_by_infra"] = json!({
            "pods": dependent_pods.iter().map(|p| g.name(p)).collect::<BTreeSet<_>>(),
            "deployments": workloads,
        });
    }
    Ok(result)
}

/// Namespace → workload → ReplicaSet → Pod → Node behind a Service (through its endpoints) or a
/// workload.
fn backing_infrastructure(g: &Graph, aliases: &BTreeSet<&str>) -> Vec<String> {
    let mut pods: BTreeSet<&str> = BTreeSet::new();
    let mut workloads: BTreeSet<&str> = BTreeSet::new();
    for a in aliases {
        match g.kind(a) {
            "Service" => {
                for ep in g.targets(a, "contains") {
                    pods.extend(
                        g.targets(ep, "contains")
                            .into_iter()
                            .filter(|p| g.kind(p) == "Pod"),
                    );
                }
            }
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
                workloads.insert(a);
            }
            "Pod" => {
                pods.insert(a);
            }
            _ => {}
        }
    }
    for p in &pods {
        workloads.insert(g.workload_of(p));
    }
    let mut chain = BTreeSet::new();
    let mut walk = vec![];
    for w in workloads {
        for ns in g
            .sources(w, "contains")
            .into_iter()
            .filter(|s| g.kind(s) == "Namespace")
        {
            chain.insert(format!("{ns} --contains--> {w}"));
        }
        walk.push(w);
    }
    while let Some(at) = walk.pop() {
        for child in g.targets(at, "contains") {
            match g.kind(child) {
                "ReplicaSet" | "Pod" => {
                    chain.insert(format!("{at} --contains--> {child}"));
                    walk.push(child);
                }
                _ => {}
            }
        }
        if g.kind(at) == "Pod" {
            for node in g
                .sources(at, "contains")
                .into_iter()
                .filter(|s| g.kind(s) == "Node")
            {
                chain.insert(format!("{node} --contains--> {at}"));
            }
        }
    }
    chain.into_iter().collect()
}

pub fn analysis(source: &Source, p: AnalysisParams) -> Result<Value> {
    source.derived::<Graph>()?.analyse(&p.entity)
}
