//! Kubernetes faults on how the kubelet runs and checks a workload's main container: its health
//! probes and its resource requests and limits.

use problems::primitive::Primitive;

use crate::bootstrap;
use crate::objects::Container;

use super::Result;
use super::context::Ctx;

pub(super) fn apply(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::ReadinessProbe { service, probe } => cx.edit_container(service, |c| {
            c.readiness_probe = Some(bootstrap::to_probe(probe))
        })?,
        P::LivenessProbe { service, probe } => cx.edit(service, |t, _| {
            t.spec.termination_grace_period_seconds = 0;
            if let Some(c) = t.spec.containers.first_mut() {
                c.liveness_probe = Some(bootstrap::to_probe(probe));
            }
        })?,
        // A limit below the request is rejected by the API server: the request follows it down.
        P::MemoryLimit { service, limit } => {
            cx.edit_container(service, |c| limit_memory(c, limit.bytes() as i64))?
        }
        P::CpuLimit { service, limit } => cx.edit_container(service, |c| {
            let m = limit.millicores() as i64;
            c.resources.limits.cpu_milli = Some(m);
            if c.resources.requests.cpu_milli.is_some_and(|r| r > m) {
                c.resources.requests.cpu_milli = Some(m);
            }
        })?,
        // Likewise a request above the limit raises the limit with it.
        P::ResourceRequests {
            service,
            cpu,
            memory,
        } => cx.edit_container(service, |c| {
            if let Some(cpu) = cpu {
                let m = cpu.millicores() as i64;
                c.resources.requests.cpu_milli = Some(m);
                if c.resources.limits.cpu_milli.is_some_and(|l| l < m) {
                    c.resources.limits.cpu_milli = Some(m);
                }
            }
            if let Some(mem) = memory {
                let b = mem.bytes() as i64;
                c.resources.requests.memory = Some(b);
                if c.resources.limits.memory.is_some_and(|l| l < b) {
                    c.resources.limits.memory = Some(b);
                }
            }
        })?,
        other => unreachable!("`{}` is not a probe or resources fault", other.name()),
    }
    Ok(())
}

/// Sets the memory limit, lowering the request to it if it was higher (a request above the
/// limit is rejected by the API server).
pub(super) fn limit_memory(c: &mut Container, bytes: i64) {
    c.resources.limits.memory = Some(bytes);
    if c.resources.requests.memory.is_some_and(|r| r > bytes) {
        c.resources.requests.memory = Some(bytes);
    }
}
