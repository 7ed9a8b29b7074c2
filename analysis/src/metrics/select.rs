//! Which series belong to an object. ITBench keeps one file per pod or service and finds an
//! object's metrics by file name; here a series belongs to a pod by its `pod` label, to a
//! service by its `service_name` / `service` / `destination_canonical_service` label, to a
//! workload through its pods' owners (or a `deployment` label), to a node by `node`. The table is
//! read once into series (kept until it changes); a question selects series by metric, object
//! and window from those.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use polars::prelude::*;
use regex::Regex;
use schemas::tables::columns::metrics as c;
use schemas::tables::{Labels, Table};

use crate::cache::Derived;
use crate::frame::{collect, each_map, label_set, strings};
use crate::owners::Owners;
use crate::params::{ObjectId, Window};
use crate::{Error, Result, Source};

/// Which objects' series to load.
#[derive(Debug, Clone)]
pub enum Target {
    /// An object named by an identifier (`pod/cart`, `otel-demo/Service/cart`, `cart`).
    Object(ObjectId),
    /// A kind and a glob on names (`pod/*`, `service/front*`), or every series (`*`).
    Pattern { kind: Option<String>, names: Regex },
}

impl Target {
    /// ITBench's `object_pattern`: `kind/glob` or `glob`.
    pub fn pattern(text: &str) -> Result<Target> {
        let (kind, glob) = match text.split_once('/') {
            Some((k, g)) => (Some(k.trim().to_ascii_lowercase()), g.trim()),
            None => (None, text.trim()),
        };
        let glob = if glob.is_empty() { "*" } else { glob };
        let re = format!(
            "(?i)^{}$",
            regex::escape(glob).replace(r"\*", ".*").replace(r"\?", ".")
        );
        let names =
            Regex::new(&re).map_err(|e| Error::param(format!("object_pattern `{text}`: {e}")))?;
        if let Some(k) = &kind
            && !["pod", "service", "deployment", "node", "*"].contains(&k.as_str())
        {
            return Err(Error::param(format!(
                "object_pattern `{text}`: the kind is pod, service, deployment or node"
            )));
        }
        Ok(Target::Pattern {
            kind: kind.filter(|k| k != "*"),
            names,
        })
    }
}

/// One series with the object it was selected for.
#[derive(Debug, Clone)]
pub struct Series {
    pub metric: String,
    pub labels: Labels,
    pub namespace: String,
    /// `pod`, `service`, `deployment`, `node` or `cluster`.
    pub object_kind: String,
    pub object_name: String,
    /// The workload the object rolls up to (ITBench's `deployment` column).
    pub deployment: String,
    pub pod: Option<String>,
    pub service: Option<String>,
    /// (time ns, value), in time order.
    pub points: Vec<(i64, f64)>,
}

/// Which metrics a question is about.
#[derive(Debug, Clone, Copy)]
pub enum Metrics<'a> {
    All,
    /// These names exactly (none: every metric).
    Named(&'a [String]),
    /// Names containing this text.
    Containing(&'a str),
}

impl Metrics<'_> {
    fn keeps(&self, metric: &str) -> bool {
        match self {
            Metrics::All => true,
            Metrics::Named(names) => names.is_empty() || names.iter().any(|n| n == metric),
            Metrics::Containing(text) => metric.contains(text),
        }
    }
}

/// One series of the metrics table as recorded: the label values that name its object, and
/// every point in time order.
#[derive(Debug)]
struct Recorded {
    metric: String,
    namespace: Option<String>,
    labels: Labels,
    pod: Option<String>,
    service: Option<String>,
    node: Option<String>,
    deployment: Option<String>,
    points: Vec<(i64, f64)>,
}

impl Recorded {
    fn new(metric: String, namespace: Option<String>, labels: Labels) -> Recorded {
        let get = |keys: &[&str]| keys.iter().find_map(|k| labels.get(*k).cloned());
        Recorded {
            pod: get(&["pod"]),
            service: get(&["service_name", "destination_canonical_service", "service"]),
            node: get(&["node", "kubernetes_io_hostname"]),
            deployment: get(&["deployment"]),
            metric,
            namespace,
            labels,
            points: Vec::new(),
        }
    }

    /// The points inside the window.
    fn points_in(&self, window: &Window) -> &[(i64, f64)] {
        let from = window
            .start
            .map_or(0, |s| self.points.partition_point(|p| p.0 < s));
        let to = window.end.map_or(self.points.len(), |e| {
            self.points.partition_point(|p| p.0 <= e)
        });
        &self.points[from..to.max(from)]
    }
}

/// The series of the metrics table read so far, by metric (every metric once `complete`), each
/// metric's in label order: together, the order a dataset stores them in. Questions select from
/// these rather than scan the table (finding an object's series means reading every row's
/// labels, which is most of what a scan costs); a question about named metrics reads only those.
#[derive(Debug, Default)]
struct Read {
    by_metric: BTreeMap<String, Vec<Recorded>>,
    complete: bool,
}

impl Read {
    /// Reads the series of the metrics `wanted` that are not read yet.
    fn ensure(&mut self, source: &Source, wanted: Metrics<'_>) -> Result<()> {
        if self.complete {
            return Ok(());
        }
        let is = |names: &mut dyn Iterator<Item = &String>| {
            names
                .map(|n| col(c::METRIC).eq(lit(n.clone())))
                .reduce(|a, b| a.or(b))
        };
        match wanted {
            Metrics::Named(names) if !names.is_empty() => {
                let missing: Vec<&String> = names
                    .iter()
                    .filter(|n| !self.by_metric.contains_key(*n))
                    .collect();
                if let Some(filter) = is(&mut missing.iter().copied()) {
                    self.add(read(source, Some(filter))?);
                    for name in missing {
                        self.by_metric.entry(name.clone()).or_default();
                    }
                }
            }
            _ => {
                let filter = is(&mut self.by_metric.keys()).map(|known| known.not());
                self.add(read(source, filter)?);
                self.complete = true;
            }
        }
        Ok(())
    }

    fn add(&mut self, series: Vec<Recorded>) {
        for s in series {
            self.by_metric.entry(s.metric.clone()).or_default().push(s);
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct AllSeries(Mutex<Read>);

impl Derived for AllSeries {
    const TABLES: &'static [Table] = &[Table::Metrics];

    /// Nothing is read until a question needs it.
    fn derive(_source: &Source) -> Result<AllSeries> {
        Ok(AllSeries::default())
    }
}

/// The series of the metrics `filter` keeps (all when none), in (metric, labels) order, each
/// with its points in time order.
fn read(source: &Source, filter: Option<Expr>) -> Result<Vec<Recorded>> {
    let mut lf = source.scan(Table::Metrics)?;
    if let Some(filter) = filter {
        lf = lf.filter(filter);
    }
    let df = collect(lf.select([
        col(c::METRIC),
        col(c::NAMESPACE),
        col(c::LABELS),
        col(c::TIME).cast(DataType::Int64).alias("_t"),
        col(c::VALUE),
    ]))?;
    let metric = df.column(c::METRIC)?.str()?;
    let namespace = df.column(c::NAMESPACE)?.str()?;
    let times = df.column("_t")?.i64()?;
    let values = df.column(c::VALUE)?.f64()?;
    let mut rows = metric
        .iter()
        .zip(namespace.iter())
        .zip(times.iter().zip(values.iter()));
    // A series is its metric and labels; its namespace is that of its first row. A row
    // whose labels are the previous row's (every row of a series but its first, in a
    // dataset's order) is matched without building its label set.
    let mut index: HashMap<(&str, Labels), usize> = HashMap::new();
    let mut series: Vec<Recorded> = Vec::new();
    let mut previous: Option<(&str, usize)> = None; // (metric, series)
    each_map(&df, c::LABELS, |entries, same| {
        let Some(((name, ns), (t, v))) = rows.next() else {
            return;
        };
        let name = name.unwrap_or_default();
        let at = match previous.filter(|(m, _)| same && *m == name) {
            Some((_, at)) => at,
            None => {
                let labels = label_set(entries);
                match index.get(&(name, labels.clone())) {
                    Some(at) => *at,
                    None => {
                        let ns = ns.map(str::to_string);
                        series.push(Recorded::new(name.to_string(), ns, labels.clone()));
                        index.insert((name, labels), series.len() - 1);
                        series.len() - 1
                    }
                }
            }
        };
        previous = Some((name, at));
        if let (Some(t), Some(v)) = (t, v) {
            series[at].points.push((t, v));
        }
    })?;
    drop(index);
    for s in &mut series {
        // Stable: points of one instant keep the table's order.
        s.points.sort_by_key(|p| p.0);
    }
    series.sort_by(|a, b| (&a.metric, &a.labels).cmp(&(&b.metric, &b.labels)));
    Ok(series)
}

/// Whether a series belongs to the object an identifier names: a pod by name or name prefix
/// (ITBench's `pod_<name>*` files), a service by name (also without a `-service` suffix), a
/// workload through its pods (`pods`, lowercased) or a `deployment` label, a node by name.
fn is_object(id: &ObjectId, variants: &[String], pods: &[String], s: &Recorded) -> bool {
    let equals_any = |value: &Option<String>, names: &[String]| {
        value
            .as_deref()
            .is_some_and(|v| names.contains(&v.to_lowercase()))
    };
    let pod = || {
        s.pod
            .as_deref()
            .is_some_and(|p| variants.iter().any(|v| p.starts_with(v.as_str())))
    };
    let service = || equals_any(&s.service, variants);
    let workload = || equals_any(&s.pod, pods) || equals_any(&s.deployment, variants);
    let node = || equals_any(&s.node, variants);
    let by_kind = match id.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("pod") => pod(),
        Some("service") | Some("svc") | Some("app") => service(),
        Some("deployment") | Some("statefulset") | Some("daemonset") | Some("replicaset") => {
            workload()
        }
        Some("node") => node(),
        _ => pod() || service() || workload() || node(),
    };
    by_kind
        && id
            .namespace
            .as_ref()
            .is_none_or(|ns| s.namespace.as_ref() == Some(ns))
}

/// The series of a target whose metric `metrics` keeps, with their points inside the window
/// (a series without one is left out).
pub fn load(
    source: &Source,
    target: &Target,
    metrics: Metrics<'_>,
    window: &Window,
    owners: &Owners,
) -> Result<Vec<Series>> {
    let all = source.derived::<AllSeries>()?;
    let mut read = all.0.lock().unwrap_or_else(|e| e.into_inner());
    read.ensure(source, metrics)?;
    let object = match target {
        Target::Object(id) => {
            let pods: Vec<String> = owners
                .pods_of(id.namespace.as_deref(), &id.name)
                .into_iter()
                .map(|(_, p)| p.to_ascii_lowercase())
                .collect();
            Some((id, id.name_variants(), pods))
        }
        Target::Pattern { .. } => None,
    };
    let mut out = Vec::new();
    for s in read.by_metric.values().flatten() {
        if !metrics.keeps(&s.metric) {
            continue;
        }
        let points = s.points_in(window);
        if points.is_empty() {
            continue;
        }
        if let Some((id, variants, pods)) = &object
            && !is_object(id, variants, pods, s)
        {
            continue;
        }
        let ns = s.namespace.clone().unwrap_or_default();
        let Some((kind, object)) =
            object_of(target, &s.pod, &s.service, &s.node, &s.deployment, &ns)
        else {
            continue;
        };
        let deployment = match (kind.as_str(), &s.pod) {
            ("pod", Some(p)) => owners.workload(&ns, "Pod", p),
            _ => object.clone(),
        };
        out.push(Series {
            metric: s.metric.clone(),
            labels: s.labels.clone(),
            namespace: ns,
            object_kind: kind,
            object_name: object,
            deployment,
            pod: s.pod.clone(),
            service: s.service.clone(),
            points: points.to_vec(),
        });
    }
    Ok(out)
}

/// The object a series is reported under, and whether a pattern target keeps it.
fn object_of(
    target: &Target,
    pod: &Option<String>,
    service: &Option<String>,
    node: &Option<String>,
    dep: &Option<String>,
    namespace: &str,
) -> Option<(String, String)> {
    let by_kind = |kind: &str| -> Option<(String, String)> {
        let name = match kind {
            "pod" => pod.clone(),
            "service" => service.clone(),
            "node" => node.clone(),
            "deployment" => dep.clone(),
            _ => None,
        }?;
        Some((kind.to_string(), name))
    };
    let first = || {
        ["pod", "service", "deployment", "node"]
            .iter()
            .find_map(|k| by_kind(k))
            .unwrap_or_else(|| {
                let scope = if namespace.is_empty() {
                    "cluster"
                } else {
                    namespace
                };
                ("cluster".to_string(), scope.to_string())
            })
    };
    match target {
        Target::Object(id) => match id.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
            Some("pod") => by_kind("pod"),
            Some("service") | Some("svc") | Some("app") => by_kind("service"),
            Some("node") => by_kind("node"),
            Some(k) if !k.is_empty() && !["pod", "service", "node"].contains(&k) => {
                Some((k.to_string(), id.name.clone()))
            }
            _ => Some(first()),
        },
        Target::Pattern { kind, names } => {
            let (k, n) = match kind {
                Some(k) => by_kind(k)?,
                None => first(),
            };
            names.is_match(&n).then_some((k, n))
        }
    }
}

/// Each metric family's type as the metadata records it.
#[derive(Debug)]
pub struct MetricTypes(pub BTreeMap<String, String>);

impl Derived for MetricTypes {
    const TABLES: &'static [Table] = &[Table::MetricMetadata];

    fn derive(source: &Source) -> Result<MetricTypes> {
        use schemas::tables::columns::metric_metadata as m;
        let df = collect(
            source
                .scan(Table::MetricMetadata)?
                .select([col(m::METRIC), col(m::TYPE)]),
        )?;
        let names = strings(&df, m::METRIC)?;
        let types = strings(&df, m::TYPE)?;
        Ok(MetricTypes(
            names
                .into_iter()
                .zip(types)
                .filter_map(|(n, t)| Some((n?, t.unwrap_or_default())))
                .collect(),
        ))
    }
}

/// Metric families the metadata calls counters (and histogram or summary parts), with the
/// naming conventions as a fallback (see [`is_counter`]).
pub fn counters(source: &Source) -> Result<Arc<MetricTypes>> {
    source.derived()
}

/// Whether samples of `metric` are cumulative (rates, not levels, carry the signal).
pub fn is_counter(metric: &str, types: &BTreeMap<String, String>) -> bool {
    let family = ["_bucket", "_count", "_sum"]
        .iter()
        .find_map(|s| metric.strip_suffix(s))
        .unwrap_or(metric);
    match types
        .get(metric)
        .or_else(|| types.get(family))
        .map(String::as_str)
    {
        Some("counter") | Some("histogram") | Some("summary") => true,
        Some("gauge") => false,
        _ => {
            metric.ends_with("_total")
                || metric.ends_with("_bucket")
                || metric.ends_with("_count")
                || metric.ends_with("_sum")
        }
    }
}

/// Per-second rates between consecutive samples of a counter, reset-aware (a drop starts the
/// count again from zero), stamped with the later sample's time.
pub fn rates(points: &[(i64, f64)]) -> Vec<(i64, f64)> {
    points
        .windows(2)
        .filter_map(|w| {
            let ((t0, v0), (t1, v1)) = (w[0], w[1]);
            let dt = (t1 - t0) as f64 / 1e9;
            if dt <= 0.0 {
                return None;
            }
            let inc = if v1 >= v0 { v1 - v0 } else { v1 };
            Some((t1, inc / dt))
        })
        .collect()
}

/// How much a counter grew over its points, reset-aware.
pub fn increase(points: &[(i64, f64)]) -> f64 {
    points
        .windows(2)
        .map(|w| {
            if w[1].1 >= w[0].1 {
                w[1].1 - w[0].1
            } else {
                w[1].1
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_become_rates_across_resets() {
        let s = 1_000_000_000;
        let p = [(0, 10.0), (10 * s, 30.0), (20 * s, 5.0)];
        assert_eq!(rates(&p), vec![(10 * s, 2.0), (20 * s, 0.5)]);
        assert_eq!(increase(&p), 25.0);
        let types = BTreeMap::from([("http_requests".to_string(), "counter".to_string())]);
        assert!(is_counter("http_requests", &types));
        assert!(is_counter("x_bucket", &BTreeMap::new()));
        assert!(!is_counter("memory_bytes", &BTreeMap::new()));
    }

    #[test]
    fn patterns_take_a_kind_and_a_glob() {
        let Target::Pattern { kind, names } = Target::pattern("pod/front*").unwrap() else {
            panic!()
        };
        assert_eq!(kind.as_deref(), Some("pod"));
        assert!(names.is_match("frontend-abc"));
        assert!(!names.is_match("cart"));
        assert!(Target::pattern("widget/x").is_err());
    }
}
