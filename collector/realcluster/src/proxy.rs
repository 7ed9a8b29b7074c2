//! The Kubernetes API an agent gets on a real cluster: served on loopback, every request forwarded
//! to the cluster's apiserver with faultline's own credentials (the agent holds none), audited
//! like the simulator's APIs, and filtered by [`Hidden`] so that the injection plane is not there
//! to be read. Answers stream through (watches, logs); lists and tables are read whole to be
//! filtered. Protobuf is not offered upstream, so every answer can be filtered. exec, attach and
//! port-forward are relayed once the apiserver has switched protocols.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use apis::audit::Api;
use apis::audit::layer::{AuditLog, audited};
use apis::kube::writes::failure;
use apiserver::status::Failure;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use hyper_util::rt::TokioIo;
use tokio::task::JoinHandle;

use super::filter::Hidden;

/// The largest list answer read whole to be filtered.
const MAX_LIST: usize = 256 << 20;

struct Upstream {
    client: kube::Client,
    hidden: Hidden,
}

/// A running proxy.
pub struct Proxy {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
    /// The same proxy over TLS, when asked for: the agent's kubeconfig points there, as at a
    /// real apiserver.
    pub https: Option<apis::replay::Https>,
    tls_task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Proxy {
    /// Serves on `listen`, forwarding to the cluster `client` reaches; with `tls_too`, also over
    /// TLS on a free port beside it (a CA of its own, see [`apis::tls`]).
    pub async fn start(
        listen: SocketAddr,
        client: kube::Client,
        hidden: Hidden,
        audit: Option<Arc<AuditLog>>,
        tls_too: bool,
    ) -> anyhow::Result<Proxy> {
        let state = Arc::new(Upstream { client, hidden });
        let mut router = axum::Router::new().fallback(forward).with_state(state);
        if let Some(log) = audit {
            router = audited(router, Api::Kubernetes, log);
        }
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding the cluster API proxy to {listen}"))?;
        let addr = listener.local_addr()?;
        let (https, tls_task) = match tls_too {
            true => {
                let (https, task) = apis::replay::serve_https(listen, router.clone()).await?;
                (Some(https), Some(task))
            }
            false => (None, None),
        };
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Proxy {
            addr,
            task,
            https,
            tls_task,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn stop(self) {
        self.task.abort();
        if let Some(t) = self.tls_task {
            t.abort();
        }
    }
}

/// The client's Accept without protobuf (JSON is always among what clients accept beside it).
fn json_accept(headers: &HeaderMap) -> Option<HeaderValue> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    let kept: Vec<&str> = accept
        .split(',')
        .map(str::trim)
        .filter(|t| !t.contains("protobuf") && !t.contains("cbor"))
        .collect();
    let kept = if kept.is_empty() {
        "application/json".to_string()
    } else {
        kept.join(",")
    };
    HeaderValue::from_str(&kept).ok()
}

async fn forward(State(up): State<Arc<Upstream>>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    if let Some(refusal) = up.hidden.refusal(&path) {
        return failure(&refusal);
    }
    if request.headers().contains_key(header::UPGRADE) {
        return relay(&up.client, request).await;
    }
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
        || path.contains("/watch/");
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_LIST).await {
        Ok(b) => b,
        Err(e) => return failure(&Failure::bad_request(e.to_string())),
    };
    let mut upstream = axum::http::Request::builder()
        .method(parts.method.clone())
        .uri(parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    for name in [header::CONTENT_TYPE, header::USER_AGENT] {
        if let Some(v) = parts.headers.get(&name) {
            upstream = upstream.header(name, v);
        }
    }
    if let Some(accept) = json_accept(&parts.headers) {
        upstream = upstream.header(header::ACCEPT, accept);
    }
    let upstream = match upstream.body(kube::client::Body::from(body.to_vec())) {
        Ok(r) => r,
        Err(e) => return failure(&Failure::bad_request(e.to_string())),
    };
    let answer = match up.client.send(upstream).await {
        Ok(a) => a,
        Err(e) => return unavailable(e),
    };
    let (parts, body) = answer.into_parts();
    let body = Body::new(body);
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    let body = if watch && json {
        filtered_events(up.clone(), body)
    } else if json && parts.status.is_success() {
        match filtered_list(&up.hidden, &path, body).await {
            Ok(b) => b,
            Err(e) => return failure(&Failure::new(502, "InternalError", e)),
        }
    } else {
        body
    };
    passed_through(Response::from_parts(parts, body))
}

/// The apiserver's answer as this server's: its status and headers, but lengths and chunking
/// are this server's own (filtering changes lengths).
fn passed_through(answer: Response) -> Response {
    let (mut parts, body) = answer.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::TRANSFER_ENCODING);
    Response::from_parts(parts, body)
}

/// Headers of an upgrade that pass through both ways: the client's key goes upstream unchanged,
/// so the apiserver's accept answers the client's handshake as it is.
const UPGRADE_HEADERS: &[&str] = &[
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-accept",
    "x-stream-protocol-version",
    "user-agent",
];

/// exec, attach and port-forward: the upgrade request goes to the apiserver with faultline's
/// credentials; once it switches protocols, the client's and the apiserver's connections are
/// joined byte for byte (WebSocket and SPDY alike). A refusal comes back as the apiserver
/// answered it.
async fn relay(client: &kube::Client, mut request: Request) -> Response {
    let Some(downstream) = request
        .extensions_mut()
        .remove::<hyper::upgrade::OnUpgrade>()
    else {
        return failure(&Failure::bad_request("the connection cannot be upgraded"));
    };
    let mut upstream = axum::http::Request::builder()
        .method(request.method().clone())
        .uri(request.uri().path_and_query().map_or("/", |p| p.as_str()));
    for (name, value) in request.headers() {
        if UPGRADE_HEADERS.contains(&name.as_str()) {
            upstream = upstream.header(name, value);
        }
    }
    let upstream = match upstream.body(kube::client::Body::empty()) {
        Ok(r) => r,
        Err(e) => return failure(&Failure::bad_request(e.to_string())),
    };
    let mut answer = match client.send(upstream).await {
        Ok(a) => a,
        Err(e) => return unavailable(e),
    };
    if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        return passed_through(answer.map(Body::new));
    }
    let mut response = Response::new(Body::empty());
    *response.status_mut() = answer.status();
    for (name, value) in answer.headers() {
        if UPGRADE_HEADERS.contains(&name.as_str()) {
            response.headers_mut().append(name, value.clone());
        }
    }
    let upstream = hyper::upgrade::on(&mut answer);
    tokio::spawn(async move {
        let (down, up) = match tokio::try_join!(downstream, upstream) {
            Ok(both) => both,
            Err(e) => {
                tracing::debug!("stream relay: an upgrade failed: {e}");
                return;
            }
        };
        let (mut down, mut up) = (TokioIo::new(down), TokioIo::new(up));
        if let Err(e) = tokio::io::copy_bidirectional(&mut down, &mut up).await {
            tracing::debug!("stream relay ended: {e}");
        }
    });
    response
}

fn unavailable(e: kube::Error) -> Response {
    tracing::warn!("cluster API: {e}");
    failure(&Failure::new(
        503,
        "ServiceUnavailable",
        "the server is currently unable to handle the request",
    ))
}

/// A JSON answer read whole; a list or table loses its hidden items.
async fn filtered_list(hidden: &Hidden, path: &str, body: Body) -> Result<Body, String> {
    let bytes = axum::body::to_bytes(body, MAX_LIST)
        .await
        .map_err(|e| e.to_string())?;
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Ok(Body::from(bytes));
    };
    if hidden.filter_list(path, &mut value) {
        return Ok(Body::from(value.to_string()));
    }
    Ok(Body::from(bytes))
}

/// A watch stream, line by line (one event each), without the events of hidden objects.
fn filtered_events(up: Arc<Upstream>, body: Body) -> Body {
    let mut pending: Vec<u8> = Vec::new();
    let stream = body.into_data_stream().map(move |chunk| {
        let chunk = chunk?;
        pending.extend_from_slice(&chunk);
        let mut out = Vec::new();
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if up.hidden.keeps_event(&line[..line.len() - 1]) {
                out.extend_from_slice(&line);
            }
        }
        Ok::<_, axum::Error>(axum::body::Bytes::from(out))
    });
    Body::from_stream(stream)
}
