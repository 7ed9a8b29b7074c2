//! The Jaeger source: services, then each service's traces over the window in time chunks (halved
//! while a chunk hits the search limit), de-duplicated by trace id, into the spans table. Reads
//! the api_v3 gateway (OTLP JSON, nanosecond times), or the v1 JSON API where api_v3 is absent.

use std::collections::{HashSet, VecDeque};

use indicatif::ProgressBar;
use schemas::tables::{Labels, Row, SpanRow};
use serde_json::Value;

use super::Window;
use super::http::HttpSource;
use super::sink::Sink;
use schemas::time::rfc3339_nanos;

/// Traces asked for per search; a chunk that returns this many is split.
const SEARCH_DEPTH: usize = 1000;
/// Searches in flight at once.
const IN_FLIGHT: usize = 4;
/// The first chunk length.
const CHUNK_NS: i64 = 300_000_000_000;
/// Chunks are not split below this (a burst of more than SEARCH_DEPTH traces in it is kept as
/// returned, with a warning).
const MIN_CHUNK_NS: i64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    V3,
    V1,
}

#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct JaegerOutcome {
    pub services: usize,
    pub traces: u64,
    pub spans: u64,
    pub truncated_chunks: u64,
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The OTLP JSON of an api_v3 answer, decoded straight into these types: a page is several MiB
/// of spans, and a `Value` tree of it costs far more memory and time than the rows it yields.
/// Scalars whose JSON type varies between servers (64-bit integers as strings or numbers, enums
/// as numbers) stay `Value`s.
mod otlp {
    use serde::Deserialize;
    use serde_json::Value;

    #[derive(Deserialize)]
    pub struct Answer {
        #[serde(default)]
        pub result: Option<Traces>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Traces {
        #[serde(default)]
        pub resource_spans: Vec<ResourceSpans>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ResourceSpans {
        #[serde(default)]
        pub resource: Resource,
        #[serde(default)]
        pub scope_spans: Vec<ScopeSpans>,
    }

    #[derive(Deserialize, Default)]
    pub struct Resource {
        #[serde(default)]
        pub attributes: Vec<KeyValue>,
    }

    #[derive(Deserialize)]
    pub struct ScopeSpans {
        #[serde(default)]
        pub spans: Vec<Span>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Span {
        #[serde(default)]
        pub trace_id: String,
        #[serde(default)]
        pub span_id: String,
        #[serde(default)]
        pub parent_span_id: Option<String>,
        #[serde(default)]
        pub name: String,
        #[serde(default)]
        pub kind: Value,
        #[serde(default)]
        pub start_time_unix_nano: Value,
        #[serde(default)]
        pub end_time_unix_nano: Value,
        #[serde(default)]
        pub attributes: Vec<KeyValue>,
        #[serde(default)]
        pub status: Status,
    }

    #[derive(Deserialize, Default)]
    pub struct Status {
        #[serde(default)]
        pub code: Value,
        #[serde(default)]
        pub message: Option<String>,
    }

    #[derive(Deserialize)]
    pub struct KeyValue {
        pub key: String,
        #[serde(default)]
        pub value: AnyValue,
    }

    /// An OTLP AnyValue; arrays and key-value lists are not kept.
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    pub struct AnyValue {
        string_value: Option<String>,
        int_value: Option<Value>,
        double_value: Option<Value>,
        bool_value: Option<bool>,
    }

    impl AnyValue {
        /// As text (64-bit integers arrive as strings already).
        pub fn into_text(self) -> String {
            if let Some(s) = self.string_value {
                return s;
            }
            if let Some(v) = self.int_value.or(self.double_value) {
                return super::text(&v);
            }
            self.bool_value.map(|b| b.to_string()).unwrap_or_default()
        }
    }
}

fn otlp_attributes(list: Vec<otlp::KeyValue>) -> Labels {
    list.into_iter()
        .map(|kv| (kv.key, kv.value.into_text()))
        .collect()
}

fn kind_name(kind: i64) -> &'static str {
    match kind {
        1 => "internal",
        2 => "server",
        3 => "client",
        4 => "producer",
        5 => "consumer",
        _ => "unspecified",
    }
}

fn nanos(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.parse().ok(),
        other => other.as_i64(),
    }
}

/// The spans of an api_v3 answer (`{"result": {"resourceSpans": [...]}}`).
fn v3_spans(answer: otlp::Answer) -> Vec<SpanRow> {
    let mut out = Vec::new();
    for rs in answer.result.into_iter().flat_map(|r| r.resource_spans) {
        // service.name stays among the resource attributes too, as OTLP has it.
        let resource = otlp_attributes(rs.resource.attributes);
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for s in rs.scope_spans.into_iter().flat_map(|ss| ss.spans) {
            let (Some(start), Some(end)) =
                (nanos(&s.start_time_unix_nano), nanos(&s.end_time_unix_nano))
            else {
                continue;
            };
            let status_code = match s.status.code.as_i64() {
                Some(1) => "ok",
                Some(2) => "error",
                _ => "unset",
            };
            out.push(SpanRow {
                trace_id: s.trace_id.to_lowercase(),
                span_id: s.span_id.to_lowercase(),
                parent_span_id: s
                    .parent_span_id
                    .filter(|p| !p.is_empty())
                    .map(|p| p.to_lowercase()),
                service: service.clone(),
                name: s.name,
                kind: kind_name(s.kind.as_i64().unwrap_or(0)).to_string(),
                start_ns: start,
                duration_ns: end - start,
                status_code: status_code.to_string(),
                status_message: s.status.message.filter(|m| !m.is_empty()),
                resource_attributes: resource.clone(),
                attributes: otlp_attributes(s.attributes),
            });
        }
    }
    out
}

fn v1_tags(list: &Value) -> Labels {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| Some((t["key"].as_str()?.to_string(), text(&t["value"]))))
        .collect()
}

/// The spans of a v1 answer (`{"data": [trace, ...]}`); kind and status come back from the tags
/// Jaeger derives them into (`span.kind`, `otel.status_code`, `error`, `otel.status_description`).
fn v1_spans(body: &Value) -> Vec<SpanRow> {
    let mut out = Vec::new();
    for trace in body["data"].as_array().into_iter().flatten() {
        for s in trace["spans"].as_array().into_iter().flatten() {
            let process = &trace["processes"][s["processID"].as_str().unwrap_or_default()];
            let service = process["serviceName"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let mut resource = v1_tags(&process["tags"]);
            resource.insert("service.name".into(), service.clone());
            let mut attributes = v1_tags(&s["tags"]);
            let kind = attributes
                .remove("span.kind")
                .unwrap_or_else(|| "unspecified".into());
            let code = attributes.remove("otel.status_code");
            let error = attributes.remove("error");
            let status_code = match (code.as_deref(), error.as_deref()) {
                (Some("ERROR"), _) | (_, Some("true")) => "error",
                (Some("OK"), _) => "ok",
                _ => "unset",
            };
            let (Some(start_us), Some(duration_us)) =
                (s["startTime"].as_i64(), s["duration"].as_i64())
            else {
                continue;
            };
            let parent = s["references"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["refType"] == "CHILD_OF")
                .and_then(|r| r["spanID"].as_str())
                .map(str::to_lowercase);
            out.push(SpanRow {
                trace_id: format!("{:0>32}", text(&s["traceID"]).to_lowercase()),
                span_id: format!("{:0>16}", text(&s["spanID"]).to_lowercase()),
                parent_span_id: parent,
                service,
                name: text(&s["operationName"]),
                kind,
                start_ns: start_us * 1000,
                duration_ns: duration_us * 1000,
                status_code: status_code.to_string(),
                status_message: attributes.remove("otel.status_description"),
                resource_attributes: resource,
                attributes,
            });
        }
    }
    out
}

async fn services(jaeger: &HttpSource) -> anyhow::Result<(Api, Vec<String>)> {
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    if let Some(body) = jaeger.get_json_or_404("api/v3/services", &[]).await? {
        return Ok((Api::V3, names(&body["services"])));
    }
    let body = jaeger.get_json("api/services", &[]).await?;
    Ok((Api::V1, names(&body["data"])))
}

/// The spans of `service`'s traces that started in `[from, to]`.
async fn search(
    jaeger: &HttpSource,
    api: Api,
    service: &str,
    from: i64,
    to: i64,
) -> anyhow::Result<Vec<SpanRow>> {
    Ok(match api {
        Api::V3 => jaeger
            .get_typed_or_404(
                "api/v3/traces",
                &[
                    ("query.serviceName", service.to_string()),
                    ("query.startTimeMin", rfc3339_nanos(from)),
                    ("query.startTimeMax", rfc3339_nanos(to)),
                    ("query.searchDepth", SEARCH_DEPTH.to_string()),
                ],
            )
            .await?
            .map(v3_spans),
        Api::V1 => jaeger
            .get_json_or_404(
                "api/traces",
                &[
                    ("service", service.to_string()),
                    ("start", (from / 1000).to_string()),
                    ("end", (to / 1000).to_string()),
                    ("limit", SEARCH_DEPTH.to_string()),
                ],
            )
            .await?
            .map(|body| v1_spans(&body)),
    }
    .unwrap_or_default())
}

fn trace_key(id: &str) -> u128 {
    u128::from_str_radix(id, 16).unwrap_or_default()
}

/// One search: a service over a time chunk.
#[derive(Debug, Clone)]
struct Chunk {
    service: usize,
    from: i64,
    to: i64,
}

pub async fn capture(
    jaeger: &HttpSource,
    window: Window,
    sink: &Sink,
    bar: &ProgressBar,
) -> anyhow::Result<JaegerOutcome> {
    let (api, services) = services(jaeger).await?;
    bar.set_length(services.len() as u64);
    let mut outcome = JaegerOutcome {
        services: services.len(),
        ..Default::default()
    };
    // Every service's chunks, earliest first; a split chunk's halves go to the front.
    let mut todo: VecDeque<Chunk> = VecDeque::new();
    let mut pending = vec![0usize; services.len()];
    for (service, count) in pending.iter_mut().enumerate() {
        let mut chunks = Vec::new();
        let mut t = window.until_ns;
        while t >= window.since_ns {
            let from = (t - CHUNK_NS + 1).max(window.since_ns);
            chunks.push(Chunk {
                service,
                from,
                to: t,
            });
            t = from - 1;
        }
        *count = chunks.len();
        todo.extend(chunks.into_iter().rev());
    }
    // Searches run as tasks, IN_FLIGHT at a time, so that the server's work and the decoding of
    // pages overlap; rows are pushed here, one page at a time, as pages complete.
    let mut in_flight = tokio::task::JoinSet::new();
    let mut seen: HashSet<u128> = HashSet::new();
    loop {
        while in_flight.len() < IN_FLIGHT
            && let Some(chunk) = todo.pop_front()
        {
            let jaeger = jaeger.clone();
            let service = services[chunk.service].clone();
            in_flight.spawn(async move {
                let spans = search(&jaeger, api, &service, chunk.from, chunk.to).await;
                (chunk, spans)
            });
        }
        let Some(joined) = in_flight.join_next().await else {
            break;
        };
        let (chunk, spans) =
            joined.map_err(|e| anyhow::anyhow!("jaeger: a search task failed: {e}"))?;
        let spans = spans?;
        let Chunk { service, from, to } = chunk;
        let traces: HashSet<&str> = spans.iter().map(|s| s.trace_id.as_str()).collect();
        if traces.len() >= SEARCH_DEPTH {
            if to - from > MIN_CHUNK_NS {
                let mid = from + (to - from) / 2;
                todo.push_front(Chunk {
                    service,
                    from: mid + 1,
                    to,
                });
                todo.push_front(Chunk {
                    service,
                    from,
                    to: mid,
                });
                pending[service] += 1;
                continue;
            }
            outcome.truncated_chunks += 1;
            tracing::warn!(
                "jaeger: more than {SEARCH_DEPTH} traces of {} within a millisecond; kept those returned",
                services[service]
            );
        }
        let new: HashSet<u128> = traces
            .iter()
            .map(|t| trace_key(t))
            .filter(|k| !seen.contains(k))
            .collect();
        outcome.traces += new.len() as u64;
        for span in spans {
            if new.contains(&trace_key(&span.trace_id)) && window.contains(span.start_ns) {
                outcome.spans += 1;
                sink.push(Row::Span(span)).await?;
            }
        }
        seen.extend(new);
        pending[service] -= 1;
        if pending[service] == 0 {
            bar.inc(1);
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v1_and_v3_answers_give_the_same_span() {
        let v3 = json!({"result": {"resourceSpans": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "geo"}},
            {"key": "host.name", "value": {"stringValue": "n1"}}]},
          "scopeSpans": [{"scope": {}, "spans": [{"traceId": "00000000000000000000000000000abc", "spanId": "00000000000000de",
            "parentSpanId": "", "name": "GET /near", "kind": 2, "startTimeUnixNano": "1000000", "endTimeUnixNano": "3000000",
            "attributes": [{"key": "http.status_code", "value": {"intValue": "500"}}],
            "status": {"code": 2, "message": "boom"}}]}]}]}});
        let v1 = json!({"data": [{"traceID": "abc", "processes": {"p1": {"serviceName": "geo",
            "tags": [{"key": "host.name", "type": "string", "value": "n1"}]}},
          "spans": [{"traceID": "abc", "spanID": "de", "operationName": "GET /near", "references": [],
            "startTime": 1000, "duration": 2000, "processID": "p1",
            "tags": [{"key": "http.status_code", "type": "int64", "value": 500},
                     {"key": "span.kind", "type": "string", "value": "server"},
                     {"key": "otel.status_code", "type": "string", "value": "ERROR"},
                     {"key": "error", "type": "bool", "value": true},
                     {"key": "otel.status_description", "type": "string", "value": "boom"}]}]}]});
        let a = v3_spans(serde_json::from_value(v3).unwrap());
        assert_eq!(a.len(), 1);
        assert_eq!(a, v1_spans(&v1));
        assert_eq!(a[0].kind, "server");
        assert_eq!(a[0].status_code, "error");
        assert_eq!(a[0].duration_ns, 2_000_000);
        assert_eq!(a[0].attributes["http.status_code"], "500");
    }
}
