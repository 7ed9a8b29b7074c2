//! `k8s_spec_change_analysis` and `get_k8_spec` over the objects table (every observed version
//! of every object, with how it was observed: added, modified, deleted).
//!
//! The diff is ITBench's: churn fields dropped (resourceVersion, managedFields, uid, status,
//! conditions, anything named like a timestamp, time-valued annotations), lists of named items
//! keyed by name, then a recursive comparison of consecutive versions. What differs: lifecycle
//! comes from the recorded change itself (ITBench infers it from timestamps in the body or from
//! when an object stops being observed), and an entity's kind and namespace are not swapped.

use std::collections::BTreeMap;

use polars::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::frame::{collect, ints, strings, strings_or_empty};
use crate::params::{ObjectId, Window, de_bool, de_usize, entity_id, limit, served};
use crate::{Error, Result, Source};
use schemas::tables::Table;
use schemas::tables::columns::objects as c;
use schemas::time::Reading;

pub const CHANGES: &str = "Spec changes of Kubernetes objects over time, timestamp churn filtered out: per entity the diffs between consecutive observed versions (path, type added/removed/changed, old, new), plus entity_added / entity_removed when the object was created or deleted in the window. Identifier: 'namespace/kind/name' (preferred), 'kind/name' or 'name'; all objects when absent. Example: k8_object_name='otel-demo/ConfigMap/flagd-config'. Example: start_time='2025-12-15T17:20:00Z' for what changed since then.";

pub const SPEC: &str = "The Kubernetes object as last observed (or every observation): 'namespace/kind/name' (preferred), 'kind/name' or 'name' (ambiguous forms return every match). Example: k8_object_name='otel-demo/Deployment/cart'.";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ChangeParams {
    /// Ignored: the objects are the session's (accepted so ITBench prompts work).
    #[serde(default, rename = "k8s_objects_file")]
    pub _k8s_objects_file: Option<Value>,
    /// 'namespace/kind/name', 'kind/name' or 'name'; every object when absent.
    #[serde(default)]
    pub k8_object_name: Option<String>,
    /// ISO 8601 start of the window.
    #[serde(default)]
    pub start_time: Option<String>,
    /// ISO 8601 end of the window.
    #[serde(default)]
    pub end_time: Option<String>,
    /// Most change items per diff.
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub max_changes_per_diff: Option<usize>,
    /// Include the first observed (cleaned) spec (default true).
    #[serde(default, deserialize_with = "de_bool")]
    #[schemars(with = "Option<bool>")]
    pub include_reference_spec: Option<bool>,
    /// Include a flat list of every change item (default true).
    #[serde(default, deserialize_with = "de_bool")]
    #[schemars(with = "Option<bool>")]
    pub include_flat_change_items: Option<bool>,
    /// Most entities returned.
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub limit: Option<usize>,
    /// Entities skipped (paging).
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub offset: Option<usize>,
    /// Include entities without changes (default false).
    #[serde(default, deserialize_with = "de_bool")]
    #[schemars(with = "Option<bool>")]
    pub include_no_change: Option<bool>,
    /// entity (default) or change_count.
    #[serde(default)]
    pub sort_by: Option<String>,
    /// observation (the time a version was observed; the only basis datasets support).
    #[serde(default)]
    pub time_basis: Option<String>,
    /// Accepted for ITBench prompts; lifecycle comes from the recorded changes.
    #[serde(default, rename = "lifecycle_inference")]
    pub _lifecycle_inference: Option<Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SpecParams {
    /// Ignored: the objects are the session's.
    #[serde(default, rename = "k8s_objects_file")]
    pub _k8s_objects_file: Option<Value>,
    /// 'namespace/kind/name', 'kind/name' or 'name'.
    pub k8_object_name: String,
    /// Every observation instead of the latest (default false).
    #[serde(default, deserialize_with = "de_bool")]
    #[schemars(with = "Option<bool>")]
    pub return_all_observations: Option<bool>,
    /// Include metadata (default true).
    #[serde(default, deserialize_with = "de_bool")]
    #[schemars(with = "Option<bool>")]
    pub include_metadata: Option<bool>,
}

/// One observed version.
pub struct Version {
    pub observed: i64,
    pub change: String,
    pub resource_version: String,
    pub body: String,
}

/// Versions per entity: (kind, namespace, name) → versions in time order.
pub type Entities = BTreeMap<(String, Option<String>, String), Vec<Version>>;

fn lower(column: &str) -> Expr {
    col(column).str().to_lowercase()
}

/// The versions of the objects an identifier names (every object when none), observed in the
/// window, each entity's led by the last version seen before the window's start (the baseline a
/// change in the window is a change from: an object edited once at the onset and asked about
/// from just before it has changed). ITBench falls back to a substring of the entity id when
/// nothing matches exactly.
pub fn load(source: &Source, id: Option<&ObjectId>, window: &Window) -> Result<Entities> {
    let until = Window {
        start: None,
        end: window.end,
    };
    let base = || -> Result<LazyFrame> {
        let mut lf = source.scan(Table::Objects)?;
        if let Some(pred) = until.predicate(c::OBSERVED) {
            lf = lf.filter(pred);
        }
        Ok(lf)
    };
    let exact = |id: &ObjectId| {
        let mut pred = lower(c::NAME).eq(lit(id.name.to_ascii_lowercase()));
        if let Some(k) = &id.kind {
            pred = pred.and(lower(c::KIND).eq(lit(k.to_ascii_lowercase())));
        }
        if let Some(ns) = &id.namespace {
            pred = pred.and(lower(c::NAMESPACE).eq(lit(ns.to_ascii_lowercase())));
        }
        pred
    };
    let mut entities = match id {
        Some(id) => read(base()?.filter(exact(id)))?,
        None => read(base()?)?,
    };
    if entities.is_empty()
        && let Some(id) = id
    {
        let part = id.name.to_ascii_lowercase();
        entities = read(base()?.filter(lower(c::NAME).str().contains_literal(lit(part))))?;
    }
    if let Some(start) = window.start {
        entities.retain(|_, versions| {
            let before = versions.iter().take_while(|v| v.observed < start).count();
            versions.drain(..before.saturating_sub(1));
            // Only an entity observed in the window is in the answer.
            versions.last().is_some_and(|v| v.observed >= start)
        });
    }
    Ok(entities)
}

fn read(lf: LazyFrame) -> Result<Entities> {
    let df = collect(lf.select([
        col(c::KIND),
        col(c::NAMESPACE),
        col(c::NAME),
        col(c::OBSERVED).cast(DataType::Int64).alias("_t"),
        col(c::CHANGE),
        col(c::RESOURCE_VERSION),
        col(c::OBJECT),
    ]))?;
    let kinds = strings_or_empty(&df, c::KIND)?;
    let namespaces = strings(&df, c::NAMESPACE)?;
    let names = strings_or_empty(&df, c::NAME)?;
    let times = ints(&df, "_t")?;
    let changes = strings_or_empty(&df, c::CHANGE)?;
    let rvs = strings_or_empty(&df, c::RESOURCE_VERSION)?;
    let bodies = strings_or_empty(&df, c::OBJECT)?;
    let mut out: Entities = BTreeMap::new();
    for i in 0..df.height() {
        out.entry((
            kinds[i].clone(),
            namespaces[i].clone().filter(|n| !n.is_empty()),
            names[i].clone(),
        ))
        .or_default()
        .push(Version {
            observed: times[i].unwrap_or(0),
            change: changes[i].clone(),
            resource_version: rvs[i].clone(),
            body: bodies[i].clone(),
        });
    }
    for versions in out.values_mut() {
        versions.sort_by_key(|v| v.observed);
    }
    Ok(out)
}

const IGNORED: [&str; 19] = [
    "resourceVersion",
    "managedFields",
    "generation",
    "uid",
    "selfLink",
    "creationTimestamp",
    "time",
    "lastTransitionTime",
    "lastUpdateTime",
    "lastProbeTime",
    "lastHeartbeatTime",
    "observedGeneration",
    "containerStatuses",
    "conditions",
    "podIP",
    "podIPs",
    "hostIP",
    "startTime",
    "status",
];

const IGNORED_ANNOTATIONS: [&str; 3] = [
    "endpoints.kubernetes.io/last-change-trigger-time",
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
];

/// ITBench's cleaning: churn fields dropped, empty objects and lists dropped.
pub fn clean(v: &Value) -> Option<Value> {
    match v {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, child) in map {
                let kl = k.to_ascii_lowercase();
                if IGNORED.contains(&k.as_str())
                    || (kl != "deletiontimestamp"
                        && (kl.ends_with("timestamp")
                            || kl.ends_with("time")
                            || kl.ends_with("date")))
                {
                    continue;
                }
                if k == "annotations"
                    && let Value::Object(a) = child
                {
                    let kept: Map<String, Value> = a
                        .iter()
                        .filter(|(ak, _)| {
                            !IGNORED_ANNOTATIONS.contains(&ak.as_str())
                                && !ak.to_ascii_lowercase().contains("time")
                        })
                        .map(|(ak, av)| (ak.clone(), av.clone()))
                        .collect();
                    if !kept.is_empty() {
                        out.insert(k.clone(), Value::Object(kept));
                    }
                    continue;
                }
                if let Some(c) = clean(child) {
                    out.insert(k.clone(), c);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Value::Array(items) => {
            let kept: Vec<Value> = items.iter().filter_map(clean).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        other => Some(other.clone()),
    }
}

/// Lists of objects that all carry a unique string `name` become maps keyed by it, so diffs
/// say `containers.cart.image` rather than `containers[0].image`.
pub fn keyed(v: Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, keyed(v))).collect()),
        Value::Array(items) => {
            let named: Option<Vec<&str>> = items
                .iter()
                .map(|i| i.get("name").and_then(Value::as_str))
                .collect();
            match named {
                Some(names)
                    if !items.is_empty()
                        && names
                            .iter()
                            .collect::<std::collections::BTreeSet<_>>()
                            .len()
                            == names.len() =>
                {
                    let names: Vec<String> = names.into_iter().map(str::to_string).collect();
                    Value::Object(
                        items
                            .into_iter()
                            .zip(names)
                            .map(|(mut item, name)| {
                                if let Value::Object(m) = &mut item {
                                    m.remove("name");
                                }
                                (name, keyed(item))
                            })
                            .collect(),
                    )
                }
                _ => Value::Array(items.into_iter().map(keyed).collect()),
            }
        }
        other => other,
    }
}

/// ITBench's recursive diff: keys added/removed/changed, lists replaced whole when their lengths
/// differ, else compared element by element.
pub fn diff(old: &Value, new: &Value, path: &str, out: &mut Vec<Value>) {
    let here = || {
        if path.is_empty() {
            "root".to_string()
        } else {
            path.to_string()
        }
    };
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (a.get(k), b.get(k)) {
                    (None, Some(n)) => out.push(json!({"path": sub, "type": "added", "new": n})),
                    (Some(o), None) => out.push(json!({"path": sub, "type": "removed", "old": o})),
                    (Some(o), Some(n)) => diff(o, n, &sub, out),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (o, n)) in a.iter().zip(b).enumerate() {
                diff(o, n, &format!("{path}[{i}]"), out);
            }
        }
        (o, n) if o != n => {
            out.push(json!({"path": here(), "type": "changed", "old": o, "new": n}))
        }
        _ => {}
    }
}

/// A cleaned spec of a version, its times shifted as served.
fn spec_of(body: &str, reading: &Reading) -> Value {
    let mut v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    schemas::time::shift_object_times(&mut v, reading.shift_ns);
    keyed(clean(&v).unwrap_or(Value::Null))
}

pub fn changes(source: &Source, p: ChangeParams) -> Result<Value> {
    let reading = source.reading();
    let window = Window::parse(p.start_time.as_deref(), p.end_time.as_deref(), &reading)?;
    match p.time_basis.as_deref() {
        None | Some("") | Some("observation") | Some("effective_update") => {}
        Some(other) => {
            return Err(Error::param(format!(
                "time_basis `{other}`: expected observation"
            )));
        }
    }
    let id = p
        .k8_object_name
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(|s| ObjectId::parse(s, "k8_object_name"))
        .transpose()?;
    let entities = load(source, id.as_ref(), &window)?;
    if entities.is_empty() {
        return Err(Error::param(match &p.k8_object_name {
            Some(n) => format!("no objects matching `{n}` in the window; try namespace/kind/name"),
            None => "no objects in the window".to_string(),
        }));
    }
    let first_seen = entities
        .values()
        .filter_map(|v| v.first())
        .map(|v| v.observed)
        .min()
        .unwrap_or(0);
    let include_reference = p.include_reference_spec.unwrap_or(true);
    let include_flat = p.include_flat_change_items.unwrap_or(true);
    let include_no_change = p.include_no_change.unwrap_or(false);
    let mut results: Vec<Value> = Vec::new();
    for ((kind, namespace, name), versions) in &entities {
        let entity = entity_id(kind, namespace.as_deref(), name);
        let mut windows: Vec<Value> = Vec::new();
        for v in versions {
            // The baseline before the window is no event of the window.
            if window.start.is_some_and(|start| v.observed < start) {
                continue;
            }
            let created_during =
                v.change == "added" && (window.start.is_some() || v.observed > first_seen);
            if created_during || v.change == "deleted" {
                let (kind_of, key) = if v.change == "added" {
                    ("entity_added", "new")
                } else {
                    ("entity_removed", "old")
                };
                windows.push(json!({
                    "timestamp": served(&reading, v.observed),
                    "from_timestamp": null,
                    "changes_truncated": false,
                    "change_item_count": 1,
                    "change_item_total": 1,
                    "changes": [{"path": "entity", "type": kind_of, key: entity, "inferred": false,
                                 "source": "recorded_change", "resourceVersion": v.resource_version}],
                }));
            }
        }
        let mut items: Vec<Value> = Vec::new();
        let specs: Vec<Value> = if versions.len() >= 2 || include_reference {
            versions
                .iter()
                .map(|v| spec_of(&v.body, &reading))
                .collect()
        } else {
            Vec::new()
        };
        for i in 1..specs.len() {
            if specs[i] == specs[i - 1] {
                continue;
            }
            let mut d = Vec::new();
            diff(&specs[i - 1], &specs[i], "", &mut d);
            if d.is_empty() {
                continue;
            }
            let total = d.len();
            if let Some(max) = p.max_changes_per_diff.filter(|m| *m > 0) {
                d.truncate(max);
            }
            let (ts, from) = (
                served(&reading, versions[i].observed),
                served(&reading, versions[i - 1].observed),
            );
            if include_flat {
                for item in &d {
                    let mut flat = json!({"timestamp": ts, "from_timestamp": from});
                    if let (Value::Object(f), Value::Object(it)) = (&mut flat, item) {
                        f.extend(it.clone());
                    }
                    items.push(flat);
                }
            }
            windows.push(json!({
                "timestamp": ts,
                "from_timestamp": from,
                "changes_truncated": d.len() < total,
                "change_item_count": d.len(),
                "change_item_total": total,
                "changes": d,
            }));
        }
        if windows.is_empty() && !include_no_change {
            continue;
        }
        let (first, last) = (versions[0].observed, versions[versions.len() - 1].observed);
        let mut out = json!({
            "entity": entity,
            "kind": kind,
            "namespace": namespace.clone().unwrap_or_default(),
            "name": name,
            "time_basis": "observation",
            "first_timestamp": served(&reading, first),
            "last_timestamp": served(&reading, last),
            "observation_count": versions.len(),
            "duration_sec": (last - first) as f64 / 1e9,
            "change_count": windows.len(),
            "changes": windows,
        });
        if include_reference && let Some(s) = specs.first() {
            out["reference_spec"] = json!({"timestamp": served(&reading, first), "spec": s});
        }
        if include_flat {
            out["change_item_count"] = items.len().into();
            out["change_items"] = Value::Array(items);
        }
        results.push(out);
    }
    Ok(change_report(
        results,
        p.sort_by.as_deref(),
        p.offset.unwrap_or(0),
        limit(p.limit),
        entities.len(),
    ))
}

/// ITBench's answer around the entities with changes: totals, paging, the page as a list and
/// as a map keyed by entity.
fn change_report(
    mut results: Vec<Value>,
    sort_by: Option<&str>,
    offset: usize,
    limit: Option<usize>,
    observed: usize,
) -> Value {
    let count = |e: &Value| e["change_count"].as_u64().unwrap_or(0);
    let items = |e: &Value| -> u64 {
        e["changes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| w["change_item_total"].as_u64().unwrap_or(0))
            .sum()
    };
    match sort_by {
        Some("change_count") => results.sort_by(|a, b| {
            count(b)
                .cmp(&count(a))
                .then(a["entity"].as_str().cmp(&b["entity"].as_str()))
        }),
        _ => results.sort_by_key(|e| {
            e["entity"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase()
        }),
    }
    let total_events: u64 = results.iter().map(count).sum();
    let total_items: u64 = results.iter().map(items).sum();
    let total = results.len();
    let page: Vec<Value> = results
        .into_iter()
        .skip(offset)
        .take(limit.unwrap_or(usize::MAX))
        .collect();
    let mut map = Map::new();
    for e in &page {
        let changes: Map<String, Value> = e["changes"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, w)| {
                (
                    format!(
                        "{} (from {})#{i}",
                        w["timestamp"].as_str().unwrap_or(""),
                        w["from_timestamp"].as_str().unwrap_or("None")
                    ),
                    w.clone(),
                )
            })
            .collect();
        map.insert(
            e["entity"].as_str().unwrap_or_default().to_string(),
            json!({
                "kind": e["kind"], "namespace": e["namespace"], "name": e["name"],
                "first_timestamp": e["first_timestamp"], "last_timestamp": e["last_timestamp"],
                "observation_count": e["observation_count"], "duration_sec": e["duration_sec"],
                "change_event_count": e["change_count"], "reference_spec": e["reference_spec"],
                "changes_detected": changes,
            }),
        );
    }
    json!({
        "input_format": "faultline_objects",
        "sort_by": sort_by.unwrap_or("entity"),
        "total_entities_observed": observed,
        "num_entities_with_changes": total,
        "entities_with_changes_returned": page.len(),
        "entity_order": page.iter().map(|e| e["entity"].clone()).collect::<Vec<_>>(),
        "total_change_events": total_events,
        "returned_change_events": page.iter().map(count).sum::<u64>(),
        "total_change_item_total": total_items,
        "returned_change_item_total": page.iter().map(items).sum::<u64>(),
        "total_entities": total,
        "returned_count": page.len(),
        "offset": offset,
        "limit": limit,
        "entities_with_changes": page,
        "entities": map,
    })
}

pub fn spec(source: &Source, p: SpecParams) -> Result<Value> {
    let reading = source.reading();
    let id = ObjectId::parse(&p.k8_object_name, "k8_object_name")?;
    let entities = load(source, Some(&id), &Window::default())?;
    if entities.is_empty() {
        return Err(Error::param(format!(
            "no objects matching `{}`; try namespace/kind/name",
            p.k8_object_name
        )));
    }
    let all = p.return_all_observations.unwrap_or(false);
    let with_meta = p.include_metadata.unwrap_or(true);
    let body = |v: &Version| -> Value {
        let mut b: Value = serde_json::from_str(&v.body).unwrap_or(Value::Null);
        schemas::time::shift_object_times(&mut b, reading.shift_ns);
        if !with_meta && let Value::Object(m) = &mut b {
            m.remove("metadata");
        }
        b
    };
    let observation = |(kind, ns, name): &(String, Option<String>, String), v: &Version| {
        json!({
            "timestamp": served(&reading, v.observed),
            "entity_id": entity_id(kind, ns.as_deref(), name),
            "kind": kind, "namespace": ns.clone().unwrap_or_default(), "name": name,
            "change": v.change,
            "spec": body(v),
        })
    };
    let mut out = json!({
        "k8_object_name": p.k8_object_name,
        "identifier_format": id.format(),
        "found": true,
    });
    if let Some(w) = id.warning(&p.k8_object_name) {
        out["warning"] = w.into();
    }
    if entities.len() > 1 {
        let ids: Vec<String> = entities
            .keys()
            .map(|(k, n, m)| entity_id(k, n.as_deref(), m))
            .collect();
        out["matched_entities"] = json!(ids);
        out["matched_entity_count"] = entities.len().into();
        out["entity_count"] = entities.len().into();
        let mut map = Map::new();
        for (key, versions) in &entities {
            let latest = versions.last().expect("an entity has a version");
            let mut e = json!({
                "kind": key.0, "namespace": key.1.clone().unwrap_or_default(), "name": key.2,
                "observation_count": versions.len(),
                "first_timestamp": served(&reading, versions[0].observed),
                "last_timestamp": served(&reading, latest.observed),
                "latest_spec": body(latest),
            });
            if all {
                e["all_observations"] = versions.iter().map(|v| observation(key, v)).collect();
            }
            map.insert(entity_id(&key.0, key.1.as_deref(), &key.2), e);
        }
        out["entities"] = Value::Object(map);
        return Ok(out);
    }
    let (key, versions) = entities.iter().next().expect("one entity");
    out["observation_count"] = versions.len().into();
    if all {
        out["first_timestamp"] = served(&reading, versions[0].observed).into();
        out["last_timestamp"] = served(&reading, versions[versions.len() - 1].observed).into();
        out["observations"] = versions.iter().map(|v| observation(key, v)).collect();
    } else if let Value::Object(latest) = observation(key, versions.last().expect("a version")) {
        out.as_object_mut().expect("object").extend(latest);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn churn_is_dropped_and_named_lists_are_keyed() {
        let v = json!({
            "metadata": {"name": "cart", "resourceVersion": "9", "creationTimestamp": "x",
                         "annotations": {"deployment.kubernetes.io/revision": "3", "team": "a"}},
            "spec": {"template": {"spec": {"containers": [{"name": "cart", "image": "c:1", "timeoutSeconds": 5}]}}},
            "status": {"replicas": 1},
        });
        let cleaned = keyed(clean(&v).unwrap());
        assert_eq!(
            cleaned,
            json!({"metadata": {"name": "cart", "annotations": {"team": "a"}},
                   "spec": {"template": {"spec": {"containers": {"cart": {"image": "c:1", "timeoutSeconds": 5}}}}}})
        );
    }

    #[test]
    fn diffs_name_paths_and_values() {
        let a = json!({"data": {"flag": "off"}, "spec": {"ports": [1, 2]}, "x": 1});
        let b = json!({"data": {"flag": "on"}, "spec": {"ports": [1]}, "y": 2});
        let mut d = Vec::new();
        diff(&a, &b, "", &mut d);
        assert_eq!(
            d,
            vec![
                json!({"path": "data.flag", "type": "changed", "old": "off", "new": "on"}),
                json!({"path": "spec.ports", "type": "changed", "old": [1, 2], "new": [1]}),
                json!({"path": "x", "type": "removed", "old": 1}),
                json!({"path": "y", "type": "added", "new": 2}),
            ]
        );
    }
}
