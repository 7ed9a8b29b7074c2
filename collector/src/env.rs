//! Environments: where the signals come from. A recorded dataset is loaded into the same in-memory
//! stores the live simulator fills, so the API facades serve both alike.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use datasets::Dataset;
use schemas::Manifest;
use schemas::tables::{Row, Table};

use crate::store::logs::LogStore;
use crate::store::objects::ObjectTimeline;

/// Everything an environment makes available to the facades.
pub struct Observations {
    pub manifest: Manifest,
    pub timeline: Arc<ObjectTimeline>,
    pub logs: Arc<LogStore>,
    pub metrics: Vec<schemas::tables::MetricSample>,
    pub metric_metadata: Vec<schemas::tables::MetricMeta>,
    pub spans: Vec<schemas::tables::SpanRow>,
    pub alerts: Vec<schemas::tables::AlertRow>,
}

/// The rows of one table as their type (a table holds only its own rows).
fn typed<T: TryFrom<Row>>(rows: Vec<Row>) -> impl Iterator<Item = T> {
    rows.into_iter().filter_map(|r| r.try_into().ok())
}

/// Loads a recorded dataset (the `dataset` environment).
pub fn load_dataset(dir: &Path) -> anyhow::Result<Observations> {
    let ds = Dataset::open(dir)?;
    let read = |t: Table| {
        ds.read_rows(t)
            .with_context(|| format!("reading the {t} table of {}", dir.display()))
    };
    let mut timeline = ObjectTimeline::default();
    timeline
        .add_objects(typed(read(Table::Objects)?))
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    timeline.add_events(typed(read(Table::Events)?));
    timeline.seal();
    let mut logs = LogStore::default();
    logs.add(typed(read(Table::Logs)?));
    logs.seal();
    let metrics = typed(read(Table::Metrics)?).collect();
    let metric_metadata = typed(read(Table::MetricMetadata)?).collect();
    let spans = typed(read(Table::Spans)?).collect();
    let alerts = typed(read(Table::Alerts)?).collect();
    Ok(Observations {
        manifest: ds.manifest().clone(),
        timeline: Arc::new(timeline),
        logs: Arc::new(logs),
        metrics,
        metric_metadata,
        spans,
        alerts,
    })
}
