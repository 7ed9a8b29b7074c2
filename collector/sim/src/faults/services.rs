//! Kubernetes faults on how traffic finds pods: Service ports and selectors, Service deletion,
//! cluster DNS, pod DNS settings and NetworkPolicies.

use problems::primitive::Primitive;

use crate::bootstrap;
use crate::objects::*;

use super::context::Ctx;
use super::{FaultError, Result};

pub(super) fn apply(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::ServiceTargetPort {
            service,
            port_name,
            target_port,
        } => edit_port(cx, service, port_name, |sp| {
            sp.target_port = IntOrString::Int(i32::from(*target_port))
        })?,
        P::ServicePort {
            service,
            port_name,
            port,
        } => edit_port(cx, service, port_name, |sp| sp.port = i32::from(*port))?,
        P::ServiceSelector { service, add } => {
            cx.modify(service, |s: &mut Service| {
                s.selector.extend(add.clone());
                Ok(())
            })?;
        }
        P::ServiceSelectsOther {
            service,
            other,
            label_key,
            label_value,
        } => {
            for s in [service, other] {
                cx.edit(s, |t, _| {
                    t.metadata
                        .labels
                        .insert(label_key.clone(), label_value.clone());
                })?;
            }
            cx.modify(service, |s: &mut Service| {
                s.selector = [(label_key.clone(), label_value.clone())].into();
                Ok(())
            })?;
        }
        P::ServiceDelete { service } => {
            cx.delete::<Service>(service)?;
        }
        P::NetworkPolicyDeny {
            name,
            service,
            ingress,
            egress,
        } => {
            if cx.app.service(service).is_none() {
                return Err(FaultError(format!("no service named `{service}`")));
            }
            let ns = cx.ns();
            let mut meta = cx.w.meta(Some(&ns), name, Labels::new());
            meta.generation = 1;
            let policy = NetworkPolicy {
                meta,
                pod_selector: [(cx.app.selector_label.clone(), service.clone())].into(),
                deny_ingress: *ingress,
                deny_egress: *egress,
            };
            cx.create(key(&ns, name), policy);
        }
        P::DnsFailure { service } => dns_failure(cx, service.as_deref())?,
        P::DnsPolicy {
            service,
            nameserver,
        } => cx.edit(service, |t, _| {
            t.spec.dns_policy = "None".into();
            t.spec.dns_config = Some(DnsConfig {
                nameservers: vec![nameserver.clone()],
                searches: vec![],
            });
        })?,
        other => unreachable!("`{}` is not a Service or DNS fault", other.name()),
    }
    Ok(())
}

/// Edits the Service's port named `port_name` (its first port when no name is given).
fn edit_port(
    cx: &mut Ctx,
    service: &str,
    port_name: &Option<String>,
    f: impl FnOnce(&mut ServicePort),
) -> Result<()> {
    cx.modify(service, |s: &mut Service| {
        let sp = s
            .ports
            .iter_mut()
            .find(|p| {
                port_name
                    .as_ref()
                    .is_none_or(|n| p.name.as_deref() == Some(n.as_str()))
            })
            .ok_or_else(|| FaultError(format!("Service `{service}` has no port {port_name:?}")))?;
        f(sp);
        Ok(())
    })
}

/// Makes CoreDNS answer NXDOMAIN for one service's name (or every cluster service name) with a
/// `template` block ahead of its `kubernetes` plugin, which would otherwise answer first.
fn dns_failure(cx: &mut Ctx, service: Option<&str>) -> Result<()> {
    let k = key(bootstrap::KUBE_SYSTEM, "coredns");
    if !cx.save::<ConfigMap>(&k) {
        return Err(FaultError("cluster DNS ConfigMap missing".into()));
    }
    let ns = cx.app.namespace.clone();
    let cm = cx.w.configmaps.get_mut(&k).expect("saved");
    let text = cm.data.get("Corefile").cloned().unwrap_or_default();
    let edited = problems::edits::corefile_nxdomain(&text, service, &ns);
    cm.data.insert("Corefile".into(), edited);
    cx.w.touch(Kind::ConfigMap, &k);
    Ok(())
}
