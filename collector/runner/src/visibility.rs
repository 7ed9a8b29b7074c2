//! Capture quality: does a dataset show what a problem says must be visible? Each expectation is
//! checked over the dataset's own tables (objects, events, logs, metrics, spans, alerts) within
//! the faulty period, and reported with what was found.

use std::collections::BTreeMap;

use problems::Expectation;
use regex::Regex;
use schemas::ground_truth::VisibilityCheck;
use schemas::tables::{Labels, Row};
use serde_json::Value;

/// The tables of a dataset, as rows.
#[derive(Debug, Default)]
pub struct Tables {
    pub objects: Vec<schemas::tables::ObjectRow>,
    pub events: Vec<schemas::tables::EventRow>,
    pub logs: Vec<schemas::tables::LogRow>,
    pub metrics: Vec<schemas::tables::MetricSample>,
    pub spans: Vec<schemas::tables::SpanRow>,
    pub alerts: Vec<schemas::tables::AlertRow>,
}

impl Tables {
    pub fn from_rows(rows: impl IntoIterator<Item = Row>) -> Tables {
        let mut t = Tables::default();
        for r in rows {
            match r {
                Row::Object(o) => t.objects.push(o),
                Row::Event(e) => t.events.push(e),
                Row::Log(l) => t.logs.push(l),
                Row::Metric(m) => t.metrics.push(m),
                Row::Span(s) => t.spans.push(s),
                Row::Alert(a) => t.alerts.push(a),
                // Metadata and request records say nothing of what an agent can see.
                Row::MetricMeta(_) | Row::Audit(_) => {}
            }
        }
        t
    }
}

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

/// Increase of each series (by labels) from its first to last sample at or after `from`,
/// counting resets as Prometheus' `increase` does.
fn increases<'a>(
    samples: impl Iterator<Item = &'a schemas::tables::MetricSample>,
    from: i64,
) -> BTreeMap<&'a Labels, f64> {
    let mut series: BTreeMap<&Labels, Vec<(i64, f64)>> = BTreeMap::new();
    for s in samples.filter(|s| s.time_ns >= from) {
        series
            .entry(&s.labels)
            .or_default()
            .push((s.time_ns, s.value));
    }
    series
        .into_iter()
        .map(|(l, mut v)| {
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

/// Every recorded version of a pod whose name `re` matches, observed at or after `from`, parsed
/// (a version that does not parse shows nothing).
fn pod_versions<'a>(t: &'a Tables, re: &'a Regex, from: i64) -> impl Iterator<Item = Value> + 'a {
    t.objects
        .iter()
        .filter(move |o| o.kind == "Pod" && o.observed_ns >= from && re.is_match(&o.name))
        .filter_map(|o| serde_json::from_str(&o.object).ok())
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

/// Checks one expectation; `from` is the fault onset (ns).
pub fn check(t: &Tables, e: &Expectation, from: i64) -> VisibilityCheck {
    let (passed, observed) = evaluate(t, e, from);
    VisibilityCheck {
        expectation: e.to_string(),
        passed,
        observed,
    }
}

fn evaluate(t: &Tables, e: &Expectation, from: i64) -> (bool, String) {
    use Expectation::*;
    match e {
        Restarts { service, min } => {
            let re = pod_of(service);
            let inc: f64 = increases(
                t.metrics.iter().filter(|m| {
                    m.metric == "kube_pod_container_status_restarts_total"
                        && m.labels.get("pod").is_some_and(|p| re.is_match(p))
                }),
                from,
            )
            .values()
            .sum();
            let total = inc;
            (
                total >= f64::from(*min),
                format!("restarts increased by {total}"),
            )
        }
        EndpointsEmpty { service } => {
            let mut seen_empty = false;
            let mut versions = 0;
            for o in t
                .objects
                .iter()
                .filter(|o| o.kind == "Endpoints" && o.name == *service && o.observed_ns >= from)
            {
                versions += 1;
                let v: Value = serde_json::from_str(&o.object).unwrap_or(Value::Null);
                let ready = v["subsets"].as_array().is_some_and(|s| {
                    s.iter()
                        .any(|ss| ss["addresses"].as_array().is_some_and(|a| !a.is_empty()))
                });
                if !ready || o.change == schemas::tables::ChangeType::Deleted {
                    seen_empty = true;
                }
            }
            let metric_zero = t.metrics.iter().any(|m| {
                m.metric == "kube_endpoint_address_available"
                    && m.time_ns >= from
                    && m.labels.get("endpoint") == Some(service)
                    && m.value == 0.0
            });
            (
                seen_empty || metric_zero,
                format!(
                    "{versions} Endpoints versions after onset; empty={}",
                    seen_empty || metric_zero
                ),
            )
        }
        EndpointsInclude { service, other } => {
            let re = pod_of(other);
            let n = t
                .objects
                .iter()
                .filter(|o| o.kind == "Endpoints" && o.name == *service && o.observed_ns >= from)
                .filter(|o| {
                    let v: Value = serde_json::from_str(&o.object).unwrap_or(Value::Null);
                    v["subsets"].as_array().is_some_and(|s| {
                        s.iter()
                            .flat_map(|ss| ss["addresses"].as_array())
                            .flatten()
                            .any(|a| {
                                a["targetRef"]["name"]
                                    .as_str()
                                    .is_some_and(|p| re.is_match(p))
                            })
                    })
                })
                .count();
            (
                n > 0,
                format!("{n} Endpoints versions listing {other} pods"),
            )
        }
        ErrorSpans { service, peer } => {
            let n = t
                .spans
                .iter()
                .filter(|s| s.service == *service && s.status_code == "error" && s.start_ns >= from)
                .filter(|s| match peer {
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
                })
                .count();
            (n > 0, format!("{n} error spans"))
        }
        Event {
            reason,
            service,
            node,
            r#type,
        } => {
            let svc_re = service.as_ref().map(|s| owned_by(s));
            let n = t
                .events
                .iter()
                .filter(|ev| ev.reason == *reason && ev.event_type == *r#type && ev.time_ns >= from)
                .filter(|ev| {
                    let by_svc = svc_re
                        .as_ref()
                        .is_none_or(|re| re.is_match(&ev.involved_name));
                    let by_node = node.as_ref().is_none_or(|n| {
                        ev.involved_name == *n || ev.source_host.as_deref() == Some(n.as_str())
                    });
                    if service.is_some() && node.is_some() {
                        by_svc || by_node
                    } else {
                        by_svc && by_node
                    }
                })
                .count();
            (n > 0, format!("{n} matching events"))
        }
        AlertFiring { alert, service } => {
            let re = service.as_ref().map(|s| owned_by(s));
            let n = t
                .alerts
                .iter()
                .filter(|a| a.alertname == *alert && a.state == "firing" && a.time_ns >= from)
                .filter(|a| match (&re, service) {
                    (Some(re), Some(s)) => {
                        a.labels.get("service") == Some(s)
                            || a.labels.get("deployment") == Some(s)
                            || a.labels.get("statefulset") == Some(s)
                            || a.labels.get("pod").is_some_and(|p| re.is_match(p))
                    }
                    _ => true,
                })
                .count();
            (n > 0, format!("{n} firing observations"))
        }
        PodPhase { service, phase } => {
            let re = pod_of(service);
            let metric = t.metrics.iter().any(|m| {
                m.metric == "kube_pod_status_phase"
                    && m.time_ns >= from
                    && m.value == 1.0
                    && m.labels.get("phase") == Some(phase)
                    && m.labels.get("pod").is_some_and(|p| re.is_match(p))
            });
            let object = pod_versions(t, &re, from).any(|v| v["status"]["phase"] == phase.as_str());
            (
                metric || object,
                format!("phase {phase} seen: {}", metric || object),
            )
        }
        ContainerWaiting {
            service,
            reason,
            init,
        } => {
            let re = pod_of(service);
            let n: usize = pod_versions(t, &re, from)
                .map(|v| {
                    pod_states(&v, *init)
                        .iter()
                        .filter(|s| s["state"]["waiting"]["reason"] == reason.as_str())
                        .count()
                })
                .sum();
            (n > 0, format!("{n} pod versions waiting with {reason}"))
        }
        ContainerTerminated { service, reason } => {
            let re = pod_of(service);
            let n: usize = pod_versions(t, &re, from)
                .map(|v| {
                    pod_states(&v, false)
                        .iter()
                        .chain(pod_states(&v, true).iter())
                        .filter(|s| {
                            s["lastState"]["terminated"]["reason"] == reason.as_str()
                                || s["state"]["terminated"]["reason"] == reason.as_str()
                        })
                        .count()
                })
                .sum();
            (n > 0, format!("{n} pod versions terminated with {reason}"))
        }
        LogContains { service, text } => {
            let re = pod_of(service);
            let needle = text.to_ascii_lowercase();
            let n = t
                .logs
                .iter()
                .filter(|l| {
                    l.time_ns >= from
                        && re.is_match(&l.pod)
                        && l.line.to_ascii_lowercase().contains(&needle)
                })
                .count();
            (n > 0, format!("{n} matching lines"))
        }
        MetricIncrease {
            metric,
            service,
            node,
            min,
        } => {
            let re = service.as_ref().map(|s| pod_of(s));
            let inc: f64 = increases(
                t.metrics
                    .iter()
                    .filter(|m| m.metric == *metric)
                    .filter(|m| {
                        re.as_ref().is_none_or(|re| {
                            m.labels.get("pod").is_some_and(|p| re.is_match(p))
                                || m.labels.get("service_name") == service.as_ref()
                                || m.labels.get("job") == service.as_ref()
                        }) && node
                            .as_ref()
                            .is_none_or(|n| m.labels.get("node") == Some(n))
                    }),
                from,
            )
            .values()
            .sum();
            (inc >= *min, format!("increase {inc:.1}"))
        }
        LatencyAbove { service, p99 } => {
            let limit = p99.as_secs_f64();
            let p = latency_p99(t, service, from);
            (
                p.is_some_and(|x| x > limit),
                format!(
                    "p99 {}",
                    p.map(|x| format!("{x:.3}s"))
                        .unwrap_or_else(|| "unknown".into())
                ),
            )
        }
        ErrorRatioAbove { service, ratio } => {
            let r = error_ratio(t, service, from);
            (
                r.is_some_and(|x| x > *ratio),
                format!(
                    "error ratio {}",
                    r.map(|x| format!("{x:.3}"))
                        .unwrap_or_else(|| "unknown".into())
                ),
            )
        }
        NodeNotReady { node } => {
            let metric = t.metrics.iter().any(|m| {
                m.metric == "kube_node_status_condition"
                    && m.time_ns >= from
                    && m.labels.get("node") == Some(node)
                    && m.labels.get("condition").map(String::as_str) == Some("Ready")
                    && m.labels.get("status").map(String::as_str) == Some("true")
                    && m.value == 0.0
            });
            (metric, format!("Ready=false seen: {metric}"))
        }
        ReplicasUnavailable { service } => {
            let mut by_time: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
            for m in t.metrics.iter().filter(|m| {
                m.time_ns >= from
                    && (m.labels.get("deployment") == Some(service)
                        || m.labels.get("statefulset") == Some(service))
            }) {
                let e = by_time.entry(m.time_ns).or_insert((f64::NAN, f64::NAN));
                match m.metric.as_str() {
                    "kube_deployment_spec_replicas" | "kube_statefulset_replicas" => e.0 = m.value,
                    "kube_deployment_status_replicas_available"
                    | "kube_statefulset_status_replicas_ready" => e.1 = m.value,
                    _ => {}
                }
            }
            let short = by_time.values().filter(|(want, have)| have < want).count();
            (short > 0, format!("{short} scrapes short of replicas"))
        }
    }
}

/// p99 of a service's server latency over the faulty period, from its histogram metrics (or,
/// failing those, its server spans).
fn latency_p99(t: &Tables, service: &str, from: i64) -> Option<f64> {
    let re = pod_of(service);
    let mut buckets: BTreeMap<String, f64> = BTreeMap::new();
    let mut scale = 1.0;
    for (name, by) in [
        ("grpc_server_handling_seconds_bucket", "pod"),
        ("http_request_duration_seconds_bucket", "pod"),
        (
            "traces_span_metrics_duration_milliseconds_bucket",
            "service_name",
        ),
    ] {
        let inc = increases(
            t.metrics.iter().filter(|m| {
                m.metric == name
                    && m.labels.get(by).is_some_and(|v| {
                        if by == "pod" {
                            re.is_match(v)
                        } else {
                            v == service
                        }
                    })
            }),
            from,
        );
        for (l, v) in inc {
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
        return Some(
            bs.iter()
                .find(|(_, c)| *c >= target)
                .map(|(le, _)| if le.is_finite() { *le } else { top })
                .unwrap_or(top)
                * scale,
        );
    }
    let mut d: Vec<i64> = t
        .spans
        .iter()
        .filter(|s| s.service == service && s.kind == "server" && s.start_ns >= from)
        .map(|s| s.duration_ns)
        .collect();
    if d.is_empty() {
        return None;
    }
    d.sort_unstable();
    Some(d[(d.len() * 99 / 100).min(d.len() - 1)] as f64 / 1e9)
}

/// Share of a service's requests that failed over the faulty period.
fn error_ratio(t: &Tables, service: &str, from: i64) -> Option<f64> {
    let re = pod_of(service);
    let mut total = 0.0;
    let mut errors = 0.0;
    for (l, v) in increases(
        t.metrics.iter().filter(|m| {
            m.metric == "grpc_server_handled_total"
                && m.labels.get("pod").is_some_and(|p| re.is_match(p))
        }),
        from,
    ) {
        total += v;
        if l.get("grpc_code").map(String::as_str) != Some("OK") {
            errors += v;
        }
    }
    for (l, v) in increases(
        t.metrics.iter().filter(|m| {
            m.metric == "http_requests_total" && m.labels.get("pod").is_some_and(|p| re.is_match(p))
        }),
        from,
    ) {
        total += v;
        if l.get("code").is_some_and(|c| c.starts_with('5')) {
            errors += v;
        }
    }
    for (l, v) in increases(
        t.metrics.iter().filter(|m| {
            m.metric == "traces_span_metrics_calls_total"
                && m.labels.get("service_name").map(String::as_str) == Some(service)
        }),
        from,
    ) {
        total += v;
        if l.get("status_code").map(String::as_str) == Some("STATUS_CODE_ERROR") {
            errors += v;
        }
    }
    if total > 0.0 {
        return Some(errors / total);
    }
    let spans: Vec<_> = t
        .spans
        .iter()
        .filter(|s| s.service == service && s.kind == "server" && s.start_ns >= from)
        .collect();
    (!spans.is_empty()).then(|| {
        spans.iter().filter(|s| s.status_code == "error").count() as f64 / spans.len() as f64
    })
}
