//! `GET .../pods/{name}/log`: container logs with the PodLogOptions kubectl sends.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{KubeFacade, Params, status};
use schemas::time::{parse_rfc3339, rfc3339_nanos};
use stores::logs::LogQuery;

pub fn pod_logs(f: &KubeFacade, namespace: &str, pod: &str, params: &Params) -> Response {
    let clock = f.clock.read();
    // Cloned out so that the objects are not locked while the logs are read.
    let object = f
        .objects
        .read()
        .state
        .get("v1", "Pod", namespace, pod)
        .cloned();
    let Some(object) = object else {
        return status::not_found("pods", pod);
    };
    // Logs come from the pod's kubelet: a node whose kubelet is down cannot serve them, and the
    // apiserver answers 500 with the dial error (clients such as `collector capture` meet this
    // during exactly the faults faultline injects).
    let node = object.pointer("/spec/nodeName").and_then(Value::as_str);
    let unreachable = node.and_then(|n| {
        f.objects
            .read()
            .state
            .get("v1", "Node", "", n)
            .and_then(|node| super::node_proxy::kubelet_unreachable(node))
    });
    if let Some(refused) = unreachable {
        return status::status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            format!(
                "Get \"https://{}:10250/containerLogs/{namespace}/{pod}\": {refused}",
                node.unwrap_or_default()
            ),
        );
    }
    let names = |list: &str| -> Vec<&str> {
        let items = object.pointer(list).and_then(Value::as_array);
        let names = items.into_iter().flatten();
        names
            .filter_map(|c| c.get("name").and_then(Value::as_str))
            .collect()
    };
    let mut containers = names("/spec/containers");
    containers.extend(names("/spec/initContainers"));
    let debuggers = names("/spec/ephemeralContainers");
    let container = match params.container.as_deref() {
        Some(c) if containers.contains(&c) || debuggers.contains(&c) => c,
        Some(c) => {
            return status::bad_request(format!("container {c} is not valid for pod {pod}"));
        }
        None if containers.len() == 1 => containers[0],
        None => {
            return status::bad_request(format!(
                "a container name must be specified for pod {pod}, choose one of: [{}]",
                containers.join(" ")
            ));
        }
    };
    // The current instance is the pod's restart count for that container; logs may say more.
    let restart_count = [
        "/status/containerStatuses",
        "/status/initContainerStatuses",
        "/status/ephemeralContainerStatuses",
    ]
    .iter()
    .filter_map(|p| object.pointer(p).and_then(Value::as_array))
    .flatten()
    .find(|s| s.get("name").and_then(Value::as_str) == Some(container))
    .and_then(|s| s.get("restartCount").and_then(Value::as_i64))
    .map(|n| n as i32);
    let now = clock.virtual_now_ns;
    let current = match restart_count {
        Some(n) => n,
        None => match f.logs.latest_restart(namespace, pod, container, now) {
            Ok(n) => n.unwrap_or(0),
            Err(e) => return read_failed(&e),
        },
    };
    let restart = if params.previous {
        if current == 0 {
            return status::bad_request(format!(
                "previous terminated container \"{container}\" in pod \"{pod}\" not found"
            ));
        }
        current - 1
    } else {
        current
    };
    let since_ns = match (&params.since_time, params.since_seconds) {
        (Some(t), _) => match parse_rfc3339(t) {
            Some(t) => Some(clock.recorded(t)),
            None => return status::bad_request(format!("sinceTime: {t} is not an RFC 3339 time")),
        },
        (None, Some(s)) if s > 0 => Some(now - s * 1_000_000_000),
        (None, Some(_)) => return status::bad_request("sinceSeconds: must be greater than 0"),
        _ => None,
    };
    let query = LogQuery {
        restart,
        since_ns,
        until_ns: now,
        tail_lines: params.tail_lines.and_then(|n| usize::try_from(n).ok()),
    };
    let lines = match f.logs.query(namespace, pod, container, &query) {
        Ok(lines) => lines,
        Err(e) => return read_failed(&e),
    };
    let mut body = String::new();
    for line in lines {
        if params.timestamps {
            body.push_str(&rfc3339_nanos(clock.serve(line.time_ns)));
            body.push(' ');
        }
        body.push_str(&line.text);
        body.push('\n');
    }
    if let Some(limit) = params.limit_bytes
        && body.len() > limit
    {
        let mut cut = limit;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        body.truncate(cut);
    }
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

/// The logs could not be read: a 500 `Status`, as the apiserver answers when the kubelet fails.
fn read_failed(e: &anyhow::Error) -> Response {
    status::status(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        format!("reading the container's logs: {e:#}"),
    )
}
