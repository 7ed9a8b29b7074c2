//! A pass-through proxy between an agent and its LLM provider that counts the tokens the agent used.
//!
//! The agent is pointed at the proxy (`OPENAI_BASE_URL=http://proxy/v1`, or
//! `ANTHROPIC_BASE_URL=http://proxy`); every request under `/v1/` goes to the upstream with its
//! method, headers (minus hop-by-hop ones) and body, and the answer comes back with its status,
//! headers and body as the upstream sent them, streamed chunk by chunk as they arrive. On the way
//! back the proxy reads the usage each generation call reports ([`usage`] does the reading, with no
//! IO) and adds it to a shared [`UsageCounter`], which the session runner turns into the run's
//! [`AgentUsage`].
//!
//! Two changes to the traffic are deliberate, both so that usage can be read:
//! - `Accept-Encoding` is not forwarded, so the upstream answers uncompressed;
//! - a streamed chat or completions request that does not ask for usage gets
//!   `stream_options.include_usage` (see [`metered`] for why the client cannot tell).

mod metered;
pub mod usage;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use schemas::run_result::AgentUsage;
use serde_json::json;

use metered::{Metered, Mode};
use usage::{Api, Usage};

/// Requests larger than this are refused with 413: agents' prompts with long histories run to a
/// few MiB, and the body is held in memory to be forwarded (and rewritten when streamed).
const MAX_REQUEST_BYTES: usize = 64 << 20;

/// Where the proxy sends requests.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The upstream's base URL as a client of it would be given it, including its `/v1`
    /// (`https://api.openai.com/v1`, `https://api.anthropic.com/v1`): a request for
    /// `/v1/chat/completions` goes to `{base_url}/chat/completions`.
    pub base_url: String,
    /// When set, replaces the client's credentials: its `Authorization` header becomes
    /// `Bearer <key>`, or its `x-api-key` (Anthropic clients) becomes the key. The agent then never
    /// holds the real key.
    pub api_key: Option<String>,
}

/// What the proxy has seen, beyond the tokens of [`AgentUsage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyTotals {
    /// Every request forwarded (or refused), model listings included.
    pub requests: u64,
    /// Generation calls (chat, completions, responses, messages) the upstream answered with 2xx.
    pub llm_calls: u64,
    /// Successful metered calls whose response reported no usage that could be read: the token
    /// totals undercount by these calls.
    pub unmetered_calls: u64,
    /// Requests the upstream answered with a non-2xx status, or could not be reached for.
    pub upstream_errors: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
}

/// Token totals shared between the proxy's requests and whoever reports them.
#[derive(Debug, Default)]
pub struct UsageCounter {
    totals: Mutex<ProxyTotals>,
}

impl UsageCounter {
    pub fn new() -> Self {
        Self::default()
    }

    fn update(&self, f: impl FnOnce(&mut ProxyTotals)) {
        // A panic elsewhere while holding the lock leaves plain counters, still valid to add to.
        let mut totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut totals);
    }

    /// Everything counted so far.
    pub fn totals(&self) -> ProxyTotals {
        *self.totals.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The agent's usage so far, as a run records it (`steps` = LLM calls).
    pub fn snapshot(&self) -> AgentUsage {
        let t = self.totals();
        AgentUsage {
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cached_input_tokens: t.cached_input_tokens,
            steps: t.llm_calls,
            cost_usd: None,
        }
    }

    /// Records a successful call to `api` and the usage read from its response.
    pub(crate) fn record_call(&self, api: Api, usage: Option<Usage>) {
        self.update(|t| {
            if api.is_generation() {
                t.llm_calls += 1;
            }
            match usage {
                Some(u) => {
                    t.input_tokens += u.input;
                    t.output_tokens += u.output;
                    t.cached_input_tokens += u.cached_input;
                }
                None => t.unmetered_calls += 1,
            }
        });
    }
}

#[derive(Clone)]
struct ProxyState {
    upstream: Arc<Upstream>,
    /// The client, or why it could not be built (every request is then answered with that).
    client: Result<reqwest::Client, String>,
    usage: Arc<UsageCounter>,
}

/// The proxy: every path under `/v1/` is forwarded to `upstream`, and usage is added to `usage`.
pub fn router(upstream: Upstream, usage: Arc<UsageCounter>) -> Router {
    let state = ProxyState {
        upstream: Arc::new(upstream),
        client: build_client(),
        usage,
    };
    Router::new()
        .route("/v1/{*rest}", any(forward))
        .fallback(not_found)
        .with_state(state)
}

fn build_client() -> Result<reqwest::Client, String> {
    // reqwest is built without a TLS provider of its own (the workspace uses ring everywhere);
    // installing fails harmlessly when the process already chose one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        // A redirect is the client's to follow, with its own credentials.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the HTTP client for the LLM upstream: {e}"))
}

/// An error in the OpenAI shape, which OpenAI and Anthropic SDKs both surface readably.
fn error(status: StatusCode, kind: &str, message: String) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn not_found(uri: Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        format!(
            "the LLM proxy serves paths under /v1/ only, not {}",
            uri.path()
        ),
    )
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection and are never forwarded, nor
/// are the headers a `Connection` header names.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

fn connection_named(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Headers of one side fit to forward to the other.
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let named = connection_named(headers);
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if !is_hop_by_hop(name) && !named.iter().any(|n| n == name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// The headers sent upstream: the client's end-to-end headers, minus `Host` and `Content-Length`
/// (the client sets them for the upstream and the body it sends) and `Accept-Encoding` (usage must
/// be readable), with the proxy's key in place of the client's when one is configured.
fn upstream_headers(client: &HeaderMap, api_key: Option<&str>) -> Result<HeaderMap, Response> {
    let mut out = end_to_end(client);
    for name in [
        header::HOST,
        header::CONTENT_LENGTH,
        header::ACCEPT_ENCODING,
    ] {
        out.remove(name);
    }
    let Some(key) = api_key else {
        return Ok(out);
    };
    let anthropic_style = out.contains_key("x-api-key");
    out.remove(header::AUTHORIZATION);
    out.remove("x-api-key");
    let (name, value) = if anthropic_style {
        (HeaderName::from_static("x-api-key"), key.to_string())
    } else {
        (header::AUTHORIZATION, format!("Bearer {key}"))
    };
    let value = HeaderValue::from_str(&value).map_err(|_| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "proxy_error",
            "the LLM proxy's configured API key is not a valid header value".into(),
        )
    })?;
    out.insert(name, value);
    Ok(out)
}

async fn forward(
    State(st): State<ProxyState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    st.usage.update(|t| t.requests += 1);
    forward_inner(&st, method, &uri, &headers, body)
        .await
        .unwrap_or_else(|refused| refused)
}

async fn forward_inner(
    st: &ProxyState,
    method: Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Response> {
    let client = st
        .client
        .as_ref()
        .map_err(|e| error(StatusCode::BAD_GATEWAY, "proxy_error", e.clone()))?;
    let rest = uri.path().strip_prefix("/v1/").unwrap_or_default();
    // Only a POST generates; `GET /v1/chat/completions` lists stored completions.
    let api = if method == Method::POST {
        Api::of_path(rest)
    } else {
        Api::Other
    };
    let body = axum::body::to_bytes(body, MAX_REQUEST_BYTES)
        .await
        .map_err(|e| {
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                format!("request body unreadable or over {MAX_REQUEST_BYTES} bytes: {e}"),
            )
        })?;
    let rewritten = usage::with_stream_usage(api, &body);
    let drop_usage_chunk = rewritten.is_some();
    let body = rewritten.map(axum::body::Bytes::from).unwrap_or(body);

    let base = st.upstream.base_url.trim_end_matches('/');
    let url = match uri.query() {
        Some(q) => format!("{base}/{rest}?{q}"),
        None => format!("{base}/{rest}"),
    };
    let sent = client
        .request(method, &url)
        .headers(upstream_headers(headers, st.upstream.api_key.as_deref())?)
        .body(body)
        .send()
        .await;
    let resp = sent.map_err(|e| {
        tracing::warn!(%url, error = %e, "LLM upstream unreachable");
        st.usage.update(|t| t.upstream_errors += 1);
        error(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            format!("the LLM proxy could not reach its upstream at {url}: {e}"),
        )
    })?;

    let status = resp.status();
    let mut out_headers = end_to_end(resp.headers());
    if !status.is_success() {
        st.usage.update(|t| t.upstream_errors += 1);
    }
    let mode = if !status.is_success() || !api.is_metered() {
        None
    } else if is_event_stream(resp.headers()) {
        if drop_usage_chunk {
            // The body changes length; the upstream's framing no longer applies.
            out_headers.remove(header::CONTENT_LENGTH);
        }
        Some(Mode::sse(api, drop_usage_chunk))
    } else {
        Some(Mode::json())
    };
    let stream = resp.bytes_stream();
    let body = match mode {
        Some(mode) => {
            Body::from_stream(Metered::new(Box::pin(stream), mode, api, st.usage.clone()))
        }
        None => Body::from_stream(stream),
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = out_headers;
    Ok(response)
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

#[cfg(test)]
mod tests;
