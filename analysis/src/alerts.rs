//! `alert_summary` and `alert_analysis` over the alerts table: every observation of a pending or
//! firing alert, with its labels, annotations, `activeAt` and value.
//!
//! ITBench reads one JSON file per observation and takes the observation time from the file
//! name; here each row carries its observation time, so both time bases are exact.

use polars::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cache::Derived;
use crate::frame::{collect, ints, label, labels, nanos, number, strings_or_empty, within};
use crate::params::{Window, de_f64, de_usize, served};
use crate::query::{self, Query, SqlParams};
use crate::{Error, Result, Source};
use schemas::tables::Table;
use schemas::tables::columns::alerts as c;

pub const SUMMARY: &str = "High-level summary of all alerts: alert type, affected entity, severity, state, first_seen, last_seen, duration_min and occurrences (observations). Use this FIRST for an overview, then alert_analysis for details. first_seen/last_seen are observation times while firing (time_basis='activeAt' starts at the earliest activeAt instead). Sorted by duration, longest first. Example: alert_summary(state_filter='firing', min_duration_min=2).";

pub const ANALYSIS: &str = "Analyzes alerts like SQL: filters -> group_by -> agg. Columns: labels.* (shortcuts alertname, severity, service_name, service, namespace), annotations.*, state, activeAt, value, snapshot_timestamp, duration_active_min (how long it had been active when observed), duration_active. Aggregations: count (default), first, last, sum, mean, max, min. Example: group_by='alertname'. Example: filters={'state': 'firing'}, sort_by='duration_active_min', limit=10.";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SummaryParams {
    /// Ignored: the alerts are the session's (accepted so ITBench prompts work).
    #[serde(default, rename = "base_dir")]
    pub _base_dir: Option<Value>,
    /// `snapshot` (observation time, default) or `activeAt`.
    #[serde(default)]
    pub time_basis: Option<String>,
    /// ISO 8601 start of the window (a time without a zone is UTC).
    #[serde(default)]
    pub start_time: Option<String>,
    /// ISO 8601 end of the window.
    #[serde(default)]
    pub end_time: Option<String>,
    /// Only alerts in this state (`firing`, `pending`).
    #[serde(default)]
    pub state_filter: Option<String>,
    /// Only alerts observed firing for at least this many minutes.
    #[serde(default, deserialize_with = "de_f64")]
    #[schemars(with = "Option<f64>")]
    pub min_duration_min: Option<f64>,
    /// Most alerts returned (default 50; 0 = all).
    #[serde(default, deserialize_with = "de_usize")]
    #[schemars(with = "Option<u64>")]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AnalysisParams {
    /// Ignored: the alerts are the session's.
    #[serde(default, rename = "base_dir")]
    pub _base_dir: Option<Value>,
    /// `snapshot` (default) or `activeAt`: what the window and the default order use.
    #[serde(default)]
    pub time_basis: Option<String>,
    #[serde(flatten)]
    pub asked: SqlParams,
}

/// Whether the window and order use `activeAt` rather than the observation time.
fn active_basis(time_basis: Option<&str>) -> Result<bool> {
    match time_basis.map(str::trim) {
        None | Some("") | Some("snapshot") => Ok(false),
        Some("activeAt") | Some("active_at") => Ok(true),
        Some(other) => Err(Error::param(format!(
            "time_basis `{other}`: expected snapshot or activeAt"
        ))),
    }
}

/// The label ITBench names an alert's entity by: the first present of these.
const ENTITY_LABELS: [&str; 7] = [
    "service_name",
    "service",
    "pod",
    "deployment",
    "instance",
    "job",
    "namespace",
];

fn entity() -> Expr {
    ENTITY_LABELS
        .iter()
        .fold(lit(NULL).cast(DataType::String), |acc, k| {
            acc.fill_null(label(c::LABELS, k))
        })
        .fill_null(lit("cluster-wide"))
}

pub fn summary(source: &Source, p: SummaryParams) -> Result<Value> {
    let reading = source.reading();
    let window = Window::parse(p.start_time.as_deref(), p.end_time.as_deref(), &reading)?;
    let by_active = active_basis(p.time_basis.as_deref())?;
    let basis = if by_active { "_a" } else { "_t" };
    let mut lf = source
        .scan(Table::Alerts)?
        .with_columns([nanos(c::TIME).alias("_t"), nanos(c::ACTIVE_AT).alias("_a")]);
    if let Some(pred) = window.predicate(basis) {
        lf = lf.filter(pred);
    }
    let firing = col(c::STATE).eq(lit("firing"));
    let grouped = lf
        .with_columns([
            entity().alias("entity"),
            label(c::LABELS, "severity")
                .fill_null(lit("unknown"))
                .alias("severity"),
            label(c::LABELS, "namespace")
                .fill_null(lit("unknown"))
                .alias("namespace"),
        ])
        .group_by([col(c::ALERTNAME), col("entity"), col("severity")])
        .agg([
            len().alias("occurrences"),
            col(basis).filter(firing.clone()).min().alias("_first"),
            col("_t").filter(firing.clone()).max().alias("_last"),
            col("namespace").first().alias("namespace"),
            col(c::STATE)
                .sort_by(
                    [col("_t")],
                    SortMultipleOptions::default().with_maintain_order(true),
                )
                .last()
                .alias("_latest"),
            firing.cast(DataType::UInt32).sum().alias("_firing"),
        ]);
    let df = collect(grouped)?;
    let names = strings_or_empty(&df, c::ALERTNAME)?;
    let entities = strings_or_empty(&df, "entity")?;
    let severities = strings_or_empty(&df, "severity")?;
    let namespaces = strings_or_empty(&df, "namespace")?;
    let latest = strings_or_empty(&df, "_latest")?;
    let occurrences = ints(&df, "occurrences")?;
    let firsts = ints(&df, "_first")?;
    let lasts = ints(&df, "_last")?;
    let fired = ints(&df, "_firing")?;
    let mut rows: Vec<(Option<f64>, i64, Value)> = Vec::new();
    for i in 0..df.height() {
        let state = if fired[i].unwrap_or(0) > 0 {
            "firing".to_string()
        } else {
            latest[i].clone()
        };
        if p.state_filter.as_deref().is_some_and(|s| s != state) {
            continue;
        }
        let span = firsts[i].zip(lasts[i]);
        let duration = span.map(|(a, b)| ((b - a).max(0) as f64 / 6e10 * 10.0).round() / 10.0);
        if let Some(min) = p.min_duration_min
            && duration.is_none_or(|d| d < min)
        {
            continue;
        }
        if !window.is_open() && span.is_none() {
            continue;
        }
        let n = occurrences[i].unwrap_or(0);
        rows.push((
            duration,
            n,
            json!({
                "alertname": names[i],
                "entity": entities[i],
                "namespace": namespaces[i],
                "severity": severities[i],
                "state": state,
                "first_seen": span.map(|(a, _)| served(&reading, a)),
                "last_seen": span.map(|(_, b)| served(&reading, b)),
                "duration_min": duration,
                "occurrences": n,
            }),
        ));
    }
    rows.sort_by(|a, b| {
        b.0.unwrap_or(0.0)
            .total_cmp(&a.0.unwrap_or(0.0))
            .then(b.1.cmp(&a.1))
            .then_with(|| a.2["alertname"].as_str().cmp(&b.2["alertname"].as_str()))
            .then_with(|| a.2["entity"].as_str().cmp(&b.2["entity"].as_str()))
            .then_with(|| a.2["severity"].as_str().cmp(&b.2["severity"].as_str()))
    });
    let keep = match p.limit {
        None => 50,
        Some(0) => usize::MAX,
        Some(n) => n,
    };
    Ok(Value::Array(
        rows.into_iter().take(keep).map(|(_, _, v)| v).collect(),
    ))
}

/// "1h 5m" as ITBench writes an active duration.
fn human_minutes(minutes: f64) -> String {
    let m = minutes as i64;
    if minutes < 1.0 {
        "<1m".into()
    } else if m < 60 {
        format!("{m}m")
    } else if m < 1440 {
        format!("{}h {}m", m / 60, m % 60)
    } else {
        format!("{}d {}h", m / 1440, (m % 1440) / 60)
    }
}

/// Every alert observation as ITBench's json_normalize'd frame: `labels.*`, `annotations.*`,
/// state, activeAt, value, snapshot_timestamp, duration_active_min, duration_active (kept until
/// the alerts change).
struct Wide(DataFrame);

impl Derived for Wide {
    const TABLES: &'static [Table] = &[Table::Alerts];

    fn derive(source: &Source) -> Result<Wide> {
        let df = collect(source.scan(Table::Alerts)?.select([
            nanos(c::TIME).alias("_t"),
            nanos(c::ACTIVE_AT).alias("_a"),
            col(c::STATE),
            col(c::LABELS),
            col(c::ANNOTATIONS),
            col(c::VALUE),
        ]))?;
        let label_sets = labels(&df, c::LABELS)?;
        let annotation_sets = labels(&df, c::ANNOTATIONS)?;
        let times = ints(&df, "_t")?;
        let actives = ints(&df, "_a")?;
        let mut columns: Vec<Column> = Vec::new();
        for (prefix, sets) in [("labels", &label_sets), ("annotations", &annotation_sets)] {
            let keys: std::collections::BTreeSet<&String> =
                sets.iter().flat_map(|l| l.keys()).collect();
            for key in keys {
                let values: Vec<Option<String>> =
                    sets.iter().map(|l| l.get(key).cloned()).collect();
                columns.push(Column::new(format!("{prefix}.{key}").into(), values));
            }
        }
        let minutes: Vec<Option<f64>> = times
            .iter()
            .zip(&actives)
            .map(|(t, a)| match (t, a) {
                (Some(t), Some(a)) if t >= a => Some(((t - a) as f64 / 6e10 * 10.0).round() / 10.0),
                _ => None,
            })
            .collect();
        let human: Vec<String> = minutes
            .iter()
            .map(|m| m.map_or_else(|| "unknown".to_string(), human_minutes))
            .collect();
        columns.push(df.column(c::STATE)?.clone());
        columns.push(Column::new("activeAt".into(), actives));
        columns.push(df.column(c::VALUE)?.clone());
        columns.push(Column::new("snapshot_timestamp".into(), times));
        columns.push(Column::new("duration_active_min".into(), minutes));
        columns.push(Column::new("duration_active".into(), human));
        Ok(Wide(DataFrame::new_infer_height(columns)?))
    }
}

/// The observations inside the window, on the time basis (`_t`): a label or annotation column
/// is there when an observation in the window has it.
fn wide(source: &Source, window: &Window, by_active: bool) -> Result<DataFrame> {
    let all = source.derived::<Wide>()?;
    let basis = if by_active {
        "activeAt"
    } else {
        "snapshot_timestamp"
    };
    let mut df = within(&all.0, basis, window)?;
    if !window.is_open() {
        let absent: Vec<String> = df
            .columns()
            .iter()
            .filter(|c| {
                (c.name().starts_with("labels.") || c.name().starts_with("annotations."))
                    && c.null_count() == c.len()
            })
            .map(|c| c.name().to_string())
            .collect();
        df = df.drop_many(absent);
    }
    let t = df.column(basis)?.clone().with_name("_t".into());
    df.with_column(t)?;
    Ok(df)
}

pub fn analysis(source: &Source, p: AnalysisParams) -> Result<Value> {
    let reading = source.reading();
    let window = p.asked.window(&reading)?;
    let by_active = active_basis(p.time_basis.as_deref())?;
    let df = wide(source, &window, by_active)?;
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|c| c.to_string())
        .collect();
    let resolve = |wanted: &str| -> String {
        let has = |n: &str| names.iter().any(|c| c == n);
        // ITBench maps `service` to `labels.service_name`; alerts label either.
        let shortcut: &[&str] = match wanted {
            "service" | "service_name" => &["labels.service_name", "labels.service"],
            _ => &[],
        };
        if let Some(found) = shortcut.iter().find(|s| has(s)) {
            return found.to_string();
        }
        if has(wanted) {
            return wanted.to_string();
        }
        let labelled = format!("labels.{wanted}");
        if has(&labelled) {
            labelled
        } else {
            wanted.to_string()
        }
    };
    let q = Query {
        asked: &p.asked,
        time_column: "_t",
        aggs: &["count", "first", "last", "sum", "mean", "max", "min"],
        numeric: &["value", "duration_active_min"],
        time_columns: &["activeAt", "snapshot_timestamp"],
        listed: &[],
        resolve: &resolve,
    };
    let mut answer = query::run(df, &q, &reading)?;
    // Values read better rounded; the frame keeps them exact for filters and sorting.
    if let Some(rows) = answer.get_mut("data").and_then(Value::as_array_mut) {
        for row in rows {
            if let Some(v) = row.get_mut("value")
                && let Some(f) = v.as_f64()
            {
                *v = number(f);
            }
        }
    }
    Ok(answer)
}
