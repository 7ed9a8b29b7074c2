//! A local OpenAI-compatible chat-completions server for tests and benchmarks: real HTTP on
//! 127.0.0.1 (port 0), scripted answers, set latency, and injected faults (429 with Retry-After, 500,
//! stalls past the client's timeout, cut-off or invalid JSON, answers with ids missing, a response
//! body cut short). Which request gets a fault is decided by a hash of (request body, how often that
//! body was seen, seed), so a test run is reproducible whatever the scheduling.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    RateLimited,
    ServerError,
    Stall,
    TruncatedJson,
    InvalidJson,
    MissingIds,
    BodyCut,
}

pub const ALL_FAULTS: [Fault; 7] = [
    Fault::RateLimited,
    Fault::ServerError,
    Fault::Stall,
    Fault::TruncatedJson,
    Fault::InvalidJson,
    Fault::MissingIds,
    Fault::BodyCut,
];

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RetryAfter {
    Millis(u64),
    Seconds(u64),
}

/// Decides the yes/no answers: (first user message, question ids) → yes per id.
pub type Script = Arc<dyn Fn(&str, &[String], Option<i64>) -> Vec<bool> + Send + Sync>;

#[derive(Clone)]
pub struct Config {
    pub latency: Duration,
    pub fault_rate: f64,
    pub faults: Vec<Fault>,
    pub seed: u64,
    pub stall: Duration,
    pub retry_after: RetryAfter,
    pub structured_supported: bool,
    /// Fail the first N requests with 429 whatever the fault rate.
    pub first_rate_limited: usize,
    /// Whether repair requests (with follow-up messages) can be faulted too.
    pub faults_on_repair: bool,
    pub script: Script,
}

/// Yes for every id, except those the diagnosis marks `no:<id>`.
pub fn default_script() -> Script {
    Arc::new(|user: &str, ids: &[String], _seed| {
        ids.iter()
            .map(|id| !user.contains(&format!("no:{id}")))
            .collect()
    })
}

impl Default for Config {
    fn default() -> Self {
        Self {
            latency: Duration::ZERO,
            fault_rate: 0.0,
            faults: ALL_FAULTS.to_vec(),
            seed: 7,
            stall: Duration::from_secs(3),
            retry_after: RetryAfter::Millis(20),
            structured_supported: true,
            first_rate_limited: 0,
            faults_on_repair: true,
            script: default_script(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Logged {
    pub at: Instant,
    pub user: String,
    pub fault: Option<Fault>,
    pub temperature: Option<f64>,
    pub seed: Option<i64>,
    pub structured: bool,
    pub follow_ups: usize,
}

#[derive(Default)]
struct Inner {
    seen: HashMap<u64, u64>,
    log: Vec<Logged>,
}

#[derive(Clone)]
struct AppState {
    config: Arc<Config>,
    inner: Arc<Mutex<Inner>>,
}

pub struct Server {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    pub async fn start(config: Config) -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let state = AppState {
            config: Arc::new(config),
            inner: inner.clone(),
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { addr, inner, task }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn log(&self) -> Vec<Logged> {
        self.inner.lock().unwrap().log.clone()
    }

    pub fn requests(&self) -> usize {
        self.inner.lock().unwrap().log.len()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn mix(mut x: u64) -> u64 {
    // splitmix64
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn error(status: StatusCode, message: &str, kind: &str) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn chat(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let _ = headers;
    let cfg = &state.config;
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("bad json: {e}"),
                "invalid_request_error",
            );
        }
    };
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    let user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    let structured = req["response_format"]["type"] == "json_schema";
    let seed = req["seed"].as_i64();
    let h = hash(&body);
    let (fault, n) = {
        let mut inner = state.inner.lock().unwrap();
        let n = inner.log.len();
        let k = {
            let c = inner.seen.entry(h).or_insert(0);
            *c += 1;
            *c
        };
        let r = mix(cfg.seed ^ h ^ k.wrapping_mul(0x1234_5678_9ABC));
        let fault = if n < cfg.first_rate_limited {
            Some(Fault::RateLimited)
        } else if !cfg.faults.is_empty()
            && (cfg.faults_on_repair || messages.len() <= 2)
            && (r % 10_000) as f64 / 10_000.0 < cfg.fault_rate
        {
            Some(cfg.faults[(mix(r) % cfg.faults.len() as u64) as usize])
        } else {
            None
        };
        inner.log.push(Logged {
            at: Instant::now(),
            user: user.clone(),
            fault,
            temperature: req["temperature"].as_f64(),
            seed,
            structured,
            follow_ups: messages.len().saturating_sub(2),
        });
        (fault, n)
    };
    let _ = n;
    if !cfg.latency.is_zero() {
        tokio::time::sleep(cfg.latency).await;
    }
    if structured && !cfg.structured_supported {
        return error(
            StatusCode::BAD_REQUEST,
            "response_format json_schema is not supported by this model",
            "invalid_request_error",
        );
    }
    match fault {
        Some(Fault::RateLimited) => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate limit reached",
                "rate_limit_error",
            );
            match cfg.retry_after {
                RetryAfter::Millis(ms) => {
                    r.headers_mut()
                        .insert("retry-after-ms", HeaderValue::from(ms));
                }
                RetryAfter::Seconds(s) => {
                    r.headers_mut().insert("retry-after", HeaderValue::from(s));
                }
            }
            return r;
        }
        Some(Fault::ServerError) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error",
                "server_error",
            );
        }
        Some(Fault::Stall) => {
            tokio::time::sleep(cfg.stall).await;
        }
        _ => {}
    }
    let ids: Vec<String> = user
        .lines()
        .find_map(|l| l.strip_prefix("Question ids: "))
        .map(|l| l.split(", ").map(str::to_string).collect())
        .unwrap_or_default();
    let yes = (cfg.script)(&user, &ids, seed);
    let mut answers: Vec<Value> = ids
        .iter()
        .zip(&yes)
        .map(|(id, y)| json!({"id": id, "answer": if *y {"yes"} else {"no"}, "confidence": "high", "evidence": format!("scripted answer for {id}")}))
        .collect();
    if fault == Some(Fault::MissingIds) {
        answers.truncate(answers.len().saturating_sub(2));
    }
    let mut content = json!({"answers": answers}).to_string();
    match fault {
        Some(Fault::TruncatedJson) => content.truncate(content.len() / 2),
        Some(Fault::InvalidJson) => {
            content = content.replace("\"yes\"", "yes").replace("\"no\"", "no")
        }
        _ => {}
    }
    let completion = json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": req["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": user.len() / 4, "completion_tokens": content.len() / 4, "total_tokens": user.len() / 4 + content.len() / 4},
    });
    let mut text = completion.to_string();
    if fault == Some(Fault::BodyCut) {
        text.truncate(text.len() / 2);
    }
    (StatusCode::OK, [("content-type", "application/json")], text).into_response()
}
