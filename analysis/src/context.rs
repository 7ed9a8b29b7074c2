//! `get_context_contract`: everything about one entity from every tool, and its dependencies'
//! events and spec changes page by page, as ITBench's tool composes it. Dependencies are the
//! entity's `calls` and `depends_on` edges (its own and its first pods'), plus one transitive hop.
//! (ITBench's version finds no dependencies on raw snapshots, whose topology is one node, and
//! loses its alerts to an undefined name.)

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::params::{ObjectId, de_usize};
use crate::topology::graph;
use crate::{Result, Source, run};

pub const DESCRIPTION: &str = "Full operational context of one Kubernetes entity in one call: events, related alerts, trace error tree, metric anomalies, log patterns, the latest spec and its changes, and its dependencies (calls and depends_on, one transitive hop). Page 1 (default) is the entity, pages 2+ give deps_per_page dependencies' events and spec changes, page 0 everything. Example: k8_object='otel-demo/Service/cart', start_time='2025-12-15T17:20:00Z'.";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Params {
    /// 'namespace/kind/name' (preferred), 'kind/name' or 'name'.
    pub k8_object: String,
    /// Ignored: the data is the session's (accepted so ITBench prompts work).
    #[serde(default, rename = "snapshot_dir")]
    pub _snapshot_dir: Option<Value>,
    /// Ignored: the topology is built from the session's data.
    #[serde(default, rename = "topology_file")]
    pub _topology_file: Option<Value>,
    /// ISO 8601 start of the window (also the trace pivot).
    #[serde(default)]
    pub start_time: Option<String>,
    /// ISO 8601 end of the window.
    #[serde(default)]
    pub end_time: Option<String>,
    /// 0 = everything, 1 = the entity (default), 2+ = dependencies.
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub page: Option<usize>,
    /// Dependencies per page from page 2 (default 3).
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub deps_per_page: Option<usize>,
}

/// A sub-tool's answer, or its error as text.
fn call(source: &Source, tool: &str, args: Value) -> std::result::Result<Value, String> {
    run(source, tool, args).map_err(|e| e.to_string())
}

/// Adds `key` (or `key_error`) to the answer.
fn put(out: &mut Value, key: &str, answer: std::result::Result<Value, String>) {
    match answer {
        Ok(v) => out[key] = v,
        Err(e) => out[format!("{key}_error")] = e.into(),
    }
}

fn window(start: &Option<String>, end: &Option<String>) -> Value {
    let mut w = json!({});
    if let Some(s) = start {
        w["start_time"] = s.clone().into();
    }
    if let Some(e) = end {
        w["end_time"] = e.clone().into();
    }
    w
}

fn with(mut base: Value, extra: Value) -> Value {
    if let (Value::Object(b), Value::Object(e)) = (&mut base, extra) {
        b.extend(e);
    }
    base
}

/// Functional dependencies in a topology answer: callees, `calls` and `depends_on` targets.
fn functional(topo: &Value) -> BTreeSet<String> {
    let mut deps: BTreeSet<String> = topo["callees"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().map(|c| format!("App/{c}")))
        .collect();
    if let Some(types) = topo["relationships_by_type"].as_object() {
        for (rel, targets) in types {
            if rel == "--calls-->" || rel == "--depends_on-->" {
                deps.extend(
                    targets
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|t| t.as_str().map(str::to_string)),
                );
            }
        }
    }
    deps
}

fn pods_behind(topo: &Value, n: usize) -> Vec<String> {
    topo["backing_infrastructure"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| {
            l.as_str()?
                .split_once("--contains--> ")
                .map(|(_, p)| p.to_string())
        })
        .filter(|p| p.contains("/Pod/"))
        .take(n)
        .collect()
}

/// Direct and one-hop transitive dependencies of an entity.
fn dependencies(
    source: &Source,
    query: &str,
) -> Result<(Value, BTreeSet<String>, BTreeSet<String>)> {
    let graph = graph(source)?;
    let topo = graph.analyse(query)?;
    let mut direct = functional(&topo);
    for pod in pods_behind(&topo, 3) {
        if let Ok(t) = graph.analyse(&pod) {
            direct.extend(functional(&t));
        }
    }
    let mut transitive = BTreeSet::new();
    for dep in &direct {
        let Ok(t) = graph.analyse(dep.trim_start_matches("App/")) else {
            continue;
        };
        let mut more = functional(&t);
        for pod in pods_behind(&t, 2) {
            if let Ok(pt) = graph.analyse(&pod) {
                more.extend(functional(&pt));
            }
        }
        transitive.extend(more.into_iter().filter(|d| {
            !direct.contains(d)
                && !d.ends_with(&format!("/{}", topo["name"].as_str().unwrap_or_default()))
        }));
    }
    Ok((topo, direct, transitive))
}

/// Events and spec changes of one dependency.
fn dependency_context(source: &Source, dep: &str, w: &Value) -> Value {
    let id = ObjectId::parse(dep, "dependency").ok();
    let name = id.as_ref().map_or(dep.to_string(), |i| i.name.clone());
    let filter = if id
        .as_ref()
        .and_then(|i| i.kind.as_deref())
        .is_some_and(|k| k != "App")
    {
        json!({"object_name": name})
    } else {
        json!({"deployment": name})
    };
    let mut out = json!({"entity": dep});
    put(
        &mut out,
        "events",
        call(
            source,
            "event_analysis",
            with(json!({"filters": filter, "limit": 10}), w.clone()),
        ),
    );
    if !dep.starts_with("App/") {
        put(
            &mut out,
            "spec_changes",
            call(
                source,
                "k8s_spec_change_analysis",
                with(
                    json!({"k8_object_name": dep, "include_reference_spec": false}),
                    w.clone(),
                ),
            ),
        );
    }
    out
}

/// The entity's own context (page 1).
fn entity_context(source: &Source, p: &Params, id: &ObjectId, out: &mut Value) {
    let w = window(&p.start_time, &p.end_time);
    let workloadish = id.kind.as_deref().is_none_or(|k| {
        matches!(
            k.to_ascii_lowercase().as_str(),
            "deployment" | "service" | "app" | "statefulset" | "daemonset"
        )
    });
    let variants = id.name_variants();
    let events = variants.iter().find_map(|v| {
        let filter = if workloadish {
            json!({"deployment": v})
        } else {
            json!({"object_name": v})
        };
        call(
            source,
            "event_analysis",
            with(json!({"filters": filter}), w.clone()),
        )
        .ok()
        .filter(|e| e["total_count"].as_u64().unwrap_or(0) > 0)
    });
    out["events"] = events.unwrap_or_else(|| json!({"total_count": 0, "data": []}));
    match call(source, "alert_analysis", w.clone()) {
        Ok(alerts) => {
            let all = alerts["data"].as_array().cloned().unwrap_or_default();
            let related: Vec<Value> = all
                .iter()
                .filter(|a| {
                    variants
                        .iter()
                        .any(|v| a.to_string().to_ascii_lowercase().contains(v.as_str()))
                })
                .cloned()
                .collect();
            out["alerts"] = json!({
                "total_alerts": all.len(),
                "related_to_entity": related.len(),
                "items": related.iter().take(10).collect::<Vec<_>>(),
                "truncated": related.len() > 10,
            });
        }
        Err(e) => out["alerts_error"] = e.into(),
    }
    let traces = variants.iter().find_map(|v| {
        let mut args = json!({"service_name": v});
        if let Some(s) = &p.start_time {
            args["pivot_time"] = s.clone().into();
        }
        call(source, "get_trace_error_tree", args)
            .ok()
            .filter(|t| t["all_paths"].as_array().is_some_and(|a| !a.is_empty()))
    });
    out["trace_errors"] = traces.unwrap_or_else(
        || json!({"message": "No trace data found for entity", "variants_tried": variants}),
    );
    let targets: Vec<String> = match id.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("pod") | Some("service") | Some("node") => vec![format!(
            "{}/{}",
            id.kind.clone().unwrap_or_default(),
            id.name
        )],
        _ => variants
            .iter()
            .flat_map(|v| [format!("Service/{v}"), format!("Deployment/{v}")])
            .collect(),
    };
    let anomalies = targets.iter().find_map(|t| {
        call(
            source,
            "get_metric_anomalies",
            with(
                json!({"k8_object_name": t, "raw_content": false}),
                w.clone(),
            ),
        )
        .ok()
        .filter(|a| a["metrics"].as_array().is_some_and(|m| !m.is_empty()))
    });
    if let Some(a) = anomalies {
        out["metric_anomalies"] = a;
    }
    let logs = call(
        source,
        "log_analysis",
        with(
            json!({"k8_object": p.k8_object, "max_patterns": 15}),
            w.clone(),
        ),
    );
    put(out, "log_patterns", logs);
    match call(
        source,
        "get_k8_spec",
        json!({"k8_object_name": p.k8_object}),
    ) {
        Ok(mut spec) => {
            let text = spec["spec"].to_string();
            if text.len() > 2000 {
                let cut: String = text.chars().take(2000).collect();
                spec["spec"] = Value::Null;
                spec["spec_truncated"] = true.into();
                spec["spec_preview"] = format!("{cut}...").into();
            }
            out["k8s_spec"] = spec;
        }
        Err(e) => out["k8s_spec_error"] = e.into(),
    }
    put(
        out,
        "spec_changes",
        call(
            source,
            "k8s_spec_change_analysis",
            with(json!({"k8_object_name": p.k8_object}), w),
        ),
    );
}

pub fn contract(source: &Source, p: Params) -> Result<Value> {
    let id = ObjectId::parse(&p.k8_object, "k8_object")?;
    let page = p.page.unwrap_or(1);
    let per_page = p.deps_per_page.unwrap_or(3).max(1);
    let mut out = json!({
        "entity": p.k8_object,
        "identifier_format": id.format(),
        "kind": id.kind.clone().unwrap_or_else(|| "Unknown".into()),
        "namespace": id.namespace,
        "name": id.name,
        "page": page,
        "time_window": {"start": p.start_time, "end": p.end_time},
    });
    if let Some(w) = id.warning(&p.k8_object) {
        out["identifier_warning"] = w.into();
    }
    let (deps, topo) =
        match dependencies(source, &p.k8_object).or_else(|_| dependencies(source, &id.name)) {
            Ok((topo, direct, transitive)) => {
                out["dependency_breakdown"] = json!({"direct": direct, "transitive": transitive});
                let all: BTreeSet<String> = direct.union(&transitive).cloned().collect();
                (all.into_iter().collect::<Vec<_>>(), Some(topo))
            }
            Err(e) => {
                out["topology_error"] = e.to_string().into();
                (Vec::new(), None)
            }
        };
    let pages = 1 + deps.len().div_ceil(per_page);
    out["pagination"] = json!({
        "current_page": page, "total_pages": pages, "total_dependencies": deps.len(),
        "deps_per_page": per_page, "all_pages": page == 0,
    });
    let w = window(&p.start_time, &p.end_time);
    if page <= 1 {
        out["context_type"] = "main_entity".into();
        if let Some(t) = topo {
            out["topology"] = t;
        }
        entity_context(source, &p, &id, &mut out);
        out["dependencies"] = json!(deps);
        if page == 0 {
            out["context_type"] = "all".into();
            out["dependency_context"] = deps
                .iter()
                .map(|d| (d.clone(), dependency_context(source, d, &w)))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        return Ok(out);
    }
    out["context_type"] = "dependencies".into();
    let on_page: Vec<&String> = deps
        .iter()
        .skip((page - 2) * per_page)
        .take(per_page)
        .collect();
    if on_page.is_empty() {
        out["message"] = format!("No dependencies on page {page}. Total pages: {pages}").into();
        return Ok(out);
    }
    out["dependencies_on_page"] = json!(on_page);
    out["dependency_context"] = on_page
        .iter()
        .map(|d| (d.to_string(), dependency_context(source, d, &w)))
        .collect::<serde_json::Map<_, _>>()
        .into();
    Ok(out)
}
