//! The Prometheus HTTP API (`/api/v1/query`, `query_range`, `series`, `labels`,
//! `label/<name>/values`, `metadata`) over a [`Storage`], frozen at a virtual "now".
//!
//! [`router`] returns a plain `axum::Router`, so other routes (alerts, rules) can be merged in.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use promql_parser::parser::Expr;

use schemas::time::Clock;

use crate::eval::{Engine, EvalError};
use crate::labels::Labels;
use crate::limits::Cancel;
use crate::storage::{LabelMatcher, SeriesId, Storage, StorageSource, TimeShifted};
use crate::value::{Value, format_float, format_timestamp};

/// Prometheus refuses range queries with more points per series than this.
pub const MAX_POINTS_PER_SERIES: i64 = 11_000;

/// Default of Prometheus' `--query.max-concurrency`.
pub const DEFAULT_MAX_CONCURRENCY: usize = 20;

/// What the API serves.
#[derive(Clone)]
pub struct PromApi {
    pub storage: Arc<dyn StorageSource>,
    /// "Now" for queries without a time; a shifted clock serves the frozen data as if recorded
    /// just now, so `time()`, `timestamp()`, `@` and the client's own "last 15 minutes" agree.
    pub clock: Clock,
    pub engine: Engine,
    /// Requests evaluated at once (Prometheus' `--query.max-concurrency`); the others wait
    /// their turn, within the query timeout. Evaluation runs on the blocking pool, which alone
    /// would start hundreds of threads.
    gate: Arc<tokio::sync::Semaphore>,
}

impl PromApi {
    pub fn new(storage: Arc<dyn StorageSource>, clock: Clock) -> Self {
        PromApi {
            storage,
            clock,
            engine: Engine::default(),
            gate: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_CONCURRENCY)),
        }
    }

    /// The same API under other limits: the engine's (timeout, samples, steps, length, depth)
    /// and how many requests are evaluated at once (at least one).
    pub fn with_limits(mut self, engine: Engine, max_concurrency: usize) -> Self {
        self.engine = engine;
        self.gate = Arc::new(tokio::sync::Semaphore::new(max_concurrency.max(1)));
        self
    }
}

/// The Prometheus API routes (GET and POST with form bodies).
pub fn router(api: PromApi) -> Router {
    Router::new()
        .route("/api/v1/query", get(query).post(query))
        .route("/api/v1/query_range", get(query_range).post(query_range))
        .route("/api/v1/series", get(series).post(series))
        .route("/api/v1/labels", get(labels).post(labels))
        .route("/api/v1/label/{name}/values", get(label_values))
        .route("/api/v1/metadata", get(metadata))
        .route(
            "/api/v1/query_exemplars",
            get(query_exemplars).post(query_exemplars),
        )
        .route("/api/v1/format_query", get(format_query).post(format_query))
        .route("/api/v1/status/buildinfo", get(buildinfo))
        .with_state(Arc::new(api))
}

/// An API failure with Prometheus' `errorType`.
#[derive(Debug)]
pub struct ApiError {
    kind: &'static str,
    status: StatusCode,
    msg: String,
}

impl ApiError {
    fn bad_data(msg: impl Into<String>) -> Self {
        ApiError {
            kind: "bad_data",
            status: StatusCode::BAD_REQUEST,
            msg: msg.into(),
        }
    }

    fn execution(msg: impl Into<String>) -> Self {
        ApiError {
            kind: "execution",
            status: StatusCode::UNPROCESSABLE_ENTITY,
            msg: msg.into(),
        }
    }

    fn internal(msg: impl Into<String>) -> Self {
        ApiError {
            kind: "internal",
            status: StatusCode::INTERNAL_SERVER_ERROR,
            msg: msg.into(),
        }
    }
}

impl From<EvalError> for ApiError {
    fn from(e: EvalError) -> Self {
        match e {
            EvalError::Parse(m) => ApiError::bad_data(format!("invalid parameter \"query\": {m}")),
            EvalError::Timeout(_) => ApiError {
                kind: "timeout",
                status: StatusCode::SERVICE_UNAVAILABLE,
                msg: e.to_string(),
            },
            // Nobody reads this answer; the kind only tells the log why the work stopped.
            EvalError::Cancelled => ApiError {
                kind: "cancelled",
                status: StatusCode::SERVICE_UNAVAILABLE,
                msg: e.to_string(),
            },
            other => ApiError::execution(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = String::from("{\"status\":\"error\",\"errorType\":");
        json_str(&mut body, self.kind);
        body.push_str(",\"error\":");
        json_str(&mut body, &self.msg);
        body.push('}');
        (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

/// A successful answer: the `data` JSON and any warnings.
struct Reply {
    data: String,
    warnings: Vec<&'static str>,
}

impl Reply {
    fn new(data: String) -> Self {
        Reply {
            data,
            warnings: Vec::new(),
        }
    }

    fn truncated(data: String, truncated: bool) -> Self {
        let warnings = if truncated {
            vec!["results truncated due to limit"]
        } else {
            Vec::new()
        };
        Reply { data, warnings }
    }
}

fn success(reply: Reply) -> Response {
    let mut body = format!("{{\"status\":\"success\",\"data\":{}", reply.data);
    if !reply.warnings.is_empty() {
        body.push_str(",\"warnings\":[");
        for (i, w) in reply.warnings.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            json_str(&mut body, w);
        }
        body.push(']');
    }
    body.push('}');
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// Request parameters from the query string and, for POST, a form body.
struct Params(Vec<(String, String)>);

impl Params {
    fn from_request(uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Self {
        let mut v: Vec<(String, String)> = Vec::new();
        if let Some(q) = uri.query() {
            v.extend(form_urlencoded::parse(q.as_bytes()).into_owned());
        }
        let is_form = headers
            .get(header::CONTENT_TYPE)
            .and_then(|c| c.to_str().ok())
            .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
        if is_form {
            v.extend(form_urlencoded::parse(body).into_owned());
        }
        Params(v)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// Parses a time parameter: Unix seconds (float) or RFC3339. Times beyond what milliseconds
/// since the epoch hold in an i64 (about ±292 million years) are refused, not clamped.
pub fn parse_time(s: &str) -> Option<i64> {
    if let Ok(v) = s.parse::<f64>() {
        return seconds_to_ms(v);
    }
    schemas::time::parse_rfc3339_ms(s)
}

/// Parses a duration parameter: float seconds or a Prometheus duration (`1m30s`).
pub fn parse_duration(s: &str) -> Option<i64> {
    if let Ok(v) = s.parse::<f64>() {
        return seconds_to_ms(v);
    }
    schemas::time::duration::parse_prometheus_ms(s).ok()
}

/// Float seconds as whole milliseconds, if finite and within an i64.
fn seconds_to_ms(v: f64) -> Option<i64> {
    let ms = (v * 1000.0).round();
    // 2^63 is exactly representable; every f64 below it in magnitude converts without loss of range.
    (ms.is_finite() && ms.abs() < 9_223_372_036_854_775_808.0).then_some(ms as i64)
}

fn time_param(p: &Params, name: &str, default: Option<i64>) -> Result<i64, ApiError> {
    match p.get(name) {
        Some(s) => parse_time(s).ok_or_else(|| {
            ApiError::bad_data(format!(
                "invalid parameter \"{name}\": cannot parse \"{s}\" to a valid timestamp"
            ))
        }),
        None => default.ok_or_else(|| {
            ApiError::bad_data(format!(
                "invalid parameter \"{name}\": cannot parse \"\" to a valid timestamp"
            ))
        }),
    }
}

/// The engine for one request: `lookback_delta` and `timeout` may override the defaults
/// (a timeout only shortens).
fn engine_for(api: &PromApi, p: &Params) -> Result<Engine, ApiError> {
    let mut engine = api.engine;
    if let Some(s) = p.get("timeout") {
        let ms = parse_duration(s).filter(|d| *d > 0).ok_or_else(|| {
            ApiError::bad_data(format!(
                "invalid parameter \"timeout\": cannot parse \"{s}\" to a valid duration"
            ))
        })?;
        engine.timeout = engine
            .timeout
            .min(std::time::Duration::from_millis(ms as u64));
    }
    if let Some(s) = p.get("lookback_delta") {
        engine.lookback_ms = parse_duration(s).filter(|d| *d > 0).ok_or_else(|| {
            ApiError::bad_data(format!(
                "invalid parameter \"lookback_delta\": cannot parse \"{s}\" to a valid duration"
            ))
        })?;
    }
    Ok(engine)
}

fn parse_query(engine: &Engine, p: &Params) -> Result<Expr, ApiError> {
    let q = p
        .get("query")
        .ok_or_else(|| ApiError::bad_data("invalid parameter \"query\": query is empty"))?;
    Ok(engine.parse(q)?)
}

/// Runs CPU-bound work off the async workers, at most `--query.max-concurrency` at once, on a
/// thread whose stack fits the deepest query the engine admits (evaluation recurses once per
/// level). If the request is dropped (its client disconnected) the work is cancelled:
/// evaluation checks the flag at every step. A request that waits for its turn longer than the
/// query timeout is refused.
async fn blocking<T: Send + 'static>(
    api: &PromApi,
    f: impl FnOnce(&Cancel) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let permit = tokio::time::timeout(api.engine.timeout, api.gate.clone().acquire_owned())
        .await
        .map_err(|_| ApiError::from(EvalError::Timeout("queue")))?
        .map_err(|e| ApiError::internal(format!("query queue closed: {e}")))?;
    let cancel = Cancel::new();
    let guard = cancel.on_drop();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("promql-query".into())
        .stack_size(crate::limits::eval_stack_bytes(api.engine.max_depth))
        .spawn(move || {
            // Held until the work really ends, not merely until its client leaves.
            let _permit = permit;
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&cancel)));
            if let Ok(Err(e)) = &r
                && e.kind == "cancelled"
            {
                tracing::info!("query cancelled: its client disconnected");
            }
            let _ = tx.send(r);
        })
        .map_err(|e| ApiError::internal(format!("cannot start a query thread: {e}")))?;
    let r = rx
        .await
        .map_err(|_| ApiError::internal("the query thread ended without an answer"))?;
    guard.disarm();
    r.unwrap_or_else(|panic| {
        // A store's read error (a data file changed or damaged under the running server) is
        // raised as a panic naming the file and the cause; answer with that cause.
        let cause = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown cause".into());
        Err(ApiError::internal(format!(
            "cannot read the stored data: {cause}"
        )))
    })
}

async fn query(
    State(api): State<Arc<PromApi>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = Params::from_request(&uri, &headers, &body);
    let state = api.clone();
    let run = move |cancel: &Cancel| -> Result<Reply, ApiError> {
        let clock = api.clock.read();
        let storage = api.storage.read();
        let st = TimeShifted::new(&**storage, clock.shift_ms());
        let t = time_param(
            &p,
            "time",
            Some(clock.virtual_now_ms().saturating_add(st.shift_ms)),
        )?;
        let engine = engine_for(&api, &p)?;
        let expr = parse_query(&engine, &p)?;
        let mut v = engine.instant_cancellable(&st, &expr, t, cancel)?;
        if let (Some(n), Value::Vector(vec)) = (limit(&p)?, &mut v) {
            vec.truncate(n);
        }
        Ok(Reply::new(render_value(&v, t)))
    };
    match blocking(&state, run).await {
        Ok(reply) => success(reply),
        Err(e) => e.into_response(),
    }
}

async fn query_range(
    State(api): State<Arc<PromApi>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = Params::from_request(&uri, &headers, &body);
    let state = api.clone();
    let run = move |cancel: &Cancel| -> Result<Reply, ApiError> {
        let start = time_param(&p, "start", None)?;
        let end = time_param(&p, "end", None)?;
        if end < start {
            return Err(ApiError::bad_data(
                "end timestamp must not be before start time",
            ));
        }
        let step_s = p.get("step").unwrap_or("");
        let step = parse_duration(step_s).ok_or_else(|| {
            ApiError::bad_data(format!(
                "invalid parameter \"step\": cannot parse \"{step_s}\" to a valid duration"
            ))
        })?;
        if step <= 0 {
            return Err(ApiError::bad_data(
                "zero or negative query resolution step widths are not accepted. Try a positive integer",
            ));
        }
        if end.saturating_sub(start) / step > MAX_POINTS_PER_SERIES {
            return Err(ApiError::bad_data(
                "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)",
            ));
        }
        let engine = engine_for(&api, &p)?;
        let expr = parse_query(&engine, &p)?;
        let storage = api.storage.read();
        let st = TimeShifted::new(&**storage, api.clock.read().shift_ms());
        let mut m = engine.range_cancellable(&st, &expr, start, end, step, cancel)?;
        if let Some(n) = limit(&p)? {
            m.truncate(n);
        }
        Ok(Reply::new(render_value(&Value::Matrix(m), end)))
    };
    match blocking(&state, run).await {
        Ok(reply) => success(reply),
        Err(e) => e.into_response(),
    }
}

/// Series selected by the `match[]` selectors (all series when none), with a sample in
/// `[start, end]`.
fn matched_series(
    api: &PromApi,
    storage: &dyn Storage,
    p: &Params,
    require_match: bool,
) -> Result<Vec<SeriesId>, ApiError> {
    let start = time_param(p, "start", Some(i64::MIN))?;
    let end = time_param(p, "end", Some(i64::MAX))?;
    let selectors = p.all("match[]");
    if selectors.is_empty() && require_match {
        return Err(ApiError::bad_data("no match[] parameter provided"));
    }
    let st = &TimeShifted::new(storage, api.clock.read().shift_ms());
    let mut ids: BTreeSet<SeriesId> = BTreeSet::new();
    if selectors.is_empty() {
        let all = st.select(&[]);
        ids.extend(all);
    }
    for s in selectors {
        let expr = api
            .engine
            .parse(s)
            .map_err(|e| ApiError::bad_data(format!("invalid parameter \"match[]\": {e}")))?;
        let Expr::VectorSelector(vs) = expr else {
            return Err(ApiError::bad_data(format!(
                "invalid parameter \"match[]\": expected a series selector, got {s:?}"
            )));
        };
        let mut ms: Vec<LabelMatcher> = vs
            .matchers
            .matchers
            .iter()
            .map(LabelMatcher::from_parsed)
            .collect();
        if let Some(n) = &vs.name {
            ms.push(LabelMatcher::equal(crate::labels::METRIC_NAME, n));
        }
        if vs.matchers.or_matchers.is_empty() {
            ids.extend(st.select(&ms));
        } else {
            for alt in &vs.matchers.or_matchers {
                let mut m2: Vec<LabelMatcher> = alt.iter().map(LabelMatcher::from_parsed).collect();
                m2.extend(ms.iter().cloned());
                ids.extend(st.select(&m2));
            }
        }
    }
    let mut ids: Vec<SeriesId> = ids
        .into_iter()
        .filter(|&id| {
            st.time_bounds(id)
                .is_some_and(|(lo, hi)| lo <= end && hi >= start)
        })
        .collect();
    // In label order, whatever order a store hands its ids out in.
    ids.sort_by(|&a, &b| st.series_labels(a).cmp(st.series_labels(b)));
    Ok(ids)
}

fn limit(p: &Params) -> Result<Option<usize>, ApiError> {
    match p.get("limit") {
        None => Ok(None),
        Some(s) => match s.parse::<usize>() {
            Ok(0) => Ok(None),
            Ok(n) => Ok(Some(n)),
            Err(_) => Err(ApiError::bad_data(format!(
                "invalid parameter \"limit\": cannot parse \"{s}\""
            ))),
        },
    }
}

async fn series(
    State(api): State<Arc<PromApi>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = Params::from_request(&uri, &headers, &body);
    let state = api.clone();
    let run = move |_: &Cancel| -> Result<Reply, ApiError> {
        let storage = api.storage.read();
        let ids = matched_series(&api, &**storage, &p, true)?;
        let lim = limit(&p)?.unwrap_or(usize::MAX);
        let mut out = String::from("[");
        for (i, id) in ids.iter().take(lim).enumerate() {
            if i > 0 {
                out.push(',');
            }
            render_labels(&mut out, storage.series_labels(*id));
        }
        out.push(']');
        Ok(Reply::truncated(out, ids.len() > lim))
    };
    match blocking(&state, run).await {
        Ok(reply) => success(reply),
        Err(e) => e.into_response(),
    }
}

fn render_strings(items: &BTreeSet<String>, lim: Option<usize>) -> Reply {
    let lim = lim.unwrap_or(usize::MAX);
    let mut out = String::from("[");
    for (i, s) in items.iter().take(lim).enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(&mut out, s);
    }
    out.push(']');
    Reply::truncated(out, items.len() > lim)
}

async fn labels(
    State(api): State<Arc<PromApi>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = Params::from_request(&uri, &headers, &body);
    let state = api.clone();
    let run = move |_: &Cancel| -> Result<Reply, ApiError> {
        let lim = limit(&p)?;
        let storage = api.storage.read();
        let names: BTreeSet<String> =
            if p.get("match[]").is_none() && p.get("start").is_none() && p.get("end").is_none() {
                storage
                    .label_names()
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            } else {
                let ids = matched_series(&api, &**storage, &p, false)?;
                ids.iter()
                    .flat_map(|&id| {
                        storage
                            .series_labels(id)
                            .iter()
                            .map(|(k, _)| k.to_string())
                            .collect::<Vec<_>>()
                    })
                    .collect()
            };
        Ok(render_strings(&names, lim))
    };
    match blocking(&state, run).await {
        Ok(reply) => success(reply),
        Err(e) => e.into_response(),
    }
}

async fn label_values(
    State(api): State<Arc<PromApi>>,
    Path(name): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let p = Params::from_request(&uri, &headers, &[]);
    let state = api.clone();
    let run = move |_: &Cancel| -> Result<Reply, ApiError> {
        if !crate::labels::is_valid_label_name(&name) {
            return Err(ApiError::bad_data(format!("invalid label name: {name:?}")));
        }
        let lim = limit(&p)?;
        let storage = api.storage.read();
        let values: BTreeSet<String> =
            if p.get("match[]").is_none() && p.get("start").is_none() && p.get("end").is_none() {
                storage
                    .label_values(&name)
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            } else {
                let ids = matched_series(&api, &**storage, &p, false)?;
                ids.iter()
                    .map(|&id| storage.series_labels(id).get(&name).to_string())
                    .filter(|v| !v.is_empty())
                    .collect()
            };
        Ok(render_strings(&values, lim))
    };
    match blocking(&state, run).await {
        Ok(reply) => success(reply),
        Err(e) => e.into_response(),
    }
}

async fn metadata(State(api): State<Arc<PromApi>>, uri: Uri, headers: HeaderMap) -> Response {
    let p = Params::from_request(&uri, &headers, &[]);
    let lim = match limit(&p) {
        Ok(l) => l.unwrap_or(usize::MAX),
        Err(e) => return e.into_response(),
    };
    let per_metric = match p.get("limit_per_metric").map(|s| s.parse::<usize>()) {
        None => usize::MAX,
        Some(Ok(0)) => usize::MAX,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            return ApiError::bad_data("invalid parameter \"limit_per_metric\"").into_response();
        }
    };
    let metric = p.get("metric");
    let storage = api.storage.read();
    let md = storage.metadata();
    let selected: BTreeMap<&String, Vec<_>> = md
        .iter()
        .filter(|(name, _)| metric.is_none_or(|m| m == name.as_str()))
        .take(lim)
        .map(|(name, v)| (name, v.iter().take(per_metric).collect()))
        .collect();
    match serde_json::to_string(&selected) {
        Ok(data) => success(Reply::new(data)),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// The store holds no exemplars; the query is still validated like Prometheus does.
async fn query_exemplars(
    State(api): State<Arc<PromApi>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = Params::from_request(&uri, &headers, &body);
    match parse_query(&api.engine, &p) {
        Ok(_) => success(Reply::new("[]".into())),
        Err(e) => e.into_response(),
    }
}

async fn format_query(
    State(api): State<Arc<PromApi>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let p = Params::from_request(&uri, &headers, &body);
    match parse_query(&api.engine, &p) {
        Ok(expr) => {
            let mut data = String::new();
            json_str(&mut data, &expr.prettify());
            success(Reply::new(data))
        }
        Err(e) => e.into_response(),
    }
}

/// Clients (Grafana, MCP servers) probe this to pick query features; the engine follows
/// Prometheus 3 semantics.
async fn buildinfo() -> Response {
    success(Reply::new(
        r#"{"version":"3.5.0","revision":"faultline","branch":"","buildUser":"","buildDate":"","goVersion":""}"#
            .into(),
    ))
}

/// Appends `s` as a JSON string literal.
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn render_labels(out: &mut String, l: &Labels) {
    out.push('{');
    for (i, (k, v)) in l.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, k);
        out.push(':');
        json_str(out, v);
    }
    out.push('}');
}

fn render_point(out: &mut String, t: i64, v: f64) {
    out.push('[');
    out.push_str(&format_timestamp(t));
    out.push_str(",\"");
    out.push_str(&format_float(v));
    out.push_str("\"]");
}

/// The `data` object of a query response.
pub fn render_value(v: &Value, t: i64) -> String {
    let mut out = String::with_capacity(256);
    out.push_str("{\"resultType\":\"");
    out.push_str(v.type_name());
    out.push_str("\",\"result\":");
    match v {
        Value::Scalar(x) => render_point(&mut out, t, *x),
        Value::String(s) => {
            out.push('[');
            out.push_str(&format_timestamp(t));
            out.push(',');
            json_str(&mut out, s);
            out.push(']');
        }
        Value::Vector(vec) => {
            out.push('[');
            for (i, s) in vec.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str("{\"metric\":");
                render_labels(&mut out, &s.labels);
                out.push_str(",\"value\":");
                render_point(&mut out, t, s.v);
                out.push('}');
            }
            out.push(']');
        }
        Value::Matrix(m) => {
            out.push('[');
            for (i, s) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str("{\"metric\":");
                render_labels(&mut out, &s.labels);
                out.push_str(",\"values\":[");
                for (j, &(pt, pv)) in s.points.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    render_point(&mut out, pt, pv);
                }
                out.push_str("]}");
            }
            out.push(']');
        }
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_and_duration_parameters() {
        assert_eq!(parse_time("1700000000.5"), Some(1_700_000_000_500));
        assert_eq!(parse_time("2023-11-14T22:13:20Z"), Some(1_700_000_000_000));
        assert_eq!(
            parse_time("2023-11-14T22:13:20.25+00:00"),
            Some(1_700_000_000_250)
        );
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(parse_duration("15"), Some(15_000));
        assert_eq!(parse_duration("1m30s"), Some(90_000));
        assert_eq!(parse_duration("0.5"), Some(500));
        assert_eq!(parse_duration("5x"), None);
    }

    #[test]
    fn renders_prometheus_shapes() {
        let v = Value::Vector(vec![crate::value::Sample {
            labels: Labels::new([("a", "\"q\"")]),
            v: f64::NAN,
        }]);
        assert_eq!(
            render_value(&v, 1500),
            r#"{"resultType":"vector","result":[{"metric":{"a":"\"q\""},"value":[1.5,"NaN"]}]}"#
        );
        assert_eq!(
            render_value(&Value::Scalar(f64::INFINITY), 2000),
            r#"{"resultType":"scalar","result":[2,"+Inf"]}"#
        );
    }
}
