//! How the kubelet runs and checks a workload's containers: health probes that succeed against
//! the process (a port it listens on, the protocol it speaks there, a path it serves), a memory
//! limit above the working set, a CPU limit that does not starve it, and requests some node can
//! hold.

use problems::app::{Protocol, ServiceSpec};
use problems::primitive::Primitive;
use sim::objects::{Container, IntOrString, Probe};
use sim::programs;
use sim::util::{cpu_quantity, memory_quantity};

use super::{Outcome, no_check};
use crate::view::{View, Workload, ports};

/// The working set a process reaches under load, relative to its resting use (the kubelet's
/// memory model grows it by up to a fifth with load).
const PEAK_MEMORY_FACTOR: f64 = 1.2;
/// A CPU limit the oracle accepts for a manifest that sets none, in millicores.
const CPU_LIMIT_WITHOUT_MANIFEST: i64 = 1000;
/// Memory a node keeps for itself (allocatable = capacity - this), as the scheduler counts it.
const NODE_RESERVED_MEMORY: i64 = 100 << 20;

pub(super) fn check(v: &View, p: &Primitive) -> Outcome {
    use Primitive as P;
    match p {
        P::ReadinessProbe { service, .. } => probes_pass(v, service, "readiness"),
        P::LivenessProbe { service, .. } => probes_pass(v, service, "liveness"),
        P::MemoryLimit { service, .. } => {
            let wl = v.serving(service)?;
            memory_fits(v, &wl)
        }
        P::CpuLimit { service, .. } => cpu_sufficient(v, service),
        P::ResourceRequests { service, .. } => requests_fit(v, service),
        other => Err(no_check(other)),
    }
}

/// Every container's probe of the kind succeeds against its process (or there is none).
fn probes_pass(v: &View, service: &str, kind: &str) -> Outcome {
    let wl = v.serving(service)?;
    for c in &wl.template.spec.containers {
        let probe = match kind {
            "liveness" => c.liveness_probe.as_ref(),
            _ => c.readiness_probe.as_ref(),
        };
        if let Some(p) = probe {
            probe_succeeds(v, c, p).map_err(|why| {
                format!(
                    "the {kind} probe of container {} in {} fails: {why}",
                    c.name,
                    v.name(wl.kind, service)
                )
            })?;
        }
    }
    Ok(())
}

/// Whether a probe succeeds against the container's process once it runs, as the kubelet
/// probes it.
fn probe_succeeds(v: &View, c: &Container, p: &Probe) -> Outcome {
    let prog = programs::identify(v.app, c);
    let listening = programs::listen_ports(c, prog.as_ref());
    let resolve = |port: &IntOrString| match port {
        IntOrString::Int(n) => u16::try_from(*n).ok(),
        IntOrString::Str(name) => c
            .ports
            .iter()
            .find(|cp| cp.name.as_deref() == Some(name.as_str()))
            .and_then(|cp| u16::try_from(cp.container_port).ok()),
    };
    let (port, http_path) = if let Some(h) = &p.http_get {
        (resolve(&h.port), Some(h.path.as_str()))
    } else if let Some(t) = p.tcp_socket.as_ref().or(p.grpc.as_ref()) {
        (resolve(&t.port), None)
    } else {
        // An exec probe: the simulated process answers it once running.
        return Ok(());
    };
    let port = port.ok_or_else(|| "it names a port the container does not declare".to_string())?;
    if !listening.contains(&port) {
        return Err(format!(
            "nothing listens on port {port} (the process listens on {})",
            ports(&listening)
        ));
    }
    if let (Some(path), Some(pr)) = (http_path, prog.as_ref()) {
        if programs::protocol_on(pr, port) != Some(Protocol::Http) {
            return Err(format!("port {port} does not speak HTTP"));
        }
        if !programs::serves_path(pr, path) {
            return Err(format!("GET {path} on port {port} answers 404"));
        }
    }
    Ok(())
}

/// The main container's memory limit is unset, at least the manifest's, or above the working
/// set the process reaches under load.
pub(super) fn memory_fits(v: &View, wl: &Workload) -> Outcome {
    let c = v.main_container(wl)?;
    let spec = v.spec(wl.name)?;
    let Some(limit) = c.resources.limits.memory else {
        return Ok(());
    };
    let peak = peak_memory(spec);
    let manifest = spec.resources.limits.memory.map(|m| m.bytes() as i64);
    if limit >= peak || manifest.is_some_and(|m| limit >= m) {
        return Ok(());
    }
    Err(format!(
        "container {} of {} has memory limit {}, below the working set its process reaches (about {})",
        c.name,
        v.name(wl.kind, wl.name),
        memory_quantity(limit),
        memory_quantity(peak)
    ))
}

fn peak_memory(spec: &ServiceSpec) -> i64 {
    (spec.usage.memory.bytes() as f64 * PEAK_MEMORY_FACTOR).ceil() as i64
}

/// The main container's CPU limit is unset or at least the manifest's (1 CPU when the manifest
/// sets none).
fn cpu_sufficient(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    let c = v.main_container(&wl)?;
    let Some(limit) = c.resources.limits.cpu_milli else {
        return Ok(());
    };
    let needed = v
        .spec(service)?
        .resources
        .limits
        .cpu
        .map(|m| m.millicores() as i64)
        .unwrap_or(CPU_LIMIT_WITHOUT_MANIFEST);
    if limit >= needed {
        return Ok(());
    }
    Err(format!(
        "container {} of {} has CPU limit {} (at least {} expected)",
        c.name,
        v.name(wl.kind, service),
        cpu_quantity(limit),
        cpu_quantity(needed)
    ))
}

/// Some Ready, schedulable node has the capacity the pod's requests ask for.
fn requests_fit(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    let (cpu, mem) = wl.template.spec.requests();
    let fits = v.w.nodes.values().any(|n| {
        n.ready()
            && !n.unschedulable
            && cpu <= n.cpu_milli
            && mem <= n.memory - NODE_RESERVED_MEMORY
    });
    if fits {
        return Ok(());
    }
    let largest_cpu = v.w.nodes.values().map(|n| n.cpu_milli).max().unwrap_or(0);
    let largest_mem =
        v.w.nodes
            .values()
            .map(|n| n.memory - NODE_RESERVED_MEMORY)
            .max()
            .unwrap_or(0);
    Err(format!(
        "the pods of {} request cpu {} and memory {}, more than any Ready node offers (at most cpu {} and memory {})",
        v.name(wl.kind, service),
        cpu_quantity(cpu),
        memory_quantity(mem),
        cpu_quantity(largest_cpu),
        memory_quantity(largest_mem)
    ))
}
