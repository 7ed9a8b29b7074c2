//! A read-only Kubernetes API server over an object timeline, good enough that kubectl and kube-rs
//! clients work as against a real cluster: discovery, list/get with selectors and chunking, Tables,
//! PartialObjectMetadata, watch, pod logs, and `Status` errors for everything else.

pub mod access;
pub mod discovery;
pub mod exec;
pub mod feed;
pub mod metrics;
pub mod openapi;
pub mod portforward;
pub mod printers;
pub mod resources;
pub mod selector;
pub mod status;
pub mod writes;

mod logs;
mod node_proxy;
mod objects;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use feed::ObjectFeed;
use promql::StorageSource;
use resources::Registry;
use schemas::time::Clock;
use stores::logs::LogStore;

/// What the Kubernetes facade serves.
pub struct KubeFacade {
    pub registry: Registry,
    /// The objects: fixed for a replay, growing for a live environment.
    pub objects: Arc<ObjectFeed>,
    pub logs: Arc<LogStore>,
    pub clock: Clock,
    pub server_version: Value,
    /// The cluster that takes writes: none for a replay, which answers them 405.
    pub writer: Option<Arc<dyn writes::ClusterWriter>>,
    /// The containers `exec` and `attach` reach: none for a replay, which answers them 405.
    pub exec: Option<Arc<dyn exec::ContainerExec>>,
    /// The pods `port-forward` reaches: none for a replay.
    pub ports: Option<Arc<dyn portforward::PodPorts>>,
    /// The series the resource metrics API (`kubectl top`) and the kubelet's Summary API are
    /// computed from; without them both answer as when metrics-server is down.
    pub metrics: Option<Arc<dyn StorageSource>>,
}

impl KubeFacade {
    /// A facade serving the kinds the objects hold, and `more_kinds` ((apiVersion, kind,
    /// namespaced): kinds a live cluster can hold though none exists yet).
    pub fn new(
        objects: Arc<ObjectFeed>,
        logs: Arc<LogStore>,
        clock: Clock,
        more_kinds: &[(&str, &str, bool)],
    ) -> Self {
        let mut kinds = objects.read().timeline.kinds();
        for (a, k, n) in more_kinds {
            if !kinds.iter().any(|(a2, k2, _)| a2 == a && k2 == k) {
                kinds.push((a.to_string(), k.to_string(), *n));
            }
        }
        let registry = Registry::new(kinds.iter().map(|(a, k, n)| (a.as_str(), k.as_str(), *n)));
        KubeFacade {
            registry,
            objects,
            logs,
            clock,
            server_version: json!({
                "major": "1",
                "minor": "33",
                "gitVersion": "v1.33.0",
                "gitCommit": "unknown",
                "gitTreeState": "archive",
                "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.24.0",
                "compiler": "gc",
                "platform": "linux/amd64",
            }),
            writer: None,
            exec: None,
            ports: None,
            metrics: None,
        }
    }
}

/// The router: every path is parsed by one dispatcher, as the apiserver's path grammar overlaps
/// (`/api/v1/namespaces/x` is both a get of a Namespace and a prefix of namespaced paths).
pub fn router(facade: Arc<KubeFacade>) -> Router {
    Router::new().fallback(dispatch).with_state(facade)
}

async fn dispatch(State(f): State<Arc<KubeFacade>>, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let method = parts.method.clone();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if let (
        [
            "api",
            "v1",
            "namespaces",
            ns,
            "pods",
            pod,
            sub @ ("exec" | "attach"),
        ],
        Some(exec),
    ) = (segments.as_slice(), &f.exec)
    {
        let ws = upgrade(&mut parts).await;
        return exec::serve(exec, ws, ns, pod, &query, *sub == "attach");
    }
    if let (["api", "v1", "namespaces", ns, "pods", pod, "portforward"], Some(ports)) =
        (segments.as_slice(), &f.ports)
    {
        let ws = upgrade(&mut parts).await;
        return portforward::serve(ports, ws, ns, pod, &query);
    }
    // The proxy to a node's kubelet is read-only and answered here; proxies to pods and services
    // are not (a recording has no process behind them).
    if let ["api", "v1", "nodes", node, "proxy", rest @ ..] = segments.as_slice()
        && (method == Method::GET || method == Method::HEAD)
    {
        return node_proxy::serve(&f, node, rest);
    }
    // A proxy to a pod or service: the apiserver looks the object up first, so a missing one is
    // its NotFound; one that exists has no process behind it to answer (a recording, or the
    // simulator's pods), as a pod whose port refuses connections.
    if let [
        "api",
        "v1",
        "namespaces",
        ns,
        kind @ ("pods" | "services"),
        target,
        "proxy",
        ..,
    ] = segments.as_slice()
    {
        let name = proxied_name(target);
        let object = ["namespaces", *ns, *kind, name];
        let found = resource(&f, "", "v1", &object, &Params::default(), &accept, None).await;
        if found.status() == StatusCode::NOT_FOUND {
            return found;
        }
        let what = if *kind == "services" {
            "service"
        } else {
            "pod"
        };
        return status::status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            format!("error trying to reach {what}: dial tcp: connect: connection refused"),
        );
    }
    if let ["api", _, "namespaces", _, _, _, sub, ..] | ["api", _, _, _, sub, ..] =
        segments.as_slice()
        && access::is_stream(sub)
    {
        return status::read_only(sub);
    }
    let params = Params::parse(&query);
    if method != Method::GET && method != Method::HEAD {
        // Reading stops past the limit: an oversized body is refused without being held whole.
        let body = match axum::body::to_bytes(body, apiserver::body::MAX_BODY_BYTES).await {
            Ok(b) => b,
            Err(_) => return writes::failure(&apiserver::body::too_large()),
        };
        let write = Write {
            method: &method,
            headers: &parts.headers,
            query: &query,
            body,
        };
        return match segments.as_slice() {
            [
                "apis",
                "authorization.k8s.io",
                "v1",
                plural @ ("selfsubjectaccessreviews" | "selfsubjectrulesreviews"),
            ] if method == Method::POST => access_review(&f, plural, &write),
            ["api", version, rest @ ..] => {
                resource(&f, "", version, rest, &params, &accept, Some(write)).await
            }
            ["apis", group, version, rest @ ..] => {
                resource(&f, group, version, rest, &params, &accept, Some(write)).await
            }
            _ => status::no_such_resource(),
        };
    }
    match segments.as_slice() {
        ["version"] => axum::Json(f.server_version.clone()).into_response(),
        ["healthz" | "readyz" | "livez"] => "ok".into_response(),
        ["openapi", "v3"] => axum::Json(openapi::index(&f.registry)).into_response(),
        ["openapi", "v3", rest @ ..] => json_or_404(openapi::group_version(&f.registry, rest)),
        ["api"] => match discovery::aggregated_version(&accept) {
            Some(v) => discovery_response(discovery::aggregated(&f.registry, true, v), v),
            None => axum::Json(discovery::api_versions("127.0.0.1")).into_response(),
        },
        ["apis"] => match discovery::aggregated_version(&accept) {
            Some(v) => discovery_response(discovery::aggregated(&f.registry, false, v), v),
            None => axum::Json(discovery::api_group_list(&f.registry)).into_response(),
        },
        ["api", version] => json_or_404(discovery::resource_list(&f.registry, "", version)),
        ["apis", group] => json_or_404(discovery::api_group(&f.registry, group)),
        ["apis", group, version] => {
            json_or_404(discovery::resource_list(&f.registry, group, version))
        }
        ["api", version, rest @ ..] => {
            resource(&f, "", version, rest, &params, &accept, None).await
        }
        ["apis", group, version, rest @ ..] => {
            resource(&f, group, version, rest, &params, &accept, None).await
        }
        _ => status::no_such_resource(),
    }
}

/// The end of a stream: a close frame with status 1000, which clients read as the end of their
/// streams (client-go takes a close without a status, 1005, for a broken connection).
fn normal_close() -> axum::extract::ws::Message {
    axum::extract::ws::Message::Close(Some(axum::extract::ws::CloseFrame {
        code: axum::extract::ws::close_code::NORMAL,
        reason: "".into(),
    }))
}

/// Ends a stream the server is done with: a normal close, then what the client still sends is
/// read until its own close (for a few seconds at most). Dropping a socket with unread input
/// resets the connection, and the client loses the last frames (an exit status, a port's
/// error) that were still on their way.
async fn close(socket: &mut axum::extract::ws::WebSocket) {
    if socket.send(normal_close()).await.is_err() {
        return;
    }
    let drained = async {
        while let Some(Ok(m)) = socket.recv().await {
            if matches!(m, axum::extract::ws::Message::Close(_)) {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), drained).await;
}

/// The WebSocket upgrade of an exec, attach or port-forward request; a plain request is refused
/// as the apiserver refuses it.
async fn upgrade(
    parts: &mut axum::http::request::Parts,
) -> Result<axum::extract::ws::WebSocketUpgrade, Response> {
    use axum::extract::FromRequestParts;
    axum::extract::ws::WebSocketUpgrade::from_request_parts(parts, &())
        .await
        .map_err(|_| {
            status::status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "Upgrade request required",
            )
        })
}

/// `kubectl auth can-i`: the review answered for the environment's one user (201, as created).
fn access_review(f: &KubeFacade, plural: &str, write: &Write<'_>) -> Response {
    let content_type = write
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let body = match apiserver::body::decode(content_type, &write.body) {
        Ok(b) => b,
        Err(e) => return writes::failure(&e),
    };
    let kind = if plural == "selfsubjectrulesreviews" {
        "SelfSubjectRulesReview"
    } else {
        "SelfSubjectAccessReview"
    };
    let answer = access::review(kind, body, f.writer.is_some());
    (axum::http::StatusCode::CREATED, axum::Json(answer)).into_response()
}

/// A write request's parts, for the write path.
struct Write<'a> {
    method: &'a Method,
    headers: &'a axum::http::HeaderMap,
    query: &'a str,
    body: axum::body::Bytes,
}

fn discovery_response(body: Value, version: &str) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            discovery::aggregated_content_type(version),
        )],
        body.to_string(),
    )
        .into_response()
}

fn json_or_404(v: Option<Value>) -> Response {
    match v {
        Some(v) => axum::Json(v).into_response(),
        None => status::no_such_resource(),
    }
}

/// The object a proxy path names: `name`, `name:port` or `scheme:name:port`.
fn proxied_name(target: &str) -> &str {
    let mut parts = target.split(':');
    let first = parts.next().unwrap_or(target);
    match (parts.next(), parts.next()) {
        (Some(name), Some(_)) => name,
        _ => first,
    }
}

/// Routes a resource path (after the group/version) to list, get, watch, a subresource, or a
/// write.
async fn resource(
    f: &Arc<KubeFacade>,
    group: &str,
    version: &str,
    rest: &[&str],
    params: &Params,
    accept: &str,
    write: Option<Write<'_>>,
) -> Response {
    if group == metrics::GROUP && version == metrics::VERSION {
        // metrics-server's API: computed, never stored, and read-only even on a live cluster.
        return match (rest, write) {
            (_, Some(_)) => status::status(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            ),
            (["namespaces", ns, "pods", name @ ..], None) if name.len() <= 1 => {
                metrics::serve(f, Some(ns), "pods", name.first().copied(), params)
            }
            ([plural @ ("pods" | "nodes"), name @ ..], None) if name.len() <= 1 => {
                metrics::serve(f, None, plural, name.first().copied(), params)
            }
            _ => status::no_such_resource(),
        };
    }
    let find = |plural: &str| f.registry.find(group, version, plural);
    let (namespace, plural, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|r| r.namespaced) => (
            Some(*ns),
            *plural,
            tail.first().copied(),
            tail.get(1).copied(),
        ),
        [plural] => (None, *plural, None, None),
        [plural, name] => (None, *plural, Some(*name), None),
        [plural, name, sub] => (None, *plural, Some(*name), Some(*sub)),
        _ => return status::no_such_resource(),
    };
    let Some(res) = find(plural).cloned() else {
        return status::no_such_resource();
    };
    if !res.namespaced && namespace.is_some() {
        return status::no_such_resource();
    }
    if let Some(w) = write {
        return writes::serve(
            f, w.method, w.headers, w.query, w.body, res, namespace, name, sub,
        )
        .await;
    }
    match (name, sub) {
        (None, _) if params.watch => objects::watch(f, &res, namespace, params, accept),
        (None, _) => objects::list(f, &res, namespace, params, accept),
        (Some(name), None) => objects::get(f, &res, namespace, name, params, accept),
        (Some(name), Some("log")) if res.kind == "Pod" => {
            logs::pod_logs(f, namespace.unwrap_or("default"), name, params)
        }
        (Some(name), Some("status")) => objects::get(f, &res, namespace, name, params, accept),
        (Some(name), Some("scale")) if res.subresources.iter().any(|s| s == "scale") => {
            objects::get_scale(f, &res, namespace, name)
        }
        (Some(_), Some(_)) => status::no_such_resource(),
    }
}

/// Query parameters of list, get, watch and log requests.
#[derive(Debug, Default, Clone)]
pub struct Params {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub watch: bool,
    pub allow_bookmarks: bool,
    pub timeout_seconds: Option<u64>,
    pub include_object: Option<String>,
    pub container: Option<String>,
    pub previous: bool,
    pub since_seconds: Option<i64>,
    pub since_time: Option<String>,
    pub tail_lines: Option<i64>,
    pub timestamps: bool,
    pub limit_bytes: Option<usize>,
    pub follow: bool,
    /// The first parameter the apiserver would refuse (its message), answered as a 400 by
    /// lists and watches.
    pub invalid: Option<String>,
}

impl Params {
    fn parse(query: &str) -> Self {
        let mut p = Params::default();
        let truthy = |v: &str| matches!(v, "true" | "1" | "True");
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            let v = v.into_owned();
            match k.as_ref() {
                "labelSelector" => p.label_selector = Some(v),
                "fieldSelector" => p.field_selector = Some(v),
                "limit" => match v.parse::<i64>() {
                    Ok(n) if n >= 0 => p.limit = usize::try_from(n).ok().filter(|n| *n > 0),
                    Ok(n) => p.refuse(format!(
                        "limit: Invalid value: {n}: must be greater than or equal to 0"
                    )),
                    Err(_) => p.refuse(format!(
                        "limit: Invalid value: \"{v}\": strconv.ParseInt: parsing \"{v}\": invalid syntax"
                    )),
                },
                "resourceVersionMatch" => match v.as_str() {
                    "" | "Exact" | "NotOlderThan" => p.resource_version_match = Some(v),
                    _ => p.refuse(format!(
                        "resourceVersionMatch: Unsupported value: \"{v}\": supported values: \"Exact\", \"NotOlderThan\""
                    )),
                },
                "continue" => p.continue_token = Some(v).filter(|s| !s.is_empty()),
                "resourceVersion" => p.resource_version = Some(v),
                "watch" => p.watch = truthy(&v),
                "allowWatchBookmarks" => p.allow_bookmarks = truthy(&v),
                "timeoutSeconds" => p.timeout_seconds = v.parse().ok(),
                "includeObject" => p.include_object = Some(v),
                "container" => p.container = Some(v),
                "previous" => p.previous = truthy(&v),
                "sinceSeconds" => p.since_seconds = v.parse().ok(),
                "sinceTime" => p.since_time = Some(v),
                "tailLines" => p.tail_lines = v.parse().ok(),
                "timestamps" => p.timestamps = truthy(&v),
                "limitBytes" => p.limit_bytes = v.parse().ok(),
                "follow" => p.follow = truthy(&v),
                _ => {}
            }
        }
        if p.resource_version_match
            .as_deref()
            .is_some_and(|m| !m.is_empty())
            && p.resource_version.as_deref().is_none_or(str::is_empty)
        {
            p.refuse("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into());
        }
        p
    }

    fn refuse(&mut self, message: String) {
        self.invalid.get_or_insert(message);
    }
}

/// A JSON response with the apiserver's content type.
pub fn json_response(code: StatusCode, body: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body.to_string()),
    )
        .into_response()
}
