//! The leak scan: nothing an agent can read in a dataset may name the problem, a fault primitive,
//! the noise machinery or the injection tooling. Every distinct string of every table (object
//! JSON, event texts, log lines, metric names and labels, span names and attributes, alert labels
//! and annotations) is matched against the markers, as the rows stream into the dataset.

use std::collections::BTreeSet;
use std::hash::BuildHasher;

use problems::primitive::PRIMITIVE_NAMES;
use regex::RegexSet;
use rustc_hash::{FxBuildHasher, FxHashSet};
use schemas::tables::{Labels, Row};

/// One marker found in a dataset.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Leak {
    pub marker: String,
    /// The offending text, shortened.
    pub text: String,
}

/// Words the injection and noise machinery would leave behind.
const MACHINERY: &[&str] = &[
    r"(?i)\bfaultline\b",
    r"(?i)\bchaos(-mesh)?\b",
    r"(?i)\bnoise\b",
    r"(?i)\binject(ed|ion|or)?\b",
    r"(?i)\bdecoy\b",
    r"(?i)\bfault\b",
    r"(?i)\bsregym\b",
    r"(?i)\bground[_ ]truth\b",
];

/// The markers for one problem: its id, every primitive name (as written in specs, with `_` or
/// `-`), and the machinery words. Single-word primitive names that are ordinary words (`scale`)
/// are left out.
pub fn markers(problem_id: &str) -> Vec<String> {
    let mut m: Vec<String> = MACHINERY.iter().map(|s| s.to_string()).collect();
    m.extend(problem_markers(problem_id));
    m
}

/// The markers that name a problem: its id and every primitive name. What an agent is handed
/// (its task, files and environment) is held to these: the task may speak of a fault, and the
/// session's own variables are named after the benchmark, but neither names the problem.
pub fn problem_markers(problem_id: &str) -> Vec<String> {
    let mut m = vec![format!("(?i){}", regex::escape(problem_id))];
    for name in PRIMITIVE_NAMES {
        if name.contains('_') {
            m.push(format!(r"(?i)\b{}\b", regex::escape(name)));
            m.push(format!(
                r"(?i)\b{}\b",
                regex::escape(&name.replace('_', "-"))
            ));
        }
    }
    m
}

/// Scans rows as they stream past; each distinct text is matched once.
pub struct LeakScan {
    markers: Vec<String>,
    set: RegexSet,
    /// Hashes of the texts matched so far, forgotten past a bound so a day-long run stays small
    /// (a text seen again after that is only matched again).
    seen: FxHashSet<u64>,
    found: BTreeSet<Leak>,
}

/// Distinct texts remembered before the memory of them is cleared.
const SEEN_BOUND: usize = 1 << 20;

impl LeakScan {
    pub fn new(markers: &[String]) -> LeakScan {
        LeakScan {
            markers: markers.to_vec(),
            set: RegexSet::new(markers).expect("markers are valid regexes"),
            seen: FxHashSet::default(),
            found: BTreeSet::new(),
        }
    }

    /// Matches one text (once, however often it is seen).
    pub fn text(&mut self, text: &str) {
        if !self.seen.insert(FxBuildHasher.hash_one(text)) {
            return;
        }
        if self.seen.len() > SEEN_BOUND {
            self.seen.clear();
        }
        for i in self.set.matches(text).into_iter() {
            self.found.insert(Leak {
                marker: self.markers[i].clone(),
                text: text.chars().take(160).collect(),
            });
        }
    }

    /// Every text an agent could read in a row: object JSON, event texts, log lines, metric
    /// names and labels, span names and attributes, alert labels and annotations.
    pub fn observe(&mut self, row: &Row) {
        match row {
            Row::Object(o) => {
                self.text(&o.object);
                self.text(&o.name);
            }
            Row::Event(e) => {
                for t in [&e.message, &e.reason, &e.name, &e.involved_name] {
                    self.text(t);
                }
            }
            Row::Log(l) => {
                for t in [&l.line, &l.pod, &l.container] {
                    self.text(t);
                }
            }
            Row::Metric(m) => {
                self.text(&m.metric);
                self.labels(&m.labels);
            }
            Row::Span(sp) => {
                self.text(&sp.name);
                self.text(&sp.service);
                if let Some(m) = &sp.status_message {
                    self.text(m);
                }
                self.labels(&sp.attributes);
                self.labels(&sp.resource_attributes);
            }
            Row::Alert(a) => {
                self.text(&a.alertname);
                self.labels(&a.labels);
                self.labels(&a.annotations);
            }
            Row::MetricMeta(_) | Row::Audit(_) => {}
        }
    }

    fn labels(&mut self, labels: &Labels) {
        for (k, v) in labels {
            self.text(k);
            self.text(v);
        }
    }

    /// Every marker occurrence (empty: no leak).
    pub fn finish(self) -> Vec<Leak> {
        self.found.into_iter().collect()
    }
}

/// Every marker occurrence in some texts (empty: no leak).
pub fn scan_texts<'a>(texts: impl IntoIterator<Item = &'a str>, markers: &[String]) -> Vec<Leak> {
    let mut scan = LeakScan::new(markers);
    texts.into_iter().for_each(|t| scan.text(t));
    scan.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::tables::LogRow;

    #[test]
    fn finds_markers_and_spares_ordinary_words() {
        let mut t: Vec<Row> = vec![];
        let log = |line: &str| LogRow {
            time_ns: 0,
            namespace: "ns".into(),
            pod: "p".into(),
            container: "c".into(),
            restart: 0,
            stream: "stdout".into(),
            line: line.into(),
        };
        let scan = |rows: &[Row]| {
            let mut scan = LeakScan::new(&markers("hr-geo-oom"));
            rows.iter().for_each(|r| scan.observe(r));
            scan.finish()
        };
        t.push(Row::Log(log(
            "default-scheduler assigned pod; scaled up replica set",
        )));
        assert!(scan(&t).is_empty());
        t.push(Row::Log(log("applying service_target_port to geo")));
        t.push(Row::Log(log("chaos experiment started")));
        t.push(Row::Log(log("problem hr-geo-oom")));
        // Seen twice, reported once.
        t.push(Row::Log(log("problem hr-geo-oom")));
        let leaks = scan(&t);
        assert_eq!(leaks.len(), 3, "{leaks:?}");
    }
}
