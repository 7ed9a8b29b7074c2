//! `fault_cleared`: whether the condition a fault primitive created no longer holds and the
//! object it changed is in a working state again. Reverting the fault exactly passes; so does an
//! equivalent fix (a readiness probe on another port the process listens on, a toleration
//! instead of a removed taint, a NetworkPolicy changed to allow the traffic, ...). Deleting the
//! workload, scaling it to zero or removing its Service never does.
//!
//! Each primitive goes to the module of its family, the way `sim::faults` groups what the
//! primitives change: `services` (Service ports and selectors, NetworkPolicies, DNS),
//! `containers` (image, env, command, sidecars, init containers), `resources` (probes, limits,
//! requests), `scheduling` (placement, replicas, volumes, quotas), `config` (ConfigMaps, feature
//! flags), `runtime` (conditions below the API: network, kernel, node, database, load) and
//! `load` (client and runtime settings that turn load into overload). The checks mirror what the
//! simulator's controllers, kubelet and data plane decide from the same state.

mod config;
mod containers;
mod load;
mod resources;
mod runtime;
mod scheduling;
mod services;

use problems::primitive::Primitive;

use crate::view::View;

type Outcome = Result<(), String>;

/// Whether the condition the primitive created is gone and its objects work again.
pub(crate) fn check(v: &View, p: &Primitive) -> Outcome {
    use Primitive as P;
    // Listed one by one (no `_`): a new primitive does not compile until it has a check.
    match p {
        P::ServiceTargetPort { .. }
        | P::ServicePort { .. }
        | P::ServiceSelector { .. }
        | P::ServiceSelectsOther { .. }
        | P::ServiceDelete { .. }
        | P::NetworkPolicyDeny { .. }
        | P::DnsFailure { .. }
        | P::DnsPolicy { .. } => services::check(v, p),
        P::ContainerImage { .. }
        | P::EnvRemove { .. }
        | P::EnvSet { .. }
        | P::EnvAddressPort { .. }
        | P::RbacDeniedInit { .. }
        | P::InitContainerHang { .. }
        | P::WrongCommand { .. }
        | P::SidecarPortConflict { .. } => containers::check(v, p),
        P::ReadinessProbe { .. }
        | P::LivenessProbe { .. }
        | P::MemoryLimit { .. }
        | P::CpuLimit { .. }
        | P::ResourceRequests { .. } => resources::check(v, p),
        P::NodeSelector { .. }
        | P::NodeTaint { .. }
        | P::AntiAffinityDeadlock { .. }
        | P::Scale { .. }
        | P::PvcClaimMismatch { .. }
        | P::ResourceQuota { .. } => scheduling::check(v, p),
        P::ConfigMapKeyDrift { .. } | P::ConfigMapDelete { .. } | P::FeatureFlag { .. } => {
            config::check(v, p)
        }
        P::DatabaseAuth { .. }
        | P::DatabaseLock { .. }
        | P::NetworkDelay { .. }
        | P::NetworkLoss { .. }
        | P::NodeCpuStress { .. }
        | P::KubeletDown { .. }
        | P::DiskReadErrors { .. }
        | P::SyscallFailure { .. }
        | P::LoadSpike { .. } => runtime::check(v, p),
        P::RpcRetryConfig { .. } | P::GcPressure { .. } => load::check(v, p),
    }
}

/// The failure of a family module handed a primitive it has no check for (the dispatch above
/// makes this unreachable; a failure, never a silent pass, if that ever changes).
fn no_check(p: &Primitive) -> String {
    format!("no check for primitive {}", p.name())
}
