//! The kubelet's cAdvisor endpoint: per container, CPU time and CFS throttling, memory and the
//! limits it runs under; per pod, network bytes derived from the requests it served; per node, the
//! root cgroup's CPU time and working set. Only pods in the scraped namespaces on nodes whose
//! kubelet answers are reported.

use schemas::tables::Labels;

use crate::objects::*;
use crate::workload::Workload;
use crate::world::World;

use crate::kubelet::NODE_SYSTEM_MEMORY;

use super::{Family, Out, Scope, b, containers_memory, labels};

pub(super) const FAMILIES: &[Family] = &[
    (
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed in seconds.",
        "seconds",
    ),
    (
        "container_cpu_cfs_periods_total",
        "counter",
        "Number of elapsed enforcement period intervals.",
        "",
    ),
    (
        "container_cpu_cfs_throttled_periods_total",
        "counter",
        "Number of throttled period intervals.",
        "",
    ),
    (
        "container_cpu_cfs_throttled_seconds_total",
        "counter",
        "Total time duration the container has been throttled.",
        "seconds",
    ),
    (
        "container_memory_working_set_bytes",
        "gauge",
        "Current working set in bytes.",
        "bytes",
    ),
    (
        "container_memory_usage_bytes",
        "gauge",
        "Current memory usage in bytes, including all memory regardless of when it was accessed",
        "bytes",
    ),
    (
        "container_memory_rss",
        "gauge",
        "Size of RSS in bytes.",
        "bytes",
    ),
    (
        "container_spec_memory_limit_bytes",
        "gauge",
        "Memory limit for the container.",
        "bytes",
    ),
    (
        "container_spec_cpu_quota",
        "gauge",
        "CPU quota of the container.",
        "",
    ),
    (
        "container_spec_cpu_period",
        "gauge",
        "CPU period of the container.",
        "",
    ),
    (
        "container_oom_events_total",
        "counter",
        "Count of out of memory events observed for the container",
        "",
    ),
    (
        "container_network_receive_bytes_total",
        "counter",
        "Cumulative count of bytes received",
        "bytes",
    ),
    (
        "container_network_transmit_bytes_total",
        "counter",
        "Cumulative count of bytes transmitted",
        "bytes",
    ),
];

pub(super) fn scrape(o: &mut Out, w: &World, wl: &Workload, scope: Scope) {
    for n in w.nodes.values() {
        node(o, w, n);
    }
    for p in w.pods.values() {
        let Some(node) = &p.spec.node_name else {
            continue;
        };
        if w.runtime.node(node).kubelet_down || !scope.contains(&p.meta.namespace) {
            continue;
        }
        let target = Target {
            pod: p,
            node,
            instance: w
                .nodes
                .get(node)
                .map(|n| format!("{}:10250", n.ip))
                .unwrap_or_default(),
            qos: p.qos_class().to_ascii_lowercase(),
        };
        for (c, s) in p.spec.containers.iter().zip(&p.statuses) {
            container(o, &target, c, s);
        }
        if p.pod_ip.is_some() {
            network(o, &target, wl);
        }
    }
}

/// The kubelet's `up`, and while it answers its root cgroup (`id="/"`): everything the node runs,
/// as `kubectl top node` and node dashboards read it.
fn node(o: &mut Out, w: &World, n: &Node) {
    let name = n.meta.name.as_str();
    let instance = format!("{}:10250", n.ip);
    let target = [
        ("job", "kubelet"),
        ("metrics_path", "/metrics/cadvisor"),
        ("instance", instance.as_str()),
        ("node", name),
    ];
    let answers = !w.runtime.node(name).kubelet_down;
    o.up(&target, answers);
    if !answers {
        return;
    }
    let mut root = labels(&target);
    root.insert("id".into(), "/".into());
    let cpu = w.node_cpu_seconds.get(name).copied().unwrap_or(0.0);
    o.push("container_cpu_usage_seconds_total", root.clone(), cpu);
    o.push(
        "container_memory_working_set_bytes",
        root,
        (containers_memory(w, name) + NODE_SYSTEM_MEMORY).round(),
    );
}

/// A pod as its node's kubelet reports it.
struct Target<'a> {
    pod: &'a Pod,
    node: &'a str,
    /// The kubelet's address.
    instance: String,
    /// The pod's QoS class, as its cgroup path spells it.
    qos: String,
}

impl Target<'_> {
    /// The labels on every series of the pod, plus `extra`.
    fn labels(&self, extra: &[(&str, &str)]) -> Labels {
        let p = self.pod;
        let mut l = labels(&[
            ("job", "kubelet"),
            ("metrics_path", "/metrics/cadvisor"),
            ("instance", &self.instance),
            ("node", self.node),
            ("namespace", p.meta.namespace.as_deref().unwrap_or_default()),
            ("pod", &p.meta.name),
        ]);
        l.extend(labels(extra));
        l
    }
}

/// A container that has been created (it has an id): its cgroup's counters.
fn container(o: &mut Out, target: &Target, c: &Container, s: &ContainerStatus) {
    let Some(cid) = &s.container_id else { return };
    let short = cid.trim_start_matches("containerd://");
    let id = format!(
        "/kubepods/{}/pod{}/{short}",
        target.qos, target.pod.meta.uid
    );
    let l = target.labels(&[
        ("container", &c.name),
        ("image", &c.image),
        ("name", short),
        ("id", &id),
    ]);
    o.push(
        "container_cpu_usage_seconds_total",
        l.clone(),
        s.cpu_seconds,
    );
    if s.state.is_running() {
        o.push(
            "container_memory_working_set_bytes",
            l.clone(),
            s.working_set.round(),
        );
        o.push(
            "container_memory_usage_bytes",
            l.clone(),
            (s.working_set * 1.18).round(),
        );
        o.push(
            "container_memory_rss",
            l.clone(),
            (s.working_set * 0.86).round(),
        );
    }
    o.push(
        "container_spec_memory_limit_bytes",
        l.clone(),
        c.resources.limits.memory.unwrap_or(0) as f64,
    );
    if let Some(cpu) = c.resources.limits.cpu_milli {
        o.push("container_spec_cpu_quota", l.clone(), (cpu * 100) as f64);
        o.push("container_spec_cpu_period", l.clone(), 100_000.0);
        o.push(
            "container_cpu_cfs_periods_total",
            l.clone(),
            s.cfs_periods.round(),
        );
        o.push(
            "container_cpu_cfs_throttled_periods_total",
            l.clone(),
            s.cfs_throttled_periods.round(),
        );
        o.push(
            "container_cpu_cfs_throttled_seconds_total",
            l.clone(),
            s.cfs_throttled_seconds,
        );
    }
    let ooms =
        f64::from(s.restart_count) * b(s.last.as_ref().is_some_and(|t| t.reason == "OOMKilled"));
    o.push("container_oom_events_total", l, ooms);
}

/// The pod's network interface; traffic follows the requests the pod served.
fn network(o: &mut Out, target: &Target, wl: &Workload) {
    let p = target.pod;
    let ns = p.meta.namespace.as_deref().unwrap_or_default();
    let id = format!("/kubepods/{}/pod{}", target.qos, p.meta.uid);
    let l = target.labels(&[("interface", "eth0"), ("id", &id)]);
    let served: f64 = wl
        .counters
        .range((key(ns, &p.meta.name), String::new())..)
        .take_while(|((k, _), _)| k.1 == p.meta.name)
        .map(|(_, c)| c.requests)
        .sum();
    o.push(
        "container_network_receive_bytes_total",
        l.clone(),
        (served * 820.0).round(),
    );
    o.push(
        "container_network_transmit_bytes_total",
        l,
        (served * 2310.0).round(),
    );
}
