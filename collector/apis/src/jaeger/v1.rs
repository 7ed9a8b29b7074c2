//! Jaeger's v1 JSON API (`structuredResponse` envelope, the UI's trace model with processes and
//! typed tags, microsecond times), with its query parser's defaults and error messages.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemas::tables::SpanRow;
use serde_json::{Map, Value, json};

use super::{JaegerFacade, Params, Typed, derived_tags, parse_trace_id, read, typed};
use schemas::time::duration;
use stores::spans::TraceQuery;

const DEFAULT_LIMIT: usize = 100;
/// `defaultTraceQueryLookbackDuration`: searches without `start` look back two days.
const DEFAULT_LOOKBACK_NS: i64 = 2 * 86_400 * 1_000_000_000;
/// `defaultDependencyLookbackDuration`: one day.
const DEFAULT_DEPENDENCY_LOOKBACK_NS: i64 = 86_400 * 1_000_000_000;

fn envelope(data: Value, total: usize, errors: Value) -> Value {
    json!({"data": data, "total": total, "limit": 0, "offset": 0, "errors": errors})
}

fn error(code: StatusCode, msg: impl Into<String>) -> Response {
    let body = envelope(
        Value::Null,
        0,
        json!([{"code": code.as_u16(), "msg": msg.into()}]),
    );
    (code, axum::Json(body)).into_response()
}

/// A refusal's message; every refusal of a parameter is a 400.
fn bad_request(msg: impl Into<String>) -> String {
    msg.into()
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
    let services = match read(&f, move |s| s.services(now)).await {
        Ok(v) => v,
        Err(e) => return failed(&e),
    };
    let n = services.len();
    axum::Json(envelope(json!(services), n, Value::Null)).into_response()
}

pub async fn service_operations(
    State(f): State<Arc<JaegerFacade>>,
    Path(service): Path<String>,
) -> Response {
    let now = f.clock.read().virtual_now_ns;
    let ops = match read(&f, move |s| s.operations(&service, None, now)).await {
        Ok(v) => v,
        Err(e) => return failed(&e),
    };
    let mut names: Vec<String> = ops.into_iter().map(|(op, _)| op).collect();
    names.dedup();
    let n = names.len();
    axum::Json(envelope(json!(names), n, Value::Null)).into_response()
}

pub async fn operations(State(f): State<Arc<JaegerFacade>>, RawQuery(q): RawQuery) -> Response {
    let p = Params::parse(q.as_deref());
    let Some(service) = p.get(&["service"]) else {
        return refuse(bad_request("parameter 'service' is required"));
    };
    let now = f.clock.read().virtual_now_ns;
    let (service, kind) = (
        service.to_string(),
        p.get(&["spanKind"]).map(str::to_string),
    );
    let ops = match read(&f, move |s| s.operations(&service, kind.as_deref(), now)).await {
        Ok(v) => v,
        Err(e) => return failed(&e),
    };
    let ops: Vec<Value> = ops
        .into_iter()
        .map(|(name, kind)| json!({"name": name, "spanKind": kind}))
        .collect();
    let n = ops.len();
    axum::Json(envelope(Value::Array(ops), n, Value::Null)).into_response()
}

fn parse_param_error(name: &str, err: impl std::fmt::Display) -> String {
    bad_request(format!("unable to parse param '{name}': {err}"))
}

/// A time parameter in units of `unit_ns` since the epoch (as served), as a recorded time.
fn time_param(p: &Params, name: &str, unit_ns: i64, default_served: i64) -> Result<i64, String> {
    match p.get(&[name]) {
        None => Ok(default_served),
        Some(v) => v
            .parse::<i64>()
            .map(|t| t.saturating_mul(unit_ns))
            .map_err(|_| {
                parse_param_error(
                    name,
                    format!("strconv.ParseInt: parsing \"{v}\": invalid syntax"),
                )
            }),
    }
}

fn duration_param(p: &Params, name: &str) -> Result<Option<i64>, String> {
    p.get(&[name])
        .map(|v| duration::parse_go(v).map_err(|e| parse_param_error(name, format!("time: {e}"))))
        .transpose()
}

/// `tag=k:v` (repeatable) and `tags={json}`, as Jaeger's `parseTags`.
fn tags_param(p: &Params) -> Result<BTreeMap<String, String>, String> {
    let mut tags = BTreeMap::new();
    for t in p.all("tag") {
        match t.split_once(':') {
            Some((k, v)) => {
                tags.insert(k.to_string(), v.to_string());
            }
            None => {
                return Err(bad_request(format!(
                    "malformed 'tag' parameter, expecting key:value, received: {t}"
                )));
            }
        }
    }
    for j in p.all("tags") {
        let map: BTreeMap<String, String> = serde_json::from_str(j).map_err(|e| {
            bad_request(format!(
                "malformed 'tags' parameter, cannot unmarshal JSON: {e}"
            ))
        })?;
        tags.extend(map);
    }
    Ok(tags)
}

pub async fn search(State(f): State<Arc<JaegerFacade>>, RawQuery(q): RawQuery) -> Response {
    let p = Params::parse(q.as_deref());
    let clock = f.clock.read();
    let now = clock.served_now_ns();
    let parsed = (|| {
        let start = time_param(&p, "start", 1_000, now.saturating_sub(DEFAULT_LOOKBACK_NS))?;
        let end = time_param(&p, "end", 1_000, now)?;
        let tags = tags_param(&p)?;
        let limit = match p.get(&["limit"]) {
            None => DEFAULT_LIMIT,
            Some(v) => v
                .parse::<i32>()
                .map_err(|_| {
                    bad_request(format!("strconv.ParseInt: parsing \"{v}\": invalid syntax"))
                })?
                .max(0) as usize,
        };
        if limit > f.max_traces {
            return Err(bad_request(format!(
                "limit {limit} is more than the maximum of {} traces per search",
                f.max_traces
            )));
        }
        let min = duration_param(&p, "minDuration")?;
        let max = duration_param(&p, "maxDuration")?;
        let mut ids = Vec::new();
        for id in p.all("traceID") {
            ids.push(
                parse_trace_id(id)
                    .map_err(|e| bad_request(format!("cannot parse traceID param: {e}")))?,
            );
        }
        let service = p.get(&["service"]).map(str::to_string);
        if ids.is_empty() && service.is_none() {
            return Err(bad_request("parameter 'service' is required"));
        }
        if let (Some(lo), Some(hi)) = (min, max)
            && lo != 0
            && hi != 0
            && hi < lo
        {
            return Err(bad_request(
                "'maxDuration' should be greater than 'minDuration'",
            ));
        }
        let query = TraceQuery {
            service,
            operation: p.get(&["operation"]).map(str::to_string),
            tags,
            start_min_ns: clock.recorded(start),
            start_max_ns: clock.recorded(end),
            duration_min_ns: min.filter(|d| *d != 0),
            duration_max_ns: max.filter(|d| *d != 0),
            limit,
        };
        Ok((query, ids))
    })();
    let (query, ids) = match parsed {
        Ok(x) => x,
        Err(msg) => return refuse(msg),
    };
    let vnow = clock.virtual_now_ns;
    let searched = ids.is_empty();
    let found = read(&f, move |s| {
        let ids = if searched {
            s.find_traces(&query, vnow, derived_tags)?
        } else {
            ids
        };
        let spans = s.traces(&ids, vnow)?;
        Ok(ids.into_iter().zip(spans).collect::<Vec<_>>())
    })
    .await;
    let found = match found {
        Ok(v) => v,
        Err(e) => return failed(&e),
    };
    let mut traces = Vec::new();
    let mut errors = Vec::new();
    for (id, spans) in found {
        if !spans.is_empty() {
            traces.push(trace_json(&id, &spans, clock.shift_ns));
        } else if !searched {
            errors.push(json!({"msg": "trace not found", "traceID": id}));
        }
    }
    let errors = if errors.is_empty() {
        Value::Null
    } else {
        Value::Array(errors)
    };
    axum::Json(envelope(Value::Array(traces), 0, errors)).into_response()
}

pub async fn trace(State(f): State<Arc<JaegerFacade>>, Path(trace_id): Path<String>) -> Response {
    let id = match parse_trace_id(&trace_id) {
        Ok(id) => id,
        Err(e) => return refuse(e),
    };
    let clock = f.clock.read();
    let now = clock.virtual_now_ns;
    let key = id.clone();
    match read(&f, move |s| s.trace(&key, now)).await {
        Ok(Some(spans)) => {
            let t = trace_json(&id, &spans, clock.shift_ns);
            axum::Json(envelope(json!([t]), 0, Value::Null)).into_response()
        }
        Ok(None) => error(StatusCode::NOT_FOUND, "trace not found"),
        Err(e) => failed(&e),
    }
}

pub async fn dependencies(State(f): State<Arc<JaegerFacade>>, RawQuery(q): RawQuery) -> Response {
    let p = Params::parse(q.as_deref());
    let clock = f.clock.read();
    let end = match time_param(&p, "endTs", 1_000_000, clock.served_now_ns()) {
        Ok(t) => clock.recorded(t),
        Err(msg) => return refuse(msg),
    };
    let lookback = match p.get(&["lookback"]) {
        None => DEFAULT_DEPENDENCY_LOOKBACK_NS,
        Some(v) => match v.parse::<i64>() {
            Ok(ms) => ms.saturating_mul(1_000_000),
            Err(_) => {
                return refuse(parse_param_error(
                    "lookback",
                    format!("strconv.ParseInt: parsing \"{v}\": invalid syntax"),
                ));
            }
        },
    };
    let service = p.get(&["service"]);
    let (from, now) = (end.saturating_sub(lookback), clock.virtual_now_ns);
    let links = match read(&f, move |s| s.dependencies(from, end, now)).await {
        Ok(v) => v,
        Err(e) => return failed(&e),
    };
    let links: Vec<Value> = links
        .into_iter()
        .filter(|((parent, child), _)| service.is_none_or(|s| s == parent || s == child))
        .map(|((parent, child), n)| json!({"parent": parent, "child": child, "callCount": n}))
        .collect();
    axum::Json(envelope(Value::Array(links), 0, Value::Null)).into_response()
}

fn tag(key: &str, value: &str) -> Value {
    match typed(value) {
        Typed::Bool(b) => json!({"key": key, "type": "bool", "value": b}),
        Typed::Int(i) => json!({"key": key, "type": "int64", "value": i}),
        Typed::Float(x) => json!({"key": key, "type": "float64", "value": x}),
        Typed::Str(s) => json!({"key": key, "type": "string", "value": s}),
    }
}

/// A trace in the UI model: spans point at processes `p1`, `p2`, ... (one per distinct service
/// and resource), tags sorted by key as Jaeger's adjusters leave them.
fn trace_json(trace_id: &str, spans: &[SpanRow], shift_ns: i64) -> Value {
    let mut processes: Vec<(&str, &schemas::tables::Labels)> = Vec::new();
    let mut out = Vec::with_capacity(spans.len());
    for s in spans {
        let key = (s.service.as_str(), &s.resource_attributes);
        let pid = match processes.iter().position(|p| *p == key) {
            Some(i) => i + 1,
            None => {
                processes.push(key);
                processes.len()
            }
        };
        let mut tags: Vec<(String, String)> = s
            .attributes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(derived_tags(s))
            .collect();
        tags.sort_by(|a, b| a.0.cmp(&b.0));
        let references: Vec<Value> = s
            .parent_span_id
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| json!({"refType": "CHILD_OF", "traceID": trace_id, "spanID": p}))
            .collect();
        out.push(json!({
            "traceID": trace_id,
            "spanID": s.span_id,
            "flags": 1,
            "operationName": s.name,
            "references": references,
            "startTime": s.start_ns.saturating_add(shift_ns).div_euclid(1_000),
            "duration": s.duration_ns.div_euclid(1_000),
            "tags": tags.iter().map(|(k, v)| tag(k, v)).collect::<Vec<_>>(),
            "logs": [],
            "processID": format!("p{pid}"),
            "warnings": null,
        }));
    }
    let mut procs = Map::new();
    for (i, (service, resource)) in processes.iter().enumerate() {
        let tags: Vec<Value> = resource
            .iter()
            .filter(|(k, _)| k.as_str() != "service.name")
            .map(|(k, v)| tag(k, v))
            .collect();
        procs.insert(
            format!("p{}", i + 1),
            json!({"serviceName": service, "tags": tags}),
        );
    }
    json!({"traceID": trace_id, "spans": out, "processes": procs, "warnings": null})
}
