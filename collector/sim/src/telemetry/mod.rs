//! Prometheus scrapes of the simulated cluster, with the metric names and labels real exporters
//! use. A scrape reads the world (objects, container state, the workload's request counters) and
//! appends one `MetricSample` row per series, all stamped with the world's clock, exporter by
//! exporter: kube-state-metrics (objects' state), the kubelet's cAdvisor endpoint (containers'
//! CPU, memory, CFS throttling), node-exporter basics, and the application's RED metrics as its
//! instrumentation names them, with Prometheus' `up` for every target. Each exporter also declares
//! the metric families it exports; they become the `MetricMeta` rows (`up` is Prometheus' own and
//! has none). docs/METRICS.md lists the families and what is left out.

mod app;
mod cadvisor;
mod kube_state;
mod node_exporter;

use problems::app::AppSpec;
use schemas::tables::{Labels, MetricMeta, MetricSample, Row};

use super::workload::Workload;
use super::world::World;

/// A metric family: name, type, help, unit.
type Family = (&'static str, &'static str, &'static str, &'static str);

/// Metadata rows for every family, exporters in scrape order.
pub fn metadata_rows() -> Vec<Row> {
    [
        kube_state::FAMILIES,
        cadvisor::FAMILIES,
        node_exporter::FAMILIES,
        app::FAMILIES,
    ]
    .concat()
    .into_iter()
    .map(|(n, t, h, u)| {
        Row::MetricMeta(MetricMeta {
            metric: n.to_string(),
            metric_type: t.to_string(),
            help: h.to_string(),
            unit: u.to_string(),
        })
    })
    .collect()
}

/// One scrape of every target at the world's current time.
pub fn scrape(w: &World, app: &AppSpec, wl: &Workload, namespaces: &[String], rows: &mut Vec<Row>) {
    let mut o = Out { rows, t: w.now };
    let scope = Scope(namespaces);
    kube_state::scrape(&mut o, w, scope);
    cadvisor::scrape(&mut o, w, wl, scope);
    node_exporter::scrape(&mut o, w);
    app::scrape(&mut o, w, app, wl);
    app::up(&mut o, w, app, wl);
}

/// The namespaces whose objects and containers are scraped (nodes are cluster-wide).
#[derive(Clone, Copy)]
struct Scope<'a>(&'a [String]);

impl Scope<'_> {
    fn contains(self, ns: &Option<String>) -> bool {
        ns.as_ref().is_some_and(|n| self.0.contains(n))
    }
}

/// Where a scrape's samples go; every sample carries the scrape's time.
struct Out<'a> {
    rows: &'a mut Vec<Row>,
    t: i64,
}

impl Out<'_> {
    fn push(&mut self, metric: &str, labels: Labels, value: f64) {
        self.rows.push(Row::Metric(MetricSample {
            metric: metric.to_string(),
            labels,
            time_ns: self.t,
            value,
        }));
    }

    /// Prometheus' own `up` for a scrape target: 1 when it answered, 0 when it did not.
    fn up(&mut self, target: &[(&str, &str)], answered: bool) {
        self.push("up", labels(target), b(answered));
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The memory a node's containers hold (their working sets), in bytes.
fn containers_memory(w: &World, node: &str) -> f64 {
    w.pods
        .values()
        .filter(|p| p.spec.node_name.as_deref() == Some(node))
        .flat_map(|p| &p.statuses)
        .map(|s| s.working_set)
        .sum()
}

/// A boolean as exporters report it: 1 or 0.
fn b(v: bool) -> f64 {
    if v { 1.0 } else { 0.0 }
}
