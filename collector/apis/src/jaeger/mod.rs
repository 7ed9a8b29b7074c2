//! The Jaeger query API over the span store: the v1 JSON API the Jaeger UI and most agent tools
//! call (`/api/services`, `/api/traces`, `/api/dependencies`, ...) and the api_v3 HTTP gateway,
//! which answers in OTLP JSON. Both look from the virtual now: spans that start later are not there.

mod v1;
mod v3;

use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use schemas::tables::SpanRow;

use schemas::time::Clock;
use stores::spans::SpanStore;

pub struct JaegerFacade {
    pub spans: Arc<SpanStore>,
    pub clock: Clock,
    /// Most traces one search may return (`limit`, `query.num_traces`); more is refused, so one
    /// request cannot assemble the whole store into one answer.
    pub max_traces: usize,
}

/// Default of [`JaegerFacade::max_traces`]: the largest limit Jaeger's UI offers.
pub const DEFAULT_MAX_TRACES: usize = 1500;

/// Runs span store work off the async threads (it may read the spans file).
pub(crate) async fn read<T: Send + 'static>(
    f: &Arc<JaegerFacade>,
    work: impl FnOnce(&SpanStore) -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let f = f.clone();
    tokio::task::spawn_blocking(move || work(&*f.spans))
        .await
        .map_err(anyhow::Error::from)?
}

pub fn router(facade: Arc<JaegerFacade>) -> Router {
    Router::new()
        .route("/api/services", get(v1::services))
        .route(
            "/api/services/{service}/operations",
            get(v1::service_operations),
        )
        .route("/api/operations", get(v1::operations))
        .route("/api/traces", get(v1::search))
        .route("/api/traces/{trace_id}", get(v1::trace))
        .route("/api/dependencies", get(v1::dependencies))
        .route("/api/v3/services", get(v3::services))
        .route("/api/v3/operations", get(v3::operations))
        .route("/api/v3/traces", get(v3::find_traces))
        .route("/api/v3/traces/{trace_id}", get(v3::trace))
        .with_state(facade)
}

/// Query parameters in order, repeats kept (`tag=` and `traceID=` repeat).
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(query: Option<&str>) -> Self {
        Params(
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The first non-empty value of any of these names (Go's `FormValue` treats empty as unset).
    pub fn get(&self, names: &[&str]) -> Option<&str> {
        names.iter().find_map(|n| {
            self.0
                .iter()
                .find(|(k, v)| k == n && !v.is_empty())
                .map(|(_, v)| v.as_str())
        })
    }

    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// An attribute value with the type recovered from its text: the dataset stores attributes as
/// strings, and the OpenTelemetry conventions make the numeric ones (status codes, ports) integers.
pub(crate) enum Typed<'a> {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
}

pub(crate) fn typed(v: &str) -> Typed<'_> {
    let plain_int = |s: &str| {
        let digits = s.strip_prefix('-').unwrap_or(s);
        !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'))
    };
    match v {
        "true" => Typed::Bool(true),
        "false" => Typed::Bool(false),
        _ if plain_int(v) => v.parse().map_or(Typed::Str(v), Typed::Int),
        _ if v.contains('.')
            && v.bytes()
                .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-')
            && !v.starts_with('.')
            && !v.ends_with('.') =>
        {
            v.parse().map_or(Typed::Str(v), Typed::Float)
        }
        _ => Typed::Str(v),
    }
}

/// Tags Jaeger derives from an OTLP span's kind and status, as (key, value text).
pub fn derived_tags(s: &SpanRow) -> Vec<(String, String)> {
    let mut tags = Vec::new();
    if matches!(
        s.kind.as_str(),
        "server" | "client" | "producer" | "consumer" | "internal"
    ) {
        tags.push(("span.kind".to_string(), s.kind.clone()));
    }
    match s.status_code.as_str() {
        "ok" => tags.push(("otel.status_code".into(), "OK".into())),
        "error" => {
            tags.push(("otel.status_code".into(), "ERROR".into()));
            tags.push(("error".into(), "true".into()));
        }
        _ => {}
    }
    if let Some(msg) = s.status_message.as_ref().filter(|m| !m.is_empty()) {
        tags.push(("otel.status_description".into(), msg.clone()));
    }
    tags
}

/// Checks a trace id as Jaeger's `TraceIDFromString` does: at most 32 hex digits.
pub(crate) fn parse_trace_id(id: &str) -> Result<String, String> {
    if id.len() > 32 {
        return Err(format!(
            "TraceID cannot be longer than 32 hex characters: {id}"
        ));
    }
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "strconv.ParseUint: parsing \"{id}\": invalid syntax"
        ));
    }
    Ok(stores::spans::trace_key(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_attribute_types_from_text() {
        assert!(matches!(typed("200"), Typed::Int(200)));
        assert!(matches!(typed("-3"), Typed::Int(-3)));
        assert!(
            matches!(typed("007"), Typed::Str("007")),
            "leading zeros stay text (ids)"
        );
        assert!(matches!(typed("true"), Typed::Bool(true)));
        assert!(matches!(typed("0.25"), Typed::Float(f) if f == 0.25));
        assert!(matches!(typed("1.2.3"), Typed::Str(_)));
        assert!(matches!(typed("GET /cart"), Typed::Str(_)));
    }

    #[test]
    fn trace_ids_are_checked_and_padded() {
        assert_eq!(parse_trace_id("ABC").unwrap(), format!("{:0>32}", "abc"));
        assert!(
            parse_trace_id("xyz")
                .unwrap_err()
                .contains("invalid syntax")
        );
        assert!(
            parse_trace_id(&"a".repeat(33))
                .unwrap_err()
                .contains("longer than 32")
        );
    }
}
