//! The resource metrics API metrics-server serves (`metrics.k8s.io/v1beta1`, PodMetrics and
//! NodeMetrics, list and get, by namespace or across them, with label and field selectors), which
//! `kubectl top` and MCP servers' `pods_top` read. Usage comes from the cAdvisor series the
//! metrics store holds ([`usage`]), answered at the clock's now; the pods and nodes listed are
//! those the cluster holds now.

pub mod usage;

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::objects::select;
use super::{KubeFacade, Params, json_response, status};
use schemas::time::{Reading, rfc3339};
use usage::{Readings, Scope, Usage, cpu_quantity, go_duration, memory_quantity};

pub const GROUP: &str = "metrics.k8s.io";
pub const VERSION: &str = "v1beta1";

/// A request under `/apis/metrics.k8s.io/v1beta1/`: `pods` or `nodes`, listed or one by name.
pub fn serve(
    f: &KubeFacade,
    namespace: Option<&str>,
    plural: &str,
    name: Option<&str>,
    params: &Params,
) -> Response {
    let Some(metrics) = &f.metrics else {
        // No series to compute from: what an apiserver answers while metrics-server is down.
        return status::status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        );
    };
    if params.watch {
        return status::status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        );
    }
    let clock = f.clock.read();
    let scope = Scope {
        namespace,
        pod: (plural == "pods").then_some(name).flatten(),
        nodes: plural == "nodes",
    };
    let (objects, res) = {
        let kind = if plural == "pods" { "pods" } else { "nodes" };
        let Some(res) = f.registry.find("", "v1", kind).cloned() else {
            return status::no_such_resource();
        };
        let state = &f.objects.read().state;
        let mut params = params.clone();
        if let Some(name) = name {
            // One object: the same selection, narrowed to its name.
            params.field_selector = Some(format!("metadata.name={name}"));
        }
        match select(state, &res, namespace, &params) {
            Ok(objects) => (objects, res),
            Err(e) => return e,
        }
    };
    let readings = {
        let store = metrics.read();
        usage::read(&**store, clock.virtual_now_ms(), scope)
    };
    let items: Vec<Value> = objects
        .iter()
        .filter_map(|o| match res.kind.as_str() {
            "Pod" => pod_metrics(o, &readings, &clock),
            _ => node_metrics(o, &readings, &clock),
        })
        .collect();
    let kind = if res.kind == "Pod" {
        "PodMetrics"
    } else {
        "NodeMetrics"
    };
    match name {
        Some(name) => match items.into_iter().next() {
            Some(mut item) => {
                item["kind"] = kind.into();
                item["apiVersion"] = format!("{GROUP}/{VERSION}").into();
                json_response(StatusCode::OK, &item)
            }
            None => {
                // metrics-server names a pod by namespace/name in its NotFound.
                let shown = match namespace {
                    Some(ns) if res.kind == "Pod" => format!("{ns}/{name}"),
                    _ => name.to_string(),
                };
                status::not_found(&format!("{}.{GROUP}", kind.to_lowercase()), &shown)
            }
        },
        None => json_response(
            StatusCode::OK,
            &json!({
                "kind": format!("{kind}List"),
                "apiVersion": format!("{GROUP}/{VERSION}"),
                "metadata": {},
                "items": items,
            }),
        ),
    }
}

/// The metadata metrics-server gives a metrics object: the object's name, namespace and labels,
/// created now.
fn metadata(object: &Value, clock: &Reading) -> Value {
    let mut m = json!({
        "name": object.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "creationTimestamp": rfc3339(clock.served_now_ns()),
    });
    if let Some(ns) = object.pointer("/metadata/namespace") {
        m["namespace"] = ns.clone();
    }
    if let Some(labels) = object.pointer("/metadata/labels") {
        m["labels"] = labels.clone();
    }
    m
}

fn usage_json(u: &Usage) -> Value {
    json!({"cpu": cpu_quantity(u.cpu_nanocores), "memory": memory_quantity(u.memory_bytes)})
}

/// A pod's metrics: its containers (in spec order) that have a current reading; none when none
/// does, as metrics-server leaves out a pod it has no metrics for.
fn pod_metrics(pod: &Arc<Value>, r: &Readings, clock: &Reading) -> Option<Value> {
    let ns = pod.pointer("/metadata/namespace")?.as_str()?;
    let name = pod.pointer("/metadata/name")?.as_str()?;
    let mut newest: Option<Usage> = None;
    let containers: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let cname = c.get("name")?.as_str()?;
            let u = r.container(ns, name, cname)?;
            if newest.is_none_or(|n| u.time_ms > n.time_ms) {
                newest = Some(*u);
            }
            Some(json!({"name": cname, "usage": usage_json(u)}))
        })
        .collect();
    let newest = newest?;
    Some(json!({
        "metadata": metadata(pod, clock),
        "timestamp": rfc3339(clock.serve(newest.time_ms * 1_000_000)),
        "window": go_duration(newest.window_ms),
        "containers": containers,
    }))
}

fn node_metrics(node: &Arc<Value>, r: &Readings, clock: &Reading) -> Option<Value> {
    let name = node.pointer("/metadata/name")?.as_str()?;
    let u = r.nodes.get(name)?;
    Some(json!({
        "metadata": metadata(node, clock),
        "timestamp": rfc3339(clock.serve(u.time_ms * 1_000_000)),
        "window": go_duration(u.window_ms),
        "usage": usage_json(u),
    }))
}
