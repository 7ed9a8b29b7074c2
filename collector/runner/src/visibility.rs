//! Capture quality: does a dataset show what a problem says must be visible? Each expectation is
//! checked over the dataset's rows (objects, events, logs, metrics, spans, alerts) within the
//! faulty period, and reported with what was found.
//!
//! The rows are checked as they stream into the dataset: a [`Probe`] per expectation keeps only
//! what its verdict needs (counts, flags, the samples of the few series it sums), so a day-long
//! run is checked in the memory of a short one.

use std::collections::BTreeMap;

use problems::Expectation;
use regex::Regex;
use schemas::ground_truth::VisibilityCheck;
use schemas::tables::{
    AlertRow, ChangeType, EventRow, Labels, LogRow, MetricSample, ObjectRow, Row, SpanRow,
};
use serde_json::Value;

/// Names of objects that belong to a service: its workload, ReplicaSets and pods.
fn owned_by(service: &str) -> Regex {
    let s = regex::escape(service);
    Regex::new(&format!(
        "^{s}(-[a-z0-9]{{6,10}}(-[a-z0-9]{{5}})?|-[0-9]+)?$"
    ))
    .expect("valid regex")
}

fn pod_of(service: &str) -> Regex {
    let s = regex::escape(service);
    Regex::new(&format!("^{s}(-[a-z0-9]{{6,10}}-[a-z0-9]{{5}}|-[0-9]+)$")).expect("valid regex")
}

/// Samples at or after the onset, by series.
type Series = BTreeMap<Labels, Vec<(i64, f64)>>;

/// Increase of each series from its first to last sample, counting resets as Prometheus'
/// `increase` does.
fn increases(series: &Series, from: i64) -> BTreeMap<&Labels, f64> {
    series
        .iter()
        .map(|(l, v)| {
            let mut v = v.clone();
            v.sort_by_key(|x| x.0);
            // A series that starts after the onset (a pod created since) counts from zero.
            let mut inc = if v.first().is_some_and(|f| f.0 > from + 20_000_000_000) {
                v[0].1
            } else {
                0.0
            };
            for w in v.windows(2) {
                inc += if w[1].1 >= w[0].1 {
                    w[1].1 - w[0].1
                } else {
                    w[1].1
                };
            }
            (l, inc)
        })
        .collect()
}

fn add_sample(series: &mut Series, m: &MetricSample) {
    if let Some(v) = series.get_mut(&m.labels) {
        v.push((m.time_ns, m.value));
    } else {
        series.insert(m.labels.clone(), vec![(m.time_ns, m.value)]);
    }
}

fn pod_states(o: &Value, init: bool) -> Vec<&Value> {
    let field = if init {
        "initContainerStatuses"
    } else {
        "containerStatuses"
    };
    o["status"][field]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// The histogram metrics a service's latency is read from, in order of preference, with the
/// label that names the service's pods (or the service itself).
const LATENCY_METRICS: [(&str, &str); 3] = [
    ("grpc_server_handling_seconds_bucket", "pod"),
    ("http_request_duration_seconds_bucket", "pod"),
    (
        "traces_span_metrics_duration_milliseconds_bucket",
        "service_name",
    ),
];

/// The request counters a service's error ratio is read from.
const REQUEST_METRICS: [&str; 3] = [
    "grpc_server_handled_total",
    "http_requests_total",
    "traces_span_metrics_calls_total",
];

/// What a probe has seen so far; each expectation uses the fields its verdict needs.
#[derive(Default)]
struct Seen {
    /// Matching rows (spans, events, firing alerts, log lines, Endpoints versions, container
    /// statuses).
    count: usize,
    /// Something an object showed (an empty Endpoints, a pod in the phase).
    in_objects: bool,
    /// Something a metric showed (a zero, the phase, Ready=false).
    in_metrics: bool,
    /// The samples of the series summed by the check (one group per metric it reads).
    series: [Series; 3],
    /// Durations of the service's server spans (latency without histograms).
    durations: Vec<i64>,
    /// The service's server spans and those in error (error ratio without counters).
    server_spans: usize,
    error_spans: usize,
    /// Desired and available replicas by scrape time.
    replicas: BTreeMap<i64, (f64, f64)>,
}

/// One expectation checked over rows as they stream past.
pub struct Probe {
    expectation: Expectation,
    /// The fault onset (ns): only rows at or after it count.
    from: i64,
    /// The pods of the expectation's service (or of `other`, for EndpointsInclude).
    pods: Option<Regex>,
    /// Everything the expectation's service owns (events and alerts name those).
    owned: Option<Regex>,
    /// LogContains' text, lower-cased once.
    needle: String,
    seen: Seen,
}

impl Probe {
    pub fn new(expectation: &Expectation, from: i64) -> Probe {
        use Expectation::*;
        let (pods, owned) = match expectation {
            Restarts { service, .. }
            | PodPhase { service, .. }
            | ContainerWaiting { service, .. }
            | ContainerTerminated { service, .. }
            | LogContains { service, .. }
            | LatencyAbove { service, .. }
            | ErrorRatioAbove { service, .. } => (Some(pod_of(service)), None),
            EndpointsInclude { other, .. } => (Some(pod_of(other)), None),
            MetricIncrease { service, .. } => (service.as_deref().map(pod_of), None),
            Event { service, .. } | AlertFiring { service, .. } => {
                (None, service.as_deref().map(owned_by))
            }
            EndpointsEmpty { .. }
            | ErrorSpans { .. }
            | NodeNotReady { .. }
            | ReplicasUnavailable { .. } => (None, None),
        };
        let needle = match expectation {
            LogContains { text, .. } => text.to_ascii_lowercase(),
            _ => String::new(),
        };
        Probe {
            expectation: expectation.clone(),
            from,
            pods,
            owned,
            needle,
            seen: Seen::default(),
        }
    }

    pub fn observe(&mut self, row: &Row) {
        match row {
            Row::Metric(m) => self.metric(m),
            Row::Object(o) => self.object(o),
            Row::Span(s) => self.span(s),
            Row::Event(e) => self.event(e),
            Row::Alert(a) => self.alert(a),
            Row::Log(l) => self.log(l),
            Row::MetricMeta(_) | Row::Audit(_) => {}
        }
    }

    fn is_pod(&self, name: Option<&String>) -> bool {
        match (&self.pods, name) {
            (Some(re), Some(name)) => re.is_match(name),
            _ => false,
        }
    }

    fn metric(&mut self, m: &MetricSample) {
        use Expectation::*;
        if m.time_ns < self.from {
            return;
        }
        let label = |k: &str| m.labels.get(k);
        let pods = &self.pods;
        let is_pod = |name: Option<&String>| {
            pods.as_ref()
                .zip(name)
                .is_some_and(|(re, name)| re.is_match(name))
        };
        let seen = &mut self.seen;
        match &self.expectation {
            Restarts { .. }
                if m.metric == "kube_pod_container_status_restarts_total"
                    && is_pod(label("pod")) =>
            {
                add_sample(&mut seen.series[0], m);
            }
            EndpointsEmpty { service } => {
                seen.in_metrics |= m.metric == "kube_endpoint_address_available"
                    && label("endpoint") == Some(service)
                    && m.value == 0.0;
            }
            PodPhase { phase, .. }
                if m.metric == "kube_pod_status_phase"
                    && m.value == 1.0
                    && label("phase") == Some(phase)
                    && is_pod(label("pod")) =>
            {
                seen.in_metrics = true;
            }
            MetricIncrease {
                metric,
                service,
                node,
                ..
            } => {
                let by_service = service.is_none()
                    || is_pod(label("pod"))
                    || label("service_name") == service.as_ref()
                    || label("job") == service.as_ref();
                let by_node = node.as_ref().is_none_or(|n| label("node") == Some(n));
                if m.metric == *metric && by_service && by_node {
                    add_sample(&mut seen.series[0], m);
                }
            }
            LatencyAbove { service, .. } => {
                for (i, (name, by)) in LATENCY_METRICS.iter().enumerate() {
                    let of_service = if *by == "pod" {
                        is_pod(label(by))
                    } else {
                        label(by) == Some(service)
                    };
                    if m.metric == *name && of_service {
                        add_sample(&mut seen.series[i], m);
                    }
                }
            }
            ErrorRatioAbove { service, .. } => {
                for (i, name) in REQUEST_METRICS.iter().enumerate() {
                    let of_service = if i < 2 {
                        is_pod(label("pod"))
                    } else {
                        label("service_name") == Some(service)
                    };
                    if m.metric == *name && of_service {
                        add_sample(&mut seen.series[i], m);
                    }
                }
            }
            NodeNotReady { node } => {
                seen.in_metrics |= m.metric == "kube_node_status_condition"
                    && label("node") == Some(node)
                    && label("condition").map(String::as_str) == Some("Ready")
                    && label("status").map(String::as_str) == Some("true")
                    && m.value == 0.0;
            }
            ReplicasUnavailable { service }
                if label("deployment") == Some(service)
                    || label("statefulset") == Some(service) =>
            {
                let e = seen
                    .replicas
                    .entry(m.time_ns)
                    .or_insert((f64::NAN, f64::NAN));
                match m.metric.as_str() {
                    "kube_deployment_spec_replicas" | "kube_statefulset_replicas" => e.0 = m.value,
                    "kube_deployment_status_replicas_available"
                    | "kube_statefulset_status_replicas_ready" => e.1 = m.value,
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, o: &ObjectRow) {
        use Expectation::*;
        if o.observed_ns < self.from {
            return;
        }
        match &self.expectation {
            EndpointsEmpty { service } if o.kind == "Endpoints" && o.name == *service => {
                self.seen.count += 1;
                let v: Value = serde_json::from_str(&o.object).unwrap_or(Value::Null);
                let ready = v["subsets"].as_array().is_some_and(|s| {
                    s.iter()
                        .any(|ss| ss["addresses"].as_array().is_some_and(|a| !a.is_empty()))
                });
                self.seen.in_objects |= !ready || o.change == ChangeType::Deleted;
            }
            EndpointsInclude { service, .. } if o.kind == "Endpoints" && o.name == *service => {
                let v: Value = serde_json::from_str(&o.object).unwrap_or(Value::Null);
                let lists = v["subsets"].as_array().is_some_and(|s| {
                    s.iter()
                        .flat_map(|ss| ss["addresses"].as_array())
                        .flatten()
                        .filter_map(|a| a["targetRef"]["name"].as_str())
                        .any(|p| self.pods.as_ref().is_some_and(|re| re.is_match(p)))
                });
                self.seen.count += usize::from(lists);
            }
            PodPhase { .. } | ContainerWaiting { .. } | ContainerTerminated { .. }
                if o.kind == "Pod" && self.is_pod(Some(&o.name)) =>
            {
                // A version that does not parse shows nothing.
                if let Ok(v) = serde_json::from_str::<Value>(&o.object) {
                    self.pod_version(&v);
                }
            }
            _ => {}
        }
    }

    fn pod_version(&mut self, v: &Value) {
        use Expectation::*;
        match &self.expectation {
            PodPhase { phase, .. } => {
                self.seen.in_objects |= v["status"]["phase"] == phase.as_str();
            }
            ContainerWaiting { reason, init, .. } => {
                self.seen.count += pod_states(v, *init)
                    .iter()
                    .filter(|s| s["state"]["waiting"]["reason"] == reason.as_str())
                    .count();
            }
            ContainerTerminated { reason, .. } => {
                self.seen.count += pod_states(v, false)
                    .iter()
                    .chain(pod_states(v, true).iter())
                    .filter(|s| {
                        s["lastState"]["terminated"]["reason"] == reason.as_str()
                            || s["state"]["terminated"]["reason"] == reason.as_str()
                    })
                    .count();
            }
            _ => {}
        }
    }

    fn span(&mut self, s: &SpanRow) {
        use Expectation::*;
        if s.start_ns < self.from {
            return;
        }
        match &self.expectation {
            ErrorSpans { service, peer } if s.service == *service && s.status_code == "error" => {
                let to_peer = match peer {
                    None => true,
                    Some(p) => {
                        s.attributes
                            .get("net.peer.name")
                            .is_some_and(|h| h.split('.').next() == Some(p.as_str()))
                            || s.status_message
                                .as_deref()
                                .is_some_and(|m| m.contains(p.as_str()))
                            || s.attributes
                                .get("db.name")
                                .is_some_and(|d| p.ends_with(d.as_str()))
                    }
                };
                self.seen.count += usize::from(to_peer);
            }
            LatencyAbove { service, .. } if s.service == *service && s.kind == "server" => {
                self.seen.durations.push(s.duration_ns);
            }
            ErrorRatioAbove { service, .. } if s.service == *service && s.kind == "server" => {
                self.seen.server_spans += 1;
                self.seen.error_spans += usize::from(s.status_code == "error");
            }
            _ => {}
        }
    }

    fn event(&mut self, ev: &EventRow) {
        let Expectation::Event {
            reason,
            service,
            node,
            r#type,
        } = &self.expectation
        else {
            return;
        };
        if ev.reason != *reason || ev.event_type != *r#type || ev.time_ns < self.from {
            return;
        }
        let by_svc = self
            .owned
            .as_ref()
            .is_none_or(|re| re.is_match(&ev.involved_name));
        let by_node = node.as_ref().is_none_or(|n| {
            ev.involved_name == *n || ev.source_host.as_deref() == Some(n.as_str())
        });
        let matches = if service.is_some() && node.is_some() {
            by_svc || by_node
        } else {
            by_svc && by_node
        };
        self.seen.count += usize::from(matches);
    }

    fn alert(&mut self, a: &AlertRow) {
        let Expectation::AlertFiring { alert, service } = &self.expectation else {
            return;
        };
        if a.alertname != *alert || a.state != "firing" || a.time_ns < self.from {
            return;
        }
        let matches = match (&self.owned, service) {
            (Some(re), Some(s)) => {
                a.labels.get("service") == Some(s)
                    || a.labels.get("deployment") == Some(s)
                    || a.labels.get("statefulset") == Some(s)
                    || a.labels.get("pod").is_some_and(|p| re.is_match(p))
            }
            _ => true,
        };
        self.seen.count += usize::from(matches);
    }

    fn log(&mut self, l: &LogRow) {
        if let Expectation::LogContains { .. } = &self.expectation
            && l.time_ns >= self.from
            && self.is_pod(Some(&l.pod))
            && l.line.to_ascii_lowercase().contains(&self.needle)
        {
            self.seen.count += 1;
        }
    }

    /// The verdict on everything observed.
    pub fn finish(self) -> VisibilityCheck {
        let (passed, observed) = self.verdict();
        VisibilityCheck {
            expectation: self.expectation.to_string(),
            passed,
            observed,
        }
    }

    fn verdict(&self) -> (bool, String) {
        use Expectation::*;
        let seen = &self.seen;
        let n = seen.count;
        let summed = || -> f64 { increases(&seen.series[0], self.from).values().sum() };
        match &self.expectation {
            Restarts { min, .. } => {
                let total = summed();
                (
                    total >= f64::from(*min),
                    format!("restarts increased by {total}"),
                )
            }
            EndpointsEmpty { .. } => {
                let empty = seen.in_objects || seen.in_metrics;
                (
                    empty,
                    format!("{n} Endpoints versions after onset; empty={empty}"),
                )
            }
            EndpointsInclude { other, .. } => (
                n > 0,
                format!("{n} Endpoints versions listing {other} pods"),
            ),
            ErrorSpans { .. } => (n > 0, format!("{n} error spans")),
            Event { .. } => (n > 0, format!("{n} matching events")),
            AlertFiring { .. } => (n > 0, format!("{n} firing observations")),
            PodPhase { phase, .. } => {
                let shown = seen.in_metrics || seen.in_objects;
                (shown, format!("phase {phase} seen: {shown}"))
            }
            ContainerWaiting { reason, .. } => {
                (n > 0, format!("{n} pod versions waiting with {reason}"))
            }
            ContainerTerminated { reason, .. } => {
                (n > 0, format!("{n} pod versions terminated with {reason}"))
            }
            LogContains { .. } => (n > 0, format!("{n} matching lines")),
            MetricIncrease { min, .. } => {
                let inc = summed();
                (inc >= *min, format!("increase {inc:.1}"))
            }
            LatencyAbove { p99, .. } => {
                let p = self.latency_p99();
                (
                    p.is_some_and(|x| x > p99.as_secs_f64()),
                    format!(
                        "p99 {}",
                        p.map(|x| format!("{x:.3}s"))
                            .unwrap_or_else(|| "unknown".into())
                    ),
                )
            }
            ErrorRatioAbove { ratio, .. } => {
                let r = self.error_ratio();
                (
                    r.is_some_and(|x| x > *ratio),
                    format!(
                        "error ratio {}",
                        r.map(|x| format!("{x:.3}"))
                            .unwrap_or_else(|| "unknown".into())
                    ),
                )
            }
            NodeNotReady { .. } => (
                seen.in_metrics,
                format!("Ready=false seen: {}", seen.in_metrics),
            ),
            ReplicasUnavailable { .. } => {
                let short = seen
                    .replicas
                    .values()
                    .filter(|(want, have)| have < want)
                    .count();
                (short > 0, format!("{short} scrapes short of replicas"))
            }
        }
    }

    /// p99 of the service's server latency over the faulty period, from its histogram metrics
    /// (or, failing those, its server spans).
    fn latency_p99(&self) -> Option<f64> {
        let mut buckets: BTreeMap<String, f64> = BTreeMap::new();
        let mut scale = 1.0;
        for (i, (name, _)) in LATENCY_METRICS.iter().enumerate() {
            for (l, v) in increases(&self.seen.series[i], self.from) {
                if let Some(le) = l.get("le") {
                    *buckets.entry(le.clone()).or_default() += v;
                }
            }
            if name.contains("milliseconds") && !buckets.is_empty() {
                scale = 0.001;
            }
            if !buckets.is_empty() {
                break;
            }
        }
        if !buckets.is_empty() {
            return bucket_p99(&buckets).map(|p| p * scale);
        }
        let mut d = self.seen.durations.clone();
        if d.is_empty() {
            return None;
        }
        d.sort_unstable();
        Some(d[(d.len() * 99 / 100).min(d.len() - 1)] as f64 / 1e9)
    }

    /// Share of the service's requests that failed over the faulty period.
    fn error_ratio(&self) -> Option<f64> {
        let failed: [fn(&Labels) -> bool; 3] = [
            |l| l.get("grpc_code").map(String::as_str) != Some("OK"),
            |l| l.get("code").is_some_and(|c| c.starts_with('5')),
            |l| l.get("status_code").map(String::as_str) == Some("STATUS_CODE_ERROR"),
        ];
        let mut total = 0.0;
        let mut errors = 0.0;
        for (series, failed) in self.seen.series.iter().zip(failed) {
            for (l, v) in increases(series, self.from) {
                total += v;
                if failed(l) {
                    errors += v;
                }
            }
        }
        if total > 0.0 {
            return Some(errors / total);
        }
        let spans = self.seen.server_spans;
        (spans > 0).then(|| self.seen.error_spans as f64 / spans as f64)
    }
}

/// The p99 of cumulative histogram buckets (by their `le`).
fn bucket_p99(buckets: &BTreeMap<String, f64>) -> Option<f64> {
    let mut bs: Vec<(f64, f64)> = buckets
        .iter()
        .map(|(le, c)| {
            (
                if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap_or(f64::INFINITY)
                },
                *c,
            )
        })
        .collect();
    bs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = bs.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let target = total * 0.99;
    let top = bs
        .iter()
        .rev()
        .find(|b| b.0.is_finite())
        .map(|b| b.0)
        .unwrap_or(10.0);
    Some(
        bs.iter()
            .find(|(_, c)| *c >= target)
            .map(|(le, _)| if le.is_finite() { *le } else { top })
            .unwrap_or(top),
    )
}
