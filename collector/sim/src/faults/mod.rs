//! Every fault primitive as a change to the simulated cluster's state, with an exact revert.
//!
//! Applying a primitive saves the prior version of each object or runtime entry it touches (or
//! notes that it did not exist) in an [`Undo`]; reverting puts those back, deleting what the fault
//! created. Pods the fault deleted to make a change take effect are not resurrected: their
//! controllers already replaced them, as on a real cluster. Symptoms are not scripted here: they
//! follow from the changed state through the controllers, kubelet, network and workload models.
//!
//! [`apply`] hands each primitive to the module of its layer (as `problems::primitive` groups
//! them; the Kubernetes layer is split by what the objects decide): `services`, `containers`,
//! `resources`, `scheduling`, `config`, then `app`, `network`, `node`, `kernel` and `load`.
//! `context` holds the edits they share, `undo` the saved versions and the revert.

mod app;
mod config;
mod containers;
mod context;
mod kernel;
mod load;
mod network;
mod node;
mod noise;
mod resources;
mod scheduling;
mod services;
mod undo;

use problems::NoiseKind;
use problems::app::AppSpec;
use problems::primitive::Primitive;
use schemas::ground_truth::Layer;

use super::world::World;
use context::Ctx;
pub use undo::Undo;

/// A fault that cannot be applied to this app (names something the app does not have).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FaultError(pub String);

type Result<T> = std::result::Result<T, FaultError>;

/// Applies a primitive to the world. On error nothing the error concerns has been changed.
pub fn apply(w: &mut World, app: &AppSpec, p: &Primitive) -> Result<Undo> {
    let mut cx = Ctx {
        w,
        app,
        undo: Undo::default(),
    };
    match p.layer() {
        Layer::Kubernetes => apply_kubernetes(&mut cx, p)?,
        Layer::Application => app::apply(&mut cx, p)?,
        Layer::Network => network::apply(&mut cx, p)?,
        Layer::Node => node::apply(&mut cx, p)?,
        Layer::Kernel => kernel::apply(&mut cx, p)?,
        Layer::Load => load::apply(&mut cx, p)?,
    }
    Ok(cx.undo)
}

/// The Kubernetes layer, by what the changed objects decide.
fn apply_kubernetes(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::ServiceTargetPort { .. }
        | P::ServicePort { .. }
        | P::ServiceSelector { .. }
        | P::ServiceSelectsOther { .. }
        | P::ServiceDelete { .. }
        | P::NetworkPolicyDeny { .. }
        | P::DnsFailure { .. }
        | P::DnsPolicy { .. } => services::apply(cx, p),
        P::ReadinessProbe { .. }
        | P::LivenessProbe { .. }
        | P::MemoryLimit { .. }
        | P::CpuLimit { .. }
        | P::ResourceRequests { .. } => resources::apply(cx, p),
        P::NodeSelector { .. }
        | P::NodeTaint { .. }
        | P::AntiAffinityDeadlock { .. }
        | P::Scale { .. }
        | P::PvcClaimMismatch { .. }
        | P::ResourceQuota { .. } => scheduling::apply(cx, p),
        P::ConfigMapKeyDrift { .. } | P::ConfigMapDelete { .. } => config::apply(cx, p),
        P::ContainerImage { .. }
        | P::EnvRemove { .. }
        | P::EnvSet { .. }
        | P::EnvAddressPort { .. }
        | P::RbacDeniedInit { .. }
        | P::InitContainerHang { .. }
        | P::WrongCommand { .. }
        | P::SidecarPortConflict { .. } => containers::apply(cx, p),
        other => unreachable!("`{}` is not a Kubernetes fault", other.name()),
    }
}

/// Puts back everything an applied fault changed, newest change first. (`_app` keeps the call
/// symmetric with [`apply`]; nothing in a revert depends on the app.)
pub fn revert(w: &mut World, undo: Undo) {
    undo.revert(w);
}

/// Applies one transient noise disturbance to a service; returns its undo.
pub fn apply_noise(w: &mut World, app: &AppSpec, kind: &NoiseKind, target: &str) -> Undo {
    let mut cx = Ctx {
        w,
        app,
        undo: Undo::default(),
    };
    noise::apply(&mut cx, kind, target);
    cx.undo
}

/// The desired state a revert must restore exactly: every object's spec-level content and the
/// runtime conditions, without status, uids, versions or timestamps.
pub fn desired_state(w: &World) -> String {
    let mut parts = vec![];
    for (k, d) in &w.deployments {
        parts.push(format!(
            "deploy {k:?} {} {}",
            d.replicas,
            serde_json::to_string(&d.template).unwrap_or_default()
        ));
    }
    for (k, s) in &w.statefulsets {
        parts.push(format!(
            "sts {k:?} {} {}",
            s.replicas,
            serde_json::to_string(&s.template).unwrap_or_default()
        ));
    }
    for (k, s) in &w.services {
        parts.push(format!(
            "svc {k:?} {:?} {}",
            s.selector,
            serde_json::to_string(&s.ports).unwrap_or_default()
        ));
    }
    for (k, c) in &w.configmaps {
        parts.push(format!("cm {k:?} {:?}", c.data));
    }
    for (n, node) in &w.nodes {
        parts.push(format!("node {n} {:?} {}", node.taints, node.unschedulable));
    }
    parts.push(format!("quotas {:?}", w.quotas.keys().collect::<Vec<_>>()));
    parts.push(format!(
        "netpols {:?}",
        w.netpols.keys().collect::<Vec<_>>()
    ));
    parts.push(format!(
        "sas {:?} roles {:?} rbs {:?}",
        w.service_accounts.keys().collect::<Vec<_>>(),
        w.roles.keys().collect::<Vec<_>>(),
        w.role_bindings.keys().collect::<Vec<_>>()
    ));
    parts.push(format!("runtime {:?}", w.runtime));
    parts.join("\n")
}
