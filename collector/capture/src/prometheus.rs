//! The Prometheus source: series discovery over the window, raw samples (range-vector selectors
//! evaluated at chunk ends, never `query_range`, so nothing is re-sampled), metric metadata, and
//! alert states from the `ALERTS` series with annotations from `/api/v1/alerts` and
//! `/api/v1/rules`.
//!
//! Requests stay small whatever the window: samples are read per metric, per group of at most
//! [`SERIES_PER_QUERY`] series (split on the label with the most values), and per time chunk.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures_util::{StreamExt, TryStreamExt};
use indicatif::ProgressBar;
use schemas::tables::{AlertRow, Labels, MetricMeta, MetricSample, Row};
use serde_json::Value;

use super::Window;
use super::http::HttpSource;
use super::scope::Scope;
use super::sink::Sink;

/// Series one query may select.
pub const SERIES_PER_QUERY: usize = 500;
/// Samples one query may return, at most (Prometheus refuses 50 million by default).
const SAMPLES_PER_QUERY: i64 = 1_000_000;
/// The longest time chunk.
const DEFAULT_CHUNK_NS: i64 = 3_600_000_000_000;
/// The densest sampling assumed when sizing chunks: one sample a second per series.
const MIN_INTERVAL_NS: i64 = 1_000_000_000;
/// Series Prometheus derives from its alerting rules: captured as alert states, not metrics.
const ALERT_SERIES: [&str; 2] = ["ALERTS", "ALERTS_FOR_STATE"];
/// A gap after which an alert's next observation starts a new activation.
const ALERT_GAP_NS: i64 = 300_000_000_000;

/// Prometheus times: seconds with millisecond precision.
fn seconds(ns: i64) -> String {
    let ms = ns.div_euclid(1_000_000);
    let sign = if ms < 0 { "-" } else { "" };
    format!(
        "{sign}{}.{:03}",
        ms.unsigned_abs() / 1000,
        ms.unsigned_abs() % 1000
    )
}

fn labels_of(v: &Value) -> Labels {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// Prometheus floats: decimal text, `NaN`, `+Inf`, `-Inf`.
fn value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        other => other.parse().ok(),
    }
}

/// A matrix result's points as (ns, value); times are float seconds with millisecond precision.
fn points(series: &Value) -> impl Iterator<Item = (i64, f64)> + '_ {
    series["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let t = p.get(0)?.as_f64()?;
            let v = value(p.get(1)?.as_str()?)?;
            Some(((t * 1000.0).round() as i64 * 1_000_000, v))
        })
}

fn selector(metric: &str, matcher: Option<&str>) -> String {
    match matcher {
        Some(m) => format!("{{__name__=\"{metric}\",{m}}}"),
        None => format!("{{__name__=\"{metric}\"}}"),
    }
}

/// A PromQL string literal.
fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// Splits a metric's series into groups of at most [`SERIES_PER_QUERY`], as label matchers that
/// partition them exactly: by the values of the label with the most distinct values (series
/// without it form their own group).
fn partition(series: &[Labels]) -> Vec<Option<String>> {
    if series.len() <= SERIES_PER_QUERY {
        return vec![None];
    }
    let mut values: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for s in series {
        for (k, v) in s {
            if k != "__name__" {
                values.entry(k).or_default().insert(v);
            }
        }
    }
    let Some((label, vals)) = values.into_iter().max_by_key(|(_, v)| v.len()) else {
        return vec![None];
    };
    let vals: Vec<&str> = vals.into_iter().collect();
    let per_value = series.len().div_ceil(vals.len()).max(1);
    let chunk = (SERIES_PER_QUERY / per_value).max(1);
    let mut groups: Vec<Option<String>> = vals
        .chunks(chunk)
        .map(|c| {
            let alternatives: Vec<String> = c.iter().map(|v| regex::escape(v)).collect();
            Some(format!("{label}=~{}", quote(&alternatives.join("|"))))
        })
        .collect();
    groups.push(Some(format!("{label}=\"\"")));
    groups
}

/// Whether a series belongs to the captured namespaces (series without a namespace label, such
/// as node metrics, always do).
fn in_scope(scope: &Scope, labels: &Labels) -> bool {
    labels
        .get("namespace")
        .is_none_or(|ns| scope.namespace_ok(ns))
}

/// Reads `sel` over the window in chunks; calls `each` with every (labels, time, value) inside it.
async fn samples(
    prom: &HttpSource,
    sel: &str,
    window: Window,
    chunk_ns: i64,
    mut each: impl FnMut(&Labels, i64, f64) -> Option<Row>,
    sink: &Sink,
) -> anyhow::Result<u64> {
    // Range windows are left-open: start a millisecond early so a sample at `since` is included.
    let mut end = window.since_ns - 1_000_000;
    let mut count = 0;
    while end < window.until_ns {
        let next = (end + chunk_ns).min(window.until_ns);
        let range_ms = (next - end) / 1_000_000;
        let body = prom
            .get_json(
                "api/v1/query",
                &[
                    ("query", format!("{sel}[{range_ms}ms]")),
                    ("time", seconds(next)),
                ],
            )
            .await?;
        for series in body["data"]["result"].as_array().into_iter().flatten() {
            let labels = labels_of(&series["metric"]);
            for (t, v) in points(series) {
                if t > end
                    && window.contains(t)
                    && let Some(row) = each(&labels, t, v)
                {
                    sink.push(row).await?;
                    count += 1;
                }
            }
        }
        end = next;
    }
    Ok(count)
}

/// The chunk length that keeps a query of `series` series under [`SAMPLES_PER_QUERY`].
fn chunk_for(series: usize) -> i64 {
    let per_series = SAMPLES_PER_QUERY / series.max(1) as i64;
    (per_series * MIN_INTERVAL_NS).clamp(60_000_000_000, DEFAULT_CHUNK_NS)
}

#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct PrometheusOutcome {
    pub metrics: usize,
    pub series: usize,
    pub samples: u64,
    pub alert_observations: u64,
}

/// Captures metrics, metadata and alerts.
pub async fn capture(
    prom: &HttpSource,
    scope: &Scope,
    window: Window,
    sink: &Sink,
    bar: &ProgressBar,
) -> anyhow::Result<PrometheusOutcome> {
    let range = [
        ("start", seconds(window.since_ns)),
        ("end", seconds(window.until_ns)),
    ];
    let names = prom
        .get_json("api/v1/label/__name__/values", &range)
        .await?;
    let names: Vec<String> = names["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_string))
        .filter(|n| !ALERT_SERIES.contains(&n.as_str()))
        .collect();
    bar.set_length(names.len() as u64 + 2);
    let mut outcome = PrometheusOutcome {
        metrics: names.len(),
        ..Default::default()
    };
    let per_metric = futures_util::stream::iter(names)
        .map(|name| {
            let range = range.clone();
            async move {
                let mut params = range.to_vec();
                params.push(("match[]", selector(&name, None)));
                let found = prom.get_json("api/v1/series", &params).await?;
                let series: Vec<Labels> = found["data"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(labels_of)
                    .filter(|l| in_scope(scope, l))
                    .collect();
                let mut samples_read = 0;
                let chunk = chunk_for(series.len().min(SERIES_PER_QUERY));
                for group in partition(&series) {
                    let sel = selector(&name, group.as_deref());
                    samples_read += samples(
                        prom,
                        &sel,
                        window,
                        chunk,
                        |labels, t, v| {
                            if !in_scope(scope, labels) {
                                return None;
                            }
                            let mut labels = labels.clone();
                            let metric = labels.remove("__name__").unwrap_or_else(|| name.clone());
                            Some(Row::Metric(MetricSample {
                                metric,
                                labels,
                                time_ns: t,
                                value: v,
                            }))
                        },
                        sink,
                    )
                    .await?;
                }
                bar.inc(1);
                anyhow::Ok((series.len(), samples_read))
            }
        })
        .buffer_unordered(4);
    let totals: Vec<(usize, u64)> = per_metric.try_collect().await?;
    outcome.series = totals.iter().map(|t| t.0).sum();
    outcome.samples = totals.iter().map(|t| t.1).sum();

    let metadata = prom.get_json("api/v1/metadata", &[]).await?;
    if let Some(families) = metadata["data"].as_object() {
        for (metric, entries) in families {
            let Some(first) = entries.as_array().and_then(|e| e.first()) else {
                continue;
            };
            let text = |k: &str| first[k].as_str().unwrap_or_default().to_string();
            sink.push(Row::MetricMeta(MetricMeta {
                metric: metric.clone(),
                metric_type: text("type"),
                help: text("help"),
                unit: text("unit"),
            }))
            .await?;
        }
    }
    bar.inc(1);
    outcome.alert_observations = alerts(prom, scope, window, sink).await?;
    bar.inc(1);
    Ok(outcome)
}

/// What Prometheus says about an alert beyond its `ALERTS` samples.
#[derive(Default)]
struct AlertDetails {
    /// Alerts active now, by (alertname, labels).
    current: HashMap<(String, Labels), Value>,
    /// Annotations of each alerting rule, when they are not templates.
    rule_annotations: HashMap<String, Labels>,
}

async fn alert_details(prom: &HttpSource) -> anyhow::Result<AlertDetails> {
    let mut details = AlertDetails::default();
    let alerts = prom.get_json("api/v1/alerts", &[]).await?;
    for a in alerts["data"]["alerts"].as_array().into_iter().flatten() {
        let labels = labels_of(&a["labels"]);
        let name = labels.get("alertname").cloned().unwrap_or_default();
        details.current.insert((name, labels), a.clone());
    }
    let rules = prom
        .get_json("api/v1/rules", &[("type", "alert".to_string())])
        .await?;
    for group in rules["data"]["groups"].as_array().into_iter().flatten() {
        for rule in group["rules"].as_array().into_iter().flatten() {
            let annotations = labels_of(&rule["annotations"]);
            if let Some(name) = rule["name"].as_str()
                && !annotations.values().any(|v| v.contains("{{"))
            {
                details
                    .rule_annotations
                    .insert(name.to_string(), annotations);
            }
        }
    }
    Ok(details)
}

/// Alert states from the `ALERTS` series: one row per observation, labels as Prometheus shows
/// alerts (with `alertname`). Prometheus keeps neither annotations nor values in `ALERTS`, so
/// rows carry the rule's static (non-template) annotations and no value, except each alert's
/// latest observation when `/api/v1/alerts` still lists it: that row gets its annotations and
/// value. `activeAt` comes from `/api/v1/alerts` for those, else it is the first observation of
/// the activation (observations more than five minutes apart are separate activations).
async fn alerts(
    prom: &HttpSource,
    scope: &Scope,
    window: Window,
    sink: &Sink,
) -> anyhow::Result<u64> {
    let details = alert_details(prom).await?;
    // Alert observations are few (one per alert per rule evaluation): they are held to find
    // each alert's latest one.
    let mut rows: Vec<AlertRow> = Vec::new();
    samples(
        prom,
        "ALERTS",
        window,
        DEFAULT_CHUNK_NS,
        |labels, t, _| {
            if !in_scope(scope, labels) {
                return None;
            }
            let mut labels = labels.clone();
            labels.remove("__name__");
            let state = labels.remove("alertstate").unwrap_or_default();
            let name = labels.get("alertname").cloned().unwrap_or_default();
            rows.push(AlertRow {
                time_ns: t,
                annotations: details
                    .rule_annotations
                    .get(&name)
                    .cloned()
                    .unwrap_or_default(),
                alertname: name,
                state,
                labels,
                active_at_ns: None,
                value: None,
            });
            None
        },
        sink,
    )
    .await?;
    // Pending and firing are separate series: an activation spans both, in time order.
    rows.sort_by_key(|r| r.time_ns);
    let mut activations: HashMap<(String, Labels), (i64, i64)> = HashMap::new();
    for r in rows.iter_mut() {
        let activation = activations
            .entry((r.alertname.clone(), r.labels.clone()))
            .or_insert((r.time_ns, r.time_ns));
        if r.time_ns - activation.1 > ALERT_GAP_NS {
            activation.0 = r.time_ns;
        }
        activation.1 = r.time_ns;
        r.active_at_ns = Some(activation.0);
    }
    let mut latest: HashMap<(String, Labels), usize> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        let slot = latest
            .entry((r.alertname.clone(), r.labels.clone()))
            .or_insert(i);
        if rows[*slot].time_ns <= r.time_ns {
            *slot = i;
        }
    }
    for (key, i) in latest {
        let Some(current) = details.current.get(&key) else {
            continue;
        };
        let row = &mut rows[i];
        row.annotations = labels_of(&current["annotations"]);
        row.value = current["value"].as_str().and_then(value);
        if let Some(t) = current["activeAt"]
            .as_str()
            .and_then(schemas::time::parse_rfc3339)
        {
            row.active_at_ns = Some(t);
        }
    }
    let count = rows.len() as u64;
    for row in rows {
        sink.push(Row::Alert(row)).await?;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(pods: usize) -> Vec<Labels> {
        (0..pods)
            .map(|i| {
                Labels::from([
                    ("pod".to_string(), format!("p.{i}")),
                    ("job".to_string(), "k".to_string()),
                ])
            })
            .collect()
    }

    #[test]
    fn small_metrics_are_one_group() {
        assert_eq!(partition(&series(10)), vec![None]);
    }

    #[test]
    fn many_series_split_on_the_busiest_label_exactly() {
        let all = series(1200);
        let groups = partition(&all);
        assert!(groups.len() >= 3, "{groups:?}");
        // Every series matches exactly one group.
        for s in &all {
            let matching = groups
                .iter()
                .filter(|g| {
                    let g = g.as_deref().unwrap();
                    if g.ends_with("=\"\"") {
                        return !s.contains_key("pod");
                    }
                    let alts: String = serde_json::from_str(g.split_once("=~").unwrap().1).unwrap();
                    let re = regex::Regex::new(&format!("^(?:{alts})$")).unwrap();
                    re.is_match(&s["pod"])
                })
                .count();
            assert_eq!(matching, 1, "{s:?}");
        }
    }

    #[test]
    fn seconds_keep_milliseconds() {
        assert_eq!(seconds(1_700_000_000_123_456_789), "1700000000.123");
        assert_eq!(seconds(-1_000_000), "-0.001");
        assert_eq!(value("+Inf"), Some(f64::INFINITY));
        assert!(value("NaN").unwrap().is_nan());
    }
}
