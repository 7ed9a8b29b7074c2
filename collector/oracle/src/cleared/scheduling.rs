//! Where and whether pods can be placed: some Ready node admits the workload's pods (taints
//! tolerated, nodeSelector matched), enough nodes for a required anti-affinity on its own pods,
//! the replica count restored, every mounted claim existing, and ResourceQuotas admitting the
//! recreated pods, as the simulator's scheduler and admission decide.

use problems::primitive::Primitive;
use sim::objects::{Container, Node, PodSpec, key, selects};
use sim::util::{cpu_quantity, memory_quantity, parse_cpu, parse_memory};

use super::{Outcome, no_check};
use crate::view::{View, labels};

pub(super) fn check(v: &View, p: &Primitive) -> Outcome {
    use Primitive as P;
    match p {
        P::NodeSelector { service, .. } => placeable(v, service).map(|_| ()),
        P::NodeTaint {
            nodes, key, evict, ..
        } => taint_cleared(v, nodes, key, evict),
        P::AntiAffinityDeadlock { service, .. } => spread_fits(v, service),
        P::Scale { service, replicas } => replicas_restored(v, service, *replicas),
        P::PvcClaimMismatch { service, .. } => claims_exist(v, service),
        P::ResourceQuota { recreate, .. } => recreate.iter().try_for_each(|s| quota_admits(v, s)),
        other => Err(no_check(other)),
    }
}

/// Why a node does not take pods of this spec, ignoring their resources.
fn node_refuses(node: &Node, spec: &PodSpec) -> Option<String> {
    if !node.ready() {
        return Some("not Ready".into());
    }
    if node.unschedulable {
        return Some("cordoned".into());
    }
    for t in node
        .taints
        .iter()
        .filter(|t| t.effect != "PreferNoSchedule")
    {
        let tolerated = spec.tolerations.iter().any(|tol| tol.tolerates(t));
        if !tolerated {
            let value = t.value.as_deref().unwrap_or_default();
            return Some(format!("untolerated taint {}={value}:{}", t.key, t.effect));
        }
    }
    if !spec
        .node_selector
        .iter()
        .all(|(k, val)| node.meta.labels.get(k) == Some(val))
    {
        return Some(format!(
            "labels do not match nodeSelector {}",
            labels(&spec.node_selector)
        ));
    }
    None
}

/// Nodes that admit the service's pods; an error naming each node's refusal when none does.
fn placeable<'a>(v: &View<'a>, service: &str) -> Result<Vec<&'a str>, String> {
    let wl = v.serving(service)?;
    let spec = &wl.template.spec;
    let mut ok = vec![];
    let mut refusals = vec![];
    for (name, node) in &v.w.nodes {
        match node_refuses(node, spec) {
            None => ok.push(name.as_str()),
            Some(why) => refusals.push(format!("Node {name}: {why}")),
        }
    }
    if ok.is_empty() {
        return Err(format!(
            "no node can take the pods of {} ({})",
            v.name(wl.kind, service),
            refusals.join("; ")
        ));
    }
    Ok(ok)
}

/// The taint is gone from the nodes, or every evicted service's pods can be placed again
/// (a toleration added, or some other node free of it).
fn taint_cleared(v: &View, nodes: &[String], taint_key: &str, evict: &[String]) -> Outcome {
    if !evict.is_empty() {
        return evict.iter().try_for_each(|s| placeable(v, s).map(|_| ()));
    }
    for n in nodes {
        let node =
            v.w.nodes
                .get(n)
                .ok_or_else(|| format!("Node {n} does not exist"))?;
        if let Some(t) = node.taints.iter().find(|t| t.key == taint_key) {
            return Err(format!("Node {n} still has taint {}:{}", t.key, t.effect));
        }
    }
    Ok(())
}

/// A required anti-affinity on the workload's own pods (one per node) leaves room for every
/// replica.
fn spread_fits(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    let nodes = placeable(v, service)?;
    let own = &wl.template.metadata.labels;
    let one_per_node = wl.template.spec.affinity.as_ref().is_some_and(|a| {
        a.pod_anti_affinity
            .required_during_scheduling_ignored_during_execution
            .iter()
            .any(|t| {
                t.topology_key == "kubernetes.io/hostname"
                    && selects(&t.label_selector.match_labels, own)
            })
    });
    if one_per_node && wl.replicas as usize > nodes.len() {
        return Err(format!(
            "{} wants {} replicas, at most one per node (required anti-affinity on its own pods), and only {} node(s) can take them",
            v.name(wl.kind, service),
            wl.replicas,
            nodes.len()
        ));
    }
    Ok(())
}

/// The workload wants replicas again, and not the injected count.
fn replicas_restored(v: &View, service: &str, injected: u32) -> Outcome {
    let wl = v.serving(service)?;
    if injected > 0 && i64::from(wl.replicas) == i64::from(injected) {
        return Err(format!(
            "{} still wants {injected} replicas",
            v.name(wl.kind, service)
        ));
    }
    Ok(())
}

/// Every claim the pods mount exists, and they still mount as many as the manifest's volumes
/// (dropping the volume would lose the data).
fn claims_exist(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    let claims: Vec<&str> = wl
        .template
        .spec
        .volumes
        .iter()
        .filter_map(|vol| vol.persistent_volume_claim.as_ref())
        .map(|p| p.claim_name.as_str())
        .collect();
    for claim in &claims {
        if !v.w.pvcs.contains_key(&key(v.ns, claim)) {
            return Err(format!(
                "{} mounts {}, which does not exist",
                v.name(wl.kind, service),
                v.name("PersistentVolumeClaim", claim)
            ));
        }
    }
    let declared = v.spec(service)?.volumes.len();
    if claims.len() < declared {
        return Err(format!(
            "{} mounts {} PersistentVolumeClaim(s), its manifest {declared}: its data would not persist",
            v.name(wl.kind, service),
            claims.len()
        ));
    }
    Ok(())
}

/// Every ResourceQuota of the namespace admits all replicas of the service's pods: the fields
/// a quota requires are declared, and the namespace's use with those replicas stays under it.
fn quota_admits(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    let containers = &wl.template.spec.containers;
    for q in
        v.w.quotas
            .values()
            .filter(|q| q.meta.namespace.as_deref() == Some(v.ns))
    {
        let quota = v.name("ResourceQuota", &q.meta.name);
        for (res, hard) in &q.hard {
            if let Some(c) = containers.iter().find(|c| undeclared(c, res)) {
                return Err(format!(
                    "{quota} requires {res} to be set, and container {} of {} sets none",
                    c.name,
                    v.name(wl.kind, service)
                ));
            }
            // Pods of other workloads as they are, this workload's at its desired count.
            let others: i64 = v
                .w
                .pods
                .values()
                .filter(|p| p.meta.namespace.as_deref() == Some(v.ns))
                .filter(|p| p.meta.deleted_at.is_none() && !selects(wl.selector, &p.meta.labels))
                .map(|p| pod_charge(&p.spec.containers, res))
                .sum();
            let own = i64::from(wl.replicas.max(0)) * pod_charge(containers, res);
            let (need, limit) = match quantity(res, hard) {
                Some(limit) => (others + own, limit),
                None => continue,
            };
            if need > limit {
                return Err(format!(
                    "{quota} limits {res} to {hard}; the namespace needs {} with all replicas of {service}",
                    show(res, need)
                ));
            }
        }
    }
    Ok(())
}

/// Whether a container lacks what a quota on `res` requires it to declare.
fn undeclared(c: &Container, res: &str) -> bool {
    let r = &c.resources;
    match res {
        "limits.memory" => r.limits.memory.is_none(),
        "limits.cpu" => r.limits.cpu_milli.is_none(),
        "requests.memory" | "memory" => r.requests.memory.is_none() && r.limits.memory.is_none(),
        "requests.cpu" | "cpu" => r.requests.cpu_milli.is_none() && r.limits.cpu_milli.is_none(),
        _ => false,
    }
}

/// What one pod counts against a quota resource (a request defaults to the limit).
fn pod_charge(containers: &[Container], res: &str) -> i64 {
    if res == "pods" {
        return 1;
    }
    containers
        .iter()
        .map(|c| {
            let r = &c.resources;
            let (limit, request) = if res.ends_with("memory") {
                (r.limits.memory, r.requests.memory)
            } else if res.ends_with("cpu") {
                (r.limits.cpu_milli, r.requests.cpu_milli)
            } else {
                return 0;
            };
            if res.starts_with("limits") {
                limit.unwrap_or(0)
            } else {
                request.or(limit).unwrap_or(0)
            }
        })
        .sum()
}

/// A quota's hard value in the unit [`pod_charge`] counts in; `None` for resources not modelled.
fn quantity(res: &str, hard: &str) -> Option<i64> {
    if res == "pods" {
        hard.parse().ok()
    } else if res.ends_with("memory") {
        parse_memory(hard)
    } else if res.ends_with("cpu") {
        parse_cpu(hard)
    } else {
        None
    }
}

fn show(res: &str, v: i64) -> String {
    if res.ends_with("memory") {
        memory_quantity(v)
    } else if res.ends_with("cpu") {
        cpu_quantity(v)
    } else {
        v.to_string()
    }
}
