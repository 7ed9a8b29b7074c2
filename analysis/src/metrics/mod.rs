//! `metric_analysis` and `get_metric_anomalies` over the metrics table.
//!
//! Where ITBench's versions go wrong on raw data, these do not: counters are summarised by their
//! rate over the window as well as their raw values; histogram quantiles are computed from the
//! buckets' increase over the window (ITBench takes the cumulative buckets since the process
//! started); anomalies are found per series (ITBench mixes every metric of a file into one
//! mean and deviation), on per-second rates for counters, in both directions.

mod eval;
mod select;

use std::collections::{BTreeMap, BTreeSet};

use polars::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::frame::{collect, labels_json, number, records};
use crate::owners::Owners;
use crate::params::{ObjectId, Window, de_bool, de_filters, de_names, de_usize, served};
use crate::{Error, Result, Source};
pub use select::{Metrics, Series, Target, counters, increase, is_counter, rates};

pub const ANALYSIS: &str = "Analyzes metrics of Kubernetes objects: filter -> eval -> group_by -> agg, like SQL/pandas. Select with k8_object_name ('namespace/kind/name', 'kind/name' or 'name'; kinds pod, service, deployment, node) or object_pattern ('pod/*', 'pod/frontend*', 'service/*', default '*'), and metric_names. Compact mode (default) summarises each series: count, mean, min, max, last_value, last_timestamp, and for counters increase and rate_per_s over the window; requesting *_bucket metrics gives p50/p90/p95/p99 of the window. eval derives a metric per timestamp (names sanitised, ':' -> '_'), e.g. eval='throttle_pct = container_cpu_cfs_throttled_periods_total / container_cpu_cfs_periods_total * 100', group_by='deployment', agg='max'. group_by='timestamp' gives a time series.";

pub const ANOMALIES: &str = "Metrics of one Kubernetes object and their anomalies: per series (metric and labels), points beyond mean +/- 2 standard deviations, computed on per-second rates for counters. Example: k8_object_name='otel-demo/Service/cart'. Example: metric_name_filter='memory', raw_content=false (anomalies only).";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AnalysisParams {
    /// Ignored: the metrics are the session's (accepted so ITBench prompts work).
    #[serde(default, rename = "base_dir")]
    pub _base_dir: Option<Value>,
    /// One object: 'namespace/kind/name', 'kind/name' or 'name'.
    #[serde(default)]
    pub k8_object_name: Option<String>,
    /// Objects by kind and glob: 'pod/*', 'pod/frontend*', 'service/*'; default '*'.
    #[serde(default)]
    pub object_pattern: Option<String>,
    /// Metric names to load (all when absent).
    #[serde(default, deserialize_with = "de_names")]
    #[schemars(with = "Option<Vec<String>>")]
    pub metric_names: Vec<String>,
    /// A derived metric, e.g. 'pct = a / b * 100'.
    #[serde(default)]
    pub eval: Option<String>,
    /// Exact-match filters on columns or labels, e.g. {"namespace": "otel-demo"}.
    #[serde(default, deserialize_with = "de_filters")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub filters: Map<String, Value>,
    /// deployment, pod_name, metric_name, timestamp, namespace or a label.
    #[serde(default)]
    pub group_by: Option<String>,
    /// mean (default), sum, max, min.
    #[serde(default)]
    pub agg: Option<String>,
    /// ISO 8601 start of the window.
    #[serde(default)]
    pub start_time: Option<String>,
    /// ISO 8601 end of the window.
    #[serde(default)]
    pub end_time: Option<String>,
    /// compact (default) or raw.
    #[serde(default)]
    pub verbosity: Option<String>,
    /// Most rows in compact mode (default 200; 0 = all).
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub limit: Option<usize>,
    /// Column to sort by, descending.
    #[serde(default)]
    pub sort_by: Option<String>,
    /// Keep every label of each series in compact mode.
    #[serde(default, deserialize_with = "de_bool")]
    #[schemars(with = "Option<bool>")]
    pub include_tags: Option<bool>,
    /// Keep *_bucket series in compact mode.
    #[serde(default, deserialize_with = "de_bool")]
    #[schemars(with = "Option<bool>")]
    pub include_buckets: Option<bool>,
    /// Labels kept in compact mode (default span_name, span_kind, status_code, le).
    #[serde(default, deserialize_with = "de_names")]
    #[schemars(with = "Option<Vec<String>>")]
    pub labels_keep: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AnomalyParams {
    /// The object: 'namespace/kind/name', 'kind/name' or 'name'.
    pub k8_object_name: String,
    /// Ignored: the metrics are the session's.
    #[serde(default, rename = "base_dir")]
    pub _base_dir: Option<Value>,
    /// Only metrics whose name contains this.
    #[serde(default)]
    pub metric_name_filter: Option<String>,
    /// ISO 8601 start of the window.
    #[serde(default)]
    pub start_time: Option<String>,
    /// ISO 8601 end of the window.
    #[serde(default)]
    pub end_time: Option<String>,
    /// Include every point of each series (default true).
    #[serde(default, deserialize_with = "de_bool")]
    #[schemars(with = "Option<bool>")]
    pub raw_content: Option<bool>,
}

const DEFAULT_KEEP: [&str; 4] = ["span_name", "span_kind", "status_code", "le"];

/// A series' value of a filter column: the frame's columns, else its labels.
fn column_value(s: &Series, column: &str) -> Option<String> {
    match column {
        "metric_name" => Some(s.metric.clone()),
        "namespace" => Some(s.namespace.clone()),
        "pod_name" | "pod" => s.pod.clone(),
        "service_name" | "service" => s.service.clone(),
        "deployment" => Some(s.deployment.clone()),
        "_object_kind" | "object_kind" => Some(s.object_kind.clone()),
        "_object_name" | "object_name" => Some(s.object_name.clone()),
        "bucket_le" => s.labels.get("le").cloned(),
        other => s.labels.get(other).cloned(),
    }
}

fn filter_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn target_of(k8_object_name: Option<&str>, object_pattern: Option<&str>) -> Result<Target> {
    match k8_object_name.filter(|s| !s.trim().is_empty()) {
        Some(id) => Ok(Target::Object(ObjectId::parse(id, "k8_object_name")?)),
        None => Target::pattern(object_pattern.unwrap_or("*")),
    }
}

pub fn analysis(source: &Source, p: AnalysisParams) -> Result<Value> {
    let reading = source.reading();
    let window = Window::parse(p.start_time.as_deref(), p.end_time.as_deref(), &reading)?;
    let target = target_of(p.k8_object_name.as_deref(), p.object_pattern.as_deref())?;
    let owners = Owners::load(source)?;
    let mut series = select::load(
        source,
        &target,
        Metrics::Named(&p.metric_names),
        &window,
        &owners,
    )?;
    for (column, value) in &p.filters {
        let want = filter_text(value);
        series.retain(|s| column_value(s, column).as_deref() == Some(want.as_str()));
    }
    let compact = match p.verbosity.as_deref() {
        None | Some("compact") | Some("") => true,
        Some("raw") => false,
        Some(other) => {
            return Err(Error::param(format!(
                "verbosity `{other}`: expected compact or raw"
            )));
        }
    };
    let agg = p.agg.as_deref().unwrap_or("mean");
    if !["mean", "sum", "max", "min"].contains(&agg) {
        return Err(Error::param(format!(
            "agg `{agg}`: expected mean, sum, max or min"
        )));
    }
    let limit = match p.limit {
        None => Some(200),
        Some(0) => None,
        Some(n) => Some(n),
    }
    .filter(|_| compact);
    let keep: Vec<String> = if p.labels_keep.is_empty() {
        DEFAULT_KEEP.iter().map(|s| s.to_string()).collect()
    } else {
        p.labels_keep.clone()
    };
    let include_buckets = p.include_buckets.unwrap_or(false);
    let wants_buckets = p.metric_names.iter().any(|m| m.ends_with("_bucket"));
    if compact && wants_buckets && !include_buckets && p.eval.is_none() {
        let rows = quantiles(&series, &keep, &reading);
        return Ok(Value::Array(sorted_limited(
            rows,
            p.sort_by.as_deref(),
            None,
            limit,
        )));
    }
    if compact && !wants_buckets && !include_buckets {
        series.retain(|s| !s.metric.ends_with("_bucket"));
    }
    if let Some(text) = p.eval.as_deref() {
        return derived(
            &series,
            text,
            p.group_by.as_deref(),
            agg,
            compact,
            limit,
            p.sort_by.as_deref(),
            &reading,
        );
    }
    if compact && p.group_by.is_none() && agg == "mean" {
        let types = counters(source)?;
        let tags = p.include_tags.unwrap_or(false);
        let rows = summaries(&series, &keep, tags, &types.0, &reading);
        return Ok(Value::Array(sorted_limited(
            rows,
            p.sort_by.as_deref(),
            Some("max"),
            limit,
        )));
    }
    let frame = long_frame(&series)?;
    grouped_or_rows(
        frame,
        p.group_by.as_deref(),
        agg,
        compact,
        limit,
        p.sort_by.as_deref(),
        None,
        &reading,
    )
}

/// Sorts records by a field, largest first, and keeps the first `limit`.
fn sorted_limited(
    mut rows: Vec<Value>,
    sort_by: Option<&str>,
    default: Option<&str>,
    limit: Option<usize>,
) -> Vec<Value> {
    if let Some(key) = sort_by.or(default) {
        rows.sort_by(|a, b| {
            let (x, y) = (&a[key], &b[key]);
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => y.total_cmp(&x),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                _ => y.to_string().cmp(&x.to_string()),
            }
        });
    }
    rows.truncate(limit.unwrap_or(usize::MAX));
    rows
}

fn kept(labels: &schemas::tables::Labels, keep: &[String]) -> Value {
    Value::Object(
        keep.iter()
            .filter_map(|k| labels.get(k).map(|v| (k.clone(), Value::String(v.clone()))))
            .collect(),
    )
}

/// The object columns every answer row starts with.
fn base_row(s: &Series) -> Map<String, Value> {
    let mut row = Map::new();
    row.insert("metric_name".into(), s.metric.clone().into());
    row.insert("namespace".into(), s.namespace.clone().into());
    row.insert("object_kind".into(), s.object_kind.clone().into());
    row.insert("object_name".into(), s.object_name.clone().into());
    row.insert("deployment".into(), s.deployment.clone().into());
    if let Some(p) = &s.pod {
        row.insert("pod_name".into(), p.clone().into());
    }
    if let Some(sv) = &s.service {
        row.insert("service_name".into(), sv.clone().into());
    }
    row
}

/// One summary per series (series whose kept labels agree are one row, as ITBench's dedupe
/// makes them).
fn summaries(
    series: &[Series],
    keep: &[String],
    all_tags: bool,
    types: &BTreeMap<String, String>,
    reading: &schemas::time::Reading,
) -> Vec<Value> {
    let mut groups: BTreeMap<String, (Map<String, Value>, Vec<&Series>)> = BTreeMap::new();
    for s in series.iter().filter(|s| !s.points.is_empty()) {
        let mut row = base_row(s);
        let labels = if all_tags {
            labels_json(&s.labels)
        } else {
            kept(&s.labels, keep)
        };
        row.insert("labels".into(), labels);
        let key = Value::Object(row.clone()).to_string();
        groups
            .entry(key)
            .or_insert_with(|| (row, Vec::new()))
            .1
            .push(s);
    }
    groups
        .into_values()
        .map(|(mut row, members)| {
            let values: Vec<f64> = members
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
                .collect();
            let n = values.len() as f64;
            let (min, max) = values
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                    (a.min(*v), b.max(*v))
                });
            let last = members
                .iter()
                .filter_map(|s| s.points.last())
                .max_by_key(|p| p.0)
                .copied()
                .unwrap_or((0, f64::NAN));
            row.insert("count".into(), values.len().into());
            row.insert("mean".into(), number(values.iter().sum::<f64>() / n));
            row.insert("min".into(), number(min));
            row.insert("max".into(), number(max));
            row.insert("last_value".into(), number(last.1));
            row.insert("last_timestamp".into(), served(reading, last.0).into());
            let metric = row["metric_name"].as_str().unwrap_or_default().to_string();
            if is_counter(&metric, types) {
                let inc: f64 = members.iter().map(|s| increase(&s.points)).sum();
                let span = members
                    .iter()
                    .filter_map(|s| Some(s.points.last()?.0 - s.points.first()?.0))
                    .max()
                    .unwrap_or(0);
                row.insert("metric_type".into(), "counter".into());
                row.insert("increase".into(), number(inc));
                let rate = if span > 0 {
                    inc / (span as f64 / 1e9)
                } else {
                    f64::NAN
                };
                row.insert("rate_per_s".into(), number(rate));
            }
            Value::Object(row)
        })
        .collect()
}

/// Prometheus' `histogram_quantile` over (upper bound, cumulative count) buckets.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let mut b: Vec<(f64, f64)> = buckets.to_vec();
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    let total = b.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut prev_le, mut prev_cnt) = (0.0, 0.0);
    for (le, cnt) in b {
        if cnt >= rank {
            if le.is_infinite() {
                return Some(prev_le);
            }
            let in_bucket = cnt - prev_cnt;
            if in_bucket <= 0.0 {
                return Some(le);
            }
            return Some(prev_le + (le - prev_le) * (rank - prev_cnt) / in_bucket);
        }
        prev_le = le;
        prev_cnt = cnt;
    }
    None
}

/// p50/p90/p95/p99 per histogram (bucket series that differ only in `le`), from each bucket's
/// increase over the window (its latest value when the window holds one sample).
fn quantiles(series: &[Series], keep: &[String], reading: &schemas::time::Reading) -> Vec<Value> {
    /// One histogram: its answer row, its (le, count) buckets, its latest sample time.
    type Histogram = (Map<String, Value>, Vec<(f64, f64)>, i64);
    let mut histograms: BTreeMap<String, Histogram> = BTreeMap::new();
    for s in series
        .iter()
        .filter(|s| s.metric.ends_with("_bucket") && !s.points.is_empty())
    {
        let Some(le) = s.labels.get("le").and_then(|l| parse_le(l)) else {
            continue;
        };
        let mut row = base_row(s);
        let mut without_le = s.labels.clone();
        without_le.remove("le");
        let keep_no_le: Vec<String> = keep.iter().filter(|k| *k != "le").cloned().collect();
        row.insert("labels".into(), kept(&without_le, &keep_no_le));
        let key = format!("{}{}", Value::Object(row.clone()), labels_json(&without_le));
        let count = if s.points.len() >= 2 {
            increase(&s.points)
        } else {
            s.points[0].1
        };
        let last = s.points.last().map_or(0, |p| p.0);
        let entry = histograms
            .entry(key)
            .or_insert_with(|| (row, Vec::new(), last));
        entry.1.push((le, count));
        entry.2 = entry.2.max(last);
    }
    histograms
        .into_values()
        .map(|(mut row, buckets, last)| {
            let samples = buckets
                .iter()
                .filter(|b| b.0.is_infinite())
                .map(|b| b.1)
                .fold(f64::NAN, f64::max);
            let q = |x| histogram_quantile(x, &buckets).map_or(Value::Null, number);
            row.insert("timestamp".into(), served(reading, last).into());
            row.insert("sample_count".into(), number(samples));
            row.insert(
                "duration_ms".into(),
                json!({"p50": q(0.5), "p90": q(0.9), "p95": q(0.95), "p99": q(0.99)}),
            );
            Value::Object(row)
        })
        .collect()
}

fn parse_le(le: &str) -> Option<f64> {
    match le.trim() {
        "+Inf" | "Inf" | "inf" | "+inf" => Some(f64::INFINITY),
        other => other.parse().ok(),
    }
}

/// The samples as one long frame: object columns, timestamp, value.
fn long_frame(series: &[Series]) -> Result<DataFrame> {
    let mut metric = Vec::new();
    let mut namespace = Vec::new();
    let mut deployment = Vec::new();
    let mut pod = Vec::new();
    let mut object = Vec::new();
    let mut times = Vec::new();
    let mut values = Vec::new();
    for s in series {
        for (t, v) in &s.points {
            metric.push(s.metric.clone());
            namespace.push(s.namespace.clone());
            deployment.push(s.deployment.clone());
            pod.push(s.pod.clone());
            object.push(s.object_name.clone());
            times.push(*t);
            values.push(*v);
        }
    }
    Ok(DataFrame::new_infer_height(vec![
        Column::new("metric_name".into(), metric),
        Column::new("namespace".into(), namespace),
        Column::new("deployment".into(), deployment),
        Column::new("pod_name".into(), pod),
        Column::new("object_name".into(), object),
        Column::new("timestamp".into(), times),
        Column::new("value".into(), values),
    ])?)
}

/// Derived metrics: the series pivoted to one column per metric at each timestamp (per object
/// when grouping by an object column, summed over objects otherwise), gaps filled forward then
/// backward as ITBench does, then the expression evaluated by polars.
#[allow(clippy::too_many_arguments)]
fn derived(
    series: &[Series],
    text: &str,
    group_by: Option<&str>,
    agg: &str,
    compact: bool,
    limit: Option<usize>,
    sort_by: Option<&str>,
    reading: &schemas::time::Reading,
) -> Result<Value> {
    let metrics: Vec<String> = series
        .iter()
        .map(|s| s.metric.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let d = eval::parse(text, &metrics)?;
    let per_object = matches!(
        group_by,
        Some("deployment" | "pod_name" | "object_name" | "_object_name")
    );
    // (object, deployment, pod) → timestamp → metric → (sum, n)
    type Cells = BTreeMap<i64, BTreeMap<String, (f64, u32)>>;
    let mut objects: BTreeMap<(String, String, Option<String>), Cells> = BTreeMap::new();
    for s in series {
        let key = if per_object {
            (s.object_name.clone(), s.deployment.clone(), s.pod.clone())
        } else {
            (String::new(), String::new(), None)
        };
        let cells = objects.entry(key).or_default();
        for (t, v) in &s.points {
            let cell = cells
                .entry(*t)
                .or_default()
                .entry(eval::sanitize(&s.metric))
                .or_default();
            cell.0 += v;
            cell.1 += 1;
        }
    }
    let mut cols: BTreeMap<String, Vec<Option<f64>>> =
        d.inputs.iter().map(|m| (m.clone(), Vec::new())).collect();
    let (mut ts, mut obj, mut dep, mut pod) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ((o, dp, pd), cells) in &objects {
        for m in &d.inputs {
            let raw: Vec<Option<f64>> = cells
                .values()
                .map(|ms| {
                    ms.get(m).map(|(sum, n)| {
                        if per_object {
                            sum / f64::from(*n)
                        } else {
                            *sum
                        }
                    })
                })
                .collect();
            cols.get_mut(m).expect("input column").extend(fill(raw));
        }
        for t in cells.keys() {
            ts.push(*t);
            obj.push(o.clone());
            dep.push(dp.clone());
            pod.push(pd.clone());
        }
    }
    let mut columns = vec![Column::new("timestamp".into(), ts)];
    if per_object {
        columns.push(Column::new("object_name".into(), obj));
        columns.push(Column::new("deployment".into(), dep));
        columns.push(Column::new("pod_name".into(), pod));
    }
    for (name, values) in cols {
        columns.push(Column::new(name.into(), values));
    }
    let frame = collect(
        DataFrame::new_infer_height(columns)?
            .lazy()
            .with_column(d.expr.clone()),
    )?;
    grouped_or_rows(
        frame,
        group_by,
        agg,
        compact,
        limit,
        sort_by,
        Some(&d.name),
        reading,
    )
}

/// Forward-fills then back-fills gaps.
fn fill(mut v: Vec<Option<f64>>) -> Vec<Option<f64>> {
    let mut last = None;
    for x in v.iter_mut() {
        match x {
            Some(val) => last = Some(*val),
            None => *x = last,
        }
    }
    let mut next = None;
    for x in v.iter_mut().rev() {
        match x {
            Some(val) => next = Some(*val),
            None => *x = next,
        }
    }
    v
}

/// Group-by and aggregation of a long or derived frame, or its rows.
#[allow(clippy::too_many_arguments)]
fn grouped_or_rows(
    frame: DataFrame,
    group_by: Option<&str>,
    agg: &str,
    compact: bool,
    limit: Option<usize>,
    sort_by: Option<&str>,
    derived: Option<&str>,
    reading: &schemas::time::Reading,
) -> Result<Value> {
    let numeric: Vec<String> = frame
        .columns()
        .iter()
        .filter(|c| c.dtype().is_primitive_numeric() && c.name() != "timestamp")
        .map(|c| c.name().to_string())
        .collect();
    let fold = |e: Expr| match agg {
        "sum" => e.sum(),
        "max" => e.max(),
        "min" => e.min(),
        _ => e.mean(),
    };
    let available = || {
        frame
            .get_column_names()
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let sort_key = sort_by
        .map(str::to_string)
        .or(derived.map(str::to_string))
        .or(numeric.last().cloned());
    let out = if let Some(g) = group_by {
        if !frame.get_column_names().iter().any(|c| c.as_str() == g) {
            return Err(Error::param(format!(
                "group_by `{g}`: not a column; available: {}",
                available()
            )));
        }
        let aggs: Vec<Expr> = numeric.iter().map(|c| fold(col(c.as_str()))).collect();
        let grouped = frame.lazy().group_by([col(g)]).agg(aggs);
        // Groups are unordered: ties on the sort key go by the group's name.
        let sorted = match sort_key.as_deref() {
            Some(k) if g != "timestamp" && k != g => grouped.sort(
                [k, g],
                SortMultipleOptions::default()
                    .with_order_descending_multi([true, false])
                    .with_nulls_last(true),
            ),
            Some(k) if g != "timestamp" => grouped.sort(
                [k],
                SortMultipleOptions::default()
                    .with_order_descending(true)
                    .with_nulls_last(true),
            ),
            _ => grouped.sort([g], SortMultipleOptions::default()),
        };
        collect(sorted)?
    } else if agg != "mean" {
        let aggs: Vec<Expr> = numeric.iter().map(|c| fold(col(c.as_str()))).collect();
        collect(frame.lazy().select(aggs))?
    } else {
        let sorted = frame.lazy().sort(
            ["timestamp"],
            SortMultipleOptions::default().with_maintain_order(true),
        );
        let sorted = match sort_by {
            Some(k) if compact => sorted.sort(
                [k],
                SortMultipleOptions::default()
                    .with_order_descending(true)
                    .with_maintain_order(true),
            ),
            _ => sorted,
        };
        collect(sorted)?
    };
    let mut rows = records(&out, &["timestamp"], reading);
    for row in rows.iter_mut() {
        if let Value::Object(m) = row {
            for v in m.values_mut() {
                if let Some(f) = v.as_f64().filter(|_| v.is_f64()) {
                    *v = number(f);
                }
            }
        }
    }
    rows.truncate(limit.unwrap_or(usize::MAX));
    Ok(Value::Array(rows))
}

pub fn anomalies(source: &Source, p: AnomalyParams) -> Result<Value> {
    let reading = source.reading();
    let window = Window::parse(p.start_time.as_deref(), p.end_time.as_deref(), &reading)?;
    let id = ObjectId::parse(&p.k8_object_name, "k8_object_name")?;
    let owners = Owners::load(source)?;
    let metrics = match p.metric_name_filter.as_deref().filter(|f| !f.is_empty()) {
        Some(text) => Metrics::Containing(text),
        None => Metrics::All,
    };
    let series = select::load(source, &Target::Object(id), metrics, &window, &owners)?;
    let types = counters(source)?;
    let raw = p.raw_content.unwrap_or(true);
    let mut out: Vec<(usize, Value)> = series
        .iter()
        .filter(|s| !s.points.is_empty())
        .map(|s| {
            let counter = is_counter(&s.metric, &types.0);
            let points = if counter { rates(&s.points) } else { s.points.clone() };
            let found = outliers(&points);
            let mut row = base_row(s);
            row.insert("series".into(), labels_json(&s.labels));
            row.insert(
                "values".into(),
                if counter { "per-second rate" } else { "value" }.into(),
            );
            row.insert("count".into(), points.len().into());
            let (mean, std) = mean_std(&points);
            row.insert("mean".into(), number(mean));
            row.insert("std".into(), number(std));
            row.insert("anomaly_count".into(), found.len().into());
            row.insert(
                "anomalies".into(),
                found
                    .iter()
                    .map(|(t, v, z)| json!({"timestamp": served(&reading, *t), "value": number(*v), "z": number(*z)}))
                    .collect(),
            );
            if raw {
                row.insert(
                    "data".into(),
                    points
                        .iter()
                        .map(|(t, v)| json!({"timestamp": served(&reading, *t), "value": number(*v)}))
                        .collect(),
                );
            }
            (found.len(), Value::Object(row))
        })
        .collect();
    out.sort_by_key(|a| std::cmp::Reverse(a.0));
    let mut answer = json!({
        "object": p.k8_object_name,
        "metrics": out.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
    });
    if answer["metrics"].as_array().is_some_and(Vec::is_empty) {
        answer["note"] = format!("no metric series of {} in the window", p.k8_object_name).into();
    }
    Ok(answer)
}

fn mean_std(points: &[(i64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    if points.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mean = points.iter().map(|p| p.1).sum::<f64>() / n;
    if points.len() < 2 {
        return (mean, 0.0);
    }
    let var = points.iter().map(|p| (p.1 - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Points beyond two sample standard deviations of the series' mean: (time, value, z).
pub fn outliers(points: &[(i64, f64)]) -> Vec<(i64, f64, f64)> {
    let (mean, std) = mean_std(points);
    // A constant series (or one too short for a deviation) has no outliers.
    if std.is_nan() || std <= 0.0 {
        return Vec::new();
    }
    points
        .iter()
        .map(|(t, v)| (*t, *v, (v - mean) / std))
        .filter(|(_, _, z)| z.abs() > 2.0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_interpolate_as_prometheus_does() {
        let b = [(10.0, 50.0), (100.0, 90.0), (f64::INFINITY, 100.0)];
        assert_eq!(histogram_quantile(0.5, &b), Some(10.0));
        assert_eq!(histogram_quantile(0.7, &b), Some(55.0));
        assert_eq!(histogram_quantile(0.99, &b), Some(100.0));
        assert_eq!(histogram_quantile(0.5, &[(1.0, 0.0)]), None);
    }

    #[test]
    fn outliers_are_beyond_two_deviations_either_way() {
        let mut p: Vec<(i64, f64)> = (0..20).map(|i| (i, 10.0)).collect();
        p.push((20, 100.0));
        p.push((21, 10.0));
        let o = outliers(&p);
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].0, 20);
        assert!(outliers(&[(0, 1.0), (1, 1.0)]).is_empty());
    }

    #[test]
    fn gaps_fill_forward_then_backward() {
        assert_eq!(
            fill(vec![None, Some(1.0), None, Some(3.0), None]),
            vec![Some(1.0), Some(1.0), Some(1.0), Some(3.0), Some(3.0)]
        );
    }
}
