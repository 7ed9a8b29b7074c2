//! What the analysis tools read in a session on a real cluster. The simulator records as it runs;
//! a real cluster keeps its own history (Prometheus, Jaeger, Loki, events) and faultline keeps
//! none beside it, so the tables are captured when an agent asks: the window from a few minutes
//! before the onset up to now, captured again once the last capture is older than [`FRESH`].
//!
//! The capture reads the cluster's API through a proxy of its own with the agent proxy's filter
//! and no audit: it sees exactly what the agent may see (the injection plane hidden), and its
//! requests are not counted as the agent's.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use analysis::{Error, LazyFrame, Tables};
use datasets::Dataset;
use schemas::tables::Table;
use schemas::time::real_now_ns;

use super::session::KubeTarget;

/// How old a capture may be and still answer: the tool calls of one question (an agent asks
/// several in a row) share one capture, and a later question sees the cluster as it is then.
pub const FRESH: Duration = Duration::from_secs(15);

/// How far before the onset the window starts: the healthy traffic the tools compare with.
pub const BEFORE_ONSET: Duration = Duration::from_secs(5 * 60);

/// The cluster captured on demand, as [`Tables`].
pub struct ClusterRecording {
    runtime: tokio::runtime::Handle,
    /// Every capture's options but its window's end and its directory.
    template: capture::Options,
    dir: tempfile::TempDir,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    latest: Option<Captured>,
    /// The capture before the latest, kept while a call that began on it may still read it.
    previous: Option<PathBuf>,
    generation: u64,
}

struct Captured {
    at: Instant,
    dataset: Arc<Dataset>,
    dir: PathBuf,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ClusterRecording {
    /// Captures through `template` (its window's start kept, its end moved to each capture's
    /// now) on `runtime`, into a directory of its own removed with it.
    pub fn new(
        runtime: tokio::runtime::Handle,
        template: capture::Options,
    ) -> anyhow::Result<ClusterRecording> {
        let dir = tempfile::Builder::new()
            .prefix("faultline-cluster-")
            .tempdir()?;
        Ok(ClusterRecording {
            runtime,
            template,
            dir,
            state: Mutex::default(),
        })
    }

    /// The latest capture and its number, captured now if it is missing or stale.
    fn current(&self) -> analysis::Result<(Arc<Dataset>, u64)> {
        let mut state = lock(&self.state);
        if let Some(c) = state.latest.as_ref().filter(|c| c.at.elapsed() < FRESH) {
            return Ok((c.dataset.clone(), state.generation));
        }
        let generation = state.generation + 1;
        let mut opts = self.template.clone();
        opts.out = self.dir.path().join(format!("capture-{generation}"));
        opts.window.until_ns = real_now_ns().max(opts.window.since_ns + 1);
        let runtime = &self.runtime;
        // A thread of its own: the tools run on one of the runtime's blocking threads, where
        // the runtime cannot be entered again.
        let captured =
            std::thread::scope(|s| s.spawn(|| runtime.block_on(capture::capture(&opts))).join())
                .map_err(|_| Error::Data("the cluster's capture stopped".into()))?
                .map_err(|e| Error::Data(format!("capturing the cluster: {e:#}")))?;
        for gap in &captured.log_gaps {
            tracing::debug!("cluster capture: {gap:?}");
        }
        let dataset = Arc::new(Dataset::open(&captured.dataset)?);
        let dir = captured.dataset;
        if let Some(stale) = state.previous.take() {
            let _ = std::fs::remove_dir_all(stale);
        }
        state.previous = state.latest.take().map(|c| c.dir);
        state.latest = Some(Captured {
            at: Instant::now(),
            dataset: dataset.clone(),
            dir,
        });
        state.generation = generation;
        Ok((dataset, generation))
    }
}

impl Tables for ClusterRecording {
    fn scan(&self, table: Table) -> analysis::Result<LazyFrame> {
        self.current()?.0.scan(table)
    }

    /// Every table changes with each capture.
    fn version(&self, _table: Table) -> analysis::Result<u64> {
        Ok(self.current()?.1)
    }
}

impl std::fmt::Debug for ClusterRecording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterRecording")
            .field("since_ns", &self.template.window.since_ns)
            .field("captures", &lock(&self.state).generation)
            .finish()
    }
}

/// The cluster as an agent sees it, captured on demand: [`ClusterRecording`] through the proxy
/// at `api_url` (hiding what the agent's proxy hides) and the target's own Prometheus, Jaeger
/// and Loki, from [`BEFORE_ONSET`] before `onset_ns`.
pub fn options(
    api_url: String,
    namespace: &str,
    target: &KubeTarget,
    onset_ns: i64,
) -> capture::Options {
    let since_ns = onset_ns - BEFORE_ONSET.as_nanos() as i64;
    capture::Options {
        kubernetes: capture::kube::Connection::Url(api_url),
        scope: capture::scope::Scope {
            namespaces: [namespace.to_string()].into(),
            ..Default::default()
        },
        prometheus: target.cluster.observability.prometheus.clone(),
        jaeger: target.cluster.observability.jaeger.clone(),
        loki: target.cluster.observability.loki.clone(),
        window: capture::Window {
            since_ns,
            until_ns: since_ns + 1,
        },
        out: PathBuf::new(),
        redaction_key: None,
        progress: false,
    }
}
