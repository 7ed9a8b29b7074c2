//! Runtime conditions end with what holds them, as on a real node, so that the fixes an operator
//! reaches through the Kubernetes API work on them and nothing else does:
//!
//! - a lock held by a session, leaked file descriptors, a password or TLS mode set at runtime
//!   live in a service's processes: they end once every running process of the service started
//!   after they began (a rollout restart, a deleted pod, or a crash and restart);
//! - latency or loss set up with `tc` lives in the network namespaces of the pods it was added
//!   to (the caller's; the callee's when every caller is impaired): it ends once every pod of
//!   that service was created after it, while a restarted container keeps its pod's namespace;
//! - failing reads come from the disks of the nodes the service ran on: they end once no pod of
//!   the service runs on those nodes (the node cordoned and the pod moved).
//!
//! What no API reaches stays: a database's dropped user or revoked roles (stored in its data),
//! CPU stressors on a node and a stopped kubelet.

use std::collections::BTreeMap;

use problems::AppSpec;

use crate::objects::Pod;
use crate::programs;
use crate::world::World;

/// One process of a service: its pod (with its creation time and node) and when it started.
struct Process<'w> {
    pod: &'w Pod,
    started: i64,
}

/// The running processes of every app service, by service name.
fn processes<'w>(w: &'w World, app: &'w AppSpec) -> BTreeMap<&'w str, Vec<Process<'w>>> {
    let mut out: BTreeMap<&str, Vec<Process>> = BTreeMap::new();
    for p in w.pods.values().filter(|p| p.meta.deleted_at.is_none()) {
        for (c, s) in p.spec.containers.iter().zip(&p.statuses) {
            let crate::objects::CState::Running { started } = s.state else {
                continue;
            };
            if let Some(pr) = programs::identify(app, c) {
                out.entry(pr.spec.name.as_str())
                    .or_default()
                    .push(Process { pod: p, started });
            }
        }
    }
    out
}

/// Nodes that pods running `service` are bound to, for the disks a fault makes fail.
pub fn nodes_running(w: &World, app: &AppSpec, service: &str) -> Vec<String> {
    let mut nodes: Vec<String> = processes(w, app)
        .remove(service)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.pod.spec.node_name.clone())
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// Ends the conditions whose holders are gone. Called once a second, before the workload reads
/// the runtime.
pub fn expire(w: &mut World, app: &AppSpec) {
    // Called every simulated second: nothing to look at unless some condition has a holder.
    let held = !w.runtime.links.is_empty()
        || w.runtime
            .services
            .values()
            .any(|rt| rt.process_since.is_some() || rt.disk_read_errors > 0.0);
    if !held {
        return;
    }
    let (ended_processes, ended_disks, ended_links) = {
        let procs = processes(w, app);
        let none = Vec::new();
        let of = |s: &str| procs.get(s).unwrap_or(&none);
        let processes: Vec<String> = w
            .runtime
            .services
            .iter()
            .filter(|(s, rt)| {
                rt.process_since.is_some_and(|since| {
                    let ps = of(s);
                    !ps.is_empty() && ps.iter().all(|p| p.started > since)
                })
            })
            .map(|(s, _)| s.clone())
            .collect();
        let disks: Vec<String> = w
            .runtime
            .services
            .iter()
            .filter(|(s, rt)| {
                rt.disk_read_errors > 0.0 && !rt.disk_nodes.is_empty() && {
                    let ps = of(s);
                    !ps.is_empty()
                        && ps.iter().all(|p| {
                            p.pod
                                .spec
                                .node_name
                                .as_ref()
                                .is_none_or(|n| !rt.disk_nodes.contains(n))
                        })
                }
            })
            .map(|(s, _)| s.clone())
            .collect();
        let links: Vec<(String, String)> = w
            .runtime
            .links
            .iter()
            .filter(|((from, to), l)| {
                let holder = if from == "*" { to } else { from };
                let ps = of(holder);
                !ps.is_empty() && ps.iter().all(|p| p.pod.meta.created > l.since)
            })
            .map(|(k, _)| k.clone())
            .collect();
        (processes, disks, links)
    };
    for s in ended_processes {
        if let Some(rt) = w.runtime.services.get_mut(&s) {
            rt.locked_table = None;
            rt.syscall_failure = None;
            if !rt.db_auth.persists() {
                rt.db_auth = Default::default();
            }
            rt.process_since = None;
        }
    }
    for s in ended_disks {
        if let Some(rt) = w.runtime.services.get_mut(&s) {
            rt.disk_read_errors = 0.0;
            rt.disk_nodes.clear();
        }
    }
    for k in ended_links {
        w.runtime.links.remove(&k);
    }
}
