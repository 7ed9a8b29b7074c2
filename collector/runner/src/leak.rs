//! The leak scan: nothing an agent can read in a dataset may name the problem, a fault primitive,
//! the noise machinery or the injection tooling. Every distinct string of every table (object
//! JSON, event texts, log lines, metric names and labels, span names and attributes, alert labels
//! and annotations) is matched against the markers.

use std::collections::BTreeSet;

use problems::primitive::PRIMITIVE_NAMES;
use regex::RegexSet;

use super::visibility::Tables;

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

fn collect(t: &Tables) -> BTreeSet<&str> {
    let mut s: BTreeSet<&str> = BTreeSet::new();
    for o in &t.objects {
        s.insert(&o.object);
        s.insert(&o.name);
    }
    for e in &t.events {
        s.insert(&e.message);
        s.insert(&e.reason);
        s.insert(&e.name);
        s.insert(&e.involved_name);
    }
    for l in &t.logs {
        s.insert(&l.line);
        s.insert(&l.pod);
        s.insert(&l.container);
    }
    for m in &t.metrics {
        s.insert(&m.metric);
        for (k, v) in &m.labels {
            s.insert(k);
            s.insert(v);
        }
    }
    for sp in &t.spans {
        s.insert(&sp.name);
        s.insert(&sp.service);
        if let Some(m) = &sp.status_message {
            s.insert(m);
        }
        for (k, v) in sp.attributes.iter().chain(&sp.resource_attributes) {
            s.insert(k);
            s.insert(v);
        }
    }
    for a in &t.alerts {
        s.insert(&a.alertname);
        for (k, v) in a.labels.iter().chain(&a.annotations) {
            s.insert(k);
            s.insert(v);
        }
    }
    s
}

/// Every marker occurrence in the tables (empty: no leak).
pub fn scan(t: &Tables, markers: &[String]) -> Vec<Leak> {
    scan_texts(collect(t), markers)
}

/// Every marker occurrence in some texts (empty: no leak).
pub fn scan_texts<'a>(texts: impl IntoIterator<Item = &'a str>, markers: &[String]) -> Vec<Leak> {
    let set = RegexSet::new(markers).expect("markers are valid regexes");
    let mut found = BTreeSet::new();
    for text in texts {
        for i in set.matches(text).into_iter() {
            let short: String = text.chars().take(160).collect();
            found.insert(Leak {
                marker: markers[i].clone(),
                text: short,
            });
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::tables::LogRow;

    #[test]
    fn finds_markers_and_spares_ordinary_words() {
        let mut t = Tables::default();
        let log = |line: &str| LogRow {
            time_ns: 0,
            namespace: "ns".into(),
            pod: "p".into(),
            container: "c".into(),
            restart: 0,
            stream: "stdout".into(),
            line: line.into(),
        };
        t.logs
            .push(log("default-scheduler assigned pod; scaled up replica set"));
        assert!(scan(&t, &markers("hr-geo-oom")).is_empty());
        t.logs.push(log("applying service_target_port to geo"));
        t.logs.push(log("chaos experiment started"));
        t.logs.push(log("problem hr-geo-oom"));
        let leaks = scan(&t, &markers("hr-geo-oom"));
        assert_eq!(leaks.len(), 3, "{leaks:?}");
    }
}
