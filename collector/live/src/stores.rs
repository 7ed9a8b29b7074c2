//! Where a live environment's rows go: every store an API reads (objects, spans, logs, series,
//! alerts), the recording the analysis tools read (in a session), and, when the run is kept, the
//! dataset being written.

use std::sync::{Arc, Mutex, RwLock};

use apis::kube::feed::ObjectFeed;
use apis::prometheus::RecordedAlerts;
use promql::LiveStorage;
use schemas::tables::Row;
use stores::live::{LiveLogs, LiveSpans};
use stores::objects::ObjectTimeline;

/// The live stores, shared with the API facades.
pub struct LiveStores {
    pub objects: Arc<ObjectFeed>,
    pub spans: Arc<LiveSpans>,
    pub logs: Arc<LiveLogs>,
    pub metrics: Arc<RwLock<LiveStorage>>,
    pub alerts: Arc<RwLock<RecordedAlerts>>,
    /// The dataset being written, when the run is kept.
    pub dataset: Mutex<Option<datasets::DatasetWriter>>,
    /// Every row so far as tables, for the analysis tools.
    pub recording: Option<Arc<datasets::Recording>>,
}

impl LiveStores {
    pub fn new(
        dataset: Option<datasets::DatasetWriter>,
        recording: Option<Arc<datasets::Recording>>,
    ) -> Self {
        let mut timeline = ObjectTimeline::default();
        timeline.seal();
        LiveStores {
            objects: Arc::new(ObjectFeed::live(timeline)),
            spans: Arc::new(LiveSpans::default()),
            logs: Arc::new(LiveLogs::default()),
            metrics: Arc::new(RwLock::new(LiveStorage::default())),
            alerts: Arc::new(RwLock::new(RecordedAlerts::default())),
            dataset: Mutex::new(dataset),
            recording,
        }
    }

    /// Routes one batch of rows (a simulated second, or what a write changed) to every store.
    pub fn route(&self, rows: Vec<Row>) -> anyhow::Result<()> {
        let (mut objects, mut events, mut spans, mut logs) = (vec![], vec![], vec![], vec![]);
        let mut samples = vec![];
        let mut alerts = vec![];
        let mut meta = vec![];
        {
            let mut dataset = self.dataset.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(w) = dataset.as_mut() {
                for row in &rows {
                    w.push(row.clone())?;
                }
            }
        }
        if let Some(r) = &self.recording {
            r.push(&rows)?;
        }
        for row in rows {
            match row {
                Row::Object(o) => objects.push(o),
                Row::Event(e) => events.push(e),
                Row::Span(s) => spans.push(s),
                Row::Log(l) => logs.push(l),
                Row::Metric(m) => samples.push(m),
                Row::MetricMeta(m) => meta.push(m),
                Row::Alert(a) => alerts.push(a),
                // Requests are evaluator data: no API serves them.
                Row::Audit(_) => {}
            }
        }
        self.objects
            .append(objects, events)
            .map_err(anyhow::Error::msg)?;
        self.spans.append(spans);
        self.logs.append(logs);
        if !samples.is_empty() || !alerts.is_empty() || !meta.is_empty() {
            let mut store = self.metrics.write().unwrap_or_else(|e| e.into_inner());
            for m in meta {
                store.set_metadata(&m.metric, &m.metric_type, &m.help, &m.unit);
            }
            for m in samples {
                let labels = m.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()));
                let id = store.series(&m.metric, labels);
                store.push(id, m.time_ns.div_euclid(1_000_000), m.value);
            }
            let mut recorded = self.alerts.write().unwrap_or_else(|e| e.into_inner());
            for a in alerts {
                recorded.observe(a, &mut store);
            }
        }
        Ok(())
    }
}
