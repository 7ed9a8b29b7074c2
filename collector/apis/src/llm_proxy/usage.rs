//! Token usage read from LLM API responses, with no IO: the proxy hands this module the bytes it
//! forwards and gets back the usage the provider reported.
//!
//! Three response families are understood, each as a whole JSON body or as a Server-Sent Events
//! stream:
//! - OpenAI Chat Completions, legacy Completions and Embeddings: `usage.prompt_tokens`,
//!   `usage.completion_tokens`, `usage.prompt_tokens_details.cached_tokens`. A stream carries usage
//!   in its last chunk (only when the request set `stream_options.include_usage`); some servers send
//!   a running total in every chunk, so the last usage seen wins.
//! - OpenAI Responses: `usage.input_tokens`, `usage.output_tokens`,
//!   `usage.input_tokens_details.cached_tokens`; a stream carries it in the `response` of its
//!   terminal event (`response.completed`, `.incomplete` or `.failed`).
//! - Anthropic Messages: `usage.input_tokens` counts only uncached input, beside
//!   `cache_creation_input_tokens` and `cache_read_input_tokens`; all three are input here, and cache
//!   reads are the cached part. A stream gives usage in `message_start` and running totals in
//!   `message_delta`, whose fields replace the earlier ones.

use serde_json::Value;

/// Which API a request path under `/v1/` belongs to; decides how its response is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    ChatCompletions,
    Completions,
    Responses,
    Embeddings,
    AnthropicMessages,
    /// Anything else (model listings, files, ...): forwarded, never metered.
    Other,
}

impl Api {
    /// The API of a path relative to `/v1/` (`chat/completions`, `messages`, ...). Sub-resources
    /// such as `responses/{id}` or `messages/count_tokens` are not generation calls.
    pub fn of_path(rest: &str) -> Api {
        match rest.trim_end_matches('/') {
            "chat/completions" => Api::ChatCompletions,
            "completions" => Api::Completions,
            "responses" => Api::Responses,
            "embeddings" => Api::Embeddings,
            "messages" => Api::AnthropicMessages,
            _ => Api::Other,
        }
    }

    /// Whether a call to this API is an LLM step of the agent (embeddings use tokens but are not).
    pub fn is_generation(self) -> bool {
        matches!(
            self,
            Api::ChatCompletions | Api::Completions | Api::Responses | Api::AnthropicMessages
        )
    }

    /// Whether this API's responses report token usage at all.
    pub fn is_metered(self) -> bool {
        self != Api::Other
    }
}

/// Tokens one call used. `input` includes `cached_input`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cached_input: u64,
}

fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// The usage object of an OpenAI-style body (chat, completions, embeddings).
fn openai_usage(usage: &Value) -> Option<Usage> {
    if !usage.is_object() {
        return None;
    }
    let input = count(usage, "prompt_tokens")?;
    Some(Usage {
        input,
        output: count(usage, "completion_tokens").unwrap_or(0),
        cached_input: usage
            .get("prompt_tokens_details")
            .and_then(|d| count(d, "cached_tokens"))
            .unwrap_or(0),
    })
}

/// The usage object of a Responses API `response`.
fn responses_usage(usage: &Value) -> Option<Usage> {
    if !usage.is_object() {
        return None;
    }
    Some(Usage {
        input: count(usage, "input_tokens")?,
        output: count(usage, "output_tokens").unwrap_or(0),
        cached_input: usage
            .get("input_tokens_details")
            .and_then(|d| count(d, "cached_tokens"))
            .unwrap_or(0),
    })
}

/// Anthropic's usage fields as last reported; a stream's `message_delta` replaces those it names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct AnthropicUsage {
    input: Option<u64>,
    output: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
}

impl AnthropicUsage {
    fn update(&mut self, usage: &Value) {
        if !usage.is_object() {
            return;
        }
        let fields = [
            ("input_tokens", &mut self.input),
            ("output_tokens", &mut self.output),
            ("cache_creation_input_tokens", &mut self.cache_creation),
            ("cache_read_input_tokens", &mut self.cache_read),
        ];
        for (key, slot) in fields {
            if let Some(n) = count(usage, key) {
                *slot = Some(n);
            }
        }
    }

    fn usage(&self) -> Option<Usage> {
        if *self == AnthropicUsage::default() {
            return None;
        }
        let read = self.cache_read.unwrap_or(0);
        Some(Usage {
            input: self.input.unwrap_or(0) + self.cache_creation.unwrap_or(0) + read,
            output: self.output.unwrap_or(0),
            cached_input: read,
        })
    }
}

/// The usage in a whole (non-streamed) JSON response body of `api`, if it reports one.
pub fn from_body(api: Api, body: &[u8]) -> Option<Usage> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let usage = v.get("usage")?;
    match api {
        Api::ChatCompletions | Api::Completions | Api::Embeddings => openai_usage(usage),
        Api::Responses => responses_usage(usage),
        Api::AnthropicMessages => {
            let mut a = AnthropicUsage::default();
            a.update(usage);
            a.usage()
        }
        Api::Other => None,
    }
}

/// One complete Server-Sent Event: its raw bytes (terminating blank line included, so that
/// re-emitting them reproduces the stream) and its joined `data` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub raw: Vec<u8>,
    pub data: String,
}

/// Splits a byte stream into Server-Sent Events, whatever the chunk boundaries: a chunk may end
/// inside a line, inside a `\r\n`, or inside a UTF-8 sequence.
#[derive(Debug, Default)]
pub struct SseSplitter {
    /// Bytes of the event being read, complete lines and a partial last line.
    pending: Vec<u8>,
    /// Where in `pending` the partial last line starts.
    line_start: usize,
    data: Vec<String>,
}

impl SseSplitter {
    /// Feeds the next chunk; returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        for &b in chunk {
            self.pending.push(b);
            if b != b'\n' {
                continue;
            }
            let line = self.pending.get(self.line_start..).unwrap_or_default();
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                events.push(Event {
                    raw: std::mem::take(&mut self.pending),
                    data: std::mem::take(&mut self.data).join("\n"),
                });
                self.line_start = 0;
                continue;
            }
            if let Some(value) = line.strip_prefix(b"data:") {
                let value = value.strip_prefix(b" ").unwrap_or(value);
                self.data.push(String::from_utf8_lossy(value).into_owned());
            }
            self.line_start = self.pending.len();
        }
        events
    }

    /// The bytes of an event left unterminated when the stream ended (or nothing).
    pub fn rest(&mut self) -> Vec<u8> {
        self.line_start = 0;
        self.data.clear();
        std::mem::take(&mut self.pending)
    }
}

/// Reads usage from the events of one streamed response of `api`.
#[derive(Debug)]
pub struct StreamUsage {
    api: Api,
    openai: Option<Usage>,
    anthropic: AnthropicUsage,
}

impl StreamUsage {
    pub fn new(api: Api) -> Self {
        Self {
            api,
            openai: None,
            anthropic: AnthropicUsage::default(),
        }
    }

    /// Takes in one event's data.
    pub fn event(&mut self, data: &str) {
        if data.is_empty() || data == "[DONE]" {
            return;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        match self.api {
            Api::ChatCompletions | Api::Completions | Api::Embeddings => {
                if let Some(u) = v.get("usage").and_then(openai_usage) {
                    self.openai = Some(u);
                }
            }
            Api::Responses => {
                let terminal = matches!(
                    v.get("type").and_then(Value::as_str),
                    Some("response.completed" | "response.incomplete" | "response.failed")
                );
                if let Some(u) = terminal
                    .then(|| v.get("response").and_then(|r| r.get("usage")))
                    .flatten()
                    .and_then(responses_usage)
                {
                    self.openai = Some(u);
                }
            }
            Api::AnthropicMessages => match v.get("type").and_then(Value::as_str) {
                Some("message_start") => {
                    if let Some(u) = v.get("message").and_then(|m| m.get("usage")) {
                        self.anthropic.update(u);
                    }
                }
                Some("message_delta") => {
                    if let Some(u) = v.get("usage") {
                        self.anthropic.update(u);
                    }
                }
                _ => {}
            },
            Api::Other => {}
        }
    }

    /// The usage reported so far (the final usage once the stream has ended).
    pub fn usage(&self) -> Option<Usage> {
        match self.api {
            Api::AnthropicMessages => self.anthropic.usage(),
            _ => self.openai,
        }
    }
}

/// Whether a chat/completions stream event is the usage-only chunk that `include_usage` adds (no
/// choices, a usage object). The proxy drops it when it was the one that asked for it.
pub fn is_usage_only_chunk(data: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(data) else {
        return false;
    };
    let no_choices = v
        .get("choices")
        .and_then(Value::as_array)
        .is_some_and(|c| c.is_empty());
    no_choices && v.get("usage").is_some_and(Value::is_object)
}

/// The body to forward for a request to `api`, when it must differ from the client's: a streamed
/// chat or completions request that does not ask for usage gets `stream_options.include_usage`
/// set, or its usage would never be reported. `None` means forward the body unchanged.
pub fn with_stream_usage(api: Api, body: &[u8]) -> Option<Vec<u8>> {
    if !matches!(api, Api::ChatCompletions | Api::Completions) {
        return None;
    }
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let obj = v.as_object_mut()?;
    if obj.get("stream").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let options = obj
        .entry("stream_options")
        .or_insert_with(|| Value::Object(Default::default()));
    // A client's explicit `stream_options: null` or a non-object is left alone: changing a
    // malformed request would hide the client's own error from it.
    let options = options.as_object_mut()?;
    if options.get("include_usage").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    options.insert("include_usage".into(), Value::Bool(true));
    serde_json::to_vec(&v).ok()
}

#[cfg(test)]
mod tests;
