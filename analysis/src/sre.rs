//! What an SRE asks next that ITBench's tools do not answer: when each service's error rate or
//! latency changed (a change point per service, from its spans minute by minute), and which
//! containers restarted or were OOM-killed when (from the pods' recorded statuses and the
//! events beside them).

use std::collections::BTreeMap;

use polars::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::frame::{collect, ints, strings, strings_or_empty};
use crate::owners::Owners;
use crate::params::{ObjectId, Window, parse_duration, served};
use crate::traces::{self, percentile};
use crate::{Result, Source};
use schemas::tables::Table;

pub const CHANGE_POINTS: &str = "When each service's error rate and p99 latency changed: spans bucketed per minute (a call that never reached its service counts for that service), and per service the instant that best splits each series into a before and an after, with both levels (a change is at least a point of error rate, or a quarter and a millisecond of p99). Services that changed, the largest change first; the others listed as unchanged. Example: service_change_points(). Example: service_name='geo', bucket='30s'.";

pub const RESTARTS: &str = "Container restarts and OOM kills over time: from each pod's recorded status (restart count, last termination reason and exit code) and the events beside them (Killing, BackOff, OOMKilling, Unhealthy, Evicted); a timeline and a per-pod summary sorted by restarts. Example: restart_timeline(k8_object='otel-demo/Deployment/cart').";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ChangeParams {
    /// Only this service.
    #[serde(default)]
    pub service_name: Option<String>,
    /// Bucket width: 1m (default), 30s, 5m.
    #[serde(default)]
    pub bucket: Option<String>,
    /// ISO 8601 start of the window.
    #[serde(default)]
    pub start_time: Option<String>,
    /// ISO 8601 end of the window.
    #[serde(default)]
    pub end_time: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RestartParams {
    /// A pod or workload: 'namespace/kind/name', 'kind/name' or 'name'; all pods when absent.
    #[serde(default)]
    pub k8_object: Option<String>,
    /// ISO 8601 start of the window.
    #[serde(default)]
    pub start_time: Option<String>,
    /// ISO 8601 end of the window.
    #[serde(default)]
    pub end_time: Option<String>,
}

#[derive(Default, Clone)]
struct Bucket {
    requests: u64,
    errors: u64,
    latencies: Vec<f64>,
}

/// The split of a series that best separates a before from an after (each side at least two
/// points): (index of the first "after" point, mean before, mean after).
pub fn change_point(values: &[f64]) -> Option<(usize, f64, f64)> {
    if values.len() < 4 {
        return None;
    }
    let total: f64 = values.iter().sum();
    let mut before = 0.0;
    let mut best: Option<(usize, f64, f64, f64)> = None;
    for k in 1..values.len() {
        before += values[k - 1];
        if k < 2 || values.len() - k < 2 {
            continue;
        }
        let (n1, n2) = (k as f64, (values.len() - k) as f64);
        let (m1, m2) = (before / n1, (total - before) / n2);
        // Difference of means weighted by how balanced the split is (a CUSUM statistic).
        let score = (m2 - m1).abs() * (n1 * n2 / (n1 + n2)).sqrt();
        if best.is_none_or(|b| score > b.3) {
            best = Some((k, m1, m2, score));
        }
    }
    best.map(|(k, a, b, _)| (k, a, b))
}

fn round(x: f64, digits: i32) -> f64 {
    let s = 10f64.powi(digits);
    (x * s).round() / s
}

pub fn change_points(source: &Source, p: ChangeParams) -> Result<Value> {
    let reading = source.reading();
    let window = Window::parse(p.start_time.as_deref(), p.end_time.as_deref(), &reading)?;
    let width = parse_duration(p.bucket.as_deref().unwrap_or("1m"), "bucket")?;
    let all = traces::load(source)?;
    let spans = all.within(window.start, window.end.map(|e| e + 1));
    let mut series: BTreeMap<String, BTreeMap<i64, Bucket>> = BTreeMap::new();
    for trace in traces::each_trace(&spans) {
        for (s, hop) in trace.spans.iter().zip(&trace.hop_service) {
            let own = matches!(&*s.kind, "server" | "consumer") && *hop == s.service;
            if !own && *hop == s.service {
                continue;
            }
            if p.service_name.as_deref().is_some_and(|n| n != &**hop) {
                continue;
            }
            let b = series
                .entry(hop.to_string())
                .or_default()
                .entry(s.start.div_euclid(width))
                .or_default();
            b.requests += 1;
            b.errors += u64::from(s.error);
            b.latencies.push(s.duration_ms);
        }
    }
    let mut out: Vec<(f64, Value)> = Vec::new();
    let mut unchanged: Vec<String> = Vec::new();
    for (service, buckets) in &series {
        let times: Vec<i64> = buckets.keys().map(|k| k * width).collect();
        let errors: Vec<f64> = buckets
            .values()
            .map(|b| b.errors as f64 * 100.0 / b.requests.max(1) as f64)
            .collect();
        let p99: Vec<f64> = buckets
            .values()
            .map(|b| percentile(&b.latencies, 0.99))
            .collect();
        let requests: u64 = buckets.values().map(|b| b.requests).sum();
        let describe = |cp: Option<(usize, f64, f64)>, unit: &str| {
            cp.map(|(k, a, b)| json!({"changed_at": served(&reading, times[k]), "before": round(a, 2), "after": round(b, 2), "unit": unit}))
        };
        // A split is a change only past these: a point of error rate; a quarter and a
        // millisecond of p99.
        let err_cp = change_point(&errors).filter(|(_, a, b)| (b - a).abs() >= 1.0);
        let lat_cp = change_point(&p99).filter(|(_, a, b)| {
            let (lo, hi) = (a.min(*b), a.max(*b));
            hi - lo >= 1.0 && hi >= lo * 1.25
        });
        if err_cp.is_none() && lat_cp.is_none() {
            unchanged.push(service.clone());
            continue;
        }
        // How much changed, comparably across services: error-rate points, and the latency
        // ratio above 1 counted in tens of percent.
        let err_size = err_cp.map_or(0.0, |(_, a, b)| (b - a).abs());
        let lat_size = lat_cp.map_or(0.0, |(_, a, b)| {
            let (lo, hi) = (a.min(b), a.max(b));
            if lo > 0.0 {
                (hi / lo - 1.0) * 10.0
            } else if hi > 0.0 {
                100.0
            } else {
                0.0
            }
        });
        out.push((
            err_size.max(lat_size),
            json!({
                "service": service,
                "requests": requests,
                "buckets": buckets.len(),
                "error_rate_pct": describe(err_cp, "%"),
                "latency_p99_ms": describe(lat_cp, "ms"),
            }),
        ));
    }
    out.sort_by(|a, b| b.0.total_cmp(&a.0));
    Ok(json!({
        "bucket": p.bucket.unwrap_or_else(|| "1m".into()),
        "services": out.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        "unchanged": unchanged,
    }))
}

/// One entry of the timeline.
fn entry(
    reading: &schemas::time::Reading,
    t: i64,
    pod: &str,
    container: Option<&str>,
    what: &str,
    detail: String,
) -> (i64, Value) {
    (
        t,
        json!({"time": served(reading, t), "pod": pod, "container": container, "what": what, "detail": detail}),
    )
}

pub fn restarts(source: &Source, p: RestartParams) -> Result<Value> {
    let reading = source.reading();
    let window = Window::parse(p.start_time.as_deref(), p.end_time.as_deref(), &reading)?;
    let owners = Owners::load(source)?;
    let id = p
        .k8_object
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .map(|s| ObjectId::parse(s, "k8_object"))
        .transpose()?;
    let pod_filter: Option<Vec<String>> =
        id.as_ref().map(
            |id| match id.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
                Some("pod") => vec![id.name.clone()],
                _ => owners
                    .pods_of(id.namespace.as_deref(), &id.name)
                    .into_iter()
                    .map(|(_, p)| p)
                    .collect(),
            },
        );
    let keep = |pod: &str| {
        pod_filter
            .as_ref()
            .is_none_or(|pods| pods.iter().any(|p| p == pod))
    };
    let all_pods = pod_versions(source)?;
    let mut timeline: Vec<(i64, Value)> = Vec::new();
    let mut summary: BTreeMap<(String, String), (u64, u64, String)> = BTreeMap::new();
    for ((ns, pod), versions) in &all_pods {
        if !keep(pod) {
            continue;
        }
        let mut last: BTreeMap<String, i64> = BTreeMap::new();
        for (t, body) in versions {
            let Ok(v) = serde_json::from_str::<Value>(body) else {
                continue;
            };
            for cs in v["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let name = cs["name"].as_str().unwrap_or_default().to_string();
                let count = cs["restartCount"].as_i64().unwrap_or(0);
                let before = last.insert(name.clone(), count).unwrap_or(0);
                if count <= before || !window.contains(*t) {
                    continue;
                }
                let term = &cs["lastState"]["terminated"];
                let reason = term["reason"].as_str().unwrap_or("unknown").to_string();
                let at = term["finishedAt"]
                    .as_str()
                    .and_then(schemas::time::parse_rfc3339)
                    .unwrap_or(*t);
                let what = if reason == "OOMKilled" {
                    "oom_killed"
                } else {
                    "restarted"
                };
                let detail = format!(
                    "restart {count}, reason {reason}, exit code {}",
                    term["exitCode"]
                        .as_i64()
                        .map_or("?".into(), |c| c.to_string())
                );
                timeline.push(entry(&reading, at, pod, Some(&name), what, detail));
                let s = summary.entry((ns.clone(), pod.clone())).or_default();
                s.0 += (count - before) as u64;
                s.1 += u64::from(reason == "OOMKilled");
                s.2 = reason;
            }
        }
    }
    for (t, ns, pod, reason, message) in pod_events(source, &window)? {
        if keep(&pod) {
            timeline.push(entry(
                &reading,
                t,
                &pod,
                None,
                &format!("event:{reason}"),
                message,
            ));
            summary.entry((ns, pod)).or_default();
        }
    }
    timeline.sort_by_key(|e| e.0);
    let mut pods: Vec<Value> = summary
        .into_iter()
        .map(|((ns, pod), (restarts, ooms, reason))| {
            json!({"pod": pod, "namespace": ns, "workload": owners.workload(&ns, "Pod", &pod),
                   "restarts": restarts, "oom_kills": ooms, "last_reason": (!reason.is_empty()).then_some(reason)})
        })
        .collect();
    pods.sort_by(|a, b| {
        b["restarts"]
            .as_u64()
            .cmp(&a["restarts"].as_u64())
            .then(a["pod"].as_str().cmp(&b["pod"].as_str()))
    });
    Ok(json!({
        "pods": pods,
        "timeline": timeline.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
    }))
}

/// Recorded versions per Pod: (namespace, name) → (observed, object JSON), in time order.
type PodVersions = BTreeMap<(String, String), Vec<(i64, String)>>;

/// Every recorded version of every Pod.
fn pod_versions(source: &Source) -> Result<PodVersions> {
    use schemas::tables::columns::objects as c;
    let df = collect(
        source
            .scan(Table::Objects)?
            .filter(col(c::KIND).eq(lit("Pod")))
            .select([
                col(c::NAMESPACE),
                col(c::NAME),
                col(c::OBSERVED).cast(DataType::Int64).alias("_t"),
                col(c::OBJECT),
            ]),
    )?;
    let ns = strings(&df, c::NAMESPACE)?;
    let names = strings_or_empty(&df, c::NAME)?;
    let times = ints(&df, "_t")?;
    let bodies = strings_or_empty(&df, c::OBJECT)?;
    let mut out = PodVersions::new();
    for i in 0..df.height() {
        out.entry((ns[i].clone().unwrap_or_default(), names[i].clone()))
            .or_default()
            .push((times[i].unwrap_or(0), bodies[i].clone()));
    }
    for v in out.values_mut() {
        v.sort_by_key(|x| x.0);
    }
    Ok(out)
}

/// A Pod event: (time, namespace, pod, reason, message).
type PodEvent = (i64, String, String, String, String);

/// Pod events that go with restarts.
fn pod_events(source: &Source, window: &Window) -> Result<Vec<PodEvent>> {
    use schemas::tables::columns::events as c;
    let reasons = [
        "Killing",
        "BackOff",
        "OOMKilling",
        "Unhealthy",
        "Evicted",
        "Failed",
    ];
    let mut lf = source
        .scan(Table::Events)?
        .filter(col(c::INVOLVED_KIND).eq(lit("Pod")));
    lf = lf.filter(
        reasons
            .iter()
            .map(|r| col(c::REASON).eq(lit(*r)))
            .reduce(|a, b| a.or(b))
            .expect("reasons"),
    );
    if let Some(pred) = window.predicate(c::TIME) {
        lf = lf.filter(pred);
    }
    let df = collect(lf.select([
        col(c::TIME).cast(DataType::Int64).alias("_t"),
        col(c::NAMESPACE),
        col(c::INVOLVED_NAME),
        col(c::REASON),
        col(c::MESSAGE),
    ]))?;
    let t = ints(&df, "_t")?;
    let ns = strings_or_empty(&df, c::NAMESPACE)?;
    let pod = strings_or_empty(&df, c::INVOLVED_NAME)?;
    let reason = strings_or_empty(&df, c::REASON)?;
    let message = strings_or_empty(&df, c::MESSAGE)?;
    Ok((0..df.height())
        .map(|i| {
            (
                t[i].unwrap_or(0),
                ns[i].clone(),
                pod[i].clone(),
                reason[i].clone(),
                message[i].clone(),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_found_where_it_happens() {
        let v = [0.0, 0.0, 1.0, 0.0, 0.0, 90.0, 100.0, 95.0, 100.0];
        let (k, before, after) = change_point(&v).unwrap();
        assert_eq!(k, 5);
        assert!(before < 1.0 && after > 90.0);
        assert_eq!(change_point(&[1.0, 2.0, 3.0]), None);
    }
}
