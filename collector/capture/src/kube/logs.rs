//! Container logs through the Kubernetes API: for every pod alive at the end of the window, each
//! container's current instance and, after a restart, its previous one, with timestamps, limited
//! to the window. The API merges stdout and stderr, so lines read this way are recorded as
//! `stdout` unless Loki tells their stream (see [`crate::loki`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use futures_util::{AsyncBufReadExt, StreamExt, TryStreamExt};
use indicatif::ProgressBar;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use schemas::tables::{LogRow, Row};
use serde_json::Value;

use crate::Window;
use crate::sink::Sink;
use schemas::time::parse_rfc3339;

/// One container instance whose log is read.
#[derive(Debug, Clone)]
pub struct Instance {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub restart: i32,
    pub previous: bool,
}

/// The instances of a pod's containers the API still has logs for.
pub fn instances(pod: &Value) -> Vec<Instance> {
    let (Some(ns), Some(name)) = (
        pod.pointer("/metadata/namespace").and_then(Value::as_str),
        pod.pointer("/metadata/name").and_then(Value::as_str),
    ) else {
        return Vec::new();
    };
    let statuses: Vec<&Value> = ["/status/initContainerStatuses", "/status/containerStatuses"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut out = Vec::new();
    for spec in ["/spec/initContainers", "/spec/containers"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
    {
        let Some(container) = spec["name"].as_str() else {
            continue;
        };
        let restarts = statuses
            .iter()
            .find(|s| s["name"].as_str() == Some(container))
            .and_then(|s| s["restartCount"].as_i64())
            .unwrap_or(0) as i32;
        let instance = |restart, previous| Instance {
            namespace: ns.to_string(),
            pod: name.to_string(),
            container: container.to_string(),
            restart,
            previous,
        };
        if restarts > 0 {
            out.push(instance(restarts - 1, true));
        }
        out.push(instance(restarts, false));
    }
    out
}

/// A container log that could not be read (the kubelet is down or unreachable, the container is
/// waiting to start, the stream broke): recorded in the capture's summary instead of aborting it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogGap {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// The previous instance (after a restart) rather than the current one.
    pub previous: bool,
    /// The API's answer (status code and message) or the transport error.
    pub error: String,
    /// Lines read before the stream broke (they are kept).
    pub lines_kept: usize,
}

/// The lines of one instance that could be read, and why the rest could not.
pub struct Read {
    pub rows: Vec<LogRow>,
    pub gap: Option<LogGap>,
}

/// Reads one instance's lines within the window. A failure to read is a [`LogGap`], never an
/// error: one pod whose kubelet cannot be reached must not cost the whole capture.
pub async fn read(client: &kube::Client, instance: &Instance, window: Window) -> Read {
    let mut rows = Vec::new();
    let gap = match read_into(client, instance, window, &mut rows).await {
        Ok(()) => None,
        Err(error) => {
            tracing::warn!(
                "logs of {}/{} container {}: {error}",
                instance.namespace,
                instance.pod,
                instance.container
            );
            Some(LogGap {
                namespace: instance.namespace.clone(),
                pod: instance.pod.clone(),
                container: instance.container.clone(),
                previous: instance.previous,
                error,
                lines_kept: rows.len(),
            })
        }
    };
    Read { rows, gap }
}

async fn read_into(
    client: &kube::Client,
    instance: &Instance,
    window: Window,
    rows: &mut Vec<LogRow>,
) -> Result<(), String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &instance.namespace);
    let params = LogParams {
        container: Some(instance.container.clone()),
        previous: instance.previous,
        timestamps: true,
        since_time: k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(window.since_ns)).ok(),
        ..Default::default()
    };
    let reader = match api.log_stream(&instance.pod, &params).await {
        Ok(r) => r,
        // The previous instance's log is gone (or the container never started): nothing to read.
        Err(kube::Error::Api(s)) if s.code == 400 || s.code == 404 => {
            tracing::info!(
                "logs of {}/{} container {}: {}",
                instance.namespace,
                instance.pod,
                instance.container,
                s.message
            );
            return Ok(());
        }
        Err(kube::Error::Api(s)) => return Err(format!("{} {}: {}", s.code, s.reason, s.message)),
        Err(e) => return Err(e.to_string()),
    };
    let mut lines = reader.lines();
    while let Some(line) = lines
        .try_next()
        .await
        .map_err(|e| format!("the log stream broke: {e}"))?
    {
        let Some((stamp, text)) = line.split_once(' ') else {
            continue;
        };
        let Some(time_ns) = parse_rfc3339(stamp) else {
            continue;
        };
        if window.contains(time_ns) {
            rows.push(LogRow {
                time_ns,
                namespace: instance.namespace.clone(),
                pod: instance.pod.clone(),
                container: instance.container.clone(),
                restart: instance.restart,
                stream: "stdout".into(),
                line: text.to_string(),
            });
        }
    }
    Ok(())
}

/// Reads every instance (a few at a time); each instance's lines go to `sink`, or, when Loki is
/// also read, into `index` to give Loki's lines their container instance. The logs that could not
/// be read are returned (only writing to the sink fails the capture).
pub async fn read_all(
    client: &kube::Client,
    pods: &[Value],
    window: Window,
    bar: &ProgressBar,
    sink: &Sink,
    index: Option<&Mutex<LogIndex>>,
) -> anyhow::Result<Vec<LogGap>> {
    let all: Vec<Instance> = pods.iter().flat_map(instances).collect();
    bar.set_length(all.len() as u64);
    let mut reads = futures_util::stream::iter(all)
        .map(|i| async move { read(client, &i, window).await })
        .buffer_unordered(8);
    let mut gaps = Vec::new();
    while let Some(Read { rows, gap }) = reads.next().await {
        gaps.extend(gap);
        match index {
            Some(index) => {
                let mut index = index.lock().expect("log index lock");
                rows.into_iter().for_each(|r| index.insert(r));
            }
            None => {
                for row in rows {
                    sink.push(Row::Log(row)).await?;
                }
            }
        }
        bar.inc(1);
    }
    gaps.sort_by(|a, b| {
        (&a.namespace, &a.pod, &a.container).cmp(&(&b.namespace, &b.pod, &b.container))
    });
    Ok(gaps)
}

type ContainerKey = (String, String, String);
/// (time, line) -> (restart, matched by a Loki line).
type ContainerLines = BTreeMap<(i64, String), (i32, bool)>;

/// Lines read through the Kubernetes API, by container and time, so that lines read from Loki
/// (which knows their stream but not their container instance) can be given their instance.
#[derive(Debug, Default)]
pub struct LogIndex {
    by_container: HashMap<ContainerKey, ContainerLines>,
}

impl LogIndex {
    pub fn insert(&mut self, row: LogRow) {
        self.by_container
            .entry((row.namespace, row.pod, row.container))
            .or_default()
            .insert((row.time_ns, row.line), (row.restart, false));
    }

    /// The container instance of a line read elsewhere: the instance the API showed it in; else
    /// the instance of the closest earlier line the API showed; else, for a line older than all of
    /// them, the instance before the oldest one shown (0 at least); 0 for a container the API
    /// showed nothing of (a pod deleted before the end).
    pub fn restart_of(
        &mut self,
        ns: &str,
        pod: &str,
        container: &str,
        time_ns: i64,
        line: &str,
    ) -> i32 {
        let key = (ns.to_string(), pod.to_string(), container.to_string());
        let Some(lines) = self.by_container.get_mut(&key) else {
            return 0;
        };
        let probe = (time_ns, line.to_string());
        if let Some((restart, matched)) = lines.get_mut(&probe) {
            *matched = true;
            return *restart;
        }
        match lines.range(..probe).next_back() {
            Some((_, (restart, _))) => *restart,
            None => lines.values().next().map_or(0, |(r, _)| (r - 1).max(0)),
        }
    }

    /// The lines the API showed and no Loki line matched.
    pub fn unmatched(self) -> impl Iterator<Item = LogRow> {
        self.by_container
            .into_iter()
            .flat_map(|((namespace, pod, container), lines)| {
                lines.into_iter().filter(|(_, (_, matched))| !matched).map(
                    move |((time_ns, line), (restart, _))| LogRow {
                        time_ns,
                        namespace: namespace.clone(),
                        pod: pod.clone(),
                        container: container.clone(),
                        restart,
                        stream: "stdout".into(),
                        line,
                    },
                )
            })
    }
}
