//! Which series belong to an object. ITBench keeps one file per pod or service and finds an
//! object's metrics by file name; here a series belongs to a pod by its `pod` label, to a
//! service by its `service_name` / `service` / `destination_canonical_service` label, to a
//! workload through its pods' owners (or a `deployment` label), to a node by `node`. The scan,
//! the window, the metric names and the object are all filters polars pushes into the Parquet
//! read; the matching rows come back grouped into series.

use std::collections::{BTreeMap, HashMap};

use polars::prelude::*;
use regex::Regex;
use schemas::tables::columns::metrics as c;
use schemas::tables::{Labels, Table};

use crate::frame::{collect, floats, ints, label, labels, strings};
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

/// The service a series is about.
fn service_label() -> Expr {
    label(c::LABELS, "service_name")
        .fill_null(label(c::LABELS, "destination_canonical_service"))
        .fill_null(label(c::LABELS, "service"))
}

fn node_label() -> Expr {
    label(c::LABELS, "node").fill_null(label(c::LABELS, "kubernetes_io_hostname"))
}

fn any_of(exprs: Vec<Expr>) -> Expr {
    exprs
        .into_iter()
        .reduce(|a, b| a.or(b))
        .unwrap_or(lit(false))
}

fn equals_any(column: &str, names: &[String]) -> Expr {
    any_of(
        names
            .iter()
            .map(|n| {
                col(column)
                    .str()
                    .to_lowercase()
                    .eq(lit(n.to_ascii_lowercase()))
            })
            .collect(),
    )
}

/// The polars predicate for an object identifier over the label columns `_pod`, `_svc`,
/// `_node`, `_dep`: a pod by name or name prefix (ITBench's `pod_<name>*` files), a service by
/// name (also without a `-service` suffix), a workload through its pods.
fn object_predicate(id: &ObjectId, owners: &Owners) -> Expr {
    let variants = id.name_variants();
    let pods: Vec<String> = owners
        .pods_of(id.namespace.as_deref(), &id.name)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    let pod = any_of(
        variants
            .iter()
            .map(|v| col("_pod").str().starts_with(lit(v.clone())))
            .collect(),
    );
    let service = equals_any("_svc", &variants);
    let workload = equals_any("_pod", &pods).or(equals_any("_dep", &variants));
    let node = equals_any("_node", &variants);
    let by_kind = match id.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("pod") => pod,
        Some("service") | Some("svc") | Some("app") => service,
        Some("deployment") | Some("statefulset") | Some("daemonset") | Some("replicaset") => {
            workload
        }
        Some("node") => node,
        _ => pod.or(service).or(workload).or(node),
    };
    match &id.namespace {
        Some(ns) => by_kind.and(col(c::NAMESPACE).eq(lit(ns.clone()))),
        None => by_kind,
    }
}

/// Loads the series of a target whose metric passes `metrics` (a predicate on the `metric`
/// column) inside the window.
pub fn load(
    source: &Source,
    target: &Target,
    metrics: Option<Expr>,
    window: &Window,
    owners: &Owners,
) -> Result<Vec<Series>> {
    let mut lf = source.scan(Table::Metrics)?;
    if let Some(pred) = window.predicate(c::TIME) {
        lf = lf.filter(pred);
    }
    if let Some(pred) = metrics {
        lf = lf.filter(pred);
    }
    lf = lf.with_columns([
        label(c::LABELS, "pod").alias("_pod"),
        service_label().alias("_svc"),
        node_label().alias("_node"),
        label(c::LABELS, "deployment").alias("_dep"),
    ]);
    if let Target::Object(id) = target {
        lf = lf.filter(object_predicate(id, owners));
    }
    let df = collect(lf.select([
        col(c::METRIC),
        col(c::NAMESPACE),
        col(c::LABELS),
        col(c::TIME).cast(DataType::Int64).alias("_t"),
        col(c::VALUE),
        col("_pod"),
        col("_svc"),
        col("_node"),
        col("_dep"),
    ]))?;
    let metric = strings(&df, c::METRIC)?;
    let namespace = strings(&df, c::NAMESPACE)?;
    let label_sets = labels(&df, c::LABELS)?;
    let times = ints(&df, "_t")?;
    let values = floats(&df, c::VALUE)?;
    let pods = strings(&df, "_pod")?;
    let services = strings(&df, "_svc")?;
    let nodes = strings(&df, "_node")?;
    let deps = strings(&df, "_dep")?;
    let mut index: HashMap<(String, Labels), usize> = HashMap::new();
    let mut out: Vec<Series> = Vec::new();
    for i in 0..df.height() {
        let name = metric[i].clone().unwrap_or_default();
        let key = (name.clone(), label_sets[i].clone());
        let at = match index.get(&key) {
            Some(at) => *at,
            None => {
                let ns = namespace[i].clone().unwrap_or_default();
                let Some((kind, object)) =
                    object_of(target, &pods[i], &services[i], &nodes[i], &deps[i], &ns)
                else {
                    continue;
                };
                let deployment = match (kind.as_str(), &pods[i]) {
                    ("pod", Some(p)) => owners.workload(&ns, "Pod", p),
                    _ => object.clone(),
                };
                out.push(Series {
                    metric: name,
                    labels: key.1.clone(),
                    namespace: ns,
                    object_kind: kind,
                    object_name: object,
                    deployment,
                    pod: pods[i].clone(),
                    service: services[i].clone(),
                    points: Vec::new(),
                });
                index.insert(key, out.len() - 1);
                out.len() - 1
            }
        };
        if let (Some(t), Some(v)) = (times[i], values[i]) {
            out[at].points.push((t, v));
        }
    }
    for s in &mut out {
        s.points.sort_by_key(|p| p.0);
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

/// Metric families the metadata calls counters (and histogram or summary parts), with the
/// naming conventions as a fallback.
pub fn counters(source: &Source) -> Result<BTreeMap<String, String>> {
    use schemas::tables::columns::metric_metadata as m;
    let df = collect(
        source
            .scan(Table::MetricMetadata)?
            .select([col(m::METRIC), col(m::TYPE)]),
    )?;
    let names = strings(&df, m::METRIC)?;
    let types = strings(&df, m::TYPE)?;
    Ok(names
        .into_iter()
        .zip(types)
        .filter_map(|(n, t)| Some((n?, t.unwrap_or_default())))
        .collect())
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
