//! Container log lines by (namespace, pod, container), with the container instance (restart
//! number) that wrote each one, from a source the facades cannot tell apart: lines held in memory,
//! or a dataset's logs file read in place ([`super::logs_file`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use schemas::tables::LogRow;

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub time_ns: i64,
    pub restart: i32,
    pub stream: String,
    pub text: String,
}

/// (namespace, pod, container)
pub type ContainerKey = (String, String, String);

/// What `GET .../pods/{name}/log` asks for (PodLogOptions).
#[derive(Debug, Clone, Default)]
pub struct LogQuery {
    /// Which instance: the current one, or the one before it (`previous=true`).
    pub restart: i32,
    /// Only lines at or after this recorded time.
    pub since_ns: Option<i64>,
    /// Only lines at or before this recorded time (the virtual now).
    pub until_ns: i64,
    pub tail_lines: Option<usize>,
}

/// Which lines of one container a reader wants.
#[derive(Debug, Clone)]
pub struct LineRange {
    /// One instance only.
    pub restart: Option<i32>,
    /// `stdout` or `stderr` only.
    pub stream: Option<String>,
    /// Recorded times, both ends included.
    pub from_ns: i64,
    pub to_ns: i64,
    /// Only the last this many of the selected lines.
    pub last: Option<usize>,
}

impl LineRange {
    /// Every line with a time in `[from, to]`.
    pub fn window(from_ns: i64, to_ns: i64) -> Self {
        LineRange {
            restart: None,
            stream: None,
            from_ns,
            to_ns,
            last: None,
        }
    }

    /// Lines of one stream with times in `[from, to]`.
    pub fn stream(stream: &str, from_ns: i64, to_ns: i64) -> Self {
        LineRange {
            stream: Some(stream.to_string()),
            ..LineRange::window(from_ns, to_ns)
        }
    }

    pub fn admits(&self, restart: i32, stream: &str, time_ns: i64) -> bool {
        self.restart.is_none_or(|r| r == restart)
            && self.stream.as_deref().is_none_or(|s| s == stream)
            && self.from_ns <= time_ns
            && time_ns <= self.to_ns
    }

    /// The selected lines (given in stored order) cut to the last ones asked for.
    pub fn cut(&self, mut lines: Vec<Line>) -> Vec<Line> {
        if let Some(n) = self.last
            && lines.len() > n
        {
            lines.drain(..lines.len() - n);
        }
        lines
    }
}

/// One stream of a container (its stdout or its stderr) and the times of its first and last line.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamInfo {
    pub key: ContainerKey,
    pub stream: String,
    pub first_ns: i64,
    pub last_ns: i64,
}

/// What a source holds: its streams, and when each container instance wrote its first line.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LogCatalog {
    /// Sorted by container, then stream.
    pub streams: Vec<StreamInfo>,
    pub restarts: HashMap<ContainerKey, BTreeMap<i32, i64>>,
}

/// Builds a catalog from lines seen in any order.
#[derive(Debug, Default, Clone)]
pub struct CatalogBuilder {
    streams: BTreeMap<(ContainerKey, String), (i64, i64)>,
    restarts: HashMap<ContainerKey, BTreeMap<i32, i64>>,
}

impl CatalogBuilder {
    /// Adds a run of lines of one container instance and stream, first and last times given.
    pub fn add(
        &mut self,
        key: (&str, &str, &str),
        restart: i32,
        stream: &str,
        first: i64,
        last: i64,
    ) {
        let key = (key.0.to_string(), key.1.to_string(), key.2.to_string());
        let span = self
            .streams
            .entry((key.clone(), stream.to_string()))
            .or_insert((first, last));
        *span = (span.0.min(first), span.1.max(last));
        let t = self
            .restarts
            .entry(key)
            .or_default()
            .entry(restart)
            .or_insert(first);
        *t = (*t).min(first);
    }

    pub fn build(self) -> LogCatalog {
        LogCatalog {
            streams: self
                .streams
                .into_iter()
                .map(|((key, stream), (first_ns, last_ns))| StreamInfo {
                    key,
                    stream,
                    first_ns,
                    last_ns,
                })
                .collect(),
            restarts: self.restarts,
        }
    }
}

/// Where the log APIs get lines from.
pub trait LogSource: Send + Sync {
    fn catalog(&self) -> anyhow::Result<Arc<LogCatalog>>;

    /// The lines of one container a range selects, in stored order (by restart, then time).
    fn lines(&self, key: &ContainerKey, range: &LineRange) -> anyhow::Result<Vec<Line>>;

    /// The lines of several containers with times in `[from, to]`, per container, in stored
    /// order (a file-backed source reads them together).
    fn lines_of(
        &self,
        keys: &[ContainerKey],
        from_ns: i64,
        to_ns: i64,
    ) -> anyhow::Result<Vec<Vec<Line>>> {
        let range = LineRange::window(from_ns, to_ns);
        keys.iter().map(|k| self.lines(k, &range)).collect()
    }
}

/// The log store the facades hold.
pub type LogStore = dyn LogSource;

fn key(ns: &str, pod: &str, container: &str) -> ContainerKey {
    (ns.to_string(), pod.to_string(), container.to_string())
}

impl dyn LogSource {
    /// The newest instance that wrote anything up to `t`.
    pub fn latest_restart(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        t: i64,
    ) -> anyhow::Result<Option<i32>> {
        Ok(self
            .catalog()?
            .restarts
            .get(&key(ns, pod, container))
            .and_then(|r| {
                r.iter()
                    .filter(|(_, first)| **first <= t)
                    .map(|(r, _)| *r)
                    .max()
            }))
    }

    /// The lines a log request selects, oldest first.
    pub fn query(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        q: &LogQuery,
    ) -> anyhow::Result<Vec<Line>> {
        self.lines(
            &key(ns, pod, container),
            &LineRange {
                restart: Some(q.restart),
                stream: None,
                from_ns: q.since_ns.unwrap_or(i64::MIN),
                to_ns: q.until_ns,
                last: q.tail_lines,
            },
        )
    }
}

/// Lines held in memory.
#[derive(Debug, Default)]
pub struct MemLogs {
    lines: HashMap<ContainerKey, Vec<Line>>,
    catalog: Arc<LogCatalog>,
    /// What the catalog is built from, kept so that appended lines extend it.
    builder: CatalogBuilder,
}

impl MemLogs {
    pub fn new(rows: impl IntoIterator<Item = LogRow>) -> Self {
        let mut store = MemLogs::default();
        for r in rows {
            store
                .lines
                .entry((r.namespace, r.pod, r.container))
                .or_default()
                .push(Line {
                    time_ns: r.time_ns,
                    restart: r.restart,
                    stream: r.stream,
                    text: r.line,
                });
        }
        for (k, lines) in &mut store.lines {
            lines.sort_by_key(|l| (l.restart, l.time_ns));
            for l in lines.iter() {
                let k = (k.0.as_str(), k.1.as_str(), k.2.as_str());
                store
                    .builder
                    .add(k, l.restart, &l.stream, l.time_ns, l.time_ns);
            }
        }
        store.catalog = Arc::new(store.builder.clone().build());
        store
    }

    /// Adds lines newer than most already held (a live environment's latest second).
    pub fn append(&mut self, rows: impl IntoIterator<Item = LogRow>) {
        for r in rows {
            let k = (r.namespace.as_str(), r.pod.as_str(), r.container.as_str());
            self.builder
                .add(k, r.restart, &r.stream, r.time_ns, r.time_ns);
            let lines = self
                .lines
                .entry((r.namespace, r.pod, r.container))
                .or_default();
            let line = Line {
                time_ns: r.time_ns,
                restart: r.restart,
                stream: r.stream,
                text: r.line,
            };
            // Lines arrive nearly in order: the insertion point is at or near the end.
            let at =
                lines.partition_point(|l| (l.restart, l.time_ns) <= (line.restart, line.time_ns));
            lines.insert(at, line);
        }
        self.catalog = Arc::new(self.builder.clone().build());
    }
}

impl LogSource for MemLogs {
    fn catalog(&self) -> anyhow::Result<Arc<LogCatalog>> {
        Ok(self.catalog.clone())
    }

    fn lines(&self, key: &ContainerKey, range: &LineRange) -> anyhow::Result<Vec<Line>> {
        let selected = self
            .lines
            .get(key)
            .into_iter()
            .flatten()
            .filter(|l| range.admits(l.restart, &l.stream, l.time_ns))
            .cloned()
            .collect();
        Ok(range.cut(selected))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_select_instance_window_and_tail() {
        let row = |t, restart, text: &str| LogRow {
            time_ns: t,
            namespace: "ns".into(),
            pod: "p".into(),
            container: "c".into(),
            restart,
            stream: "stdout".into(),
            line: text.into(),
        };
        let mem = MemLogs::new([
            row(30, 1, "c"),
            row(10, 0, "a"),
            row(20, 0, "b"),
            row(40, 1, "d"),
            row(99, 1, "future"),
        ]);
        let store: &LogStore = &mem;
        let q = |restart, since, tail| LogQuery {
            restart,
            since_ns: since,
            until_ns: 50,
            tail_lines: tail,
        };
        let texts = |q: &LogQuery| -> Vec<String> {
            store
                .query("ns", "p", "c", q)
                .unwrap()
                .iter()
                .map(|l| l.text.clone())
                .collect()
        };
        assert_eq!(texts(&q(1, None, None)), ["c", "d"]);
        assert_eq!(texts(&q(0, None, None)), ["a", "b"]);
        assert_eq!(texts(&q(1, Some(35), None)), ["d"]);
        assert_eq!(texts(&q(0, None, Some(1))), ["b"]);
        assert_eq!(store.latest_restart("ns", "p", "c", 50).unwrap(), Some(1));
        assert_eq!(store.latest_restart("ns", "p", "c", 15).unwrap(), Some(0));
    }
}
