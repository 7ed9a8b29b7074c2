//! The read tools over HTTP: Prometheus (`/api/v1/...`), Jaeger's query API (`/api/...`), Loki
//! (`/loki/api/v1/...`), and the submit endpoint. Each tool is one or two requests whose answer
//! is turned into text an agent reads; an upstream error comes back as the tool's error with
//! the upstream's status and message.
//!
//! "The last N minutes" is measured from the APIs' now, which is not this machine's clock when
//! a session runs faster than real time (`collector env up --speed 5`): the Prometheus API is
//! asked for `time()` first. Only when Prometheus cannot answer does the wall clock stand in,
//! which is right for a live session at 1x (it serves wall-clock times).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::{Method, Url};
use serde_json::{Value, json};

/// The session's read APIs and where a solution is submitted.
#[derive(Debug, Clone)]
pub struct Apis {
    http: reqwest::Client,
    pub prometheus: String,
    pub jaeger: String,
    pub loki: String,
    pub submit: Option<String>,
}

/// Most log lines and traces one call returns (as SREGym's tools do).
const LOG_LIMIT: usize = 100;
const TRACE_LIMIT: usize = 20;
/// Spans listed per trace; the rest are counted.
const SPANS_SHOWN: usize = 25;

impl Apis {
    pub fn new(
        prometheus: String,
        jaeger: String,
        loki: String,
        submit: Option<String>,
    ) -> Result<Apis, String> {
        // Installing fails only when a provider is already chosen, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Apis {
            http,
            prometheus,
            jaeger,
            loki,
            submit,
        })
    }

    // ---- Prometheus ------------------------------------------------------------------------

    /// An instant query at the server's now: the `data` of the answer, as JSON.
    pub async fn metrics(&self, query: &str) -> Result<String, String> {
        Ok(self.metrics_data(query).await?.to_string())
    }

    pub(crate) async fn metrics_data(&self, query: &str) -> Result<Value, String> {
        self.get(Api::Prometheus, "/api/v1/query", &[("query", query)])
            .await
    }

    /// A range query; `start`/`end` are RFC 3339 or Unix seconds (default: the last 15 minutes
    /// of the server's now), `step` a duration (`30s`) or seconds (default: about 120 points).
    pub async fn metrics_range(
        &self,
        query: &str,
        start: Option<&str>,
        end: Option<&str>,
        step: Option<&str>,
    ) -> Result<String, String> {
        let end = match end {
            Some(e) => parse_time("end", e)?,
            None => self.now().await,
        };
        let start = match start {
            Some(s) => parse_time("start", s)?,
            None => end - 15.0 * 60.0,
        };
        if start > end {
            return Err(format!("start ({start}) is after end ({end})"));
        }
        let step = match step {
            Some(s) => s.to_string(),
            None => format!("{}s", ((end - start) / 120.0).ceil().max(1.0)),
        };
        let (start, end) = (start.to_string(), end.to_string());
        let data = self
            .get(
                Api::Prometheus,
                "/api/v1/query_range",
                &[
                    ("query", query),
                    ("start", &start),
                    ("end", &end),
                    ("step", &step),
                ],
            )
            .await?;
        Ok(data.to_string())
    }

    /// Metric names, one a line; `matcher` is a series selector (`{namespace="x"}`).
    pub async fn metric_names(&self, matcher: Option<&str>) -> Result<String, String> {
        let params: Vec<(&str, &str)> = matcher.map(|m| ("match[]", m)).into_iter().collect();
        let data = self
            .get(Api::Prometheus, "/api/v1/label/__name__/values", &params)
            .await?;
        Ok(lines_of(&data))
    }

    /// Metric metadata, one metric a line: `name (type): help`.
    pub async fn metric_metadata(&self, metric: Option<&str>) -> Result<String, String> {
        let params: Vec<(&str, &str)> = metric.map(|m| ("metric", m)).into_iter().collect();
        let data = self
            .get(Api::Prometheus, "/api/v1/metadata", &params)
            .await?;
        let Some(map) = data.as_object().filter(|m| !m.is_empty()) else {
            return Ok("No metric metadata found.".into());
        };
        let mut out = String::new();
        for (name, entries) in map {
            for e in entries.as_array().into_iter().flatten() {
                let kind = e.get("type").and_then(Value::as_str).unwrap_or("unknown");
                let help = e.get("help").and_then(Value::as_str).unwrap_or("");
                out.push_str(&format!("{name} ({kind}): {help}\n"));
            }
        }
        Ok(out)
    }

    /// The alerts firing now, as JSON, or "No firing alerts".
    pub async fn alerts(&self) -> Result<String, String> {
        let firing = self.firing_alerts().await?;
        if firing.is_empty() {
            return Ok("No firing alerts".into());
        }
        Ok(json!(firing).to_string())
    }

    /// The alerts in state `firing`, as Prometheus lists them.
    pub(crate) async fn firing_alerts(&self) -> Result<Vec<Value>, String> {
        let data = self.get(Api::Prometheus, "/api/v1/alerts", &[]).await?;
        Ok(data
            .get("alerts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|a| a.get("state").and_then(Value::as_str) == Some("firing"))
            .cloned()
            .collect())
    }

    /// The APIs' now, in Unix seconds: Prometheus's `time()`, or the wall clock when
    /// Prometheus cannot say (see the module docs).
    pub async fn now(&self) -> f64 {
        let asked = self
            .get(Api::Prometheus, "/api/v1/query", &[("query", "time()")])
            .await;
        let from_api = asked.ok().and_then(|data| {
            let result = data.get("result")?;
            // A scalar is `[time, "value"]`.
            result.get(1)?.as_str()?.parse::<f64>().ok()
        });
        from_api.unwrap_or_else(wall_clock_secs)
    }

    // ---- Jaeger ----------------------------------------------------------------------------

    pub async fn services(&self) -> Result<String, String> {
        Ok(self.services_data().await?.to_string())
    }

    pub(crate) async fn services_data(&self) -> Result<Value, String> {
        self.get(Api::Jaeger, "/api/services", &[]).await
    }

    pub async fn operations(&self, service: &str) -> Result<String, String> {
        Ok(self.operations_data(service).await?.to_string())
    }

    pub(crate) async fn operations_data(&self, service: &str) -> Result<Value, String> {
        self.get(Api::Jaeger, "/api/operations", &[("service", service)])
            .await
    }

    /// The last `TRACE_LIMIT` traces of a service, summarised: root, duration, errors, spans.
    pub async fn traces(&self, service: &str, minutes: u32) -> Result<String, String> {
        let data = self.traces_data(service, minutes).await?;
        let traces = data.as_array().cloned().unwrap_or_default();
        if traces.is_empty() {
            return Ok(format!(
                "No traces of {service} in the last {minutes} minutes."
            ));
        }
        Ok(traces
            .iter()
            .map(summarise_trace)
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// Jaeger's answer for the last `TRACE_LIMIT` traces of a service in the last `minutes`.
    pub(crate) async fn traces_data(&self, service: &str, minutes: u32) -> Result<Value, String> {
        let end_us = (self.now().await * 1e6) as i64;
        let start_us = end_us - i64::from(minutes) * 60_000_000;
        let (start, end, limit) = (
            start_us.to_string(),
            end_us.to_string(),
            TRACE_LIMIT.to_string(),
        );
        self.get(
            Api::Jaeger,
            "/api/traces",
            &[
                ("service", service),
                ("start", &start),
                ("end", &end),
                ("limit", &limit),
            ],
        )
        .await
    }

    /// Service-to-service calls over the last `minutes`, one edge a line.
    pub async fn dependencies(&self, minutes: u32) -> Result<String, String> {
        let data = self.dependencies_data(minutes).await?;
        let edges = data.as_array().cloned().unwrap_or_default();
        if edges.is_empty() {
            return Ok(format!("No dependencies in the last {minutes} minutes."));
        }
        let mut out = String::new();
        for e in edges {
            let parent = e.get("parent").and_then(Value::as_str).unwrap_or("?");
            let child = e.get("child").and_then(Value::as_str).unwrap_or("?");
            let calls = e.get("callCount").and_then(Value::as_u64).unwrap_or(0);
            out.push_str(&format!("{parent} -> {child} ({calls} calls)\n"));
        }
        Ok(out)
    }

    /// Jaeger's dependency edges over the last `minutes`.
    pub(crate) async fn dependencies_data(&self, minutes: u32) -> Result<Value, String> {
        let end_ms = (self.now().await * 1e3) as i64;
        let (end, lookback) = (
            end_ms.to_string(),
            (i64::from(minutes) * 60_000).to_string(),
        );
        self.get(
            Api::Jaeger,
            "/api/dependencies",
            &[("endTs", &end), ("lookback", &lookback)],
        )
        .await
    }

    // ---- Loki ------------------------------------------------------------------------------

    /// The newest `LOG_LIMIT` lines a LogQL query selects in the last `minutes`, oldest first:
    /// `[YYYY-mm-dd HH:MM:SS] [k=v, ...] line`.
    pub async fn logs(&self, query: &str, minutes: u32) -> Result<String, String> {
        let lines = self.log_lines(query, minutes).await?;
        if lines.is_empty() {
            return Ok(format!("No logs found in the last {minutes} minutes."));
        }
        Ok(lines.join("\n"))
    }

    /// The lines of [`Apis::logs`], formatted, oldest first.
    pub(crate) async fn log_lines(&self, query: &str, minutes: u32) -> Result<Vec<String>, String> {
        let end_ns = (self.now().await * 1e9) as i128;
        let start_ns = end_ns - i128::from(minutes) * 60_000_000_000;
        let (start, end, limit) = (
            start_ns.to_string(),
            end_ns.to_string(),
            LOG_LIMIT.to_string(),
        );
        let data = self
            .get(
                Api::Loki,
                "/loki/api/v1/query_range",
                &[
                    ("query", query),
                    ("start", &start),
                    ("end", &end),
                    ("limit", &limit),
                    ("direction", "backward"),
                ],
            )
            .await?;
        Ok(log_lines(&data))
    }

    pub async fn labels(&self) -> Result<String, String> {
        Ok(self.labels_data().await?.to_string())
    }

    pub(crate) async fn labels_data(&self) -> Result<Value, String> {
        self.get(Api::Loki, "/loki/api/v1/labels", &[]).await
    }

    pub async fn label_values(&self, label: &str) -> Result<String, String> {
        Ok(self.label_values_data(label).await?.to_string())
    }

    pub(crate) async fn label_values_data(&self, label: &str) -> Result<Value, String> {
        self.get_segments(
            Api::Loki,
            &["loki", "api", "v1", "label", label, "values"],
            &[],
        )
        .await
    }

    // ---- submit ----------------------------------------------------------------------------

    /// POSTs `{"solution": ans}`; the endpoint's answer as text. A stage followed by another is
    /// evaluated before the next opens (SREGym's conductor): the answer comes once it is, so an
    /// agent's next submission is never taken for a duplicate of this one.
    pub async fn submit(&self, ans: &str) -> Result<String, String> {
        let before = self.stage().await;
        let (status, body) = self.post_solution(ans).await?;
        if !(200..300).contains(&status) {
            return Err(format!("the submit endpoint answered {status}: {body}"));
        }
        if before.as_deref() == Some("diagnosis") {
            while self.stage().await.as_deref() == Some("diagnosis") {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(body)
    }

    /// The submission API's open stage (`GET …/status`), when it answers.
    async fn stage(&self) -> Option<String> {
        let url = self.submit.as_deref()?.strip_suffix("/submit")?;
        let answer: Value = self
            .http
            .get(format!("{url}/status"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        answer.get("stage")?.as_str().map(str::to_string)
    }

    /// POSTs `{"solution": ans}`; the endpoint's status code and body.
    pub(crate) async fn post_solution(&self, ans: &str) -> Result<(u16, String), String> {
        let Some(url) = &self.submit else {
            return Err("no submit endpoint is configured for this session".into());
        };
        let response = self
            .http
            .post(url)
            .json(&json!({ "solution": ans }))
            .send()
            .await
            .map_err(|e| format!("cannot reach the submit endpoint at {url}: {e}"))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|e| format!("reading the submit endpoint's answer: {e}"))?;
        Ok((status, body))
    }

    // ---- plumbing --------------------------------------------------------------------------

    fn base(&self, api: Api) -> &str {
        match api {
            Api::Prometheus => &self.prometheus,
            Api::Jaeger => &self.jaeger,
            Api::Loki => &self.loki,
        }
    }

    /// GET `base + path` with query parameters; the answer's `data`.
    async fn get(&self, api: Api, path: &str, params: &[(&str, &str)]) -> Result<Value, String> {
        let base = self.base(api).trim_end_matches('/');
        let mut url = Url::parse(&format!("{base}{path}"))
            .map_err(|e| format!("the {} URL `{base}` is not a URL: {e}", api.name()))?;
        add_params(&mut url, params);
        self.fetch(api, url).await
    }

    /// GET with path segments that come from the agent (percent-encoded, never path syntax).
    async fn get_segments(
        &self,
        api: Api,
        segments: &[&str],
        params: &[(&str, &str)],
    ) -> Result<Value, String> {
        let base = self.base(api);
        let mut url = Url::parse(base)
            .map_err(|e| format!("the {} URL `{base}` is not a URL: {e}", api.name()))?;
        url.path_segments_mut()
            .map_err(|()| format!("the {} URL `{base}` cannot have a path", api.name()))?
            .pop_if_empty()
            .extend(segments);
        add_params(&mut url, params);
        self.fetch(api, url).await
    }

    async fn fetch(&self, api: Api, url: Url) -> Result<Value, String> {
        let response = self
            .http
            .request(Method::GET, url.clone())
            .send()
            .await
            .map_err(|e| format!("cannot reach {} at {url}: {e}", api.name()))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|e| format!("reading {}'s answer: {e}", api.name()))?;
        let parsed: Option<Value> = serde_json::from_str(&body).ok();
        if !status.is_success() {
            let message = parsed
                .as_ref()
                .and_then(upstream_message)
                .unwrap_or_else(|| body.trim().to_string());
            return Err(format!("{} answered {status}: {message}", api.name()));
        }
        let Some(value) = parsed else {
            return Err(format!(
                "{} answered {status} with a body that is not JSON",
                api.name()
            ));
        };
        if value.get("status").and_then(Value::as_str) == Some("error") {
            let message = upstream_message(&value).unwrap_or_default();
            return Err(format!("{} answered an error: {message}", api.name()));
        }
        Ok(value.get("data").cloned().unwrap_or(Value::Null))
    }
}

#[derive(Debug, Clone, Copy)]
enum Api {
    Prometheus,
    Jaeger,
    Loki,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::Prometheus => "Prometheus",
            Api::Jaeger => "Jaeger",
            Api::Loki => "Loki",
        }
    }
}

fn add_params(url: &mut Url, params: &[(&str, &str)]) {
    if !params.is_empty() {
        url.query_pairs_mut().extend_pairs(params);
    }
}

/// The error text in an API's JSON error: Prometheus and Loki's `error`, Jaeger's
/// `errors[].msg`, a Kubernetes-style `message`.
fn upstream_message(body: &Value) -> Option<String> {
    if let Some(e) = body.get("error").and_then(Value::as_str) {
        return Some(e.to_string());
    }
    if let Some(errors) = body.get("errors").and_then(Value::as_array) {
        let msgs: Vec<&str> = errors
            .iter()
            .filter_map(|e| e.get("msg").and_then(Value::as_str))
            .collect();
        if !msgs.is_empty() {
            return Some(msgs.join("; "));
        }
    }
    body.get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn wall_clock_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// A time parameter: Unix seconds (`1767225600.5`) or RFC 3339 (`2026-01-01T00:00:00Z`).
fn parse_time(field: &str, text: &str) -> Result<f64, String> {
    if let Ok(secs) = text.trim().parse::<f64>()
        && secs.is_finite()
    {
        return Ok(secs);
    }
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.timestamp_millis() as f64 / 1e3)
        .map_err(|_| {
            format!(
                "{field} `{text}`: expected Unix seconds or an RFC 3339 time (2026-01-01T00:00:00Z)"
            )
        })
}

/// A JSON array of strings as one item a line.
fn lines_of(data: &Value) -> String {
    let items: Vec<&str> = data
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if items.is_empty() {
        return "None found.".into();
    }
    items.join("\n")
}

/// Loki's streams as lines `[YYYY-mm-dd HH:MM:SS] [k=v, ...] line`, oldest first.
fn log_lines(data: &Value) -> Vec<String> {
    let mut entries: Vec<(i128, String)> = Vec::new();
    for stream in data
        .get("result")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let labels: Vec<String> = stream
            .get("stream")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        let labels = labels.join(", ");
        for value in stream
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let ns = value
                .get(0)
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<i128>().ok())
                .unwrap_or_default();
            let line = value.get(1).and_then(Value::as_str).unwrap_or_default();
            entries.push((ns, format!("[{}] [{labels}] {line}", format_ns(ns))));
        }
    }
    entries.sort_by_key(|(ns, _)| *ns);
    entries.into_iter().map(|(_, line)| line).collect()
}

fn format_ns(ns: i128) -> String {
    let secs = i64::try_from(ns.div_euclid(1_000_000_000)).unwrap_or_default();
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| ns.to_string())
}

/// One Jaeger trace as text: a header (root, start, duration, span and error counts), then its
/// spans by start time.
fn summarise_trace(trace: &Value) -> String {
    let id = trace.get("traceID").and_then(Value::as_str).unwrap_or("?");
    let spans: Vec<&Value> = trace
        .get("spans")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let service = |span: &Value| -> String {
        span.get("processID")
            .and_then(Value::as_str)
            .and_then(|p| trace.pointer(&format!("/processes/{p}/serviceName")))
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    };
    let mut sorted = spans.clone();
    sorted.sort_by_key(|s| {
        s.get("startTime")
            .and_then(Value::as_i64)
            .unwrap_or_default()
    });
    let root = sorted.iter().copied().find(|s| {
        s.get("references")
            .and_then(Value::as_array)
            .is_none_or(|r| r.is_empty())
    });
    let errors = spans.iter().filter(|s| span_failed(s)).count();
    let mut out = match root.or(sorted.first().copied()) {
        Some(r) => format!(
            "Trace {id}: {} {} at {} UTC, {:.1} ms, {} spans, {errors} with errors\n",
            service(r),
            r.get("operationName")
                .and_then(Value::as_str)
                .unwrap_or("?"),
            format_ns(
                i128::from(
                    r.get("startTime")
                        .and_then(Value::as_i64)
                        .unwrap_or_default()
                ) * 1000
            ),
            r.get("duration")
                .and_then(Value::as_f64)
                .unwrap_or_default()
                / 1e3,
            spans.len()
        ),
        None => format!("Trace {id}: no spans\n"),
    };
    for span in sorted.iter().take(SPANS_SHOWN) {
        out.push_str(&format!(
            "  {} {} {:.1} ms{}\n",
            service(span),
            span.get("operationName")
                .and_then(Value::as_str)
                .unwrap_or("?"),
            span.get("duration")
                .and_then(Value::as_f64)
                .unwrap_or_default()
                / 1e3,
            if span_failed(span) { " [error]" } else { "" }
        ));
    }
    if sorted.len() > SPANS_SHOWN {
        out.push_str(&format!(
            "  ... {} more spans\n",
            sorted.len() - SPANS_SHOWN
        ));
    }
    out
}

/// A span tagged `error=true`, or with a gRPC/HTTP status that is a failure.
fn span_failed(span: &Value) -> bool {
    span.get("tags")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|t| {
            let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
            let value = t.get("value");
            match key {
                "error" => {
                    value.and_then(Value::as_bool) == Some(true)
                        || value.and_then(Value::as_str) == Some("true")
                }
                "otel.status_code" => value.and_then(Value::as_str) == Some("ERROR"),
                "http.status_code" => value.and_then(Value::as_i64).is_some_and(|c| c >= 500),
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_seconds_or_rfc3339_and_name_the_field() {
        assert_eq!(parse_time("start", "1767225600.5"), Ok(1767225600.5));
        assert_eq!(parse_time("end", "2026-01-01T00:00:00Z"), Ok(1767225600.0));
        let err = parse_time("start", "yesterday").unwrap_err();
        assert!(err.starts_with("start `yesterday`"), "{err}");
        assert!(parse_time("end", "NaN").is_err());
    }

    #[test]
    fn log_lines_are_formatted_oldest_first_with_their_labels() {
        let data = json!({"resultType": "streams", "result": [
            {"stream": {"app": "geo", "namespace": "hotel"}, "values": [
                ["1767225601000000000", "second"], ["1767225600000000000", "first"]]},
            {"stream": {"app": "frontend"}, "values": [["1767225660500000000", "third"]]}
        ]});
        assert_eq!(
            log_lines(&data),
            [
                "[2026-01-01 00:00:00] [app=geo, namespace=hotel] first",
                "[2026-01-01 00:00:01] [app=geo, namespace=hotel] second",
                "[2026-01-01 00:01:00] [app=frontend] third",
            ]
        );
        assert!(log_lines(&json!({"result": []})).is_empty());
    }

    #[test]
    fn upstream_errors_are_found_in_each_api_shape() {
        assert_eq!(
            upstream_message(&json!({"status": "error", "error": "parse error"})).as_deref(),
            Some("parse error")
        );
        assert_eq!(
            upstream_message(&json!({"errors": [{"code": 400, "msg": "bad service"}]})).as_deref(),
            Some("bad service")
        );
        assert_eq!(upstream_message(&json!({"data": []})), None);
    }

    #[test]
    fn a_trace_is_summarised_from_its_root() {
        let trace = json!({
            "traceID": "abc",
            "processes": {"p1": {"serviceName": "frontend"}, "p2": {"serviceName": "geo"}},
            "spans": [
                {"spanID": "2", "operationName": "Nearby", "processID": "p2",
                 "startTime": 1767225600100000_i64, "duration": 2000,
                 "references": [{"refType": "CHILD_OF", "spanID": "1"}],
                 "tags": [{"key": "error", "type": "bool", "value": true}]},
                {"spanID": "1", "operationName": "HTTP GET /hotels", "processID": "p1",
                 "startTime": 1767225600000000_i64, "duration": 5500, "references": [], "tags": []}
            ]
        });
        let text = summarise_trace(&trace);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "Trace abc: frontend HTTP GET /hotels at 2026-01-01 00:00:00 UTC, 5.5 ms, 2 spans, 1 with errors",
                "  frontend HTTP GET /hotels 5.5 ms",
                "  geo Nearby 2.0 ms [error]",
            ]
        );
    }

    #[test]
    fn names_are_listed_one_a_line() {
        assert_eq!(lines_of(&json!(["a", "b"])), "a\nb");
        assert_eq!(lines_of(&json!([])), "None found.");
    }
}
