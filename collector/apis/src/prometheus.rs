//! The Prometheus HTTP API over the recorded metrics: the promql crate's query API, plus
//! `/api/v1/alerts` and `/api/v1/rules` from the recorded alert states, and the `ALERTS` series
//! Prometheus keeps for its alerting rules.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use anyhow::Context;
use arrow_array::RecordBatch;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use datasets::Dataset;
use datasets::encode::{for_each_alert, for_each_metric};
use promql::api::PromApi;
use promql::storage::SeriesHandle;
use promql::storage::StorageSource;
use promql::{DiskConfig, DiskStorage, MemStorage, Storage, StorageBuilder};
use schemas::tables::{AlertRow, Labels, MetricMeta, Table};
use serde_json::{Value, json};

use schemas::time::{Clock, rfc3339_nanos};

/// An alert observation counts as current for this long after it was recorded: a few rule
/// evaluation intervals.
pub const ALERT_FRESHNESS_NS: i64 = 60_000_000_000;

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
    now_ns: i64,
) -> anyhow::Result<(MemStorage, RecordedAlerts)> {
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
    let alerts = RecordedAlerts::stream(ds, now_ns, &mut b)?;
    add_metadata(&mut b, metadata);
    Ok((b.build(), alerts))
}

/// The series store replay serves: samples stay in the metrics table and are read on demand
/// (nothing is read here); the `ALERTS` series and the metadata are held in memory.
pub fn disk_storage(
    ds: &Dataset,
    metadata: &[MetricMeta],
    now_ns: i64,
) -> anyhow::Result<(DiskStorage, RecordedAlerts)> {
    let mut b = StorageBuilder::new();
    let alerts = RecordedAlerts::stream(ds, now_ns, &mut b)?;
    add_metadata(&mut b, metadata);
    let overlay = b.build();
    let metadata = overlay.metadata().clone();
    let storage = DiskStorage::new(
        &ds.path(Table::Metrics)?,
        now_ns,
        overlay,
        metadata,
        DiskConfig::default(),
    );
    Ok((storage, alerts))
}

fn add_metadata(b: &mut StorageBuilder, metadata: &[MetricMeta]) {
    for m in metadata {
        b.set_metadata(&m.metric, &m.metric_type, &m.help, &m.unit);
    }
}

/// What the alert routes serve of the recorded alert states at the virtual now (which is fixed
/// for a replay): the latest observation of every alert still current, and the first observation
/// of each alert name, which stands for its rule.
#[derive(Debug, Default)]
pub struct RecordedAlerts {
    current: Vec<AlertRow>,
    rules: BTreeMap<String, AlertRow>,
}

impl RecordedAlerts {
    /// Reads the alerts table batch by batch without building its rows (a long recording holds
    /// hundreds of thousands of observations) and adds the `ALERTS` series Prometheus keeps for
    /// its alerting rules, up to the virtual now, to `b`. Only the rows served whole (the latest
    /// of each alert, the first of each alert name) are decoded.
    pub fn stream(ds: &Dataset, now_ns: i64, b: &mut StorageBuilder) -> anyhow::Result<Self> {
        Self::stream_batches(ds, now_ns, b, 16 * 1024)
    }

    /// [`Self::stream`] reading `batch_rows` rows at a time (tests make alerts span batches).
    pub fn stream_batches(
        ds: &Dataset,
        now_ns: i64,
        b: &mut StorageBuilder,
        batch_rows: usize,
    ) -> anyhow::Result<Self> {
        let path = ds.path(Table::Alerts)?;
        let context = || format!("reading {}", path.display());
        let whole = |batch: &RecordBatch, row: usize| -> anyhow::Result<AlertRow> {
            datasets::encode::decode(Table::Alerts, &batch.slice(row, 1))
                .with_context(context)?
                .into_iter()
                .find_map(|r| AlertRow::try_from(r).ok())
                .with_context(context)
        };
        let mut out = RecordedAlerts::default();
        // The table is sorted by alert name, labels, then time: one alert's observations are
        // contiguous, and the last one up to now is its latest.
        let mut alert: Option<(String, Vec<(String, String)>)> = None;
        let mut handles: Vec<(String, SeriesHandle)> = Vec::new();
        let mut latest: Option<AlertRow> = None;
        let mut keep = |latest: Option<AlertRow>| {
            if let Some(a) = latest.filter(|a| now_ns - a.time_ns <= ALERT_FRESHNESS_NS) {
                out.current.push(a);
            }
        };
        for batch in ds.batches(Table::Alerts, batch_rows)? {
            let batch = batch.with_context(context)?;
            // Per alert that ends in this batch, the row of its latest observation here.
            let mut ended: Vec<Option<usize>> = Vec::new();
            let mut last_here: Option<usize> = None;
            let mut first_of_name: Vec<usize> = Vec::new();
            for_each_alert(&batch, |a| {
                let same = alert.as_ref().is_some_and(|(name, labels)| {
                    name == a.alertname
                        && labels.len() == a.labels.len()
                        && labels
                            .iter()
                            .zip(&a.labels)
                            .all(|((k, v), (k2, v2))| k == k2 && v == v2)
                });
                if !same {
                    if alert.as_ref().is_none_or(|(name, _)| name != a.alertname) {
                        first_of_name.push(a.row);
                    }
                    if alert.is_some() {
                        ended.push(last_here.take());
                    }
                    let labels = a.labels.iter().map(|(k, v)| (k.to_string(), v.to_string()));
                    alert = Some((a.alertname.to_string(), labels.collect()));
                    handles.clear();
                }
                if a.time_ns > now_ns {
                    return;
                }
                last_here = Some(a.row);
                let handle = match handles.iter().find(|(state, _)| state == a.state) {
                    Some((_, h)) => *h,
                    None => {
                        let own = [("alertname", a.alertname), ("alertstate", a.state)];
                        let labels = a
                            .labels
                            .iter()
                            .copied()
                            .filter(|(k, _)| !own.iter().any(|(name, _)| name == k));
                        let h = b.series("ALERTS", labels.chain(own));
                        handles.push((a.state.to_string(), h));
                        h
                    }
                };
                b.push(handle, a.time_ns.div_euclid(1_000_000), 1.0);
            })
            .with_context(context)?;
            for row in first_of_name {
                let a = whole(&batch, row)?;
                out.rules.entry(a.alertname.clone()).or_insert(a);
            }
            // The first alert ending here may have begun in an earlier batch.
            for (i, row) in ended.into_iter().enumerate() {
                let previous = if i == 0 { latest.take() } else { None };
                keep(row.map(|r| whole(&batch, r)).transpose()?.or(previous));
                latest = None;
            }
            if let Some(r) = last_here {
                latest = Some(whole(&batch, r)?);
            }
        }
        keep(latest);
        Ok(out)
    }

    /// A live environment's newest alert observation (rows come in time order): it replaces the
    /// alert's previous one, its rule is recorded if new, the `ALERTS` series gets the sample, and
    /// alerts no longer observed fall out of the current ones.
    pub fn observe(&mut self, a: AlertRow, storage: &mut promql::LiveStorage) {
        let own = [
            ("alertname", a.alertname.as_str()),
            ("alertstate", a.state.as_str()),
        ];
        let labels = a
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .filter(|(k, _)| !own.iter().any(|(name, _)| name == k));
        let id = storage.series("ALERTS", labels.chain(own));
        storage.push(id, a.time_ns.div_euclid(1_000_000), 1.0);
        let now_ns = a.time_ns;
        self.rules
            .entry(a.alertname.clone())
            .or_insert_with(|| a.clone());
        self.current
            .retain(|c| !(c.alertname == a.alertname && c.labels == a.labels));
        self.current.push(a);
        self.current
            .retain(|c| now_ns - c.time_ns <= ALERT_FRESHNESS_NS);
    }

    /// The latest observation of every alert still current at the virtual now.
    pub fn current(&self) -> &[AlertRow] {
        &self.current
    }

    /// The first observation of each alert name, which stands for its rule.
    pub fn rules(&self) -> impl Iterator<Item = &AlertRow> {
        self.rules.values()
    }
}

struct AlertsState {
    alerts: Arc<RwLock<RecordedAlerts>>,
    clock: Clock,
}

impl AlertsState {
    fn alerts(&self) -> std::sync::RwLockReadGuard<'_, RecordedAlerts> {
        self.alerts.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// The query API with the alert routes merged in. A live environment keeps appending to the
/// storage and the alerts; a replay's never change.
pub fn router(
    storage: Arc<dyn StorageSource>,
    alerts: Arc<RwLock<RecordedAlerts>>,
    clock: Clock,
    limits: &crate::limits::Limits,
) -> Router {
    let api = PromApi::new(storage, clock).with_limits(limits.promql, limits.max_concurrency);
    let state = Arc::new(AlertsState { alerts, clock });
    promql::api::router(api).merge(
        Router::new()
            .route("/api/v1/alerts", get(alerts_handler))
            .route("/api/v1/rules", get(rules_handler))
            .with_state(state),
    )
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
    let alerts: Vec<Value> = state
        .alerts()
        .current
        .iter()
        .map(|a| alert_json(a, &state))
        .collect();
    axum::Json(json!({"status": "success", "data": {"alerts": alerts}}))
}

/// The recording holds alert states, not rule definitions: each alert name seen becomes an
/// alerting rule with its labels and annotations and its current alerts; the expression is not
/// known and is served empty.
async fn rules_handler(State(state): State<Arc<AlertsState>>) -> axum::Json<Value> {
    let recorded = state.alerts();
    let mut rules: BTreeMap<&str, (&AlertRow, Vec<Value>)> = recorded
        .rules
        .iter()
        .map(|(name, example)| (name.as_str(), (example, Vec::new())))
        .collect();
    for a in &recorded.current {
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
