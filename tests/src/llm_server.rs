//! A scripted OpenAI-compatible chat completions server for tests that drive an LLM agent: real
//! HTTP on 127.0.0.1 (port 0), answering each `POST /v1/chat/completions` with the next step of a
//! script (text, tool calls, or a fault), reporting the usage the step names, streamed as Server-Sent
//! Events when the request asks for it.
//!
//! It keeps what it received and the usage it reported, so a test can check what an agent fed
//! back to the model and compare a token counter with what was really served. A stream reports
//! usage only when the request set `stream_options.include_usage`, as OpenAI's API does, and its
//! bytes are sent in small pieces that cut through events, as a real network may deliver them.
//!
//! The judge's tests have their own server (`judge/tests/common/server.rs`): its answers are
//! computed from the judge's rubric questions and its faults are chosen by a seeded hash to test
//! retries, so the two share only the wire format.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// What the model does at one step.
#[derive(Debug, Clone)]
pub enum Reply {
    Text(String),
    ToolCalls(Vec<ToolCall>),
    Fault(Fault),
}

#[derive(Debug, Clone)]
pub struct ToolCall {
    pub name: String,
    /// The arguments object; sent JSON-encoded in `function.arguments`, as OpenAI does.
    pub arguments: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 500 with an OpenAI-shaped error body.
    ServerError,
    /// Never answers (until the server is dropped).
    Hang,
}

/// Tokens a step reports. `prompt` includes `cached`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, o: Self) {
        self.prompt += o.prompt;
        self.completion += o.completion;
        self.cached += o.cached;
    }
}

/// One answer of the script.
#[derive(Debug, Clone)]
pub struct Step {
    pub reply: Reply,
    pub usage: TokenUsage,
    /// Waited before answering.
    pub latency: Duration,
}

impl Step {
    pub fn text(text: &str) -> Self {
        Self::new(Reply::Text(text.to_string()))
    }

    /// One tool call.
    pub fn tool(name: &str, arguments: Value) -> Self {
        Self::new(Reply::ToolCalls(vec![ToolCall {
            name: name.to_string(),
            arguments,
        }]))
    }

    pub fn fault(fault: Fault) -> Self {
        Self::new(Reply::Fault(fault))
    }

    fn new(reply: Reply) -> Self {
        Self {
            reply,
            usage: TokenUsage::default(),
            latency: Duration::ZERO,
        }
    }

    pub fn usage(mut self, prompt: u64, completion: u64, cached: u64) -> Self {
        self.usage = TokenUsage {
            prompt,
            completion,
            cached,
        };
        self
    }

    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Step>,
    requests: Vec<Value>,
    served: TokenUsage,
    answered: usize,
}

#[derive(Clone)]
struct AppState {
    inner: Arc<Mutex<Inner>>,
    /// Wakes hung requests when the server is dropped.
    shutdown: Arc<Notify>,
    chunk_bytes: usize,
}

impl AppState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running scripted server; stops when dropped.
pub struct ScriptedLlm {
    pub addr: SocketAddr,
    state: AppState,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedLlm {
    /// Starts serving `script` on a free loopback port (within a tokio runtime).
    pub async fn start(script: Vec<Step>) -> std::io::Result<Self> {
        let state = AppState {
            inner: Arc::new(Mutex::new(Inner {
                script: script.into(),
                ..Inner::default()
            })),
            shutdown: Arc::new(Notify::new()),
            // Small and odd, so pieces end inside events, lines and `\n\n` pairs.
            chunk_bytes: 37,
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, state, task })
    }

    /// The base URL a client is given (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The chat requests received, in order, as JSON.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().requests.clone()
    }

    /// The sum of the usage reported to clients.
    pub fn served(&self) -> TokenUsage {
        self.state.lock().served
    }

    /// Requests answered with a completion (faults excluded).
    pub fn answered(&self) -> usize {
        self.state.lock().answered
    }

    /// Steps of the script not yet used.
    pub fn remaining(&self) -> usize {
        self.state.lock().script.len()
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.state.shutdown.notify_waiters();
        self.task.abort();
    }
}

fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn models() -> Response {
    let body = json!({"object": "list", "data": [{"id": "scripted", "object": "model", "created": 0, "owned_by": "faultline"}]});
    ([("content-type", "application/json")], body.to_string()).into_response()
}

async fn chat(State(st): State<AppState>, body: Bytes) -> Response {
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("the request body is not JSON: {e}"),
            );
        }
    };
    let (step, n) = {
        let mut inner = st.lock();
        inner.requests.push(req.clone());
        (inner.script.pop_front(), inner.requests.len())
    };
    let Some(step) = step else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            &format!("the script has no answer for request {n}"),
        );
    };
    if !step.latency.is_zero() {
        tokio::time::sleep(step.latency).await;
    }
    match step.reply {
        Reply::Fault(Fault::ServerError) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "scripted server error",
            );
        }
        Reply::Fault(Fault::Hang) => {
            st.shutdown.notified().await;
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "server stopped",
            );
        }
        _ => {}
    }
    let model = req["model"].as_str().unwrap_or("scripted").to_string();
    let id = format!("chatcmpl-scripted-{n}");
    let streamed = req["stream"] == true;
    let with_usage = !streamed || req["stream_options"]["include_usage"] == true;
    {
        let mut inner = st.lock();
        inner.answered += 1;
        if with_usage {
            inner.served += step.usage;
        }
    }
    if streamed {
        let text = sse(&id, &model, n, &step.reply, step.usage, with_usage);
        let pieces: Vec<Result<Bytes, std::io::Error>> = text
            .as_bytes()
            .chunks(st.chunk_bytes.max(1))
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let mut r = Response::new(Body::from_stream(futures_util::stream::iter(pieces)));
        r.headers_mut().insert(
            "content-type",
            axum::http::HeaderValue::from_static("text/event-stream"),
        );
        return r;
    }
    let body = json!({
        "id": id, "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message(n, &step.reply), "logprobs": null,
                     "finish_reason": finish_reason(&step.reply)}],
        "usage": usage_json(step.usage),
    });
    ([("content-type", "application/json")], body.to_string()).into_response()
}

fn usage_json(u: TokenUsage) -> Value {
    json!({
        "prompt_tokens": u.prompt, "completion_tokens": u.completion,
        "total_tokens": u.prompt + u.completion,
        "prompt_tokens_details": {"cached_tokens": u.cached},
    })
}

fn finish_reason(reply: &Reply) -> &'static str {
    match reply {
        Reply::ToolCalls(_) => "tool_calls",
        _ => "stop",
    }
}

fn call_id(n: usize, i: usize) -> String {
    format!("call_{n}_{i}")
}

fn message(n: usize, reply: &Reply) -> Value {
    match reply {
        Reply::ToolCalls(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    json!({"id": call_id(n, i), "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments.to_string()}})
                })
                .collect();
            json!({"role": "assistant", "content": null, "tool_calls": calls})
        }
        Reply::Text(t) => json!({"role": "assistant", "content": t}),
        Reply::Fault(_) => json!({"role": "assistant", "content": ""}),
    }
}

/// A streamed answer: a role chunk, the content or each tool call's name then its arguments in
/// pieces, a finish chunk, the usage chunk when asked for, and `[DONE]`.
fn sse(
    id: &str,
    model: &str,
    n: usize,
    reply: &Reply,
    usage: TokenUsage,
    with_usage: bool,
) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let mut c = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
                           "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        if with_usage {
            c["usage"] = Value::Null;
        }
        format!("data: {c}\n\n")
    };
    let mut out = chunk(json!({"role": "assistant", "content": ""}), None);
    match reply {
        Reply::Text(t) => {
            for piece in t.split_inclusive(' ') {
                out += &chunk(json!({"content": piece}), None);
            }
        }
        Reply::ToolCalls(calls) => {
            for (i, c) in calls.iter().enumerate() {
                out += &chunk(
                    json!({"tool_calls": [{"index": i, "id": call_id(n, i), "type": "function",
                                           "function": {"name": c.name, "arguments": ""}}]}),
                    None,
                );
                let args = c.arguments.to_string();
                let chars: Vec<char> = args.chars().collect();
                for piece in chars.chunks(8) {
                    let piece: String = piece.iter().collect();
                    out += &chunk(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                        None,
                    );
                }
            }
        }
        Reply::Fault(_) => {}
    }
    out += &chunk(json!({}), Some(finish_reason(reply)));
    if with_usage {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
                       "choices": [], "usage": usage_json(usage)});
        out += &format!("data: {c}\n\n");
    }
    out + "data: [DONE]\n\n"
}
