//! Kubernetes faults on where and whether pods can be placed: node selectors and taints,
//! anti-affinity, replica counts, volume claims and ResourceQuota admission.

use std::collections::BTreeMap;

use problems::primitive::Primitive;

use crate::objects::*;

use super::context::Ctx;
use super::{FaultError, Result};

pub(super) fn apply(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::NodeSelector { service, selector } => cx.edit(service, |t, _| {
            t.spec.node_selector.extend(selector.clone())
        })?,
        P::NodeTaint {
            nodes,
            key: tkey,
            value,
            effect,
            evict,
        } => {
            for n in nodes {
                let k = key("", n);
                if !cx.save::<Node>(&k) {
                    return Err(FaultError(format!("no node named `{n}`")));
                }
                cx.w.nodes.get_mut(n).expect("saved").taints.push(Taint {
                    key: tkey.clone(),
                    value: (!value.is_empty()).then(|| value.clone()),
                    effect: effect.as_str().into(),
                });
                cx.w.touch(Kind::Node, &k);
            }
            for s in evict {
                cx.restart(s);
            }
        }
        P::AntiAffinityDeadlock { service, replicas } => {
            let sel: Labels = [(cx.app.selector_label.clone(), service.clone())].into();
            cx.edit(service, |t, r| {
                *r = *replicas as i32;
                t.spec.affinity = Some(Affinity {
                    pod_anti_affinity: PodAntiAffinity {
                        required_during_scheduling_ignored_during_execution: vec![
                            PodAffinityTerm {
                                label_selector: LabelSelector { match_labels: sel },
                                topology_key: "kubernetes.io/hostname".into(),
                            },
                        ],
                    },
                });
            })?
        }
        P::Scale { service, replicas } => cx.edit(service, |_, r| *r = *replicas as i32)?,
        P::PvcClaimMismatch { service, claim } => cx.edit(service, |t, _| {
            for v in &mut t.spec.volumes {
                if let Some(p) = &mut v.persistent_volume_claim {
                    p.claim_name = claim.clone();
                }
            }
        })?,
        P::ResourceQuota {
            name,
            hard,
            recreate,
        } => {
            let ns = cx.ns();
            let meta = cx.w.meta(Some(&ns), name, Labels::new());
            let quota = ResourceQuota {
                meta,
                hard: hard.entries(),
                used: BTreeMap::new(),
            };
            cx.create(key(&ns, name), quota);
            for s in recreate {
                cx.restart(s);
            }
        }
        other => unreachable!("`{}` is not a scheduling fault", other.name()),
    }
    Ok(())
}
