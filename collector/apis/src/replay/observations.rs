//! Environments: where the signals come from. A recorded dataset's small tables are loaded into
//! memory; its spans and logs are served from their files in place, behind the same store
//! interfaces as rows held in memory, so the API facades serve both alike.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use datasets::Dataset;
use schemas::Manifest;
use schemas::tables::{Row, Table};

use stores::logs::LogStore;
use stores::logs_file::FileLogs;
use stores::objects::ObjectTimeline;
use stores::spans::SpanStore;
use stores::spans_file::FileSpans;

/// Everything an environment makes available to the facades.
pub struct Observations {
    pub manifest: Manifest,
    /// The dataset itself: metrics are streamed from it into the series store, never held as rows.
    pub dataset: Dataset,
    pub timeline: Arc<ObjectTimeline>,
    pub logs: Arc<LogStore>,
    pub metric_metadata: Vec<schemas::tables::MetricMeta>,
    pub spans: Arc<SpanStore>,
}

/// The rows of one table as their type (a table holds only its own rows).
fn typed<T: TryFrom<Row>>(rows: Vec<Row>) -> impl Iterator<Item = T> {
    rows.into_iter().filter_map(|r| r.try_into().ok())
}

/// A scoped thread's result; its panic, if any, continues in the caller.
fn joined<T>(r: std::thread::Result<T>) -> T {
    r.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Loads a recorded dataset (the `dataset` environment).
pub fn load_dataset(dir: &Path) -> anyhow::Result<Observations> {
    // Checksums and row counts first: a damaged table is refused here, never met by a request.
    let ds = Dataset::open_verified(dir)?;
    let read = |t: Table| {
        ds.read_rows(t)
            .with_context(|| format!("reading the {t} table of {}", dir.display()))
    };
    // Spans and logs stay in their files: only footers and page indexes are read here.
    let open = |t: Table| {
        ds.path(t)
            .with_context(|| format!("the {t} table of {}", dir.display()))
    };
    let spans: Arc<SpanStore> = Arc::new(FileSpans::open(&open(Table::Spans)?)?);
    let logs: Arc<LogStore> = Arc::new(FileLogs::open(&open(Table::Logs)?)?);
    // Tables are independent until the facades are built: read them side by side.
    let (timeline, metadata) = std::thread::scope(|scope| {
        let timeline = scope.spawn(|| -> anyhow::Result<ObjectTimeline> {
            let mut timeline = ObjectTimeline::default();
            timeline
                .add_objects(typed(read(Table::Objects)?))
                .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
            timeline.add_events(typed(read(Table::Events)?));
            timeline.seal();
            Ok(timeline)
        });
        let metadata = read(Table::MetricMetadata).map(|rows| typed(rows).collect());
        (joined(timeline.join()), metadata)
    });
    // Alerts are streamed into the Prometheus facade, never held as rows.
    let (timeline, metric_metadata) = (timeline?, metadata?);
    Ok(Observations {
        manifest: ds.manifest().clone(),
        dataset: ds.clone(),
        timeline: Arc::new(timeline),
        logs,
        metric_metadata,
        spans,
    })
}
