//! Container log lines by (namespace, pod, container), in time order, with the container instance
//! (restart number) that wrote each one.

use std::collections::HashMap;

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

#[derive(Debug, Default)]
pub struct LogStore {
    lines: HashMap<ContainerKey, Vec<Line>>,
}

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

impl LogStore {
    pub fn add(&mut self, rows: impl IntoIterator<Item = LogRow>) {
        for r in rows {
            self.lines
                .entry((r.namespace, r.pod, r.container))
                .or_default()
                .push(Line {
                    time_ns: r.time_ns,
                    restart: r.restart,
                    stream: r.stream,
                    text: r.line,
                });
        }
    }

    /// Sorts what was added; call once after loading.
    pub fn seal(&mut self) {
        for lines in self.lines.values_mut() {
            lines.sort_by_key(|l| (l.restart, l.time_ns));
        }
    }

    pub fn has_container(&self, ns: &str, pod: &str, container: &str) -> bool {
        self.lines
            .contains_key(&(ns.to_string(), pod.to_string(), container.to_string()))
    }

    /// The newest instance that wrote anything up to `t`.
    pub fn latest_restart(&self, ns: &str, pod: &str, container: &str, t: i64) -> Option<i32> {
        self.lines
            .get(&(ns.to_string(), pod.to_string(), container.to_string()))?
            .iter()
            .filter(|l| l.time_ns <= t)
            .map(|l| l.restart)
            .max()
    }

    /// The lines a log request selects, oldest first.
    pub fn query(&self, ns: &str, pod: &str, container: &str, q: &LogQuery) -> Vec<&Line> {
        let Some(lines) = self
            .lines
            .get(&(ns.to_string(), pod.to_string(), container.to_string()))
        else {
            return Vec::new();
        };
        let mut out: Vec<&Line> = lines
            .iter()
            .filter(|l| {
                l.restart == q.restart
                    && l.time_ns <= q.until_ns
                    && q.since_ns.is_none_or(|s| l.time_ns >= s)
            })
            .collect();
        if let Some(n) = q.tail_lines
            && out.len() > n
        {
            out.drain(..out.len() - n);
        }
        out
    }

    /// Every container's lines, for facades that index logs their own way (Loki).
    pub fn streams(&self) -> impl Iterator<Item = (&ContainerKey, &[Line])> {
        self.lines.iter().map(|(k, v)| (k, v.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_select_instance_window_and_tail() {
        let mut store = LogStore::default();
        let row = |t, restart, text: &str| LogRow {
            time_ns: t,
            namespace: "ns".into(),
            pod: "p".into(),
            container: "c".into(),
            restart,
            stream: "stdout".into(),
            line: text.into(),
        };
        store.add([
            row(30, 1, "c"),
            row(10, 0, "a"),
            row(20, 0, "b"),
            row(40, 1, "d"),
            row(99, 1, "future"),
        ]);
        store.seal();
        let q = |restart, since, tail| LogQuery {
            restart,
            since_ns: since,
            until_ns: 50,
            tail_lines: tail,
        };
        let texts = |q: &LogQuery| -> Vec<String> {
            store
                .query("ns", "p", "c", q)
                .iter()
                .map(|l| l.text.clone())
                .collect()
        };
        assert_eq!(texts(&q(1, None, None)), ["c", "d"]);
        assert_eq!(texts(&q(0, None, None)), ["a", "b"]);
        assert_eq!(texts(&q(1, Some(35), None)), ["d"]);
        assert_eq!(texts(&q(0, None, Some(1))), ["b"]);
        assert_eq!(store.latest_restart("ns", "p", "c", 50), Some(1));
        assert_eq!(store.latest_restart("ns", "p", "c", 15), Some(0));
    }
}
