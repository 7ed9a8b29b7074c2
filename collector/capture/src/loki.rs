//! The Loki source: the log streams of the captured namespaces, read forward in pages, into the
//! logs table. Loki knows each line's stream (stdout/stderr) and keeps the lines of pods deleted
//! before the end; the Kubernetes API knows which container instance wrote a line. Lines are
//! given their instance from the lines the API showed (see [`LogIndex`]); lines the API showed but
//! Loki did not are kept too.

use std::collections::HashSet;
use std::sync::Mutex;

use indicatif::ProgressBar;
use schemas::tables::{LogRow, Row};
use serde_json::Value;

use super::Window;
use super::http::HttpSource;
use super::kube::logs::LogIndex;
use super::scope::Scope;
use super::sink::Sink;

/// Lines per request.
const PAGE: usize = 5000;

#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct LokiOutcome {
    pub streams: usize,
    pub lines: u64,
}

/// The namespaces to read: the chosen ones, or every namespace Loki knows in the window.
async fn namespaces(
    loki: &HttpSource,
    scope: &Scope,
    window: Window,
) -> anyhow::Result<Vec<String>> {
    if !scope.namespaces.is_empty() {
        return Ok(scope
            .namespaces
            .iter()
            .filter(|n| scope.namespace_ok(n))
            .cloned()
            .collect());
    }
    let body = loki
        .get_json(
            "loki/api/v1/label/namespace/values",
            &[
                ("start", window.since_ns.to_string()),
                ("end", window.until_ns.to_string()),
            ],
        )
        .await?;
    Ok(body["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .filter(|n| scope.namespace_ok(n))
        .collect())
}

/// Reads every line of the captured namespaces; `index` gives each its container instance.
pub async fn capture(
    loki: &HttpSource,
    scope: &Scope,
    window: Window,
    index: &Mutex<LogIndex>,
    sink: &Sink,
    bar: &ProgressBar,
) -> anyhow::Result<LokiOutcome> {
    let namespaces = namespaces(loki, scope, window).await?;
    bar.set_length(namespaces.len() as u64);
    let mut outcome = LokiOutcome::default();
    let mut streams: HashSet<String> = HashSet::new();
    for ns in namespaces {
        let query = format!("{{namespace={}}}", serde_json::to_string(&ns)?);
        let mut start = window.since_ns;
        // Lines already taken at `start` (the last page's last timestamp), as (stream, line).
        let mut at_start: HashSet<(String, String)> = HashSet::new();
        loop {
            let body = loki
                .get_json(
                    "loki/api/v1/query_range",
                    &[
                        ("query", query.clone()),
                        ("start", start.to_string()),
                        // `end` is exclusive.
                        ("end", (window.until_ns + 1).to_string()),
                        ("limit", PAGE.to_string()),
                        ("direction", "forward".to_string()),
                    ],
                )
                .await?;
            let mut page: Vec<(i64, &Value, &str)> = Vec::new();
            for s in body["data"]["result"].as_array().into_iter().flatten() {
                streams.insert(s["stream"].to_string());
                for v in s["values"].as_array().into_iter().flatten() {
                    if let (Some(t), Some(line)) = (
                        v[0].as_str().and_then(|t| t.parse::<i64>().ok()),
                        v[1].as_str(),
                    ) {
                        page.push((t, &s["stream"], line));
                    }
                }
            }
            page.sort_by_key(|p| p.0);
            let full = page.len() >= PAGE;
            let last = page.last().map(|p| p.0);
            let mut next_at_start = HashSet::new();
            let mut new_lines = 0;
            for (t, labels, line) in page {
                let key = (labels.to_string(), line.to_string());
                if t == start && at_start.contains(&key) {
                    continue;
                }
                new_lines += 1;
                if Some(t) == last {
                    next_at_start.insert(key);
                }
                let label = |k: &str| labels[k].as_str().unwrap_or_default().to_string();
                let (pod, container) = (label("pod"), label("container"));
                let restart = index
                    .lock()
                    .expect("log index lock")
                    .restart_of(&ns, &pod, &container, t, line);
                let stream = match label("stream") {
                    s if s.is_empty() => "stdout".to_string(),
                    s => s,
                };
                sink.push(Row::Log(LogRow {
                    time_ns: t,
                    namespace: ns.clone(),
                    pod,
                    container,
                    restart,
                    stream,
                    line: line.to_string(),
                }))
                .await?;
                outcome.lines += 1;
            }
            anyhow::ensure!(
                !full || new_lines > 0,
                "loki: more than {PAGE} lines of {query} at one instant ({start} ns): cannot page past them"
            );
            match last {
                Some(last) if full => {
                    if last == start {
                        at_start.extend(next_at_start);
                    } else {
                        at_start = next_at_start;
                    }
                    start = last;
                }
                _ => break,
            }
        }
        bar.inc(1);
    }
    outcome.streams = streams.len();
    Ok(outcome)
}
