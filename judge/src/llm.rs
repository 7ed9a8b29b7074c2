//! The judge model behind any OpenAI-compatible endpoint, through async-openai.
//!
//! The transport is our own tower service under async-openai: every HTTP attempt first takes a
//! token from the run's rate limiter, and 429, 5xx, timeouts and connection failures are retried
//! with exponential backoff and full jitter, waiting at least what `Retry-After` (or OpenAI's
//! `retry-after-ms`) asks. Attempts are counted per verdict through a task-local counter.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
    CreateChatCompletionRequest, ResponseFormat, ResponseFormatJsonSchema,
};
use rand::Rng;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::ratelimit::TokenBucket;

/// Whether to ask the endpoint for schema-constrained output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StructuredMode {
    /// Try `response_format: json_schema`; if the endpoint rejects it, stop asking for the run.
    Auto,
    On,
    Off,
}

/// Endpoint used when none is given (`--base-url`, `JUDGE_BASE_URL`).
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Model used when none is given (`--model`, `JUDGE_MODEL`).
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// Environment variables naming the judge model, read by `judge run` and by sessions.
pub const ENV_BASE_URL: &str = "JUDGE_BASE_URL";
pub const ENV_MODEL: &str = "JUDGE_MODEL";
pub const ENV_API_KEY: &str = "JUDGE_API_KEY";

/// Where and how to call the judge model.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    pub base_url: String,
    pub api_key: String,
    pub model: String,
    pub temperature: f64,
    pub seed: Option<i64>,
    pub max_tokens: Option<u32>,
    pub structured: StructuredMode,
    /// Per HTTP attempt.
    pub timeout: Duration,
    /// HTTP attempts per call, retries included.
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// Requests per second over the whole run (None = unlimited), and the burst allowed.
    pub rate: Option<f64>,
    pub burst: u32,
}

/// One successful completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Whether the answer was schema-constrained.
    pub structured: bool,
}

/// Why a call failed after every retry.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{0}")]
    Api(String),
    #[error("no answer after {attempts} attempts: {last}")]
    Exhausted { attempts: u32, last: String },
}

tokio::task_local! {
    /// HTTP requests made on behalf of the current verdict.
    static REQUESTS: Arc<AtomicU32>;
}

/// Runs `f` while counting the HTTP requests it makes; returns its result and the count.
pub async fn counting_requests<F: std::future::Future>(f: F) -> (F::Output, u32) {
    let counter = Arc::new(AtomicU32::new(0));
    let out = REQUESTS.scope(counter.clone(), f).await;
    (out, counter.load(Ordering::Relaxed))
}

fn count_request() {
    let _ = REQUESTS.try_with(|c| c.fetch_add(1, Ordering::Relaxed));
}

#[derive(Debug, Clone)]
struct RetryPolicy {
    max_attempts: u32,
    base: Duration,
    cap: Duration,
    limiter: Option<Arc<TokenBucket>>,
}

impl RetryPolicy {
    /// Full jitter: uniform in [0, min(cap, base·2^attempt)].
    fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(2u32.saturating_pow(attempt.min(20)));
        let ceiling = exp.min(self.cap);
        ceiling.mul_f64(rand::rng().random::<f64>())
    }

    async fn wait_turn(&self) {
        if let Some(l) = &self.limiter {
            l.acquire().await;
        }
    }
}

/// How long the server asked us to wait: `retry-after-ms` (OpenAI), else `Retry-After` in seconds
/// (integer or decimal) or as an HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let raw = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = raw.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(raw).ok()?;
    let delta = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

fn transient(e: &reqwest::Error) -> bool {
    e.is_timeout() || e.is_connect() || e.is_request() || e.is_body()
}

/// One HTTP exchange with retries; the response handed back is either a success, a non-retryable
/// status, or the last retryable one (which async-openai turns into an API error).
async fn send(
    http: reqwest::Client,
    factory: HttpRequestFactory,
    policy: RetryPolicy,
) -> Result<reqwest::Response, OpenAIError> {
    let mut attempt = 0;
    loop {
        policy.wait_turn().await;
        count_request();
        attempt += 1;
        let request = factory.build().await?;
        let result = http.execute(request).await;
        let asked = match &result {
            Ok(r) if r.status().as_u16() == 429 || r.status().is_server_error() => {
                tracing::debug!(status = %r.status(), attempt, "retryable status");
                retry_after(r.headers())
            }
            Ok(_) => return result.map_err(OpenAIError::Reqwest),
            Err(e) if transient(e) => {
                tracing::debug!(error = %e, attempt, "transient transport error");
                None
            }
            Err(_) => return result.map_err(OpenAIError::Reqwest),
        };
        if attempt >= policy.max_attempts {
            return result.map_err(OpenAIError::Reqwest);
        }
        let jitter = policy.backoff(attempt - 1);
        let wait = match asked {
            // Never earlier than asked; a little jitter so a crowd of waiters does not return at once.
            Some(d) => d + jitter.min(d / 10 + Duration::from_millis(1)),
            None => jitter,
        };
        tokio::time::sleep(wait).await;
    }
}

/// A client for one judge model.
pub struct Llm {
    client: Client<OpenAIConfig>,
    pub config: LlmConfig,
    structured_ok: AtomicBool,
    policy: RetryPolicy,
}

/// Messages of one exchange: system, user, then (assistant, user) pairs for repairs.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub system: String,
    pub user: String,
    pub follow_ups: Vec<(String, String)>,
}

impl Llm {
    pub fn new(config: LlmConfig) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
        let policy = RetryPolicy {
            max_attempts: config.max_attempts.max(1),
            base: config.backoff_base,
            cap: config.backoff_cap,
            limiter: config
                .rate
                .filter(|r| *r > 0.0)
                .map(|r| Arc::new(TokenBucket::new(r, config.burst))),
        };
        let service_policy = policy.clone();
        let service = tower::service_fn(move |factory: HttpRequestFactory| {
            send(http.clone(), factory, service_policy.clone())
        });
        let openai = OpenAIConfig::new()
            .with_api_base(config.base_url.trim_end_matches('/'))
            .with_api_key(config.api_key.clone());
        let client = Client::with_config(openai).with_http_service(service);
        Ok(Self {
            client,
            structured_ok: AtomicBool::new(config.structured != StructuredMode::Off),
            config,
            policy,
        })
    }

    /// Whether the next call asks for schema-constrained output.
    pub fn structured_now(&self) -> bool {
        self.structured_ok.load(Ordering::Relaxed)
    }

    // `seed` is deprecated by OpenAI but still honoured by it and by most compatible servers; the
    // judge records and sends it so repeated runs can be reproduced where the endpoint allows.
    #[allow(deprecated)]
    fn request(
        &self,
        conv: &Conversation,
        schema: Option<&Value>,
        seed: Option<i64>,
    ) -> CreateChatCompletionRequest {
        let mut messages = vec![
            ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage::from(
                conv.system.as_str(),
            )),
            ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage::from(
                conv.user.as_str(),
            )),
        ];
        for (assistant, user) in &conv.follow_ups {
            messages.push(ChatCompletionRequestMessage::Assistant(
                ChatCompletionRequestAssistantMessage::from(assistant.as_str()),
            ));
            messages.push(ChatCompletionRequestMessage::User(
                ChatCompletionRequestUserMessage::from(user.as_str()),
            ));
        }
        CreateChatCompletionRequest {
            model: self.config.model.clone(),
            messages,
            temperature: Some(self.config.temperature as f32),
            seed,
            max_completion_tokens: self.config.max_tokens,
            response_format: schema.map(|s| ResponseFormat::JsonSchema {
                json_schema: ResponseFormatJsonSchema {
                    description: Some("Answers to the checklist questions".into()),
                    name: "checklist_answers".into(),
                    schema: s.clone(),
                    strict: Some(true),
                },
            }),
            ..Default::default()
        }
    }

    /// Sends one conversation. Transport failures are retried in the HTTP service; a response body
    /// that cannot be read (cut off, not JSON) is retried here, within the same attempt budget.
    pub async fn complete(
        &self,
        conv: &Conversation,
        schema: &Value,
        seed: Option<i64>,
    ) -> Result<Completion, CallError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let structured = self.structured_now();
            let req = self.request(conv, structured.then_some(schema), seed);
            let err = match self.client.chat().create(req).await {
                Ok(resp) => {
                    let text = resp
                        .choices
                        .first()
                        .and_then(|c| c.message.content.clone())
                        .unwrap_or_default();
                    let (p, c) = resp.usage.map_or((0, 0), |u| {
                        (u64::from(u.prompt_tokens), u64::from(u.completion_tokens))
                    });
                    return Ok(Completion {
                        text,
                        prompt_tokens: p,
                        completion_tokens: c,
                        structured,
                    });
                }
                Err(e) => e,
            };
            match &err {
                OpenAIError::ApiError(api)
                    if structured
                        && self.config.structured == StructuredMode::Auto
                        && api.status_code.as_u16() == 400
                        && mentions_response_format(&api.api_error.message) =>
                {
                    tracing::warn!(
                        "endpoint refuses response_format json_schema; asking for plain JSON from now on"
                    );
                    self.structured_ok.store(false, Ordering::Relaxed);
                    attempt -= 1;
                    continue;
                }
                OpenAIError::ApiError(api)
                    if api.status_code.as_u16() == 429 || api.status_code.is_server_error() =>
                {
                    // The service already spent its attempts on this status.
                    return Err(CallError::Exhausted {
                        attempts: self.policy.max_attempts,
                        last: err.to_string(),
                    });
                }
                OpenAIError::ApiError(_) | OpenAIError::InvalidArgument(_) => {
                    return Err(CallError::Api(err.to_string()));
                }
                _ => {}
            }
            if attempt >= self.policy.max_attempts {
                return Err(CallError::Exhausted {
                    attempts: attempt,
                    last: err.to_string(),
                });
            }
            tracing::debug!(error = %err, attempt, "unreadable response, retrying");
            tokio::time::sleep(self.policy.backoff(attempt - 1)).await;
        }
    }
}

fn mentions_response_format(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("response_format") || m.contains("json_schema") || m.contains("structured")
}

/// Installs ring as rustls' process-wide crypto provider (once; later calls are no-ops).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_every_form() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after", "0.25".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        h.insert("retry-after-ms", "40".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(40)));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn backoff_stays_under_its_ceiling() {
        let p = RetryPolicy {
            max_attempts: 5,
            base: Duration::from_millis(100),
            cap: Duration::from_millis(700),
            limiter: None,
        };
        for attempt in 0..10 {
            let ceiling =
                Duration::from_millis(100 * 2u64.pow(attempt)).min(Duration::from_millis(700));
            for _ in 0..50 {
                assert!(p.backoff(attempt) <= ceiling);
            }
        }
    }
}
