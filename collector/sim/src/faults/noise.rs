//! Transient noise: the harmless-in-the-end disturbances a noise profile schedules around the
//! fault. Each is applied like a fault, with an undo, through the same helpers.

use problems::NoiseKind;

use crate::controllers::delete_pod;
use crate::objects::*;

use super::context::Ctx;
use super::network::{add_delay, add_loss};

/// Applies one noise disturbance to a service.
pub(super) fn apply(cx: &mut Ctx, kind: &NoiseKind, target: &str) {
    match kind {
        NoiseKind::PodKill => {
            let ns = cx.ns();
            let sel: Labels = [(cx.app.selector_label.clone(), target.to_string())].into();
            let victim =
                cx.w.pods_selected(&ns, &sel)
                    .find(|p| p.meta.deleted_at.is_none())
                    .map(|p| key(&ns, &p.meta.name));
            if let Some(pk) = victim {
                delete_pod(cx.w, &pk);
            }
        }
        NoiseKind::CpuBurst { cpu } => {
            cx.service_rt(target).extra_cpu_milli += cpu.millicores() as i64;
        }
        NoiseKind::NetworkDelay { delay, jitter } => add_delay(cx, "*", target, *delay, *jitter),
        NoiseKind::RequestDrop { percent } => add_loss(cx, "*", target, *percent),
    }
}
