//! Alerting rules in the style of kube-prometheus (names, labels, severities, annotation texts),
//! evaluated at every scrape: an alert whose condition holds is `pending` from its first true
//! evaluation and `firing` once it has held for the rule's `for`. The `for` durations are
//! shortened from kube-prometheus' 15 minutes so that a problem's faulty window can show them, as
//! SREGym's rule set does.

use std::collections::{BTreeMap, VecDeque};

use problems::app::AppSpec;
use schemas::tables::{AlertRow, Labels, Row};

use super::objects::CState;
use super::util::NS_PER_SEC;
use super::workload::Workload;
use super::world::World;

/// A rule: name, severity, `for` in seconds.
pub struct Rule {
    pub name: &'static str,
    pub severity: &'static str,
    pub for_secs: i64,
    pub summary: &'static str,
}

pub const RULES: &[Rule] = &[
    Rule {
        name: "KubePodCrashLooping",
        severity: "warning",
        for_secs: 120,
        summary: "Pod is crash looping.",
    },
    Rule {
        name: "KubePodNotReady",
        severity: "warning",
        for_secs: 180,
        summary: "Pod has been in a non-ready state for more than 3 minutes.",
    },
    Rule {
        name: "KubeDeploymentReplicasMismatch",
        severity: "warning",
        for_secs: 180,
        summary: "Deployment has not matched the expected number of replicas.",
    },
    Rule {
        name: "KubeStatefulSetReplicasMismatch",
        severity: "warning",
        for_secs: 180,
        summary: "StatefulSet has not matched the expected number of replicas.",
    },
    Rule {
        name: "KubeContainerWaiting",
        severity: "warning",
        for_secs: 180,
        summary: "Pod container waiting longer than 3 minutes",
    },
    Rule {
        name: "CPUThrottlingHigh",
        severity: "info",
        for_secs: 180,
        summary: "Processes experience elevated CPU throttling.",
    },
    Rule {
        name: "KubeNodeNotReady",
        severity: "warning",
        for_secs: 120,
        summary: "Node is not ready.",
    },
    Rule {
        name: "HighRequestErrorRate",
        severity: "critical",
        for_secs: 60,
        summary: "High request error rate.",
    },
    Rule {
        name: "HighRequestLatency",
        severity: "warning",
        for_secs: 120,
        summary: "High request latency.",
    },
];

const RUNBOOK: &str = "https://runbooks.prometheus-operator.dev/runbooks/kubernetes/";

/// Alert state across evaluations.
/// (namespace, pod, container).
type ContainerKey = (String, String, String);

#[derive(Debug, Clone, Default)]
pub struct Alerts {
    /// Active alerts: (rule, labels) -> active since.
    active: BTreeMap<(String, Labels), i64>,
    /// Last time each container was seen in CrashLoopBackOff (for `max_over_time[5m]`).
    crashloop_seen: BTreeMap<ContainerKey, i64>,
    /// Recent (time, throttled, periods) per container, for the 5-minute throttling ratio.
    throttle: BTreeMap<ContainerKey, VecDeque<(i64, f64, f64)>>,
    /// Recent (time, requests, errors, p99) per service.
    health: BTreeMap<String, VecDeque<(i64, f64, f64, f64)>>,
}

fn l(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Alerts {
    /// Alerts firing at `now` (active for at least their rule's `for`): (alert name, labels).
    pub fn firing(&self, now: i64) -> Vec<(&str, &Labels)> {
        self.active
            .iter()
            .filter(|((rule, _), since)| {
                RULES
                    .iter()
                    .find(|r| r.name == rule)
                    .is_some_and(|r| now - **since >= r.for_secs * NS_PER_SEC)
            })
            .map(|((rule, labels), _)| (rule.as_str(), labels))
            .collect()
    }

    /// Evaluates every rule now and appends a row per pending or firing alert.
    pub fn evaluate(
        &mut self,
        w: &World,
        app: &AppSpec,
        wl: &Workload,
        namespaces: &[String],
        out: &mut Vec<Row>,
    ) {
        let now = w.now;
        let mut hits: Vec<(&'static str, Labels, String, f64)> = vec![];
        let ksm = |extra: &[(&str, &str)]| {
            let mut m = l(&[("job", "kube-state-metrics")]);
            m.extend(l(extra));
            m
        };
        for p in w.pods.values() {
            let Some(ns) = p.meta.namespace.clone().filter(|n| namespaces.contains(n)) else {
                continue;
            };
            let pod = p.meta.name.clone();
            for s in &p.statuses {
                let key = (ns.clone(), pod.clone(), s.name.clone());
                if s.state.waiting_reason() == Some("CrashLoopBackOff") {
                    self.crashloop_seen.insert(key.clone(), now);
                }
                if self
                    .crashloop_seen
                    .get(&key)
                    .is_some_and(|t| now - t <= 300 * NS_PER_SEC)
                    && p.meta.deleted_at.is_none()
                {
                    hits.push(("KubePodCrashLooping", ksm(&[("namespace", &ns), ("pod", &pod), ("container", &s.name)]), format!("Pod {ns}/{pod} ({}) is in waiting state (reason: \"CrashLoopBackOff\").", s.name), 1.0));
                }
                if s.state.waiting_reason().is_some() {
                    hits.push(("KubeContainerWaiting", ksm(&[("namespace", &ns), ("pod", &pod), ("container", &s.name)]), format!("pod/{pod} in namespace {ns} on container {} has been in waiting state for longer than 3 minutes.", s.name), 1.0));
                }
                let q = self.throttle.entry(key.clone()).or_default();
                q.push_back((now, s.cfs_throttled_periods, s.cfs_periods));
                while q.front().is_some_and(|f| now - f.0 > 300 * NS_PER_SEC) {
                    q.pop_front();
                }
                if let (Some(a), Some(b)) = (q.front(), q.back()) {
                    let periods = b.2 - a.2;
                    if periods > 0.0 {
                        let ratio = (b.1 - a.1) / periods;
                        if ratio > 0.25 && matches!(s.state, CState::Running { .. }) {
                            hits.push(("CPUThrottlingHigh", l(&[("namespace", &ns), ("pod", &pod), ("container", &s.name)]), format!("{:.0}% throttling of CPU in namespace {ns} for container {} in pod {pod}.", ratio * 100.0, s.name), ratio));
                        }
                    }
                }
            }
            let bad_phase = matches!(p.phase.as_str(), "Pending" | "Unknown" | "Failed")
                || (p.phase == "Running" && !p.ready() && p.statuses.iter().any(|s| !s.ready));
            if bad_phase && p.meta.deleted_at.is_none() {
                hits.push((
                    "KubePodNotReady",
                    ksm(&[("namespace", &ns), ("pod", &pod)]),
                    format!(
                        "Pod {ns}/{pod} has been in a non-ready state for longer than 3 minutes."
                    ),
                    1.0,
                ));
            }
        }
        for d in w.deployments.values() {
            let Some(ns) = d.meta.namespace.clone().filter(|n| namespaces.contains(n)) else {
                continue;
            };
            if d.replicas != d.counts.available {
                hits.push(("KubeDeploymentReplicasMismatch", ksm(&[("namespace", &ns), ("deployment", &d.meta.name)]), format!("Deployment {ns}/{} has not matched the expected number of replicas for longer than 3 minutes.", d.meta.name), f64::from(d.replicas - d.counts.available)));
            }
        }
        for s in w.statefulsets.values() {
            let Some(ns) = s.meta.namespace.clone().filter(|n| namespaces.contains(n)) else {
                continue;
            };
            if s.replicas != s.counts.ready {
                hits.push(("KubeStatefulSetReplicasMismatch", ksm(&[("namespace", &ns), ("statefulset", &s.meta.name)]), format!("StatefulSet {ns}/{} has not matched the expected number of replicas for longer than 3 minutes.", s.meta.name), f64::from(s.replicas - s.counts.ready)));
            }
        }
        for n in w.nodes.values() {
            if !n.ready() {
                hits.push((
                    "KubeNodeNotReady",
                    ksm(&[("node", &n.meta.name), ("condition", "Ready")]),
                    format!("{} has been unready for more than 2 minutes.", n.meta.name),
                    1.0,
                ));
            }
        }
        for (svc, (rate, err, p99)) in &wl.service_health {
            let q = self.health.entry(svc.clone()).or_default();
            q.push_back((now, *rate, *err, *p99));
            while q.front().is_some_and(|f| now - f.0 > 120 * NS_PER_SEC) {
                q.pop_front();
            }
        }
        for (svc, q) in &mut self.health {
            if !wl.service_health.contains_key(svc) {
                q.clear();
                continue;
            }
            let total: f64 = q.iter().map(|x| x.1).sum();
            if total <= 0.0 {
                continue;
            }
            let err = q.iter().map(|x| x.1 * x.2).sum::<f64>() / total;
            let p99 = q.iter().map(|x| x.1 * x.3).sum::<f64>() / total;
            let ns = app.namespace.as_str();
            if err > 0.05 {
                hits.push(("HighRequestErrorRate", l(&[("namespace", ns), ("service", svc)]), format!("Service {svc} has an error rate of {:.1}% over the last 2 minutes (threshold 5%).", err * 100.0), err));
            }
            if p99 > 1.0 {
                hits.push(("HighRequestLatency", l(&[("namespace", ns), ("service", svc)]), format!("Service {svc} p99 latency is {:.2}s over the last 2 minutes (threshold 1s).", p99), p99));
            }
        }
        let mut next: BTreeMap<(String, Labels), i64> = BTreeMap::new();
        for (name, mut labels, description, value) in hits {
            let rule = RULES.iter().find(|r| r.name == name).expect("rule listed");
            labels.insert("alertname".into(), name.into());
            labels.insert("severity".into(), rule.severity.into());
            let k = (name.to_string(), labels.clone());
            if next.contains_key(&k) {
                continue;
            }
            let since = self.active.get(&k).copied().unwrap_or(now);
            next.insert(k, since);
            let firing = now - since >= rule.for_secs * NS_PER_SEC;
            let mut annotations = l(&[("description", &description), ("summary", rule.summary)]);
            annotations.insert(
                "runbook_url".into(),
                format!("{RUNBOOK}{}", name.to_ascii_lowercase()),
            );
            out.push(Row::Alert(AlertRow {
                time_ns: now,
                alertname: name.to_string(),
                state: if firing { "firing" } else { "pending" }.to_string(),
                labels,
                annotations,
                active_at_ns: Some(since),
                value: Some(value),
            }));
        }
        self.active = next;
    }
}
