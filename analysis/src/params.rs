//! What the tools' arguments mean, shared by every tool: times (ISO 8601, a naive time is UTC),
//! time windows, durations (`5m`), Kubernetes object identifiers (`namespace/kind/name`,
//! `kind/name` or `name`, as ITBench writes them), and lenient number, boolean and list
//! arguments (clients that send every argument as a string are as welcome as JSON ones).

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use schemas::time::Reading;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::{Error, Result};

/// Parses a time an agent gives: RFC 3339 (`2025-12-15T17:30:00Z`, an offset), or a naive
/// `2025-12-15T17:30:00` / `2025-12-15 17:30:00[.fff]` taken as UTC. Nanoseconds since the epoch.
pub fn parse_time(text: &str, argument: &str) -> Result<i64> {
    let t = text.trim();
    let parsed = DateTime::parse_from_rfc3339(t)
        .map(|d| d.with_timezone(&Utc))
        .or_else(|_| {
            [
                "%Y-%m-%dT%H:%M:%S%.f",
                "%Y-%m-%d %H:%M:%S%.f",
                "%Y-%m-%dT%H:%M",
                "%Y-%m-%d %H:%M",
            ]
            .iter()
            .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
            .map(|n| n.and_utc())
            .ok_or(())
        })
        .map_err(|_| {
            Error::param(format!(
                "{argument} `{text}`: expected an ISO 8601 time such as 2025-12-15T17:30:00Z \
                 (a time without a zone is UTC)"
            ))
        })?;
    parsed
        .timestamp_nanos_opt()
        .ok_or_else(|| Error::param(format!("{argument} `{text}`: out of range")))
}

/// A time as answered: RFC 3339 in UTC with as many fractional digits as it needs.
pub fn format_time(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns).to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A served time (what the client sees) formatted for an answer, from a recorded one.
pub fn served(reading: &Reading, recorded_ns: i64) -> String {
    format_time(reading.serve(recorded_ns))
}

/// Parses `5m`, `90s`, `1h`, `2d` or a Go duration (`1h30m`) to nanoseconds.
pub fn parse_duration(text: &str, argument: &str) -> Result<i64> {
    let t = text.trim();
    let simple = t
        .strip_suffix('d')
        .and_then(|n| n.parse::<i64>().ok())
        .map(|d| d * 86_400_000_000_000);
    match simple
        .map(Ok)
        .unwrap_or_else(|| schemas::time::duration::parse_go(t))
    {
        Ok(ns) if ns > 0 => Ok(ns),
        _ => Err(Error::param(format!(
            "{argument} `{text}`: expected a positive duration such as 5m, 90s or 1h"
        ))),
    }
}

/// A closed time window in recorded time; either end may be open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub start: Option<i64>,
    pub end: Option<i64>,
}

impl Window {
    /// The window of `start_time` / `end_time` arguments, moved from served to recorded time.
    pub fn parse(start: Option<&str>, end: Option<&str>, reading: &Reading) -> Result<Window> {
        let start = start
            .filter(|s| !s.trim().is_empty())
            .map(|s| parse_time(s, "start_time"))
            .transpose()?
            .map(|t| reading.recorded(t));
        let end = end
            .filter(|s| !s.trim().is_empty())
            .map(|s| parse_time(s, "end_time"))
            .transpose()?
            .map(|t| reading.recorded(t));
        if let (Some(s), Some(e)) = (start, end)
            && s > e
        {
            return Err(Error::param("start_time is after end_time"));
        }
        Ok(Window { start, end })
    }

    pub fn contains(&self, t: i64) -> bool {
        self.start.is_none_or(|s| t >= s) && self.end.is_none_or(|e| t <= e)
    }

    pub fn is_open(&self) -> bool {
        self.start.is_none() && self.end.is_none()
    }

    /// A polars predicate keeping rows whose Int64 nanosecond column `column` is inside.
    pub fn predicate(&self, column: &str) -> Option<polars::prelude::Expr> {
        use polars::prelude::*;
        let c = || col(column).cast(DataType::Int64);
        let lo = self.start.map(|s| c().gt_eq(lit(s)));
        let hi = self.end.map(|e| c().lt_eq(lit(e)));
        match (lo, hi) {
            (Some(a), Some(b)) => Some(a.and(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A Kubernetes object identifier as ITBench's tools take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectId {
    pub namespace: Option<String>,
    pub kind: Option<String>,
    pub name: String,
}

impl ObjectId {
    /// `namespace/kind/name` (exact), `kind/name` or `name` (ambiguous: every match).
    pub fn parse(text: &str, argument: &str) -> Result<ObjectId> {
        let parts: Vec<&str> = text
            .split('/')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        match parts.as_slice() {
            [] => Err(Error::param(format!(
                "{argument}: expected namespace/kind/name, kind/name or name"
            ))),
            [name] => Ok(ObjectId {
                namespace: None,
                kind: None,
                name: name.to_string(),
            }),
            [kind, name] => Ok(ObjectId {
                namespace: None,
                kind: Some(kind.to_string()),
                name: name.to_string(),
            }),
            [ns, kind, rest @ ..] => Ok(ObjectId {
                namespace: Some(ns.to_string()),
                kind: Some(kind.to_string()),
                name: rest.join("/"),
            }),
        }
    }

    /// ITBench's name for the identifier's form.
    pub fn format(&self) -> &'static str {
        match (&self.namespace, &self.kind) {
            (Some(_), _) => "namespace/kind/name",
            (None, Some(_)) => "kind/name",
            (None, None) => "name",
        }
    }

    /// The warning ITBench gives for an ambiguous form.
    pub fn warning(&self, text: &str) -> Option<String> {
        match self.format() {
            "kind/name" => Some(format!(
                "Format 'kind/name' is ambiguous - '{text}' may exist in multiple namespaces. \
                 Consider using 'namespace/kind/name' format for precision."
            )),
            "name" => Some(format!(
                "Format 'name' is highly ambiguous - '{text}' may exist across multiple kinds and \
                 namespaces. Consider using 'namespace/kind/name' format for precision."
            )),
            _ => None,
        }
    }

    /// Whether an object of this kind, namespace and name is meant (case-insensitive).
    pub fn matches(&self, kind: &str, namespace: Option<&str>, name: &str) -> bool {
        let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        self.kind.as_deref().is_none_or(|k| eq(k, kind))
            && self
                .namespace
                .as_deref()
                .is_none_or(|n| eq(n, namespace.unwrap_or("")))
            && eq(&self.name, name)
    }

    /// The name and, for a name ending in `-service`/`-svc`, the name without it (ITBench's
    /// architecture names services `cart-service` where Kubernetes says `cart`).
    pub fn name_variants(&self) -> Vec<String> {
        let lower = self.name.to_ascii_lowercase();
        let mut out = vec![lower.clone()];
        for suffix in ["-service", "_service", "-svc", "_svc"] {
            if let Some(stem) = lower.strip_suffix(suffix) {
                out.push(stem.to_string());
            }
        }
        out
    }
}

/// `namespace/Kind/name` for a namespaced object, `Kind/name` for a cluster-scoped one.
pub fn entity_id(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace.filter(|n| !n.is_empty()) {
        Some(ns) => format!("{ns}/{kind}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// Paging as ITBench's tools answer it.
pub fn page(rows: Vec<Value>, offset: usize, limit: Option<usize>) -> Value {
    let total = rows.len();
    let data: Vec<Value> = rows
        .into_iter()
        .skip(offset)
        .take(limit.unwrap_or(usize::MAX))
        .collect();
    serde_json::json!({
        "total_count": total,
        "offset": offset,
        "limit": limit.map_or(Value::from("all"), Value::from),
        "returned_count": data.len(),
        "data": data,
    })
}

/// `limit` as ITBench means it: absent or 0 is no limit.
pub fn limit(n: Option<usize>) -> Option<usize> {
    n.filter(|n| *n > 0)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Lenient {
    Bool(bool),
    Number(serde_json::Number),
    Text(String),
}

fn lenient<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Lenient>, D::Error> {
    Option::<Lenient>::deserialize(d)
}

/// A whole number, also given as text.
pub fn de_usize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<usize>, D::Error> {
    match lenient(d)? {
        None => Ok(None),
        Some(Lenient::Number(n)) => n
            .as_u64()
            .map(|n| Some(n as usize))
            .ok_or_else(|| serde::de::Error::custom(format!("`{n}`: expected a whole number"))),
        Some(Lenient::Text(t)) if t.trim().is_empty() => Ok(None),
        Some(Lenient::Text(t)) => t
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("`{t}`: expected a whole number"))),
        Some(Lenient::Bool(b)) => Err(serde::de::Error::custom(format!(
            "`{b}`: expected a whole number"
        ))),
    }
}

/// A number, also given as text.
pub fn de_f64<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    match lenient(d)? {
        None => Ok(None),
        Some(Lenient::Number(n)) => Ok(n.as_f64()),
        Some(Lenient::Text(t)) if t.trim().is_empty() => Ok(None),
        Some(Lenient::Text(t)) => t
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("`{t}`: expected a number"))),
        Some(Lenient::Bool(b)) => Err(serde::de::Error::custom(format!(
            "`{b}`: expected a number"
        ))),
    }
}

/// A boolean, also given as `true`/`false`/`1`/`0` text.
pub fn de_bool<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<bool>, D::Error> {
    match lenient(d)? {
        None => Ok(None),
        Some(Lenient::Bool(b)) => Ok(Some(b)),
        Some(Lenient::Number(n)) => Ok(Some(n.as_f64() != Some(0.0))),
        Some(Lenient::Text(t)) => match t.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(Some(true)),
            "false" | "0" | "no" | "" => Ok(Some(false)),
            _ => Err(serde::de::Error::custom(format!(
                "`{t}`: expected true or false"
            ))),
        },
    }
}

/// One name or a list of names (ITBench's `group_by`), also a JSON list given as text.
pub fn de_names<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Names {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<Names>::deserialize(d)? {
        None => Vec::new(),
        Some(Names::Many(v)) => v,
        Some(Names::One(s)) if s.trim_start().starts_with('[') => {
            serde_json::from_str(&s).map_err(serde::de::Error::custom)?
        }
        Some(Names::One(s)) if s.trim().is_empty() => Vec::new(),
        Some(Names::One(s)) => vec![s],
    })
}

/// An object of column filters, also given as JSON text.
pub fn de_filters<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<serde_json::Map<String, Value>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(Default::default()),
        Some(Value::Object(m)) => Ok(m),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Default::default()),
        Some(Value::String(s)) => match serde_json::from_str(&s) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(serde::de::Error::custom(format!(
                "`{s}`: expected an object of column filters"
            ))),
        },
        Some(other) => Err(serde::de::Error::custom(format!(
            "`{other}`: expected an object of column filters"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_with_and_without_a_zone_are_utc() {
        let z = parse_time("2025-12-15T17:30:00Z", "t").unwrap();
        assert_eq!(parse_time("2025-12-15 17:30:00", "t").unwrap(), z);
        assert_eq!(parse_time("2025-12-15T18:30:00+01:00", "t").unwrap(), z);
        assert_eq!(
            parse_time("2025-12-15 17:30:00.5", "t").unwrap(),
            z + 500_000_000
        );
        let err = parse_time("yesterday", "pivot_time")
            .unwrap_err()
            .to_string();
        assert!(err.contains("pivot_time `yesterday`"), "{err}");
        assert_eq!(format_time(z), "2025-12-15T17:30:00Z");
    }

    #[test]
    fn durations_and_identifiers() {
        assert_eq!(parse_duration("5m", "d").unwrap(), 300_000_000_000);
        assert_eq!(parse_duration("2d", "d").unwrap(), 172_800_000_000_000);
        assert!(parse_duration("soon", "delta_time").is_err());
        let id = ObjectId::parse("otel-demo/Deployment/cart", "x").unwrap();
        assert_eq!(id.format(), "namespace/kind/name");
        assert!(id.matches("deployment", Some("otel-demo"), "Cart"));
        assert!(!id.matches("Service", Some("otel-demo"), "cart"));
        let id = ObjectId::parse("cart-service", "x").unwrap();
        assert_eq!(id.name_variants(), ["cart-service", "cart"]);
        assert!(id.warning("cart-service").is_some());
        assert!(ObjectId::parse("//", "k8_object").is_err());
    }
}
