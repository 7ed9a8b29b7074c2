//! Conditions below the Kubernetes API, read from the world's runtime (`cluster::runtime`):
//! network delay or loss on a link, failing disk reads and syscalls in a process, a database's
//! authentication and locks, CPU stressors and a stopped kubelet on a node, the load
//! generator's rate. Each is cleared when the runtime no longer holds it (the simulator ends
//! them with the processes, pods and disks that hold them, or another part of the environment
//! gives agents a way to end them); the services involved must still serve, so deleting the
//! workload that holds a condition does not count.

use problems::primitive::Primitive;
use sim::runtime::DbAuth;

use super::{Outcome, no_check};
use crate::view::View;

pub(super) fn check(v: &View, p: &Primitive) -> Outcome {
    use Primitive as P;
    match p {
        P::DatabaseAuth {
            service,
            restart_clients,
            ..
        } => auth_works(v, service, restart_clients),
        P::DatabaseLock { service, .. } => unlocked(v, service),
        P::NetworkDelay { from, to, .. } => link_clean(v, from, to, false),
        P::NetworkLoss { from, to, .. } => link_clean(v, from, to, true),
        P::NodeCpuStress { node, .. } => node_unstressed(v, node),
        P::KubeletDown { node } => kubelet_up(v, node),
        P::DiskReadErrors { service, .. } => disk_reads_work(v, service),
        P::SyscallFailure { service, .. } => syscalls_work(v, service),
        P::LoadSpike { .. } => load_normal(v),
        other => Err(no_check(other)),
    }
}

fn auth_works(v: &View, service: &str, clients: &[String]) -> Outcome {
    v.serving(service)?;
    for c in clients {
        v.serving(c)?;
    }
    let why = match v.w.runtime.service(service).db_auth {
        DbAuth::Ok => return Ok(()),
        DbAuth::RolesRevoked => "its client user's roles are revoked",
        DbAuth::UserRemoved => "its client user was dropped",
        DbAuth::TlsRequired => "it requires TLS its clients do not speak",
        DbAuth::PasswordChanged => "its password was changed under its clients",
    };
    Err(format!(
        "database {} rejects its clients: {why}",
        v.name("Service", service)
    ))
}

fn unlocked(v: &View, service: &str) -> Outcome {
    v.serving(service)?;
    match v.w.runtime.service(service).locked_table {
        None => Ok(()),
        Some(table) => Err(format!(
            "a session still holds an exclusive lock on table {table} in database {}",
            v.name("Service", service)
        )),
    }
}

/// No delay (or loss) is left on the link from `from` (`*`: every caller) to `to`.
fn link_clean(v: &View, from: &str, to: &str, loss: bool) -> Outcome {
    if from != "*" {
        v.serving(from)?;
    }
    v.serving(to)?;
    let Some(l) = v.w.runtime.links.get(&(from.to_string(), to.to_string())) else {
        return Ok(());
    };
    let ns = v.ns;
    let callers = if from == "*" {
        "every caller".to_string()
    } else {
        format!("{ns}/{from}")
    };
    if loss && l.loss > 0.0 {
        return Err(format!(
            "packets from {callers} to {ns}/{to} are still dropped ({:.0}%)",
            l.loss * 100.0
        ));
    }
    if !loss && l.delay_ms > 0.0 {
        return Err(format!(
            "traffic from {callers} to {ns}/{to} is still delayed by {:.0} ms",
            l.delay_ms
        ));
    }
    Ok(())
}

/// The stressors are gone, or the app no longer runs beside them (the node cordoned and
/// drained: what an operator does about a noisy node whose hogs they cannot stop).
fn node_unstressed(v: &View, node: &str) -> Outcome {
    let Some(n) = v.w.nodes.get(node) else {
        return Err(format!("Node {node} does not exist"));
    };
    let burn = v.w.runtime.node(node).cpu_stress_milli;
    if burn == 0 {
        return Ok(());
    }
    let ours: Vec<&str> =
        v.w.pods
            .values()
            .filter(|p| {
                p.meta.namespace.as_deref() == Some(v.ns)
                    && p.meta.deleted_at.is_none()
                    && p.spec.node_name.as_deref() == Some(node)
            })
            .map(|p| p.meta.name.as_str())
            .collect();
    match ours.first() {
        None if n.unschedulable => Ok(()),
        None => Err(format!(
            "Node {node} still runs CPU stressors burning {burn}m and is not cordoned: the app's pods may land there again"
        )),
        Some(pod) => Err(format!(
            "Node {node} still runs CPU stressors burning {burn}m beside {} pod(s) of namespace {} (e.g. {pod})",
            ours.len(),
            v.ns
        )),
    }
}

fn kubelet_up(v: &View, node: &str) -> Outcome {
    let n =
        v.w.nodes
            .get(node)
            .ok_or_else(|| format!("Node {node} does not exist"))?;
    if v.w.runtime.node(node).kubelet_down {
        return Err(format!("the kubelet of Node {node} is stopped"));
    }
    if !n.ready() {
        return Err(format!("Node {node} is not Ready yet"));
    }
    Ok(())
}

fn disk_reads_work(v: &View, service: &str) -> Outcome {
    v.serving(service)?;
    let rt = v.w.runtime.service(service);
    if rt.disk_read_errors > 0.0 {
        return Err(format!(
            "{:.0}% of the storage reads of {} still fail with EIO (disks of node(s) {})",
            rt.disk_read_errors * 100.0,
            v.name("Service", service),
            rt.disk_nodes.join(", ")
        ));
    }
    Ok(())
}

fn syscalls_work(v: &View, service: &str) -> Outcome {
    v.serving(service)?;
    match v.w.runtime.service(service).syscall_failure {
        None => Ok(()),
        Some((error, ratio)) => Err(format!(
            "{:.0}% of a syscall of the processes of {} still fail ({error})",
            ratio * 100.0,
            v.name("Service", service)
        )),
    }
}

fn load_normal(v: &View) -> Outcome {
    let m = v.w.runtime.load_multiplier;
    if m > 1.0 {
        return Err(format!(
            "the load generator still runs at {m}x its rate against namespace {}",
            v.ns
        ));
    }
    Ok(())
}
