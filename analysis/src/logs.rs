//! `log_analysis` over the logs table: the lines of an object or service in a window, clustered
//! into templates (variable tokens masked, lines of the same shape merged when enough of their
//! tokens agree, as Drain does), with counts, severities, pods and an example per template; or
//! the raw lines, paged.
//!
//! Container log lines carry no severity column, so a line's level is read from the line (JSON
//! `level`, `level=`, `[ERROR]`, klog's `E0102`); filters compare levels case-insensitively
//! (ITBench's `ERROR` matches nothing because its logs say `Error`).

use std::collections::BTreeMap;

use polars::prelude::*;
use regex::Regex;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::frame::{collect, counts_json, ints, strings_or_empty};
use crate::owners::Owners;
use crate::params::{ObjectId, Window, de_bool, de_f64, de_usize, page, served};
use crate::{Result, Source};
use schemas::tables::Table;
use schemas::tables::columns::logs as c;

pub const DESCRIPTION: &str = "Log pattern mining over container logs: lines of an object or service in a window clustered into templates with count, percentage, severity and pod breakdowns, time range and an example; pattern_analysis=false pages the raw lines. Example: k8_object='Deployment/recommendation'. Example: severity_filter='ERROR,WARNING'. Example: body_contains='timeout'.";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Params {
    /// Ignored: the logs are the session's (accepted so ITBench prompts work).
    #[serde(default, rename = "logs_file")]
    pub _logs_file: Option<Value>,
    /// 'namespace/kind/name', 'kind/name' or 'name' (a pod, or a workload's pods).
    #[serde(default)]
    pub k8_object: Option<String>,
    /// A service: its containers, or its workload's pods.
    #[serde(default)]
    pub service_name: Option<String>,
    /// Levels, comma-separated, any case: ERROR, WARNING, INFO, DEBUG, FATAL.
    #[serde(default)]
    pub severity_filter: Option<String>,
    /// Case-insensitive substring of the line.
    #[serde(default)]
    pub body_contains: Option<String>,
    /// ISO 8601 start of the window.
    #[serde(default)]
    pub start_time: Option<String>,
    /// ISO 8601 end of the window.
    #[serde(default)]
    pub end_time: Option<String>,
    /// Mine patterns (default true) or page raw lines.
    #[serde(default, deserialize_with = "de_bool")]
    #[schemars(with = "Option<bool>")]
    pub pattern_analysis: Option<bool>,
    /// Most patterns (default 50).
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub max_patterns: Option<usize>,
    /// Share of tokens two lines must agree on to be one pattern (default 0.5).
    #[serde(default, deserialize_with = "de_f64")]
    #[schemars(with = "Option<f64>")]
    pub similarity_threshold: Option<f64>,
    /// Most raw lines (default 100; 0 = all).
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub limit: Option<usize>,
    /// Raw lines skipped (paging).
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub offset: Option<usize>,
}

/// The level a line states, if it states one.
pub fn level(line: &str) -> &'static str {
    static WORDS: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let re = WORDS.get_or_init(|| {
        Regex::new(
            r#"(?i)(?:"(?:level|severity|lvl)"\s*:\s*"|\b(?:level|severity|lvl)=|\[|^|\s)(fatal|panic|crit(?:ical)?|err(?:or)?|warn(?:ing)?|info|debug|trace)\b"#,
        )
        .expect("level regex")
    });
    static KLOG: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let klog = KLOG.get_or_init(|| Regex::new(r"^([EWIF])\d{4} ").expect("klog regex"));
    if let Some(m) = klog.captures(line) {
        return match &m[1] {
            "E" => "ERROR",
            "W" => "WARNING",
            "F" => "FATAL",
            _ => "INFO",
        };
    }
    match re.captures(line).map(|m| m[1].to_ascii_lowercase()) {
        Some(w) if w.starts_with("fatal") || w == "panic" || w.starts_with("crit") => "FATAL",
        Some(w) if w.starts_with("err") => "ERROR",
        Some(w) if w.starts_with("warn") => "WARNING",
        Some(w) if w == "info" => "INFO",
        Some(_) => "DEBUG",
        None => "UNKNOWN",
    }
}

fn normalise_level(s: &str) -> String {
    match s.trim().to_ascii_uppercase().as_str() {
        "WARN" => "WARNING".into(),
        "ERR" => "ERROR".into(),
        "INFORMATION" => "INFO".into(),
        other => other.to_string(),
    }
}

/// A token that varies between lines of one shape.
fn variable(token: &str) -> bool {
    static VAR: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let re = VAR.get_or_init(|| {
        Regex::new(
            r"(?x)^[\W_]*(?:
                -?\d+(?:\.\d+)?(?:ms|s|us|µs|ns|m|h|%|[kKMG]i?B?)? |
                [0-9a-fA-F]{8,} | [0-9a-fA-F-]{36} |
                \d{1,3}(?:\.\d{1,3}){3}(?::\d+)? |
                \d{4}-\d{2}-\d{2}[T\s][\d:.]+Z? |
                [A-Za-z0-9._-]*\d[A-Za-z0-9._-]*-[a-z0-9]{5}
            )[\W_]*$",
        )
        .expect("variable-token regex")
    });
    re.is_match(token)
}

/// One template being mined.
struct Cluster {
    tokens: Vec<String>,
    count: u64,
    severities: BTreeMap<String, u64>,
    pods: BTreeMap<String, u64>,
    first: i64,
    last: i64,
    example: String,
}

/// Mines templates: lines of the same length and first token are compared position by position,
/// and join a template when at least `threshold` of their tokens agree.
fn mine(lines: &[(i64, String, String, String)], threshold: f64) -> Vec<Cluster> {
    let mut clusters: Vec<Cluster> = Vec::new();
    let mut groups: BTreeMap<(usize, String), Vec<usize>> = BTreeMap::new();
    for (t, pod, severity, line) in lines {
        let tokens: Vec<String> = line
            .split_whitespace()
            .map(|tok| {
                if variable(tok) {
                    "<*>".to_string()
                } else {
                    tok.to_string()
                }
            })
            .collect();
        let key = (tokens.len(), tokens.first().cloned().unwrap_or_default());
        let members = groups.entry(key).or_default();
        let best = members
            .iter()
            .map(|&i| {
                let same = clusters[i]
                    .tokens
                    .iter()
                    .zip(&tokens)
                    .filter(|(a, b)| a == b || *a == "<*>")
                    .count();
                (i, same as f64 / tokens.len().max(1) as f64)
            })
            .filter(|(_, sim)| *sim >= threshold)
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let at = match best {
            Some((i, _)) => {
                let c = &mut clusters[i];
                for (a, b) in c.tokens.iter_mut().zip(&tokens) {
                    if a != b {
                        *a = "<*>".to_string();
                    }
                }
                i
            }
            None => {
                clusters.push(Cluster {
                    tokens,
                    count: 0,
                    severities: BTreeMap::new(),
                    pods: BTreeMap::new(),
                    first: *t,
                    last: *t,
                    example: line.clone(),
                });
                members.push(clusters.len() - 1);
                clusters.len() - 1
            }
        };
        let c = &mut clusters[at];
        c.count += 1;
        *c.severities.entry(severity.clone()).or_default() += 1;
        *c.pods.entry(pod.clone()).or_default() += 1;
        c.first = c.first.min(*t);
        c.last = c.last.max(*t);
    }
    clusters
}

/// The lines of the selection: (time, pod, level, line).
fn lines(
    source: &Source,
    p: &Params,
    window: &Window,
) -> Result<Vec<(i64, String, String, String)>> {
    let mut lf = source.scan(Table::Logs)?;
    if let Some(pred) = window.predicate(c::TIME) {
        lf = lf.filter(pred);
    }
    if let Some(text) = p.body_contains.as_deref().filter(|s| !s.is_empty()) {
        lf = lf.filter(
            col(c::LINE)
                .str()
                .to_lowercase()
                .str()
                .contains_literal(lit(text.to_lowercase())),
        );
    }
    let owners = Owners::load(source)?;
    let mut pods: Option<Vec<String>> = None;
    let mut prefixes: Vec<String> = Vec::new();
    let mut containers: Vec<String> = Vec::new();
    if let Some(obj) = p.k8_object.as_deref().filter(|s| !s.trim().is_empty()) {
        let id = ObjectId::parse(obj, "k8_object")?;
        if let Some(ns) = &id.namespace {
            lf = lf.filter(col(c::NAMESPACE).eq(lit(ns.clone())));
        }
        let owned: Vec<String> = owners
            .pods_of(id.namespace.as_deref(), &id.name)
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        pods = Some(owned);
        prefixes = id.name_variants();
    }
    if let Some(svc) = p.service_name.as_deref().filter(|s| !s.is_empty()) {
        let owned: Vec<String> = owners
            .pods_of(None, svc)
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        pods.get_or_insert_with(Vec::new).extend(owned);
        containers.push(svc.to_string());
        prefixes.push(svc.to_ascii_lowercase());
    }
    if pods.is_some() {
        let mut pred = lit(false);
        for pod in pods.iter().flatten() {
            pred = pred.or(col(c::POD).eq(lit(pod.clone())));
        }
        for prefix in &prefixes {
            pred = pred.or(col(c::POD).str().starts_with(lit(format!("{prefix}-"))));
        }
        for container in &containers {
            pred = pred.or(col(c::CONTAINER).eq(lit(container.clone())));
        }
        lf = lf.filter(pred);
    }
    let df = collect(lf.select([
        col(c::TIME).cast(DataType::Int64).alias("_t"),
        col(c::POD),
        col(c::LINE),
    ]))?;
    let times = ints(&df, "_t")?;
    let pod_names = strings_or_empty(&df, c::POD)?;
    let text = strings_or_empty(&df, c::LINE)?;
    let wanted: Option<Vec<String>> = p
        .severity_filter
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.split(',').map(normalise_level).collect());
    let mut out: Vec<(i64, String, String, String)> = (0..df.height())
        .map(|i| {
            (
                times[i].unwrap_or(0),
                pod_names[i].clone(),
                level(&text[i]).to_string(),
                text[i].clone(),
            )
        })
        .filter(|(_, _, lvl, _)| wanted.as_ref().is_none_or(|w| w.iter().any(|x| x == lvl)))
        .collect();
    out.sort_by_key(|l| l.0);
    Ok(out)
}

pub fn analysis(source: &Source, p: Params) -> Result<Value> {
    let reading = source.reading();
    let window = Window::parse(p.start_time.as_deref(), p.end_time.as_deref(), &reading)?;
    let found = lines(source, &p, &window)?;
    let filters = json!({
        "k8_object": p.k8_object, "service_name": p.service_name, "severity_filter": p.severity_filter,
        "body_contains": p.body_contains, "start_time": p.start_time, "end_time": p.end_time,
    });
    if !p.pattern_analysis.unwrap_or(true) {
        let rows: Vec<Value> = found
            .iter()
            .map(|(t, pod, lvl, line)| json!({"timestamp": served(&reading, *t), "pod": pod, "severity": lvl, "body": line}))
            .collect();
        let limit = match p.limit {
            None => Some(100),
            Some(0) => None,
            Some(n) => Some(n),
        };
        let mut out = page(rows, p.offset.unwrap_or(0), limit);
        out["filters_applied"] = filters;
        return Ok(out);
    }
    let threshold = p.similarity_threshold.unwrap_or(0.5).clamp(0.0, 1.0);
    let mut clusters = mine(&found, threshold);
    clusters.sort_by(|a, b| b.count.cmp(&a.count).then(a.first.cmp(&b.first)));
    let total = found.len();
    let count = clusters.len();
    let patterns: Vec<Value> = clusters
        .into_iter()
        .take(p.max_patterns.unwrap_or(50))
        .map(|c| {
            json!({
                "pattern": c.tokens.join(" "),
                "count": c.count,
                "percentage": (c.count as f64 * 1000.0 / total.max(1) as f64).round() / 10.0,
                "severity_breakdown": counts_json(&c.severities),
                "pod_breakdown": counts_json(&c.pods),
                "first_seen": served(&reading, c.first),
                "last_seen": served(&reading, c.last),
                "example": c.example,
            })
        })
        .collect();
    Ok(json!({
        "total_logs": total,
        "pattern_count": count,
        "patterns": patterns,
        "filters_applied": filters,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_read_from_the_line() {
        assert_eq!(level(r#"{"level":"error","msg":"x"}"#), "ERROR");
        assert_eq!(level("2025-01-01 level=warn msg=slow"), "WARNING");
        assert_eq!(level("E0102 12:00:00.1 1 reflector.go] failed"), "ERROR");
        assert_eq!(level("[INFO] started"), "INFO");
        assert_eq!(level("just text"), "UNKNOWN");
        assert_eq!(normalise_level(" warn"), "WARNING");
    }

    #[test]
    fn lines_of_one_shape_become_one_template() {
        let l = |t: i64, s: &str| (t, "p".to_string(), "INFO".to_string(), s.to_string());
        let lines = vec![
            l(1, "connect to geo:8083 failed after 12ms"),
            l(2, "connect to geo:8084 failed after 30ms"),
            l(3, "user 42 logged in"),
        ];
        let c = mine(&lines, 0.5);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].count, 2);
        assert_eq!(c[0].tokens.join(" "), "connect to <*> failed after <*>");
    }
}
