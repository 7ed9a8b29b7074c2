//! Prometheus scrapes of the simulated cluster, with the metric names and labels real exporters
//! use: kube-state-metrics (objects' state), the kubelet's cAdvisor endpoint (containers' CPU,
//! memory, CFS throttling), node-exporter basics, and the application's RED metrics as its
//! instrumentation names them (go-grpc-prometheus + promhttp for hotel-reservation, the OTel
//! collector's spanmetrics for the OpenTelemetry demo and social-network).

use std::collections::BTreeMap;

use problems::app::{AppSpec, Protocol};
use schemas::tables::{Labels, MetricMeta, MetricSample, Row};

use super::objects::*;
use super::workload::{OpCounters, Workload};
use super::world::World;

/// Families this simulator exports: name, type, help, unit.
pub const METRIC_FAMILIES: &[(&str, &str, &str, &str)] = &[
    ("kube_pod_info", "gauge", "Information about pod.", ""),
    (
        "kube_pod_owner",
        "gauge",
        "Information about the Pod's owner.",
        "",
    ),
    (
        "kube_pod_status_phase",
        "gauge",
        "The pods current phase.",
        "",
    ),
    (
        "kube_pod_status_ready",
        "gauge",
        "Describes whether the pod is ready to serve requests.",
        "",
    ),
    (
        "kube_pod_status_scheduled",
        "gauge",
        "Describes the status of the scheduling process for the pod.",
        "",
    ),
    (
        "kube_pod_container_info",
        "gauge",
        "Information about a container in a pod.",
        "",
    ),
    (
        "kube_pod_container_status_restarts_total",
        "counter",
        "The number of container restarts per container.",
        "",
    ),
    (
        "kube_pod_container_status_waiting",
        "gauge",
        "Describes whether the container is currently in waiting state.",
        "",
    ),
    (
        "kube_pod_container_status_waiting_reason",
        "gauge",
        "Describes the reason the container is currently in waiting state.",
        "",
    ),
    (
        "kube_pod_container_status_running",
        "gauge",
        "Describes whether the container is currently in running state.",
        "",
    ),
    (
        "kube_pod_container_status_terminated",
        "gauge",
        "Describes whether the container is currently in terminated state.",
        "",
    ),
    (
        "kube_pod_container_status_ready",
        "gauge",
        "Describes whether the containers readiness check succeeded.",
        "",
    ),
    (
        "kube_pod_container_status_last_terminated_reason",
        "gauge",
        "Describes the last reason the container was in terminated state.",
        "",
    ),
    (
        "kube_pod_container_status_last_terminated_exitcode",
        "gauge",
        "Describes the exit code for the last container in terminated state.",
        "",
    ),
    (
        "kube_pod_init_container_status_waiting_reason",
        "gauge",
        "Describes the reason the init container is currently in waiting state.",
        "",
    ),
    (
        "kube_pod_init_container_status_restarts_total",
        "counter",
        "The number of restarts for the init container.",
        "",
    ),
    (
        "kube_pod_container_resource_requests",
        "gauge",
        "The number of requested request resource by a container. It is recommended to use the kube_pod_resource_requests metric exposed by kube-scheduler instead, as it is more precise.",
        "",
    ),
    (
        "kube_pod_container_resource_limits",
        "gauge",
        "The number of requested limit resource by a container. It is recommended to use the kube_pod_resource_limits metric exposed by kube-scheduler instead, as it is more precise.",
        "",
    ),
    (
        "kube_deployment_spec_replicas",
        "gauge",
        "Number of desired pods for a deployment.",
        "",
    ),
    (
        "kube_deployment_status_replicas",
        "gauge",
        "The number of replicas per deployment.",
        "",
    ),
    (
        "kube_deployment_status_replicas_available",
        "gauge",
        "The number of available replicas per deployment.",
        "",
    ),
    (
        "kube_deployment_status_replicas_unavailable",
        "gauge",
        "The number of unavailable replicas per deployment.",
        "",
    ),
    (
        "kube_deployment_status_replicas_updated",
        "gauge",
        "The number of updated replicas per deployment.",
        "",
    ),
    (
        "kube_deployment_status_replicas_ready",
        "gauge",
        "The number of ready replicas per deployment.",
        "",
    ),
    (
        "kube_deployment_status_observed_generation",
        "gauge",
        "The generation observed by the deployment controller.",
        "",
    ),
    (
        "kube_deployment_metadata_generation",
        "gauge",
        "Sequence number representing a specific generation of the desired state.",
        "",
    ),
    (
        "kube_deployment_status_condition",
        "gauge",
        "The current status conditions of a deployment.",
        "",
    ),
    (
        "kube_statefulset_replicas",
        "gauge",
        "Number of desired pods for a StatefulSet.",
        "",
    ),
    (
        "kube_statefulset_status_replicas_ready",
        "gauge",
        "The number of ready replicas per StatefulSet.",
        "",
    ),
    (
        "kube_replicaset_spec_replicas",
        "gauge",
        "Number of desired pods for a ReplicaSet.",
        "",
    ),
    (
        "kube_replicaset_status_ready_replicas",
        "gauge",
        "The number of ready replicas per ReplicaSet.",
        "",
    ),
    (
        "kube_replicaset_owner",
        "gauge",
        "Information about the ReplicaSet's owner.",
        "",
    ),
    (
        "kube_node_info",
        "gauge",
        "Information about a cluster node.",
        "",
    ),
    (
        "kube_node_status_condition",
        "gauge",
        "The condition of a cluster node.",
        "",
    ),
    (
        "kube_node_status_allocatable",
        "gauge",
        "The allocatable for different resources of a node that are available for scheduling.",
        "",
    ),
    (
        "kube_node_spec_unschedulable",
        "gauge",
        "Whether a node can schedule new pods.",
        "",
    ),
    (
        "kube_node_spec_taint",
        "gauge",
        "The taint of a cluster node.",
        "",
    ),
    (
        "kube_service_info",
        "gauge",
        "Information about service.",
        "",
    ),
    (
        "kube_endpoint_address",
        "gauge",
        "Information about Endpoint available and non available addresses.",
        "",
    ),
    (
        "kube_endpoint_address_available",
        "gauge",
        "Number of addresses available in endpoint.",
        "",
    ),
    (
        "kube_endpoint_address_not_ready",
        "gauge",
        "Number of addresses not ready in endpoint",
        "",
    ),
    (
        "kube_configmap_info",
        "gauge",
        "Information about configmap.",
        "",
    ),
    (
        "kube_persistentvolumeclaim_status_phase",
        "gauge",
        "The phase the persistent volume claim is currently in.",
        "",
    ),
    (
        "kube_resourcequota",
        "gauge",
        "Information about resource quota.",
        "",
    ),
    (
        "kube_networkpolicy_spec_ingress_rules",
        "gauge",
        "Number of ingress rules on the networkpolicy",
        "",
    ),
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
    ("node_load1", "gauge", "1m load average.", ""),
    (
        "node_memory_MemAvailable_bytes",
        "gauge",
        "Memory information field MemAvailable_bytes.",
        "bytes",
    ),
    (
        "node_memory_MemTotal_bytes",
        "gauge",
        "Memory information field MemTotal_bytes.",
        "bytes",
    ),
    (
        "grpc_server_started_total",
        "counter",
        "Total number of RPCs started on the server.",
        "",
    ),
    (
        "grpc_server_handled_total",
        "counter",
        "Total number of RPCs completed on the server, regardless of success or failure.",
        "",
    ),
    (
        "grpc_server_handling_seconds",
        "histogram",
        "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
        "seconds",
    ),
    (
        "http_requests_total",
        "counter",
        "Total number of HTTP requests by status code, handler and method.",
        "",
    ),
    (
        "http_request_duration_seconds",
        "histogram",
        "HTTP request latencies in seconds.",
        "seconds",
    ),
    ("traces_span_metrics_calls_total", "counter", "", ""),
    (
        "traces_span_metrics_duration_milliseconds",
        "histogram",
        "",
        "milliseconds",
    ),
];

/// Metadata rows for every family.
pub fn metadata_rows() -> Vec<Row> {
    METRIC_FAMILIES
        .iter()
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
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const KSM: [(&str, &str); 2] = [
    ("job", "kube-state-metrics"),
    ("instance", "10.244.0.4:8080"),
];

fn ksm(extra: &[(&str, &str)]) -> Labels {
    let mut l = labels(&KSM);
    l.extend(labels(extra));
    l
}

fn b(v: bool) -> f64 {
    if v { 1.0 } else { 0.0 }
}

/// One scrape of every target at the world's current time.
pub fn scrape(w: &World, app: &AppSpec, wl: &Workload, namespaces: &[String], rows: &mut Vec<Row>) {
    let mut o = Out { rows, t: w.now };
    let in_scope = |ns: &Option<String>| ns.as_ref().is_some_and(|n| namespaces.contains(n));
    // kube-state-metrics: pods.
    for p in w.pods.values().filter(|p| in_scope(&p.meta.namespace)) {
        let ns = p.meta.namespace.as_deref().unwrap_or_default();
        let (pod, uid) = (p.meta.name.as_str(), p.meta.uid.as_str());
        let node = p.spec.node_name.clone().unwrap_or_default();
        let (okind, oname) = p
            .meta
            .owner
            .as_ref()
            .map(|o| (o.kind.name(), o.name.as_str()))
            .unwrap_or(("<none>", "<none>"));
        o.push(
            "kube_pod_info",
            ksm(&[
                ("namespace", ns),
                ("pod", pod),
                ("uid", uid),
                ("node", &node),
                ("host_ip", p.host_ip.as_deref().unwrap_or("")),
                ("pod_ip", p.pod_ip.as_deref().unwrap_or("")),
                ("created_by_kind", okind),
                ("created_by_name", oname),
                ("priority_class", ""),
                ("host_network", "false"),
            ]),
            1.0,
        );
        o.push(
            "kube_pod_owner",
            ksm(&[
                ("namespace", ns),
                ("pod", pod),
                ("uid", uid),
                ("owner_kind", okind),
                ("owner_name", oname),
                ("owner_is_controller", "true"),
            ]),
            1.0,
        );
        let phase = if p.meta.deleted_at.is_some()
            && p.spec
                .node_name
                .as_ref()
                .is_some_and(|n| w.runtime.node(n).kubelet_down)
        {
            "Unknown"
        } else {
            p.phase.as_str()
        };
        for ph in ["Pending", "Running", "Succeeded", "Failed", "Unknown"] {
            o.push(
                "kube_pod_status_phase",
                ksm(&[("namespace", ns), ("pod", pod), ("uid", uid), ("phase", ph)]),
                b(ph == phase),
            );
        }
        let ready = p.ready();
        for (cond, v) in [("true", ready), ("false", !ready), ("unknown", false)] {
            o.push(
                "kube_pod_status_ready",
                ksm(&[
                    ("namespace", ns),
                    ("pod", pod),
                    ("uid", uid),
                    ("condition", cond),
                ]),
                b(v),
            );
        }
        let scheduled = p.spec.node_name.is_some();
        for (cond, v) in [
            ("true", scheduled),
            ("false", !scheduled),
            ("unknown", false),
        ] {
            o.push(
                "kube_pod_status_scheduled",
                ksm(&[
                    ("namespace", ns),
                    ("pod", pod),
                    ("uid", uid),
                    ("condition", cond),
                ]),
                b(v),
            );
        }
        for (c, s) in p.spec.containers.iter().zip(&p.statuses) {
            let cn = c.name.as_str();
            let base = [
                ("namespace", ns),
                ("pod", pod),
                ("uid", uid),
                ("container", cn),
            ];
            let mut info = base.to_vec();
            let cid = s.container_id.clone().unwrap_or_default();
            info.extend([
                ("image", c.image.as_str()),
                ("image_spec", c.image.as_str()),
                ("image_id", s.image_id.as_deref().unwrap_or("")),
                ("container_id", cid.as_str()),
            ]);
            o.push("kube_pod_container_info", ksm(&info), 1.0);
            o.push(
                "kube_pod_container_status_restarts_total",
                ksm(&base),
                f64::from(s.restart_count),
            );
            let waiting = s.state.waiting_reason();
            o.push(
                "kube_pod_container_status_waiting",
                ksm(&base),
                b(waiting.is_some()),
            );
            if let Some(r) = waiting {
                let mut l = base.to_vec();
                l.push(("reason", r));
                o.push("kube_pod_container_status_waiting_reason", ksm(&l), 1.0);
            }
            o.push(
                "kube_pod_container_status_running",
                ksm(&base),
                b(s.state.is_running()),
            );
            o.push(
                "kube_pod_container_status_terminated",
                ksm(&base),
                b(matches!(s.state, CState::Terminated(_))),
            );
            o.push("kube_pod_container_status_ready", ksm(&base), b(s.ready));
            if let Some(t) = &s.last {
                let mut l = base.to_vec();
                l.push(("reason", t.reason.as_str()));
                o.push(
                    "kube_pod_container_status_last_terminated_reason",
                    ksm(&l),
                    1.0,
                );
                o.push(
                    "kube_pod_container_status_last_terminated_exitcode",
                    ksm(&base),
                    f64::from(t.exit_code),
                );
            }
            for (kind, list) in [
                (
                    "kube_pod_container_resource_requests",
                    &c.resources.requests,
                ),
                ("kube_pod_container_resource_limits", &c.resources.limits),
            ] {
                if let Some(cpu) = list.cpu_milli {
                    let mut l = base.to_vec();
                    l.extend([
                        ("node", node.as_str()),
                        ("resource", "cpu"),
                        ("unit", "core"),
                    ]);
                    o.push(kind, ksm(&l), cpu as f64 / 1000.0);
                }
                if let Some(mem) = list.memory {
                    let mut l = base.to_vec();
                    l.extend([
                        ("node", node.as_str()),
                        ("resource", "memory"),
                        ("unit", "byte"),
                    ]);
                    o.push(kind, ksm(&l), mem as f64);
                }
            }
        }
        for (c, s) in p.spec.init_containers.iter().zip(&p.init_statuses) {
            let base = [
                ("namespace", ns),
                ("pod", pod),
                ("uid", uid),
                ("container", c.name.as_str()),
            ];
            o.push(
                "kube_pod_init_container_status_restarts_total",
                ksm(&base),
                f64::from(s.restart_count),
            );
            if let Some(r) = s.state.waiting_reason() {
                let mut l = base.to_vec();
                l.push(("reason", r));
                o.push(
                    "kube_pod_init_container_status_waiting_reason",
                    ksm(&l),
                    1.0,
                );
            }
        }
    }
    for d in w
        .deployments
        .values()
        .filter(|d| in_scope(&d.meta.namespace))
    {
        let ns = d.meta.namespace.as_deref().unwrap_or_default();
        let l = ksm(&[("namespace", ns), ("deployment", &d.meta.name)]);
        let c = &d.counts;
        o.push(
            "kube_deployment_spec_replicas",
            l.clone(),
            f64::from(d.replicas),
        );
        o.push(
            "kube_deployment_status_replicas",
            l.clone(),
            f64::from(c.replicas),
        );
        o.push(
            "kube_deployment_status_replicas_available",
            l.clone(),
            f64::from(c.available),
        );
        o.push(
            "kube_deployment_status_replicas_unavailable",
            l.clone(),
            f64::from(
                (c.replicas - c.available)
                    .max(0)
                    .max(d.replicas - c.available),
            ),
        );
        o.push(
            "kube_deployment_status_replicas_updated",
            l.clone(),
            f64::from(c.updated),
        );
        o.push(
            "kube_deployment_status_replicas_ready",
            l.clone(),
            f64::from(c.ready),
        );
        o.push(
            "kube_deployment_status_observed_generation",
            l.clone(),
            d.observed_generation as f64,
        );
        o.push(
            "kube_deployment_metadata_generation",
            l,
            d.meta.generation as f64,
        );
        for cond in &d.conditions {
            for (st, v) in [
                ("true", cond.status),
                ("false", !cond.status),
                ("unknown", false),
            ] {
                o.push(
                    "kube_deployment_status_condition",
                    ksm(&[
                        ("namespace", ns),
                        ("deployment", &d.meta.name),
                        ("condition", &cond.kind),
                        ("status", st),
                    ]),
                    b(v),
                );
            }
        }
    }
    for s in w
        .statefulsets
        .values()
        .filter(|s| in_scope(&s.meta.namespace))
    {
        let ns = s.meta.namespace.as_deref().unwrap_or_default();
        let l = ksm(&[("namespace", ns), ("statefulset", &s.meta.name)]);
        o.push(
            "kube_statefulset_replicas",
            l.clone(),
            f64::from(s.replicas),
        );
        o.push(
            "kube_statefulset_status_replicas_ready",
            l,
            f64::from(s.counts.ready),
        );
    }
    for r in w
        .replicasets
        .values()
        .filter(|r| in_scope(&r.meta.namespace))
    {
        let ns = r.meta.namespace.as_deref().unwrap_or_default();
        let l = ksm(&[("namespace", ns), ("replicaset", &r.meta.name)]);
        o.push(
            "kube_replicaset_spec_replicas",
            l.clone(),
            f64::from(r.replicas),
        );
        o.push(
            "kube_replicaset_status_ready_replicas",
            l,
            f64::from(r.counts.ready),
        );
        if let Some(ow) = &r.meta.owner {
            o.push(
                "kube_replicaset_owner",
                ksm(&[
                    ("namespace", ns),
                    ("replicaset", &r.meta.name),
                    ("owner_kind", ow.kind.name()),
                    ("owner_name", &ow.name),
                    ("owner_is_controller", "true"),
                ]),
                1.0,
            );
        }
    }
    for n in w.nodes.values() {
        let name = n.meta.name.as_str();
        o.push(
            "kube_node_info",
            ksm(&[
                ("node", name),
                ("internal_ip", &n.ip),
                ("kubelet_version", "v1.31.2"),
                ("container_runtime_version", "containerd://1.7.18"),
                ("os_image", "Debian GNU/Linux 12 (bookworm)"),
                ("kernel_version", "6.8.0-49-generic"),
            ]),
            1.0,
        );
        for c in &n.conditions {
            let (t, f, u) = if !n.kubelet_up {
                (false, false, true)
            } else {
                (c.status, !c.status, false)
            };
            for (st, v) in [("true", t), ("false", f), ("unknown", u)] {
                o.push(
                    "kube_node_status_condition",
                    ksm(&[("node", name), ("condition", &c.kind), ("status", st)]),
                    b(v),
                );
            }
        }
        o.push(
            "kube_node_status_allocatable",
            ksm(&[("node", name), ("resource", "cpu"), ("unit", "core")]),
            n.cpu_milli as f64 / 1000.0,
        );
        o.push(
            "kube_node_status_allocatable",
            ksm(&[("node", name), ("resource", "memory"), ("unit", "byte")]),
            (n.memory - (100 << 20)) as f64,
        );
        o.push(
            "kube_node_status_allocatable",
            ksm(&[("node", name), ("resource", "pods"), ("unit", "integer")]),
            n.max_pods as f64,
        );
        o.push(
            "kube_node_spec_unschedulable",
            ksm(&[("node", name)]),
            b(n.unschedulable),
        );
        for t in &n.taints {
            o.push(
                "kube_node_spec_taint",
                ksm(&[
                    ("node", name),
                    ("key", &t.key),
                    ("value", t.value.as_deref().unwrap_or("")),
                    ("effect", &t.effect),
                ]),
                1.0,
            );
        }
    }
    for s in w.services.values().filter(|s| in_scope(&s.meta.namespace)) {
        let ns = s.meta.namespace.as_deref().unwrap_or_default();
        o.push(
            "kube_service_info",
            ksm(&[
                ("namespace", ns),
                ("service", &s.meta.name),
                ("uid", &s.meta.uid),
                ("cluster_ip", &s.cluster_ip),
                ("external_name", ""),
                ("load_balancer_ip", ""),
            ]),
            1.0,
        );
    }
    for e in w.endpoints.values().filter(|e| in_scope(&e.meta.namespace)) {
        let ns = e.meta.namespace.as_deref().unwrap_or_default();
        let name = e.meta.name.as_str();
        o.push(
            "kube_endpoint_address_available",
            ksm(&[("namespace", ns), ("endpoint", name)]),
            (e.ready.len() * e.ports.len().max(1)) as f64 * b(!e.ports.is_empty()),
        );
        o.push(
            "kube_endpoint_address_not_ready",
            ksm(&[("namespace", ns), ("endpoint", name)]),
            (e.not_ready.len() * e.ports.len().max(1)) as f64 * b(!e.ports.is_empty()),
        );
        for (list, ready) in [(&e.ready, "true"), (&e.not_ready, "false")] {
            for a in list {
                o.push(
                    "kube_endpoint_address",
                    ksm(&[
                        ("namespace", ns),
                        ("endpoint", name),
                        ("ip", &a.ip),
                        ("ready", ready),
                    ]),
                    1.0,
                );
            }
        }
    }
    for c in w
        .configmaps
        .values()
        .filter(|c| in_scope(&c.meta.namespace))
    {
        o.push(
            "kube_configmap_info",
            ksm(&[
                ("namespace", c.meta.namespace.as_deref().unwrap_or_default()),
                ("configmap", &c.meta.name),
            ]),
            1.0,
        );
    }
    for p in w.pvcs.values().filter(|p| in_scope(&p.meta.namespace)) {
        for ph in ["Bound", "Lost", "Pending"] {
            o.push(
                "kube_persistentvolumeclaim_status_phase",
                ksm(&[
                    ("namespace", p.meta.namespace.as_deref().unwrap_or_default()),
                    ("persistentvolumeclaim", &p.meta.name),
                    ("phase", ph),
                ]),
                b(ph == "Bound"),
            );
        }
    }
    for q in w.quotas.values().filter(|q| in_scope(&q.meta.namespace)) {
        let ns = q.meta.namespace.as_deref().unwrap_or_default();
        for (res, hard) in &q.hard {
            let parse = |v: &str| {
                if res.ends_with("memory") {
                    super::util::parse_memory(v).unwrap_or(0) as f64
                } else if res.ends_with("cpu") {
                    super::util::parse_cpu(v).unwrap_or(0) as f64 / 1000.0
                } else {
                    v.parse().unwrap_or(0.0)
                }
            };
            o.push(
                "kube_resourcequota",
                ksm(&[
                    ("namespace", ns),
                    ("resourcequota", &q.meta.name),
                    ("resource", res),
                    ("type", "hard"),
                ]),
                parse(hard),
            );
            o.push(
                "kube_resourcequota",
                ksm(&[
                    ("namespace", ns),
                    ("resourcequota", &q.meta.name),
                    ("resource", res),
                    ("type", "used"),
                ]),
                parse(q.used.get(res).map(String::as_str).unwrap_or("0")),
            );
        }
    }
    for np in w.netpols.values().filter(|n| in_scope(&n.meta.namespace)) {
        o.push(
            "kube_networkpolicy_spec_ingress_rules",
            ksm(&[
                (
                    "namespace",
                    np.meta.namespace.as_deref().unwrap_or_default(),
                ),
                ("networkpolicy", &np.meta.name),
            ]),
            0.0,
        );
    }
    // cAdvisor, per node whose kubelet answers.
    let mut node_cpu: BTreeMap<String, f64> = BTreeMap::new();
    for p in w.pods.values() {
        let Some(node) = &p.spec.node_name else {
            continue;
        };
        if w.runtime.node(node).kubelet_down || !in_scope(&p.meta.namespace) {
            continue;
        }
        let nip = w
            .nodes
            .get(node)
            .map(|n| format!("{}:10250", n.ip))
            .unwrap_or_default();
        let ns = p.meta.namespace.as_deref().unwrap_or_default();
        let qos = p.qos_class().to_ascii_lowercase();
        for (c, s) in p.spec.containers.iter().zip(&p.statuses) {
            let Some(cid) = &s.container_id else { continue };
            let short = cid.trim_start_matches("containerd://");
            let id = format!("/kubepods/{qos}/pod{}/{short}", p.meta.uid);
            let l = labels(&[
                ("job", "kubelet"),
                ("metrics_path", "/metrics/cadvisor"),
                ("instance", &nip),
                ("node", node),
                ("namespace", ns),
                ("pod", &p.meta.name),
                ("container", &c.name),
                ("image", &c.image),
                ("name", short),
                ("id", &id),
            ]);
            *node_cpu.entry(node.clone()).or_default() += s.cpu_seconds;
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
            let ooms = f64::from(s.restart_count)
                * b(s.last.as_ref().is_some_and(|t| t.reason == "OOMKilled"));
            o.push("container_oom_events_total", l, ooms);
        }
        if p.pod_ip.is_some() {
            let id = format!("/kubepods/{qos}/pod{}", p.meta.uid);
            let l = labels(&[
                ("job", "kubelet"),
                ("metrics_path", "/metrics/cadvisor"),
                ("instance", &nip),
                ("node", node),
                ("namespace", ns),
                ("pod", &p.meta.name),
                ("interface", "eth0"),
                ("id", &id),
            ]);
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
    }
    for n in w.nodes.values() {
        if w.runtime.node(&n.meta.name).kubelet_down {
            continue;
        }
        let nr = w.runtime.node(&n.meta.name);
        let demand: f64 = w
            .pods
            .values()
            .filter(|p| p.spec.node_name.as_ref() == Some(&n.meta.name))
            .filter_map(|p| {
                w.demand.get(&key(
                    p.meta.namespace.as_deref().unwrap_or_default(),
                    &p.meta.name,
                ))
            })
            .sum::<f64>()
            + nr.cpu_stress_milli as f64 / 1000.0
            + 0.15;
        let inst = format!("{}:9100", n.ip);
        let l = labels(&[
            ("job", "node-exporter"),
            ("instance", &inst),
            ("node", &n.meta.name),
        ]);
        o.push("node_load1", l.clone(), (demand * 100.0).round() / 100.0);
        let used: f64 = w
            .pods
            .values()
            .filter(|p| p.spec.node_name.as_ref() == Some(&n.meta.name))
            .flat_map(|p| &p.statuses)
            .map(|s| s.working_set)
            .sum();
        o.push("node_memory_MemTotal_bytes", l.clone(), n.memory as f64);
        o.push(
            "node_memory_MemAvailable_bytes",
            l,
            (n.memory as f64 - used - 900e6).max(0.0).round(),
        );
    }
    let _ = node_cpu;
    app_metrics(&mut o, w, app, wl);
}

/// RED metrics as the app's instrumentation exports them.
fn app_metrics(o: &mut Out, w: &World, app: &AppSpec, wl: &Workload) {
    let ns = app.namespace.as_str();
    if wl.spanmetrics() {
        // The OTel collector's spanmetrics connector: per service and span, all pods together.
        let mut agg: BTreeMap<(String, String), OpCounters> = BTreeMap::new();
        for ((pk, op), c) in &wl.counters {
            let Some(p) = w.pods.get(pk) else { continue };
            let Some(svc) = p
                .spec
                .containers
                .first()
                .and_then(|c| super::programs::identify(app, c))
                .map(|pr| pr.spec.name.clone())
            else {
                continue;
            };
            let e = agg.entry((svc, op.clone())).or_insert_with(|| OpCounters {
                buckets: vec![0.0; c.buckets.len()],
                ..OpCounters::default()
            });
            e.requests += c.requests;
            e.errors += c.errors;
            e.duration_sum += c.duration_sum;
            for (i, v) in c.buckets.iter().enumerate() {
                e.buckets[i] += v;
            }
        }
        for ((svc, op), c) in agg {
            let (req, err, sum, buckets) = (c.requests, c.errors, c.duration_sum, c.buckets);
            let name = op.strip_prefix("HTTP ").unwrap_or(&op).to_string();
            let kind = if app.service(&svc).is_some_and(|s| s.ports.is_empty()) {
                "SPAN_KIND_CONSUMER"
            } else {
                "SPAN_KIND_SERVER"
            };
            let base = |status: &str| {
                labels(&[
                    ("job", "otel-collector"),
                    ("instance", "otel-collector:8889"),
                    ("namespace", ns),
                    ("service_name", &svc),
                    ("span_name", &name),
                    ("span_kind", kind),
                    ("status_code", status),
                ])
            };
            o.push(
                "traces_span_metrics_calls_total",
                base("STATUS_CODE_UNSET"),
                req - err,
            );
            if err > 0.0 {
                o.push(
                    "traces_span_metrics_calls_total",
                    base("STATUS_CODE_ERROR"),
                    err,
                );
            }
            let hl = base("STATUS_CODE_UNSET");
            let mut cum = 0.0;
            for (i, bnd) in wl.buckets.iter().enumerate() {
                cum += buckets[i];
                let mut l = hl.clone();
                l.insert("le".into(), format_le(bnd * 1000.0));
                o.push(
                    "traces_span_metrics_duration_milliseconds_bucket",
                    l,
                    cum.min(req),
                );
            }
            let mut l = hl.clone();
            l.insert("le".into(), "+Inf".into());
            o.push("traces_span_metrics_duration_milliseconds_bucket", l, req);
            o.push(
                "traces_span_metrics_duration_milliseconds_sum",
                hl.clone(),
                (sum * 1000.0 * 1000.0).round() / 1000.0,
            );
            o.push("traces_span_metrics_duration_milliseconds_count", hl, req);
        }
        return;
    }
    for ((pk, op), c) in &wl.counters {
        let Some(p) = w.pods.get(pk) else { continue };
        let Some(prog) = p
            .spec
            .containers
            .first()
            .and_then(|c| super::programs::identify(app, c))
        else {
            continue;
        };
        let port = prog.spec.ports.first();
        let inst = format!(
            "{}:{}",
            p.pod_ip.as_deref().unwrap_or(""),
            port.map(|p| p.target_port()).unwrap_or(0)
        );
        let base = [
            ("job", prog.spec.name.as_str()),
            ("instance", inst.as_str()),
            ("namespace", ns),
            ("pod", p.meta.name.as_str()),
        ];
        match port.map(|p| p.protocol) {
            Some(Protocol::Grpc) => {
                let trimmed = op.trim_start_matches('/');
                let (gs, gm) = trimmed.split_once('/').unwrap_or((trimmed, trimmed));
                let mut l = base.to_vec();
                l.extend([
                    ("grpc_service", gs),
                    ("grpc_method", gm),
                    ("grpc_type", "unary"),
                ]);
                o.push("grpc_server_started_total", labels(&l), c.requests);
                for (code, n) in &c.by_code {
                    let mut lc = l.clone();
                    lc.push(("grpc_code", code.as_str()));
                    o.push("grpc_server_handled_total", labels(&lc), *n);
                }
                hist(
                    o,
                    "grpc_server_handling_seconds",
                    &labels(&l),
                    c,
                    &wl.buckets,
                );
            }
            Some(Protocol::Http) => {
                let mut parts = op.split_whitespace();
                let (method, handler) = match (parts.next(), parts.next(), parts.next()) {
                    (Some("HTTP"), Some(m), Some(h)) => (m, h),
                    (Some(m), Some(h), _) => (m, h),
                    (Some(h), None, _) => ("GET", h),
                    _ => ("GET", "/"),
                };
                let mut l = base.to_vec();
                l.extend([("handler", handler), ("method", method)]);
                for (code, n) in &c.by_code {
                    let status = if code == "OK" { "200" } else { "500" };
                    let mut lc = l.clone();
                    lc.push(("code", status));
                    o.push("http_requests_total", labels(&lc), *n);
                }
                hist(
                    o,
                    "http_request_duration_seconds",
                    &labels(&l),
                    c,
                    &wl.buckets,
                );
            }
            _ => {}
        }
    }
}

fn format_le(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

fn hist(o: &mut Out, name: &str, l: &Labels, c: &super::workload::OpCounters, bounds: &[f64]) {
    let mut cum = 0.0;
    for (i, bnd) in bounds.iter().enumerate() {
        cum += c.buckets[i];
        let mut lb = l.clone();
        lb.insert("le".into(), format_le(*bnd));
        o.push(&format!("{name}_bucket"), lb, cum.min(c.requests));
    }
    let mut lb = l.clone();
    lb.insert("le".into(), "+Inf".into());
    o.push(&format!("{name}_bucket"), lb, c.requests);
    o.push(&format!("{name}_sum"), l.clone(), c.duration_sum);
    o.push(&format!("{name}_count"), l.clone(), c.requests);
}
