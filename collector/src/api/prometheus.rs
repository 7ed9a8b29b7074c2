//! The Prometheus HTTP API over the recorded metrics: the promql crate's query API, plus
//! `/api/v1/alerts` and `/api/v1/rules` from the recorded alert states, and the `ALERTS` series
//! Prometheus keeps for its alerting rules.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use datasets::Dataset;
use datasets::encode::for_each_metric;
use promql::api::{PromApi, VirtualClock};
use promql::storage::SeriesHandle;
use promql::{DiskConfig, DiskStorage, MemStorage, Storage, StorageBuilder};
use schemas::tables::{AlertRow, Labels, MetricMeta, Table};
use serde_json::{Value, json};

use crate::clock::{Clock, rfc3339_nanos};

/// An alert observation counts as current for this long after it was recorded: a few rule
/// evaluation intervals.
const ALERT_FRESHNESS_NS: i64 = 60_000_000_000;

/// The series the last sample belonged to.
struct CurrentSeries {
    metric: String,
    labels: Vec<(String, String)>,
    handle: SeriesHandle,
}

/// Builds an in-memory series store from a dataset's samples up to the virtual now (later samples stay
/// hidden), streaming the metrics table batch by batch: samples are never materialised as rows.
pub fn storage(
    ds: &Dataset,
    metadata: &[MetricMeta],
    alerts: &[AlertRow],
    now_ns: i64,
) -> anyhow::Result<MemStorage> {
    let mut b = StorageBuilder::new();
    // The table is sorted by series then time: look a series up only when it changes.
    let mut current: Option<CurrentSeries> = None;
    let path = ds.path(Table::Metrics)?;
    for batch in ds.batches(Table::Metrics, 64 * 1024)? {
        let batch = batch.with_context(|| format!("reading {}", path.display()))?;
        for_each_metric(&batch, |m| {
            if m.time_ns > now_ns {
                return;
            }
            let same = current.as_ref().is_some_and(|c| {
                c.metric == m.metric
                    && c.labels.len() == m.labels.len()
                    && c.labels
                        .iter()
                        .zip(&m.labels)
                        .all(|((k, v), (k2, v2))| k == k2 && v == v2)
            });
            if !same {
                current = Some(CurrentSeries {
                    metric: m.metric.to_string(),
                    labels: m
                        .labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    handle: b.series(m.metric, m.labels.iter().copied()),
                });
            }
            if let Some(c) = &current {
                b.push(c.handle, m.time_ns.div_euclid(1_000_000), m.value);
            }
        })
        .with_context(|| format!("reading {}", path.display()))?;
    }
    add_alerts_and_metadata(&mut b, metadata, alerts, now_ns);
    Ok(b.build())
}

/// The series store replay serves: samples stay in the metrics table and are read on demand
/// (nothing is read here); the `ALERTS` series and the metadata are held in memory.
pub fn disk_storage(
    ds: &Dataset,
    metadata: &[MetricMeta],
    alerts: &[AlertRow],
    now_ns: i64,
) -> anyhow::Result<DiskStorage> {
    let mut b = StorageBuilder::new();
    add_alerts_and_metadata(&mut b, metadata, alerts, now_ns);
    let overlay = b.build();
    let metadata = overlay.metadata().clone();
    Ok(DiskStorage::new(
        &ds.path(Table::Metrics)?,
        now_ns,
        overlay,
        metadata,
        DiskConfig::default(),
    ))
}

/// The `ALERTS` series Prometheus keeps for its alerting rules, from the recorded alert states
/// up to the virtual now, and the metric metadata.
fn add_alerts_and_metadata(
    b: &mut StorageBuilder,
    metadata: &[MetricMeta],
    alerts: &[AlertRow],
    now_ns: i64,
) {
    for a in alerts.iter().filter(|a| a.time_ns <= now_ns) {
        let mut labels = a.labels.clone();
        labels.insert("alertname".into(), a.alertname.clone());
        labels.insert("alertstate".into(), a.state.clone());
        b.add_sample(
            "ALERTS",
            labels.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            a.time_ns.div_euclid(1_000_000),
            1.0,
        );
    }
    for m in metadata {
        b.set_metadata(&m.metric, &m.metric_type, &m.help, &m.unit);
    }
}

struct AlertsState {
    alerts: Vec<AlertRow>,
    clock: Clock,
}

/// The query API with the alert routes merged in.
pub fn router(storage: Arc<dyn Storage>, alerts: Vec<AlertRow>, clock: Clock) -> Router {
    let now_ms = clock.read().virtual_now_ns.div_euclid(1_000_000);
    let prom_clock = if clock.is_shifted() {
        VirtualClock::shifted(now_ms)
    } else {
        VirtualClock::fixed(now_ms)
    };
    let api = PromApi::new(storage, prom_clock);
    let state = Arc::new(AlertsState { alerts, clock });
    promql::api::router(api).merge(
        Router::new()
            .route("/api/v1/alerts", get(alerts_handler))
            .route("/api/v1/rules", get(rules_handler))
            .with_state(state),
    )
}

/// The latest observation of every alert that is still current at the virtual now.
fn active(state: &AlertsState) -> Vec<&AlertRow> {
    let now = state.clock.read().virtual_now_ns;
    let mut latest: BTreeMap<(&str, &Labels), &AlertRow> = BTreeMap::new();
    for a in state.alerts.iter().filter(|a| a.time_ns <= now) {
        let slot = latest.entry((a.alertname.as_str(), &a.labels)).or_insert(a);
        if a.time_ns >= slot.time_ns {
            *slot = a;
        }
    }
    latest
        .into_values()
        .filter(|a| now - a.time_ns <= ALERT_FRESHNESS_NS)
        .collect()
}

fn alert_json(a: &AlertRow, state: &AlertsState) -> Value {
    let clock = state.clock.read();
    let mut labels = a.labels.clone();
    labels.insert("alertname".into(), a.alertname.clone());
    json!({
        "labels": labels,
        "annotations": a.annotations,
        "state": a.state,
        "activeAt": a.active_at_ns.map(|t| rfc3339_nanos(clock.serve(t))),
        "value": a.value.map_or_else(|| "0".to_string(), promql::value::format_float),
    })
}

async fn alerts_handler(State(state): State<Arc<AlertsState>>) -> axum::Json<Value> {
    let alerts: Vec<Value> = active(&state)
        .into_iter()
        .map(|a| alert_json(a, &state))
        .collect();
    axum::Json(json!({"status": "success", "data": {"alerts": alerts}}))
}

/// The recording holds alert states, not rule definitions: each alert name seen becomes an
/// alerting rule with its labels and annotations and its current alerts; the expression is not
/// known and is served empty.
async fn rules_handler(State(state): State<Arc<AlertsState>>) -> axum::Json<Value> {
    let current = active(&state);
    let mut rules: BTreeMap<&str, (&AlertRow, Vec<Value>)> = BTreeMap::new();
    for a in &state.alerts {
        rules.entry(a.alertname.as_str()).or_insert((a, Vec::new()));
    }
    for a in &current {
        if let Some((_, list)) = rules.get_mut(a.alertname.as_str()) {
            list.push(alert_json(a, &state));
        }
    }
    let rules: Vec<Value> = rules
        .into_iter()
        .map(|(name, (example, alerts))| {
            let state_name = if alerts.iter().any(|a| a["state"] == "firing") {
                "firing"
            } else if alerts.is_empty() {
                "inactive"
            } else {
                "pending"
            };
            let severity: Labels = example
                .labels
                .iter()
                .filter(|(k, _)| k.as_str() == "severity")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            json!({
                "name": name, "query": "", "duration": 0, "labels": severity,
                "annotations": example.annotations, "alerts": alerts, "health": "ok",
                "type": "alerting", "state": state_name,
            })
        })
        .collect();
    axum::Json(json!({"status": "success", "data": {"groups": [
        {"name": "recorded", "file": "", "rules": rules, "interval": 15}
    ]}}))
}
