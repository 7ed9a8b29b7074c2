//! The proxy over real HTTP on loopback: a canned upstream answers with set bytes in set chunks
//! and records what it received; a reqwest client plays the agent.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::*;

/// What the canned upstream answers.
#[derive(Clone)]
struct Canned {
    status: StatusCode,
    content_type: &'static str,
    chunks: Vec<Vec<u8>>,
    /// When set, the chunks after the first wait for it: the test lets them go once it has seen
    /// the first chunk arrive through the proxy.
    gate: Option<Arc<Notify>>,
}

impl Canned {
    fn json(body: Value) -> Self {
        Self {
            status: StatusCode::OK,
            content_type: "application/json",
            chunks: vec![body.to_string().into_bytes()],
            gate: None,
        }
    }

    fn sse(stream: &str, chunk: usize) -> Self {
        Self {
            status: StatusCode::OK,
            content_type: "text/event-stream; charset=utf-8",
            chunks: stream
                .as_bytes()
                .chunks(chunk)
                .map(<[u8]>::to_vec)
                .collect(),
            gate: None,
        }
    }
}

#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

#[derive(Clone)]
struct UpstreamState {
    canned: Canned,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn canned(
    State(st): State<UpstreamState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    st.seen.lock().unwrap().push(Seen {
        method,
        uri,
        headers,
        body,
    });
    let c = st.canned.clone();
    let gate = c.gate.clone();
    let chunks =
        futures_util::stream::iter(c.chunks.into_iter().enumerate()).then(move |(i, chunk)| {
            let gate = gate.clone();
            async move {
                if let (1, Some(g)) = (i, gate) {
                    g.notified().await;
                }
                Ok::<_, std::io::Error>(Bytes::from(chunk))
            }
        });
    let mut r = Response::new(Body::from_stream(chunks));
    *r.status_mut() = c.status;
    r.headers_mut()
        .insert("content-type", c.content_type.parse().unwrap());
    r.headers_mut()
        .insert("x-request-id", "req_123".parse().unwrap());
    r
}

async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    addr
}

struct Setup {
    proxy: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    usage: Arc<UsageCounter>,
    client: reqwest::Client,
}

/// A canned upstream and a proxy in front of it (with `api_key`).
async fn setup(canned_reply: Canned, api_key: Option<&str>) -> Setup {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = axum::Router::new()
        .fallback(canned)
        .with_state(UpstreamState {
            canned: canned_reply,
            seen: seen.clone(),
        });
    let upstream = serve(app).await;
    let usage = Arc::new(UsageCounter::new());
    let proxy = serve(router(
        Upstream {
            base_url: format!("http://{upstream}/v1/"),
            api_key: api_key.map(str::to_string),
        },
        usage.clone(),
    ))
    .await;
    Setup {
        proxy: format!("http://{proxy}"),
        seen,
        usage,
        client: reqwest::Client::new(),
    }
}

impl Setup {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.proxy))
            .json(&body)
            .send()
            .await
            .unwrap()
    }
}

const CHAT_STREAM_WITH_USAGE: &str = concat!(
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"pods look fine\"},\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":7,\"total_tokens\":127,\"prompt_tokens_details\":{\"cached_tokens\":64}}}\n\n",
    "data: [DONE]\n\n",
);

fn usage_of(s: &Setup) -> (u64, u64, u64, u64) {
    let u = s.usage.snapshot();
    (
        u.input_tokens,
        u.output_tokens,
        u.cached_input_tokens,
        u.steps,
    )
}

#[tokio::test]
async fn a_chat_completion_passes_through_and_its_usage_is_counted() {
    let reply = json!({"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":5,"total_tokens":55,"prompt_tokens_details":{"cached_tokens":32}}});
    let s = setup(Canned::json(reply.clone()), None).await;
    let request = json!({"model":"m","messages":[{"role":"user","content":"hi"}]});
    let r = s
        .post("/v1/chat/completions?api-version=2", request.clone())
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-request-id"], "req_123");
    assert_eq!(r.text().await.unwrap(), reply.to_string());
    let seen = s.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, Method::POST);
    assert_eq!(
        seen[0].uri.to_string(),
        "/v1/chat/completions?api-version=2"
    );
    let forwarded: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(
        forwarded, request,
        "a non-streamed body is forwarded as sent"
    );
    assert_eq!(usage_of(&s), (50, 5, 32, 1));
    assert_eq!(s.usage.totals().requests, 1);
}

#[tokio::test]
async fn a_stream_that_asked_for_usage_passes_through_byte_for_byte() {
    let s = setup(Canned::sse(CHAT_STREAM_WITH_USAGE, 7), None).await;
    let request =
        json!({"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]});
    let r = s.post("/v1/chat/completions", request.clone()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), CHAT_STREAM_WITH_USAGE);
    let forwarded: Value = serde_json::from_slice(&s.seen()[0].body).unwrap();
    assert_eq!(forwarded, request);
    assert_eq!(usage_of(&s), (120, 7, 64, 1));
}

#[tokio::test]
async fn a_stream_without_include_usage_gets_it_upstream_and_not_its_extra_chunk() {
    let s = setup(Canned::sse(CHAT_STREAM_WITH_USAGE, 13), None).await;
    let r = s
        .post(
            "/v1/chat/completions",
            json!({"model":"m","stream":true,"messages":[]}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let got = r.text().await.unwrap();
    let usage_chunk_start = CHAT_STREAM_WITH_USAGE
        .find("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[]")
        .unwrap();
    let done = CHAT_STREAM_WITH_USAGE.find("data: [DONE]").unwrap();
    let want = format!(
        "{}{}",
        &CHAT_STREAM_WITH_USAGE[..usage_chunk_start],
        &CHAT_STREAM_WITH_USAGE[done..]
    );
    assert_eq!(got, want, "the client gets every event but the usage chunk");
    let forwarded: Value = serde_json::from_slice(&s.seen()[0].body).unwrap();
    assert_eq!(forwarded["stream_options"]["include_usage"], true);
    assert_eq!(usage_of(&s), (120, 7, 64, 1));
}

#[tokio::test]
async fn a_stream_is_passed_on_before_it_ends() {
    let mut canned_reply = Canned::sse(CHAT_STREAM_WITH_USAGE, 40);
    // The first chunk is a whole event, so that even the event-by-event mode can pass it on.
    let first_end = CHAT_STREAM_WITH_USAGE.find("\n\n").unwrap() + 2;
    let (head, tail) = CHAT_STREAM_WITH_USAGE.split_at(first_end);
    canned_reply.chunks = vec![head.as_bytes().to_vec(), tail.as_bytes().to_vec()];
    let gate = Arc::new(Notify::new());
    canned_reply.gate = Some(gate.clone());
    let s = setup(canned_reply, None).await;
    for include_usage in [true, false] {
        let r = s
            .post(
                "/v1/chat/completions",
                json!({"stream":true,"stream_options":{"include_usage":include_usage}}),
            )
            .await;
        let mut body = r.bytes_stream();
        // The upstream holds the rest until this first event has come through the proxy: a
        // proxy that buffered the response would never get here (the timeout fails the test).
        let mut first = Vec::new();
        while first.len() < head.len() {
            let chunk = tokio::time::timeout(Duration::from_secs(20), body.next())
                .await
                .expect("the first event arrives while the upstream is still sending")
                .expect("the body goes on")
                .unwrap();
            first.extend_from_slice(&chunk);
        }
        assert_eq!(first, head.as_bytes());
        gate.notify_one();
        let mut rest = Vec::new();
        while let Some(chunk) = body.next().await {
            rest.extend_from_slice(&chunk.unwrap());
        }
        assert!(
            String::from_utf8(rest)
                .unwrap()
                .ends_with("data: [DONE]\n\n")
        );
    }
    assert_eq!(usage_of(&s), (240, 14, 128, 2));
}

const MESSAGES_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":300,\"output_tokens\":1}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":42}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[tokio::test]
async fn anthropic_messages_are_counted_and_the_key_replaced() {
    let s = setup(Canned::sse(MESSAGES_STREAM, 5), Some("real-key")).await;
    let r = s
        .client
        .post(format!("{}/v1/messages", s.proxy))
        .header("x-api-key", "agent-key")
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model":"claude","stream":true,"max_tokens":100,"messages":[]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), MESSAGES_STREAM);
    let seen = &s.seen()[0];
    assert_eq!(seen.headers["x-api-key"], "real-key");
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert!(!seen.headers.contains_key("authorization"));
    // Anthropic streams are never rewritten.
    let forwarded: Value = serde_json::from_slice(&seen.body).unwrap();
    assert!(forwarded.get("stream_options").is_none());
    assert_eq!(usage_of(&s), (325, 42, 300, 1));
}

#[tokio::test]
async fn responses_api_streams_are_counted() {
    let stream = concat!(
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"usage\":null}}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":70,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":9,\"total_tokens\":79}}}\n\n",
    );
    let s = setup(Canned::sse(stream, 11), None).await;
    let r = s
        .post(
            "/v1/responses",
            json!({"model":"m","stream":true,"input":"hi"}),
        )
        .await;
    assert_eq!(r.text().await.unwrap(), stream);
    assert_eq!(usage_of(&s), (70, 9, 0, 1));
}

#[tokio::test]
async fn headers_are_forwarded_minus_hop_by_hop_with_the_configured_key() {
    let s = setup(
        Canned::json(json!({"object":"list","data":[{"id":"m","object":"model"}]})),
        Some("real-key"),
    )
    .await;
    let r = s
        .client
        .get(format!("{}/v1/models", s.proxy))
        .header("authorization", "Bearer agent-key")
        .header("connection", "keep-alive, x-private")
        .header("x-private", "1")
        .header("keep-alive", "timeout=5")
        .header("accept-encoding", "gzip")
        .header("openai-organization", "org-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let seen = &s.seen()[0];
    assert_eq!(seen.method, Method::GET);
    assert_eq!(seen.uri.path(), "/v1/models");
    assert_eq!(seen.headers["authorization"], "Bearer real-key");
    assert_eq!(seen.headers["openai-organization"], "org-1");
    for gone in ["x-private", "keep-alive", "accept-encoding"] {
        assert!(!seen.headers.contains_key(gone), "{gone} was forwarded");
    }
    // A model listing is a request, not an LLM call, and reports no tokens.
    assert_eq!(usage_of(&s), (0, 0, 0, 0));
    let t = s.usage.totals();
    assert_eq!((t.requests, t.unmetered_calls), (1, 0));
}

#[tokio::test]
async fn without_a_configured_key_the_clients_credentials_pass() {
    let s = setup(Canned::json(json!({"usage":{"prompt_tokens":1}})), None).await;
    let r = s
        .client
        .post(format!("{}/v1/embeddings", s.proxy))
        .header("authorization", "Bearer agent-key")
        .json(&json!({"input":"x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(s.seen()[0].headers["authorization"], "Bearer agent-key");
    // Embeddings use tokens but are not a step of the agent.
    assert_eq!(usage_of(&s), (1, 0, 0, 0));
}

#[tokio::test]
async fn upstream_errors_pass_through_with_their_status() {
    let body = json!({"error":{"message":"Rate limit reached","type":"rate_limit_error","code":"rate_limit_exceeded"}});
    let mut canned_reply = Canned::json(body.clone());
    canned_reply.status = StatusCode::TOO_MANY_REQUESTS;
    let s = setup(canned_reply, None).await;
    let r = s.post("/v1/chat/completions", json!({"messages":[]})).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.json::<Value>().await.unwrap(), body);
    assert_eq!(usage_of(&s), (0, 0, 0, 0));
    assert_eq!(s.usage.totals().upstream_errors, 1);
}

#[tokio::test]
async fn a_call_without_readable_usage_is_counted_as_unmetered() {
    let s = setup(Canned::json(json!({"choices":[]})), None).await;
    let r = s.post("/v1/chat/completions", json!({"messages":[]})).await;
    assert_eq!(r.status(), 200);
    let t = s.usage.totals();
    assert_eq!((t.llm_calls, t.unmetered_calls, t.input_tokens), (1, 1, 0));
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_in_openai_shape() {
    // A port that was just free: bind, note it, close.
    let closed = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let usage = Arc::new(UsageCounter::new());
    let proxy = serve(router(
        Upstream {
            base_url: format!("http://{closed}/v1"),
            api_key: None,
        },
        usage.clone(),
    ))
    .await;
    let r = reqwest::Client::new()
        .post(format!("http://{proxy}/v1/chat/completions"))
        .json(&json!({"messages":[]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("http://{closed}/v1/chat/completions")),
        "{message}"
    );
    assert_eq!(v["error"]["type"], "upstream_error");
    let t = usage.totals();
    assert_eq!((t.requests, t.upstream_errors, t.llm_calls), (1, 1, 0));
}

#[tokio::test]
async fn paths_outside_v1_are_404_in_openai_shape() {
    let s = setup(Canned::json(json!({})), None).await;
    let r = s
        .client
        .get(format!("{}/health", s.proxy))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("/health"));
    assert!(s.seen().is_empty());
}
