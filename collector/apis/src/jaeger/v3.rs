//! Jaeger's api_v3 HTTP gateway: OTLP JSON (hex ids, integer enums, 64-bit integers as strings)
//! wrapped in `{"result": ...}`, and grpc-gateway error bodies.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use schemas::tables::{Labels, SpanRow};
use serde_json::{Value, json};

use super::{JaegerFacade, Params, Typed, derived_tags, parse_trace_id, read, typed};
use schemas::time::duration;
use schemas::time::{Reading, parse_rfc3339};
use stores::spans::TraceQuery;

const DEFAULT_SEARCH_DEPTH: usize = 100;

/// The gateway writes errors with Go's `http.Error`: JSON text, plain-text content type.
fn error(code: StatusCode, message: impl Into<String>) -> Response {
    let body = json!({"error": {"httpCode": code.as_u16(), "message": message.into()}});
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{body}\n"),
    )
        .into_response()
}

/// A refusal's message; every refusal of a parameter is a 400.
fn malformed(param: &str, err: impl std::fmt::Display) -> String {
    format!("malformed parameter {param}: {err}")
}

fn refuse(msg: String) -> Response {
    error(StatusCode::BAD_REQUEST, msg)
}

/// The store could not be read.
fn failed(e: &anyhow::Error) -> Response {
    error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}"))
}

pub async fn services(State(f): State<Arc<JaegerFacade>>) -> Response {
    let now = f.clock.read().virtual_now_ns;
    match read(&f, move |s| s.services(now)).await {
        Ok(services) => axum::Json(json!({"services": services})).into_response(),
        Err(e) => failed(&e),
    }
}

pub async fn operations(State(f): State<Arc<JaegerFacade>>, RawQuery(q): RawQuery) -> Response {
    let p = Params::parse(q.as_deref());
    let now = f.clock.read().virtual_now_ns;
    let service = p.get(&["service"]).unwrap_or("").to_string();
    let kind = p.get(&["span_kind", "spanKind"]).map(str::to_string);
    let ops = match read(&f, move |s| s.operations(&service, kind.as_deref(), now)).await {
        Ok(v) => v,
        Err(e) => return failed(&e),
    };
    let ops: Vec<Value> = ops
        .into_iter()
        .map(|(name, kind)| json!({"name": name, "spanKind": kind}))
        .collect();
    axum::Json(json!({"operations": ops})).into_response()
}

/// Parameter names: the camelCase the current gateway documents, and the snake_case aliases.
fn names(camel: &'static str, snake: &'static str) -> [&'static str; 2] {
    [camel, snake]
}

fn rfc3339_param(p: &Params, n: [&'static str; 2], clock: &Reading) -> Result<Option<i64>, String> {
    p.get(&n)
        .map(|v| {
            parse_rfc3339(v)
                .map(|t| clock.recorded(t))
                .ok_or_else(|| malformed(n[1], format!("parsing time \"{v}\" as RFC3339Nano")))
        })
        .transpose()
}

fn duration_param(p: &Params, n: [&'static str; 2]) -> Result<Option<i64>, String> {
    p.get(&n)
        .map(|v| duration::parse_go(v).map_err(|e| malformed(n[1], format!("time: {e}"))))
        .transpose()
}

/// `query.attributes` as a JSON object, or one `query.attributes[key]=value` (also
/// `query.attributes.key=value`) per attribute.
fn attributes_param(p: &Params) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in p.pairs() {
        if k == "query.attributes" {
            let map: BTreeMap<String, Value> = serde_json::from_str(v)
                .map_err(|e| malformed("query.attributes", format!("not a JSON object: {e}")))?;
            for (key, val) in map {
                let text = match val {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, text);
            }
        } else if let Some(rest) = k.strip_prefix("query.attributes") {
            let key = rest
                .strip_prefix('[')
                .and_then(|r| r.strip_suffix(']'))
                .or_else(|| rest.strip_prefix('.'));
            match key {
                Some(key) if !key.is_empty() => {
                    out.insert(key.to_string(), v.to_string());
                }
                _ => return Err(malformed(k, "expected query.attributes[key]=value")),
            }
        }
    }
    Ok(out)
}

pub async fn find_traces(State(f): State<Arc<JaegerFacade>>, RawQuery(q): RawQuery) -> Response {
    let p = Params::parse(q.as_deref());
    let clock = f.clock.read();
    let parsed = (|| {
        let min_names = names("query.startTimeMin", "query.start_time_min");
        let max_names = names("query.startTimeMax", "query.start_time_max");
        let (Some(min), Some(max)) = (
            rfc3339_param(&p, min_names, &clock)?,
            rfc3339_param(&p, max_names, &clock)?,
        ) else {
            return Err(format!(
                "{} and {} are required",
                min_names[1], max_names[1]
            ));
        };
        let depth = match p.get(&[
            "query.searchDepth",
            "query.search_depth",
            "query.num_traces",
        ]) {
            None => DEFAULT_SEARCH_DEPTH,
            Some(v) => v.parse::<usize>().map_err(|_| {
                malformed(
                    "query.search_depth",
                    format!("strconv.Atoi: parsing \"{v}\": invalid syntax"),
                )
            })?,
        };
        if depth > f.max_traces {
            return Err(malformed(
                "query.search_depth",
                format!(
                    "{depth} is more than the maximum of {} traces per search",
                    f.max_traces
                ),
            ));
        }
        Ok(TraceQuery {
            service: p
                .get(&names("query.serviceName", "query.service_name"))
                .map(str::to_string),
            operation: p
                .get(&names("query.operationName", "query.operation_name"))
                .map(str::to_string),
            tags: attributes_param(&p)?,
            start_min_ns: min,
            start_max_ns: max,
            duration_min_ns: duration_param(&p, names("query.durationMin", "query.duration_min"))?,
            duration_max_ns: duration_param(&p, names("query.durationMax", "query.duration_max"))?,
            limit: if depth == 0 {
                DEFAULT_SEARCH_DEPTH
            } else {
                depth
            },
        })
    })();
    let query = match parsed {
        Ok(q) => q,
        Err(msg) => return refuse(msg),
    };
    let now = clock.virtual_now_ns;
    let found = read(&f, move |s| {
        let ids = s.find_traces(&query, now, derived_tags)?;
        s.traces(&ids, now)
    })
    .await;
    match found {
        Ok(traces) => traces_response(&traces, &clock),
        Err(e) => failed(&e),
    }
}

pub async fn trace(
    State(f): State<Arc<JaegerFacade>>,
    Path(trace_id): Path<String>,
    RawQuery(q): RawQuery,
) -> Response {
    let id = match parse_trace_id(&trace_id) {
        Ok(id) => id,
        Err(e) => return refuse(malformed("trace_id", e)),
    };
    let p = Params::parse(q.as_deref());
    let clock = f.clock.read();
    let window = (|| {
        Ok((
            rfc3339_param(&p, names("startTime", "start_time"), &clock)?,
            rfc3339_param(&p, names("endTime", "end_time"), &clock)?,
        ))
    })();
    let (from, to) = match window {
        Ok(w) => w,
        Err(msg) => return refuse(msg),
    };
    let now = clock.virtual_now_ns;
    let spans = match read(&f, move |s| s.trace(&id, now)).await {
        Ok(v) => v,
        Err(e) => return failed(&e),
    };
    let spans: Vec<SpanRow> = spans
        .unwrap_or_default()
        .into_iter()
        .filter(|s| from.is_none_or(|t| s.start_ns >= t) && to.is_none_or(|t| s.start_ns <= t))
        .collect();
    traces_response(&[spans], &clock)
}

/// The traces' resource spans one trace after another, as the gateway concatenates them.
fn traces_response(traces: &[Vec<SpanRow>], clock: &Reading) -> Response {
    let resource_spans: Vec<Value> = traces
        .iter()
        .filter(|t| !t.is_empty())
        .flat_map(|t| resource_spans(t, clock))
        .collect();
    if resource_spans.is_empty() {
        return error(StatusCode::NOT_FOUND, "No traces found");
    }
    axum::Json(json!({"result": {"resourceSpans": resource_spans}})).into_response()
}

fn any_value(v: &str) -> Value {
    match typed(v) {
        Typed::Bool(b) => json!({"boolValue": b}),
        Typed::Int(i) => json!({"intValue": i.to_string()}),
        Typed::Float(x) => json!({"doubleValue": x}),
        Typed::Str(s) => json!({"stringValue": s}),
    }
}

fn attributes(map: &Labels) -> Vec<Value> {
    map.iter()
        .map(|(k, v)| json!({"key": k, "value": any_value(v)}))
        .collect()
}

fn kind_number(kind: &str) -> u8 {
    match kind {
        "internal" => 1,
        "server" => 2,
        "client" => 3,
        "producer" => 4,
        "consumer" => 5,
        _ => 0,
    }
}

/// Spans grouped by resource (service and resource attributes), one scope each.
fn resource_spans(spans: &[SpanRow], clock: &Reading) -> Vec<Value> {
    let mut groups: Vec<(Labels, Vec<Value>)> = Vec::new();
    for s in spans {
        let mut resource = s.resource_attributes.clone();
        resource.insert("service.name".into(), s.service.clone());
        let span = span_json(s, clock);
        match groups.iter_mut().find(|(r, _)| *r == resource) {
            Some((_, list)) => list.push(span),
            None => groups.push((resource, vec![span])),
        }
    }
    groups
        .into_iter()
        .map(|(resource, spans)| {
            json!({
                "resource": {"attributes": attributes(&resource)},
                "scopeSpans": [{"scope": {}, "spans": spans}],
            })
        })
        .collect()
}

fn span_json(s: &SpanRow, clock: &Reading) -> Value {
    let start = clock.serve(s.start_ns);
    let mut status = serde_json::Map::new();
    match s.status_code.as_str() {
        "ok" => {
            status.insert("code".into(), json!(1));
        }
        "error" => {
            status.insert("code".into(), json!(2));
        }
        _ => {}
    }
    if let Some(msg) = s.status_message.as_ref().filter(|m| !m.is_empty()) {
        status.insert("message".into(), json!(msg));
    }
    let mut span = json!({
        "traceId": stores::spans::trace_key(&s.trace_id),
        "spanId": s.span_id,
        "parentSpanId": s.parent_span_id.as_deref().unwrap_or(""),
        "name": s.name,
        "startTimeUnixNano": start.to_string(),
        "endTimeUnixNano": start.saturating_add(s.duration_ns).to_string(),
        "attributes": attributes(&s.attributes),
        "status": status,
    });
    let kind = kind_number(&s.kind);
    if kind != 0 {
        span["kind"] = json!(kind);
    }
    span
}
