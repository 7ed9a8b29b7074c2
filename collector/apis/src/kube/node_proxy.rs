//! `GET /api/v1/nodes/{node}/proxy/...`: what the apiserver's proxy to a node's kubelet reaches.
//! The kubelet's Summary API (`stats/summary`, which MCP servers' node tools read) is answered
//! from the same cAdvisor readings as the resource metrics API; a node whose kubelet stopped
//! posting its status cannot be reached, and the proxy says so as the apiserver does. Other kubelet
//! paths answer as the kubelet does for a path it does not serve.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::metrics::usage::{self, Readings, Scope, Usage};
use super::objects::served;
use super::{KubeFacade, json_response, status};
use schemas::time::{Reading, rfc3339};

pub fn serve(f: &KubeFacade, node: &str, path: &[&str]) -> Response {
    let clock = f.clock.read();
    let (Some(nodes), Some(pod_res)) = (
        f.registry.find("", "v1", "nodes"),
        f.registry.find("", "v1", "pods"),
    ) else {
        return status::no_such_resource();
    };
    // Served as the API serves them: times moved by the clock's shift.
    let (object, pods) = {
        let objects = f.objects.read();
        let Some(object) = objects.state.get("v1", "Node", "", node) else {
            return status::not_found("nodes", node);
        };
        let pods: Vec<Value> = objects
            .state
            .objects("v1", "Pod")
            .filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node))
            .map(|p| served(pod_res, p, &clock))
            .collect();
        (served(nodes, object, &clock), pods)
    };
    if let Some(refused) = kubelet_unreachable(&object) {
        return status::status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            format!("error trying to reach service: {refused}"),
        );
    }
    match path {
        ["stats", "summary"] => {
            let Some(metrics) = &f.metrics else {
                return status::status(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "ServiceUnavailable",
                    "the server is currently unable to handle the request",
                );
            };
            let readings = {
                let store = metrics.read();
                usage::read(
                    &**store,
                    clock.virtual_now_ms(),
                    Scope {
                        nodes: true,
                        ..Scope::default()
                    },
                )
            };
            json_response(StatusCode::OK, &summary(&object, &pods, &readings, &clock))
        }
        _ => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "404 page not found\n",
        )
            .into_response(),
    }
}

/// The connection error the apiserver meets dialing the node's kubelet, when the kubelet stopped
/// posting its status (a stopped kubelet leaves `Ready` Unknown); `None` when it answers.
pub(super) fn kubelet_unreachable(node: &Value) -> Option<String> {
    let stopped = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "Unknown");
    if !stopped {
        return None;
    }
    let ip = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
        .and_then(|a| a["address"].as_str())
        .or_else(|| node.pointer("/metadata/name").and_then(Value::as_str))
        .unwrap_or_default();
    Some(format!("dial tcp {ip}:10250: connect: connection refused"))
}

fn cpu(u: &Usage, clock: &Reading) -> Value {
    json!({
        "time": rfc3339(clock.serve(u.time_ms * 1_000_000)),
        "usageNanoCores": u.cpu_nanocores,
        "usageCoreNanoSeconds": u.cpu_core_nanos,
    })
}

fn memory(u: &Usage, clock: &Reading) -> Value {
    json!({
        "time": rfc3339(clock.serve(u.time_ms * 1_000_000)),
        "workingSetBytes": u.memory_bytes,
    })
}

/// The kubelet's `stats/v1alpha1` Summary: the node's CPU and memory, and each of its pods' with
/// their containers'. Network, filesystem and volume stats are not recorded and are left out.
fn summary(node: &Value, pods: &[Value], r: &Readings, clock: &Reading) -> Value {
    let name = node.pointer("/metadata/name").cloned().unwrap_or_default();
    let mut out_node = json!({
        "nodeName": name,
        "systemContainers": [],
        "startTime": node.pointer("/metadata/creationTimestamp").cloned().unwrap_or_default(),
    });
    if let Some(u) = name.as_str().and_then(|n| r.nodes.get(n)) {
        out_node["cpu"] = cpu(u, clock);
        out_node["memory"] = memory(u, clock);
    }
    let pods: Vec<Value> = pods.iter().filter_map(|p| pod_stats(p, r, clock)).collect();
    json!({"node": out_node, "pods": pods})
}

fn pod_stats(pod: &Value, r: &Readings, clock: &Reading) -> Option<Value> {
    let ns = pod.pointer("/metadata/namespace")?.as_str()?;
    let name = pod.pointer("/metadata/name")?.as_str()?;
    let statuses = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array);
    let mut total: Option<Usage> = None;
    let containers: Vec<Value> = statuses
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let cname = s.get("name")?.as_str()?;
            let u = r.container(ns, name, cname)?;
            total.get_or_insert_default().add(u);
            Some(json!({
                "name": cname,
                "startTime": s.pointer("/state/running/startedAt").cloned().unwrap_or_default(),
                "cpu": cpu(u, clock),
                "memory": memory(u, clock),
            }))
        })
        .collect();
    let total = total?;
    Some(json!({
        "podRef": {"name": name, "namespace": ns, "uid": pod.pointer("/metadata/uid").cloned().unwrap_or_default()},
        "startTime": pod.pointer("/status/startTime").cloned().unwrap_or_default(),
        "containers": containers,
        "cpu": cpu(&total, clock),
        "memory": memory(&total, clock),
    }))
}
