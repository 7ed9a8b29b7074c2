//! The Loki HTTP API over the log store: `query_range` (streams and matrices), `query` (metric
//! queries), `labels`, `label/<name>/values`, `series`, `index/stats` and `patterns`, with Loki's
//! envelopes, parameter defaults and time formats, and its plain-text error bodies.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use logql::{Expr, Matcher};
use schemas::time::duration;
use schemas::time::{Clock, Reading, parse_rfc3339};
use stores::Cached;
use stores::logql::{self as eval, Failure, Labels, Series, Stats, StreamIndex};
use stores::logs::LogCatalog;
use stores::logs::LogStore;
use stores::objects::ObjectTimeline;

use crate::kube::feed::ObjectFeed;

const SEC: i64 = 1_000_000_000;
const DEFAULT_LIMIT: usize = 100;
/// Loki's default `max_entries_limit_per_query`.
const MAX_LIMIT: usize = 5000;
const MAX_POINTS: i64 = 11_000;

pub struct LokiFacade {
    /// The objects, whose pods' app labels give the `service_name` label.
    objects: Arc<ObjectFeed>,
    /// The labeled streams, indexed on first use (reading a large store's catalog takes a while).
    index: Cached<StreamIndex>,
    /// A live environment's index, with the catalog it was built from: rebuilt when the
    /// catalog changes (new pods, new restarts).
    live_index: Mutex<Option<(Arc<LogCatalog>, Arc<StreamIndex>)>>,
    pub logs: Arc<LogStore>,
    pub clock: Clock,
}

impl LokiFacade {
    /// A facade over the log store; `service_name` comes from each pod's app label.
    pub fn new(logs: Arc<LogStore>, objects: Arc<ObjectFeed>, clock: Clock) -> Self {
        LokiFacade {
            objects,
            index: Cached::default(),
            live_index: Mutex::new(None),
            logs,
            clock,
        }
    }

    fn build_index(&self, catalog: &LogCatalog) -> StreamIndex {
        let apps = {
            let objects = self.objects.read();
            pod_apps(&objects.timeline, self.clock.read().virtual_now_ns)
        };
        StreamIndex::build(catalog, |ns, pod| {
            apps.get(&(ns.to_string(), pod.to_string())).cloned()
        })
    }

    fn index(&self) -> anyhow::Result<Arc<StreamIndex>> {
        if !self.clock.is_live() {
            return self
                .index
                .get_or_try(|| Ok(self.build_index(&*self.logs.catalog()?)));
        }
        let catalog = self.logs.catalog()?;
        let mut cached = self.live_index.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((c, index)) = cached.as_ref()
            && Arc::ptr_eq(c, &catalog)
        {
            return Ok(index.clone());
        }
        let index = Arc::new(self.build_index(&catalog));
        *cached = Some((catalog, index.clone()));
        Ok(index)
    }

    /// Indexes the streams now rather than on the first request.
    pub fn warm(&self) -> anyhow::Result<()> {
        self.index().map(drop)
    }
}

/// Runs a request's work off the async threads (it may read the logs file).
async fn blocking(
    f: Arc<LokiFacade>,
    work: impl FnOnce(&LokiFacade) -> Result<Response, Failure> + Send + 'static,
) -> Response {
    match tokio::task::spawn_blocking(move || work(&f)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => fail(e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn fail(e: Failure) -> Response {
    match e {
        Failure::Query(msg) => refuse(msg),
        Failure::Source(_) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// The app name of every pod seen up to `now`: its `app.kubernetes.io/name` label, else `app`.
fn pod_apps(timeline: &ObjectTimeline, now: i64) -> HashMap<(String, String), String> {
    let mut apps = HashMap::new();
    for ((_, kind, ns, name), version) in timeline.changes(0, timeline.resource_version_at(now)) {
        if kind != "Pod" {
            continue;
        }
        let labels = &version.object["metadata"]["labels"];
        if let Some(app) = labels["app.kubernetes.io/name"]
            .as_str()
            .or_else(|| labels["app"].as_str())
        {
            apps.insert((ns.clone(), name.clone()), app.to_string());
        }
    }
    apps
}

pub fn router(facade: Arc<LokiFacade>) -> Router {
    Router::new()
        .route(
            "/loki/api/v1/query_range",
            get(query_range).post(query_range),
        )
        .route("/loki/api/v1/query", get(query).post(query))
        .route("/loki/api/v1/labels", get(labels).post(labels))
        .route(
            "/loki/api/v1/label/{name}/values",
            get(label_values).post(label_values),
        )
        .route("/loki/api/v1/series", get(series).post(series))
        .route(
            "/loki/api/v1/index/stats",
            get(index_stats).post(index_stats),
        )
        .route("/loki/api/v1/patterns", get(patterns).post(patterns))
        .route("/loki/api/v1/status/buildinfo", get(buildinfo))
        .route("/ready", get(|| async { "ready\n" }))
        .with_state(facade)
}

/// Loki writes errors with Go's `http.Error`: the message as plain text.
fn error(code: StatusCode, msg: impl Into<String>) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{}\n", msg.into()),
    )
        .into_response()
}

/// A refusal's message; every refusal is a 400.
fn bad(msg: impl Into<String>) -> String {
    msg.into()
}

fn refuse(msg: String) -> Response {
    error(StatusCode::BAD_REQUEST, msg)
}

fn success(data: Value) -> Response {
    axum::Json(json!({"status": "success", "data": data})).into_response()
}

/// Query-string and form-body parameters (Loki accepts both).
struct Params(Vec<(String, String)>);

impl Params {
    fn new(query: Option<String>, body: &Bytes) -> Self {
        let mut v: Vec<(String, String)> =
            form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
        v.extend(form_urlencoded::parse(body).map(|(k, v)| (k.into_owned(), v.into_owned())));
        Params(v)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A time as Loki's `parseTimestamp` reads it: float seconds when it has a dot, integer seconds
/// up to 10 digits, integer nanoseconds beyond, else RFC 3339.
fn parse_time(v: &str) -> Option<i64> {
    if v.contains('.')
        && let Ok(f) = v.parse::<f64>()
    {
        let secs = f.trunc();
        let ms = ((f - secs) * 1000.0).round();
        return Some(
            (secs as i64)
                .saturating_mul(SEC)
                .saturating_add(ms as i64 * 1_000_000),
        );
    }
    match v.parse::<i64>() {
        Ok(n) if v.len() <= 10 => Some(n.saturating_mul(SEC)),
        Ok(n) => Some(n),
        Err(_) => parse_rfc3339(v),
    }
}

fn time_param(p: &Params, name: &str, default: i64) -> Result<i64, String> {
    match p.get(name) {
        None => Ok(default),
        Some(v) => parse_time(v).ok_or_else(|| {
            bad(format!(
                "invalid {name} parameter: cannot parse \"{v}\" to a valid timestamp"
            ))
        }),
    }
}

/// Float seconds or a duration (`step`, `since`).
fn seconds_or_duration(p: &Params, name: &str) -> Result<Option<i64>, String> {
    let Some(v) = p.get(name) else {
        return Ok(None);
    };
    if let Ok(f) = v.parse::<f64>()
        && f.is_finite()
    {
        return Ok(Some((f * SEC as f64) as i64));
    }
    duration::parse_loki(v)
        .map(Some)
        .map_err(|e| bad(format!("invalid {name} parameter: {e}")))
}

/// The served window `[start, end]` of a request, with Loki's defaults.
fn window(p: &Params, clock: &Reading, default_since: i64) -> Result<(i64, i64), String> {
    let end = time_param(p, "end", clock.served_now_ns())?;
    let since = seconds_or_duration(p, "since")?.unwrap_or(default_since);
    let start = time_param(p, "start", end.saturating_sub(since))?;
    if end < start {
        return Err(bad(
            "end timestamp must not be before or equal to start time",
        ));
    }
    Ok((start, end))
}

/// The recorded span a served window reads: nothing recorded after the virtual now.
fn recorded(clock: &Reading, start: i64, end: i64) -> (i64, i64) {
    (
        clock.recorded(start),
        clock.recorded(end).min(clock.virtual_now_ns),
    )
}

fn parse_query(p: &Params) -> Result<Expr, String> {
    let q = p.get("query").unwrap_or("");
    logql::parse(q).map_err(bad)
}

fn stats_json(stats: Stats, returned: usize, started: std::time::Instant) -> Value {
    json!({"summary": {
        "totalBytesProcessed": stats.bytes,
        "totalLinesProcessed": stats.lines,
        "totalEntriesReturned": returned,
        "execTime": started.elapsed().as_secs_f64(),
    }})
}

/// Unix seconds as a JSON number, millisecond precision (Prometheus' sample time format).
fn seconds(ns: i64) -> Value {
    let ms = ns.div_euclid(1_000_000);
    if ms % 1000 == 0 {
        json!(ms / 1000)
    } else {
        json!(ms as f64 / 1000.0)
    }
}

fn sample_value(v: f64) -> String {
    promql::value::format_float(v)
}

async fn query_range(
    State(f): State<Arc<LokiFacade>>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Response {
    blocking(f, move |f| query_range_now(f, q, &body)).await
}

fn query_range_now(f: &LokiFacade, q: Option<String>, body: &Bytes) -> Result<Response, Failure> {
    let started = std::time::Instant::now();
    let p = Params::new(q, body);
    let clock = f.clock.read();
    {
        let expr = parse_query(&p)?;
        if p.get("interval").is_some() {
            return Err(Failure::Query(format!(
                "{}: the interval parameter is not applied by this replay",
                logql::UNSUPPORTED
            )));
        }
        let (start, end) = window(&p, &clock, 3600 * SEC)?;
        match expr {
            Expr::Log(log) => {
                let limit = match p.get("limit") {
                    None => DEFAULT_LIMIT,
                    Some(v) => v
                        .parse::<usize>()
                        .map_err(|_| bad(format!("invalid limit parameter: \"{v}\"")))?,
                };
                if limit > MAX_LIMIT {
                    return Err(Failure::Query(format!(
                        "max entries limit per query exceeded, limit > max_entries_limit ({limit} > {MAX_LIMIT})"
                    )));
                }
                let backward = match p.get("direction").map(str::to_ascii_lowercase).as_deref() {
                    None | Some("backward") => true,
                    Some("forward") => false,
                    Some(other) => {
                        return Err(Failure::Query(format!("invalid direction '{other}'")));
                    }
                };
                let (from, to) = (clock.recorded(start), clock.recorded(end));
                // Lines after the virtual now are not there yet.
                let to = to.min(clock.virtual_now_ns.saturating_add(1));
                let (streams, stats) =
                    eval::log_query(&*f.index()?, &*f.logs, &log, from, to, limit, backward)?;
                let returned = streams.iter().map(|s| s.1.len()).sum();
                let result: Vec<Value> = streams
                    .into_iter()
                    .map(|(labels, values)| {
                        let values: Vec<Value> = values
                            .into_iter()
                            .map(|(t, line)| json!([clock.serve(t).to_string(), line]))
                            .collect();
                        json!({"stream": labels, "values": values})
                    })
                    .collect();
                Ok(success(json!({
                    "resultType": "streams",
                    "result": result,
                    "stats": stats_json(stats, returned, started),
                })))
            }
            Expr::Metric(m) => {
                let span = end.saturating_sub(start);
                let default_step = (span / SEC / 250).max(1) * SEC;
                let step = seconds_or_duration(&p, "step")?.unwrap_or(default_step);
                if step <= 0 {
                    return Err(Failure::Query(
                        "zero or negative query resolution step widths are not accepted. Try a positive integer".into(),
                    ));
                }
                if span / step > MAX_POINTS {
                    return Err(Failure::Query(
                        "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)".into(),
                    ));
                }
                let served_steps: Vec<i64> = (0..=span / step).map(|i| start + i * step).collect();
                let steps: Vec<i64> = served_steps.iter().map(|t| clock.recorded(*t)).collect();
                let (series, stats) =
                    eval::metric_query(&*f.index()?, &*f.logs, &m, &steps, clock.virtual_now_ns)?;
                let returned = series.len();
                let result: Vec<Value> = series
                    .into_iter()
                    .map(|Series { labels, points }| {
                        let values: Vec<Value> = points
                            .into_iter()
                            .map(|(i, v)| json!([seconds(served_steps[i]), sample_value(v)]))
                            .collect();
                        json!({"metric": labels, "values": values})
                    })
                    .collect();
                Ok(success(json!({
                    "resultType": "matrix",
                    "result": result,
                    "stats": stats_json(stats, returned, started),
                })))
            }
        }
    }
}

async fn query(State(f): State<Arc<LokiFacade>>, RawQuery(q): RawQuery, body: Bytes) -> Response {
    blocking(f, move |f| query_now(f, q, &body)).await
}

fn query_now(f: &LokiFacade, q: Option<String>, body: &Bytes) -> Result<Response, Failure> {
    let started = std::time::Instant::now();
    let p = Params::new(q, body);
    let clock = f.clock.read();
    {
        let expr = parse_query(&p)?;
        let t = time_param(&p, "time", clock.served_now_ns())?;
        let Expr::Metric(m) = expr else {
            return Err(Failure::Query(
                "log queries are not supported as an instant query type, please change your query to a range query type".into(),
            ));
        };
        let (series, stats) = eval::metric_query(
            &*f.index()?,
            &*f.logs,
            &m,
            &[clock.recorded(t)],
            clock.virtual_now_ns,
        )?;
        let returned = series.len();
        let result: Vec<Value> = series
            .into_iter()
            .filter_map(|s| {
                let v = s.points.first()?.1;
                Some(json!({"metric": s.labels, "value": [seconds(t), sample_value(v)]}))
            })
            .collect();
        Ok(success(json!({
            "resultType": "vector",
            "result": result,
            "stats": stats_json(stats, returned, started),
        })))
    }
}

/// Label sets of the streams with lines in the request's window (default: the last 6 hours),
/// optionally only those a selector (`query`, or `match[]` for series) picks.
fn streams_in_window(
    f: &LokiFacade,
    p: &Params,
    selectors: &[Vec<Matcher>],
) -> Result<Vec<Labels>, Failure> {
    let clock = f.clock.read();
    let (start, end) = window(p, &clock, 6 * 3600 * SEC)?;
    let (from, to) = recorded(&clock, start, end);
    let mut out = Vec::new();
    for s in f.index()?.streams.iter().filter(|s| {
        selectors.is_empty()
            || selectors.iter().any(|m| {
                m.iter()
                    .all(|m| m.matches(s.labels.get(&m.name).map_or("", String::as_str)))
            })
    }) {
        if s.has_lines_in(&*f.logs, from, to)? {
            out.push(s.labels.clone());
        }
    }
    Ok(out)
}

fn selectors(p: &Params, name: &str) -> Result<Vec<Vec<Matcher>>, String> {
    p.all(name)
        .filter(|s| !s.is_empty())
        .map(|s| logql::parse_selector(s).map_err(bad))
        .collect()
}

async fn labels(State(f): State<Arc<LokiFacade>>, RawQuery(q): RawQuery, body: Bytes) -> Response {
    blocking(f, move |f| {
        let p = Params::new(q, &body);
        let sel = selectors(&p, "query")?;
        let streams = streams_in_window(f, &p, &sel)?;
        let names: BTreeSet<&String> = streams.iter().flat_map(|l| l.keys()).collect();
        Ok(success(json!(names)))
    })
    .await
}

async fn label_values(
    State(f): State<Arc<LokiFacade>>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Response {
    blocking(f, move |f| {
        let p = Params::new(q, &body);
        let sel = selectors(&p, "query")?;
        let streams = streams_in_window(f, &p, &sel)?;
        let values: BTreeSet<&String> = streams.iter().filter_map(|l| l.get(&name)).collect();
        Ok(success(json!(values)))
    })
    .await
}

async fn series(State(f): State<Arc<LokiFacade>>, RawQuery(q): RawQuery, body: Bytes) -> Response {
    blocking(f, move |f| {
        let p = Params::new(q, &body);
        let mut sel = selectors(&p, "match[]")?;
        sel.extend(selectors(&p, "match")?);
        Ok(success(json!(streams_in_window(f, &p, &sel)?)))
    })
    .await
}

/// Loki's chunks close after two hours at most: a stream's lines are counted in a chunk per
/// two-hour period they fall in.
const CHUNK_NS: i64 = 2 * 3600 * SEC;

/// `index/stats`: streams, chunks, lines and bytes a selector picks in the window (default: the
/// last hour), answered without Loki's envelope as Loki answers it.
async fn index_stats(
    State(f): State<Arc<LokiFacade>>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Response {
    blocking(f, move |f| {
        let p = Params::new(q, &body);
        let selector = logql::parse_selector(p.get("query").unwrap_or("")).map_err(bad)?;
        let clock = f.clock.read();
        let (start, end) = window(&p, &clock, 3600 * SEC)?;
        let (from, to) = recorded(&clock, start, end);
        let (mut entries, mut bytes) = (0u64, 0u64);
        let mut chunks: BTreeSet<(&Labels, i64)> = BTreeSet::new();
        let index = f.index()?;
        eval::for_each_line(&index, &*f.logs, &selector, from, to, |s, t, line| {
            entries += 1;
            bytes += line.len() as u64;
            chunks.insert((&s.labels, t.div_euclid(CHUNK_NS)));
        })?;
        let streams: BTreeSet<&Labels> = chunks.iter().map(|(l, _)| *l).collect();
        Ok(axum::Json(json!({
            "streams": streams.len(),
            "chunks": chunks.len(),
            "entries": entries,
            "bytes": bytes,
        }))
        .into_response())
    })
    .await
}

/// Loki keeps at most this many patterns in an answer.
const MAX_PATTERNS: usize = 300;

/// `patterns`: the shapes of the lines a selector picks in the window (default: the last hour),
/// with their detected level and a count per `step` (default: as for a range query, at least
/// the ten seconds Loki's pattern samples are kept at).
async fn patterns(
    State(f): State<Arc<LokiFacade>>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Response {
    blocking(f, move |f| {
        let p = Params::new(q, &body);
        let selector = logql::parse_selector(p.get("query").unwrap_or("")).map_err(bad)?;
        let clock = f.clock.read();
        let (start, end) = window(&p, &clock, 3600 * SEC)?;
        let span = end.saturating_sub(start);
        let step = seconds_or_duration(&p, "step")?
            .unwrap_or((span / SEC / 250).max(1) * SEC)
            .max(10 * SEC);
        let (from, to) = recorded(&clock, start, end);
        let mut miner = stores::patterns::Miner::new(step);
        let index = f.index()?;
        eval::for_each_line(&index, &*f.logs, &selector, from, to, |_, t, line| {
            miner.add(clock.serve(t), line)
        })?;
        let data: Vec<Value> = miner
            .patterns(MAX_PATTERNS)
            .into_iter()
            .map(|p| {
                let samples: Vec<Value> = p
                    .samples
                    .iter()
                    .map(|(t, n)| json!([t.div_euclid(SEC), n]))
                    .collect();
                json!({"pattern": p.pattern, "level": p.level, "samples": samples})
            })
            .collect();
        Ok(axum::Json(json!({"status": "success", "data": data})).into_response())
    })
    .await
}

async fn buildinfo() -> Response {
    axum::Json(json!({
        "version": "3.4.2",
        "revision": "",
        "branch": "",
        "buildUser": "",
        "buildDate": "",
        "goVersion": "",
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_like_loki() {
        assert_eq!(parse_time("1767225600"), Some(1_767_225_600 * SEC));
        assert_eq!(parse_time("1767225600000000000"), Some(1_767_225_600 * SEC));
        assert_eq!(
            parse_time("1767225600.5"),
            Some(1_767_225_600 * SEC + 500_000_000)
        );
        assert_eq!(
            parse_time("2026-01-01T00:00:00Z"),
            Some(1_767_225_600 * SEC)
        );
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(seconds(1_767_225_600 * SEC), json!(1_767_225_600));
        assert_eq!(
            seconds(1_767_225_600 * SEC + 250_000_000),
            json!(1_767_225_600.25)
        );
    }
}
