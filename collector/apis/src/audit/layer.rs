//! The audit middleware: wraps an API's router so that every request it answers becomes an
//! [`AuditEvent`] handed to the environment's sink.
//!
//! What flows through: a request passes untouched to the router (bodies are not read); when the
//! response's head is ready the middleware notes the status and times, reads the body of a failure
//! for its reason (error bodies are small and already whole), and hands the event to the sink. The
//! sink must not block (a channel send, a push under a short lock): the response waits for it.
//!
//! A response still streaming when its head is ready (a watch, a followed log) is recorded then,
//! with stage `ResponseStarted`: an audit trail that waited for watches to end would lose every
//! watch still open when the environment stops.
//!
//! Audit ids come from one counter per environment (shared by its four APIs), so they are unique in
//! the dataset and sort in arrival order; they are UUID-shaped, as an apiserver's are.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use schemas::time::Clock;

use super::{Api, AuditEvent, Exchange, Failure};

/// Where audit events go.
pub type AuditSink = Arc<dyn Fn(AuditEvent) + Send + Sync>;

/// The virtual time now, ns: finer than the clock's simulated second when the environment can
/// tell how far into the second the wall clock is.
pub type VirtualNow = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The largest failure body read for its message.
const MAX_FAILURE_BODY: u64 = 64 * 1024;

/// One environment's audit log: the id counter, the clocks and the sink its APIs share.
pub struct AuditLog {
    next_id: AtomicU64,
    now: VirtualNow,
    clock: Clock,
    sink: AuditSink,
}

impl AuditLog {
    /// `now` gives the virtual time of a request; `clock` the shift its served times get.
    pub fn new(now: VirtualNow, clock: Clock, sink: AuditSink) -> Arc<AuditLog> {
        Arc::new(AuditLog {
            next_id: AtomicU64::new(1),
            now,
            clock,
            sink,
        })
    }

    /// A log on the clock's own now (to the simulated second).
    pub fn on_clock(clock: Clock, sink: AuditSink) -> Arc<AuditLog> {
        AuditLog::new(Arc::new(move || clock.read().virtual_now_ns), clock, sink)
    }

    fn next_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        // UUID-shaped (version 4 and variant bits set), the counter in the last two groups.
        format!(
            "00000000-0000-4000-{:04x}-{:012x}",
            0x8000 | ((n >> 48) & 0x3fff),
            n & 0xffff_ffff_ffff
        )
    }
}

/// The router with every request it answers recorded as `api`'s. Serve it with
/// `into_make_service_with_connect_info::<SocketAddr>()` to record the client's address.
pub fn audited(router: Router, api: Api, log: Arc<AuditLog>) -> Router {
    router.layer(from_fn_with_state((api, log), record))
}

async fn record(
    State((api, log)): State<(Api, Arc<AuditLog>)>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let audit_id = log.next_id();
    let received_ns = (log.now)();
    let shift_ns = log.clock.read().shift_ns;
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let headers = request.headers();
    let mut exchange = Exchange {
        method: request.method().as_str().to_string(),
        path: request.uri().path().to_string(),
        query: request.uri().query().unwrap_or("").to_string(),
        user_agent: header_str(headers, header::USER_AGENT.as_str()),
        source_ips: source_ips(headers, peer),
        authenticated: headers.contains_key(header::AUTHORIZATION),
        kubectl_command: header_str(headers, "kubectl-command"),
        kubectl_session: header_str(headers, "kubectl-session"),
        received_ns,
        shift_ns,
        ..Exchange::default()
    };
    let mut response = next.run(request).await;
    exchange.code = response.status().as_u16();
    if response.status().is_client_error() || response.status().is_server_error() {
        let (with_body, failure) = read_failure(response).await;
        response = with_body;
        exchange.failure = failure;
    }
    exchange.complete = response.body().size_hint().exact().is_some();
    exchange.responded_ns = (log.now)().max(received_ns);
    exchange.latency_ns = i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX);
    (log.sink)(AuditEvent::new(api, audit_id, exchange));
    response
}

fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// `X-Forwarded-For` entries, then the peer, as an apiserver lists a request's source IPs.
fn source_ips(headers: &HeaderMap, peer: Option<String>) -> Vec<String> {
    let mut ips: Vec<String> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(peer) = peer
        && !ips.contains(&peer)
    {
        ips.push(peer);
    }
    ips
}

/// The failure's reason and message, and the response with its body put back. Only a body whose
/// whole length is known and small is read: a streamed one is passed on untouched.
async fn read_failure(response: Response) -> (Response, Option<Failure>) {
    let small = response
        .body()
        .size_hint()
        .exact()
        .is_some_and(|n| n <= MAX_FAILURE_BODY);
    if !small {
        return (response, None);
    }
    let (parts, body) = response.into_parts();
    match axum::body::to_bytes(body, MAX_FAILURE_BODY as usize).await {
        Ok(bytes) => {
            let failure = Failure::from_body(&bytes);
            (Response::from_parts(parts, Body::from(bytes)), failure)
        }
        Err(e) => {
            let failure = Failure {
                reason: None,
                message: format!("the response body could not be read: {e}"),
            };
            (Response::from_parts(parts, Body::empty()), Some(failure))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use axum::routing::get;
    use futures_util::StreamExt;
    use tower::ServiceExt;

    use super::*;

    /// A log collecting events in a vector, on a clock frozen at `now_ns`.
    fn log(now_ns: i64) -> (Arc<AuditLog>, Arc<Mutex<Vec<AuditEvent>>>) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink_events = events.clone();
        let sink: AuditSink = Arc::new(move |e| sink_events.lock().unwrap().push(e));
        (AuditLog::on_clock(Clock::frozen(now_ns), sink), events)
    }

    fn app() -> Router {
        Router::new()
            .route("/api/v1/query", get(|| async { "{\"status\":\"success\"}" }))
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}",
                get(|| async {
                    let body = r#"{"kind":"Status","status":"Failure","message":"pods \"p\" not found","reason":"NotFound","code":404}"#;
                    (StatusCode::NOT_FOUND, body).into_response()
                }),
            )
            .route(
                "/api/v1/pods",
                get(|| async {
                    let stream = futures_util::stream::iter(["a\n", "b\n"])
                        .map(|s| Ok::<_, std::io::Error>(axum::body::Bytes::from(s)));
                    Body::from_stream(stream)
                }),
            )
    }

    async fn send(router: &Router, uri: &str, headers: &[(&str, &str)]) -> (StatusCode, String) {
        let mut req = Request::builder().uri(uri);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut req = req.body(Body::empty()).unwrap();
        req.extensions_mut()
            .insert(ConnectInfo(SocketAddr::from(([10, 0, 0, 7], 51000))));
        let res = router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let body = axum::body::to_bytes(res.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn every_request_is_recorded_with_its_client_and_outcome() {
        let (log, events) = log(5_000_000_000);
        let kube = audited(app(), Api::Kubernetes, log.clone());
        let prom = audited(app(), Api::Prometheus, log);
        let (code, body) = send(
            &kube,
            "/api/v1/namespaces/x/pods/p",
            &[
                (
                    "user-agent",
                    "kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07",
                ),
                ("kubectl-command", "kubectl get"),
            ],
        )
        .await;
        // The failure's body is read for the audit and still reaches the client whole.
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert!(body.contains("\"reason\":\"NotFound\""), "{body}");
        let (code, _) = send(
            &prom,
            "/api/v1/query?query=up",
            &[("user-agent", "curl/8"), ("x-forwarded-for", "192.0.2.1")],
        )
        .await;
        assert_eq!(code, StatusCode::OK);
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 2);
        let (k, p) = (&events[0], &events[1]);
        assert_ne!(k.audit_id, p.audit_id);
        assert!(k.audit_id < p.audit_id, "ids sort in arrival order");
        let kj = k.to_json();
        assert_eq!(kj["verb"], "get");
        assert_eq!(kj["objectRef"]["name"], "p");
        assert_eq!(kj["responseStatus"]["reason"], "NotFound");
        assert_eq!(kj["responseStatus"]["code"], 404);
        assert_eq!(kj["sourceIPs"], serde_json::json!(["10.0.0.7"]));
        assert_eq!(
            kj["annotations"]["faultline.dev/kubectl-command"],
            "kubectl get"
        );
        assert_eq!(kj["stage"], "ResponseComplete");
        assert_eq!(k.exchange.received_ns, 5_000_000_000);
        let pj = p.to_json();
        assert_eq!(pj["annotations"]["faultline.dev/api"], "prometheus");
        assert_eq!(pj["annotations"]["faultline.dev/query"], "up");
        assert_eq!(pj["userAgent"], "curl/8");
        assert_eq!(
            pj["sourceIPs"],
            serde_json::json!(["192.0.2.1", "10.0.0.7"])
        );
        assert_eq!(p.to_row().source_ip.as_deref(), Some("192.0.2.1"));
        assert!(p.exchange.latency_ns >= 0);
    }

    #[tokio::test]
    async fn a_streamed_response_is_recorded_when_it_starts_and_reaches_the_client_whole() {
        let (log, events) = log(0);
        let kube = audited(app(), Api::Kubernetes, log);
        let (code, body) = send(&kube, "/api/v1/pods?watch=true", &[]).await;
        assert_eq!((code, body.as_str()), (StatusCode::OK, "a\nb\n"));
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].stage(), "ResponseStarted");
        assert_eq!(events[0].info.verb, "watch");
        assert_eq!(events[0].exchange.user_agent, None);
    }

    #[tokio::test]
    async fn unknown_paths_are_recorded_too() {
        let (log, events) = log(0);
        let kube = audited(app(), Api::Kubernetes, log);
        let (code, _) = send(&kube, "/openapi/v3", &[]).await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 1);
        let j = events[0].to_json();
        assert_eq!(
            (j["verb"].as_str(), j["responseStatus"]["code"].as_u64()),
            (Some("get"), Some(404))
        );
        assert!(j.get("objectRef").is_none());
    }

    #[test]
    fn audit_ids_are_uuid_shaped_and_ordered() {
        let (log, _) = log(0);
        let ids: Vec<String> = (0..3).map(|_| log.next_id()).collect();
        assert_eq!(ids[0], "00000000-0000-4000-8000-000000000001");
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        for id in &ids {
            let groups: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
        }
    }
}
