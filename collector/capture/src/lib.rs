//! `collector capture`: record a running system into a dataset, the read side of the real-cluster
//! environment. Each source streams rows into one dataset writer:
//!
//! - Kubernetes (kube crate): discovery, then per kind a list and a watch for the window (the
//!   object timeline and Events), then container logs (current and previous instances).
//! - Prometheus: raw samples of every series, metric metadata, alert states.
//! - Jaeger: the traces of every service.
//! - Loki (when given): the log lines of the captured namespaces, with their stream.
//!
//! Sources that are queried (Prometheus, Jaeger, Loki) are read once the window has ended.
//!
//! The dataset appears at the output path only when every source has finished; a failed or
//! interrupted capture leaves nothing there.
//!
//! ## Windows in the past, and what a capture can see
//!
//! `--since/--until` may lie in the past (a capture of a replay, or of a window that just ended).
//! The Kubernetes API only shows the present: a capture records the objects as listed when it
//! runs, plus every version its watch sees until the window ends. Rows are stamped with the time
//! they were observed, clamped into the window, so objects listed after a past window ended are
//! recorded as observed at its end. Captured from `collector replay` (frozen at its virtual now,
//! the window's end), the object timeline is therefore the recorded cluster's state at the
//! virtual now, one `added` row per object, and the events table holds each Event's last
//! recorded version; logs are those of the pods alive then (current and previous instance).

pub mod http;
pub mod jaeger;
pub mod kube;
pub mod loki;
pub mod prometheus;
pub mod redact;
pub mod scope;
pub mod sink;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use schemas::TimeWindow;
use serde::Serialize;

use http::HttpSource;
use redact::Redactor;
use scope::Scope;
use sink::Writer;

/// The capture window, in nanoseconds since the epoch, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub since_ns: i64,
    pub until_ns: i64,
}

impl Window {
    pub fn contains(&self, t: i64) -> bool {
        self.since_ns <= t && t <= self.until_ns
    }

    pub fn clamp(&self, t: i64) -> i64 {
        t.clamp(self.since_ns, self.until_ns)
    }

    fn time_window(&self) -> TimeWindow {
        TimeWindow {
            start: DateTime::<Utc>::from_timestamp_nanos(self.since_ns),
            end: DateTime::<Utc>::from_timestamp_nanos(self.until_ns),
        }
    }
}

/// The wall clock: when an observation is made.
pub fn now_ns() -> i64 {
    schemas::time::real_now_ns()
}

#[derive(Debug, Clone)]
pub struct Options {
    pub kubernetes: kube::Connection,
    pub scope: Scope,
    pub prometheus: Option<String>,
    pub jaeger: Option<String>,
    pub loki: Option<String>,
    pub window: Window,
    pub out: PathBuf,
    /// Key of the hash that replaces Secret values; a random one when absent.
    pub redaction_key: Option<String>,
    /// Draw progress bars (on stderr, when it is a terminal).
    pub progress: bool,
}

/// What a capture wrote, for people and for `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub dataset: PathBuf,
    pub dataset_id: String,
    pub window_start: String,
    pub window_end: String,
    pub namespaces: Vec<String>,
    pub rows: BTreeMap<String, u64>,
    pub kubernetes_kinds: usize,
    /// Watch interruptions (closed streams, 410 Gone, transient errors) recovered from.
    pub watch_recoveries: u64,
    pub prometheus: Option<prometheus::PrometheusOutcome>,
    pub jaeger: Option<jaeger::JaegerOutcome>,
    pub loki: Option<loki::LokiOutcome>,
    /// Container logs that could not be read (which pod and container, the error): everything
    /// else was captured.
    pub log_gaps: Vec<kube::logs::LogGap>,
}

/// Waits until the window is over: queried sources have everything only then.
async fn window_end(window: Window) {
    let wait = window.until_ns - now_ns();
    if wait > 0 {
        tokio::time::sleep(Duration::from_nanos(wait as u64)).await;
    }
}

fn bar(multi: &MultiProgress, name: &str) -> ProgressBar {
    let bar = multi.add(ProgressBar::new(0));
    bar.set_style(
        ProgressStyle::with_template("{prefix:>11} [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(name.to_string());
    bar
}

/// Runs a capture to the end and seals the dataset.
pub async fn capture(opts: &Options) -> anyhow::Result<Summary> {
    anyhow::ensure!(
        opts.window.since_ns < opts.window.until_ns,
        "the window is empty: --since must be before --until"
    );
    let multi = MultiProgress::with_draw_target(if opts.progress {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let redactor = match &opts.redaction_key {
        Some(key) => Redactor::new(key.as_bytes()),
        None => Redactor::random(),
    };

    let sources = |name: &'static str, url: &Option<String>| {
        url.as_deref().map(|u| HttpSource::new(name, u)).transpose()
    };
    let (prom, traces, logs) = (
        sources("prometheus", &opts.prometheus)?,
        sources("jaeger", &opts.jaeger)?,
        sources("loki", &opts.loki)?,
    );
    let client = kube::client(&opts.kubernetes).await?;
    let targets = kube::discover(&client, &opts.scope).await?;
    let writer = Writer::create(&opts.out)?;
    let sink = writer.sink();
    let kubernetes = async {
        let objects_bar = bar(&multi, "kubernetes");
        let objects = kube::capture_objects(
            &client,
            &targets,
            &opts.scope,
            opts.window,
            &redactor,
            &sink,
            &objects_bar,
        )
        .await?;
        objects_bar.finish_with_message("objects and events");
        let logs_bar = bar(&multi, "pod logs");
        let mut loki_outcome = None;
        let log_gaps = match &logs {
            None => {
                kube::logs::read_all(&client, &objects.pods, opts.window, &logs_bar, &sink, None)
                    .await?
            }
            Some(loki_source) => {
                let index = Mutex::new(kube::logs::LogIndex::default());
                let gaps = kube::logs::read_all(
                    &client,
                    &objects.pods,
                    opts.window,
                    &logs_bar,
                    &sink,
                    Some(&index),
                )
                .await?;
                let loki_bar = bar(&multi, "loki");
                loki_outcome = Some(
                    loki::capture(
                        loki_source,
                        &opts.scope,
                        opts.window,
                        &index,
                        &sink,
                        &loki_bar,
                    )
                    .await?,
                );
                loki_bar.finish_with_message("log streams");
                let unmatched = index.into_inner().expect("log index lock").unmatched();
                for row in unmatched {
                    sink.push(schemas::tables::Row::Log(row)).await?;
                }
                gaps
            }
        };
        logs_bar.finish_with_message("container logs");
        anyhow::Ok((objects, loki_outcome, log_gaps))
    };
    let metrics = async {
        let Some(prom) = &prom else {
            return anyhow::Ok(None);
        };
        window_end(opts.window).await;
        let b = bar(&multi, "prometheus");
        let outcome = prometheus::capture(prom, &opts.scope, opts.window, &sink, &b).await?;
        b.finish_with_message("series, metadata, alerts");
        Ok(Some(outcome))
    };
    let spans = async {
        let Some(jaeger_source) = &traces else {
            return anyhow::Ok(None);
        };
        window_end(opts.window).await;
        let b = bar(&multi, "jaeger");
        let outcome = jaeger::capture(jaeger_source, opts.window, &sink, &b).await?;
        b.finish_with_message("traces");
        Ok(Some(outcome))
    };
    let ((objects, loki_outcome, log_gaps), prometheus_outcome, jaeger_outcome) =
        tokio::try_join!(kubernetes, metrics, spans)?;

    let mut namespaces: Vec<String> = if opts.scope.namespaces.is_empty() {
        objects.namespaces.into_iter().collect()
    } else {
        opts.scope.namespaces.iter().cloned().collect()
    };
    namespaces.retain(|ns| opts.scope.namespace_ok(ns));
    let counts = sink.counts();
    drop(sink);
    let window = opts.window.time_window();
    let manifest = tokio::task::spawn_blocking({
        let namespaces = namespaces.clone();
        move || {
            writer.finish(datasets::DatasetInfo {
                environment: "kube".into(),
                application: None,
                namespaces,
                window,
                virtual_now: window.end,
            })
        }
    })
    .await
    .context("the dataset writer")??;
    Ok(Summary {
        dataset: opts.out.clone(),
        dataset_id: manifest.dataset_id.clone(),
        window_start: window.start.to_rfc3339(),
        window_end: window.end.to_rfc3339(),
        namespaces,
        rows: counts
            .into_iter()
            .map(|(t, n)| (t.name().to_string(), n))
            .collect(),
        kubernetes_kinds: objects.kinds,
        watch_recoveries: objects.recovered_errors,
        prometheus: prometheus_outcome,
        jaeger: jaeger_outcome,
        loki: loki_outcome,
        log_gaps,
    })
}
