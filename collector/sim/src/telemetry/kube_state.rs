//! kube-state-metrics: one series per object state, labelled as KSM labels them (its job and
//! instance on every series). Pods (with their containers), workloads, nodes, services and
//! endpoints, config maps, claims, quotas and network policies in the scraped namespaces; nodes
//! are cluster-wide.

use std::collections::BTreeMap;

use schemas::tables::Labels;

use crate::objects::*;
use crate::util::{parse_cpu, parse_memory};
use crate::world::World;

use super::{Family, Out, Scope, b, labels};

pub(super) const FAMILIES: &[Family] = &[
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
        "kube_pod_status_unschedulable",
        "gauge",
        "Describes the unschedulable status for the pod.",
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
        "kube_pod_container_status_terminated_reason",
        "gauge",
        "Describes the reason the container is currently in terminated state.",
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
        "kube_node_status_capacity",
        "gauge",
        "The capacity for different resources of a node.",
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
];

const KSM: [(&str, &str); 2] = [
    ("job", "kube-state-metrics"),
    ("instance", "10.244.0.4:8080"),
];

fn ksm(extra: &[(&str, &str)]) -> Labels {
    let mut l = labels(&KSM);
    l.extend(labels(extra));
    l
}

/// Every object kind KSM watches, in the order the scrape lists them.
pub(super) fn scrape(o: &mut Out, w: &World, scope: Scope) {
    o.up(&KSM, true);
    for p in in_scope(&w.pods, scope, |p| &p.meta) {
        pod_status(o, w, p);
        for (c, s) in p.spec.containers.iter().zip(&p.statuses) {
            container_status(o, p, c, s);
        }
        for (c, s) in p.spec.init_containers.iter().zip(&p.init_statuses) {
            init_container_status(o, p, c, s);
        }
    }
    for d in in_scope(&w.deployments, scope, |d| &d.meta) {
        deployment(o, d);
    }
    for s in in_scope(&w.statefulsets, scope, |s| &s.meta) {
        statefulset(o, s);
    }
    for r in in_scope(&w.replicasets, scope, |r| &r.meta) {
        replicaset(o, r);
    }
    for n in w.nodes.values() {
        node(o, n);
    }
    for s in in_scope(&w.services, scope, |s| &s.meta) {
        service(o, s);
    }
    for e in in_scope(&w.endpoints, scope, |e| &e.meta) {
        endpoints(o, e);
    }
    for c in in_scope(&w.configmaps, scope, |c| &c.meta) {
        configmap(o, c);
    }
    for p in in_scope(&w.pvcs, scope, |p| &p.meta) {
        pvc(o, p);
    }
    for q in in_scope(&w.quotas, scope, |q| &q.meta) {
        quota(o, q);
    }
    for np in in_scope(&w.netpols, scope, |n| &n.meta) {
        netpol(o, np);
    }
}

/// The objects of one kind in the scraped namespaces, in key order.
fn in_scope<'a, T>(
    objects: &'a BTreeMap<Key, T>,
    scope: Scope<'a>,
    meta: impl Fn(&T) -> &Meta + 'a,
) -> impl Iterator<Item = &'a T> + 'a {
    objects
        .values()
        .filter(move |x| scope.contains(&meta(x).namespace))
}

/// Namespace, name and uid: the labels naming a pod on every pod-level series.
fn pod_id(p: &Pod) -> (&str, &str, &str) {
    (
        p.meta.namespace.as_deref().unwrap_or_default(),
        p.meta.name.as_str(),
        p.meta.uid.as_str(),
    )
}

/// Info, owner, phase, readiness and scheduling. A pod being deleted on a node whose kubelet is
/// down reports phase `Unknown`, as kube-state-metrics does for a lost node.
fn pod_status(o: &mut Out, w: &World, p: &Pod) {
    let (ns, pod, uid) = pod_id(p);
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
    let unschedulable = p.conditions.iter().any(|c| {
        c.kind == "PodScheduled" && !c.status && c.reason.as_deref() == Some("Unschedulable")
    });
    if unschedulable {
        o.push(
            "kube_pod_status_unschedulable",
            ksm(&[("namespace", ns), ("pod", pod), ("uid", uid)]),
            1.0,
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
}

/// Info, restarts, state (with waiting and last-terminated reasons) and resources.
fn container_status(o: &mut Out, p: &Pod, c: &Container, s: &ContainerStatus) {
    let (ns, pod, uid) = pod_id(p);
    let node = p.spec.node_name.as_deref().unwrap_or_default();
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
    if let CState::Terminated(t) = &s.state {
        let mut l = base.to_vec();
        l.push(("reason", t.reason.as_str()));
        o.push("kube_pod_container_status_terminated_reason", ksm(&l), 1.0);
    }
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
            l.extend([("node", node), ("resource", "cpu"), ("unit", "core")]);
            o.push(kind, ksm(&l), cpu as f64 / 1000.0);
        }
        if let Some(mem) = list.memory {
            let mut l = base.to_vec();
            l.extend([("node", node), ("resource", "memory"), ("unit", "byte")]);
            o.push(kind, ksm(&l), mem as f64);
        }
    }
}

fn init_container_status(o: &mut Out, p: &Pod, c: &Container, s: &ContainerStatus) {
    let (ns, pod, uid) = pod_id(p);
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

fn deployment(o: &mut Out, d: &Deployment) {
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

fn statefulset(o: &mut Out, s: &StatefulSet) {
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

fn replicaset(o: &mut Out, r: &ReplicaSet) {
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

fn node(o: &mut Out, n: &Node) {
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
    for (resource, unit, value) in [
        ("cpu", "core", n.cpu_milli as f64 / 1000.0),
        ("memory", "byte", n.memory as f64),
        ("pods", "integer", n.max_pods as f64),
    ] {
        o.push(
            "kube_node_status_capacity",
            ksm(&[("node", name), ("resource", resource), ("unit", unit)]),
            value,
        );
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

fn service(o: &mut Out, s: &Service) {
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

fn endpoints(o: &mut Out, e: &Endpoints) {
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

fn configmap(o: &mut Out, c: &ConfigMap) {
    o.push(
        "kube_configmap_info",
        ksm(&[
            ("namespace", c.meta.namespace.as_deref().unwrap_or_default()),
            ("configmap", &c.meta.name),
        ]),
        1.0,
    );
}

fn pvc(o: &mut Out, p: &Pvc) {
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

fn quota(o: &mut Out, q: &ResourceQuota) {
    let ns = q.meta.namespace.as_deref().unwrap_or_default();
    for (res, hard) in &q.hard {
        let parse = |v: &str| {
            if res.ends_with("memory") {
                parse_memory(v).unwrap_or(0) as f64
            } else if res.ends_with("cpu") {
                parse_cpu(v).unwrap_or(0) as f64 / 1000.0
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

fn netpol(o: &mut Out, np: &NetworkPolicy) {
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
