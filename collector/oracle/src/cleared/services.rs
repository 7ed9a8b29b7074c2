//! How traffic finds pods: a Service's ports must target a port the pods listen on and carry the
//! port callers dial, its selector must pick the service's own pods (and only them), no
//! NetworkPolicy may drop the traffic the fault blocked, and names must resolve through cluster
//! DNS (the Corefile) and the pods' own DNS settings, as `sim::network` resolves them.

use problems::primitive::Primitive;
use sim::network;
use sim::objects::{Service, ServicePort, selects};

use super::{Outcome, no_check};
use crate::view::{View, Workload, labels, ports, target_port};

pub(super) fn check(v: &View, p: &Primitive) -> Outcome {
    use Primitive as P;
    match p {
        P::ServiceTargetPort {
            service, port_name, ..
        } => targets_listener(v, service, port_name.as_deref()),
        P::ServicePort {
            service, port_name, ..
        } => dialled_port(v, service, port_name.as_deref()),
        P::ServiceSelector { service, .. } | P::ServiceDelete { service } => {
            selects_own(v, service).map(|_| ())
        }
        P::ServiceSelectsOther { service, other, .. } => selects_only_own(v, service, other),
        P::NetworkPolicyDeny {
            service,
            ingress,
            egress,
            ..
        } => policies_allow(v, service, *ingress, *egress),
        P::DnsFailure { service } => cluster_dns(v, service.as_deref()),
        P::DnsPolicy { service, .. } => pod_dns(v, service),
        other => Err(no_check(other)),
    }
}

/// The Service port (named, else the first) targets a port the pods listen on.
fn targets_listener(v: &View, service: &str, port_name: Option<&str>) -> Outcome {
    let wl = v.serving(service)?;
    let sp = v.service_port(service, port_name)?;
    port_reaches_pods(v, service, &wl, sp)
}

/// A Service port forwards to a port the workload's processes listen on.
fn port_reaches_pods(v: &View, service: &str, wl: &Workload, sp: &ServicePort) -> Outcome {
    let listening = v.listening(wl.template);
    match target_port(wl.template, &sp.target_port) {
        Some(tp) if listening.contains(&tp) => Ok(()),
        Some(tp) => Err(format!(
            "{} port {} targets {tp}; the pods of {service} listen on {}",
            v.name("Service", service),
            sp.port,
            ports(&listening)
        )),
        None => Err(format!(
            "{} port {} targets {:?}, which names no container port of {}",
            v.name("Service", service),
            sp.port,
            sp.target_port,
            v.name(wl.kind, service)
        )),
    }
}

/// Callers dial the port of the manifest (from their configuration): the Service must still
/// have it, forwarding to a port the pods listen on.
fn dialled_port(v: &View, service: &str, port_name: Option<&str>) -> Outcome {
    let wl = v.serving(service)?;
    let spec = v.spec(service)?;
    let declared = spec
        .ports
        .iter()
        .find(|p| port_name.is_none_or(|n| p.name == n))
        .ok_or_else(|| format!("the manifest of {service} declares no port {port_name:?}"))?;
    let svc = v.service(service)?;
    let Some(sp) = svc
        .ports
        .iter()
        .find(|p| p.port == i32::from(declared.port))
    else {
        let have: Vec<u16> = svc
            .ports
            .iter()
            .filter_map(|p| u16::try_from(p.port).ok())
            .collect();
        return Err(format!(
            "{} has no port {} (callers dial {service}:{}); its ports: {}",
            v.name("Service", service),
            declared.port,
            declared.port,
            ports(&have)
        ));
    };
    port_reaches_pods(v, service, &wl, sp)
}

/// The Service selects the pods of its own workload.
fn selects_own<'a>(v: &View<'a>, service: &str) -> Result<&'a Service, String> {
    let wl = v.serving(service)?;
    let svc = v.service(service)?;
    let pod_labels = &wl.template.metadata.labels;
    if !selects(&svc.selector, pod_labels) {
        return Err(format!(
            "{} selects {}, which the pods of {} ({}) do not carry",
            v.name("Service", service),
            labels(&svc.selector),
            v.name(wl.kind, service),
            labels(pod_labels)
        ));
    }
    Ok(svc)
}

/// The Service selects its own pods and not those of `other` (which must still serve).
fn selects_only_own(v: &View, service: &str, other: &str) -> Outcome {
    let svc = selects_own(v, service)?;
    let other_wl = v.serving(other)?;
    if selects(&svc.selector, &other_wl.template.metadata.labels) {
        return Err(format!(
            "{} selects {}, which the pods of {} carry too",
            v.name("Service", service),
            labels(&svc.selector),
            v.name(other_wl.kind, other)
        ));
    }
    Ok(())
}

/// No NetworkPolicy that selects the service's pods denies the directions the fault blocked.
fn policies_allow(v: &View, service: &str, ingress: bool, egress: bool) -> Outcome {
    let wl = v.serving(service)?;
    let pod_labels = &wl.template.metadata.labels;
    for np in v.w.netpols.values() {
        if np.meta.namespace.as_deref() != Some(v.ns) {
            continue;
        }
        // An empty podSelector selects every pod of the namespace, as the data plane reads it.
        if !np.pod_selector.is_empty() && !selects(&np.pod_selector, pod_labels) {
            continue;
        }
        let denied = match (ingress && np.deny_ingress, egress && np.deny_egress) {
            (true, true) => "ingress and egress",
            (true, false) => "ingress",
            (false, true) => "egress",
            (false, false) => continue,
        };
        return Err(format!(
            "{} selects the pods of {service} and allows no {denied} traffic",
            v.name("NetworkPolicy", &np.meta.name)
        ));
    }
    Ok(())
}

/// Cluster DNS answers for the service's name (every app Service's name when none is given).
fn cluster_dns(v: &View, service: Option<&str>) -> Outcome {
    let names: Vec<&str> = match service {
        Some(s) => {
            v.serving(s)?;
            vec![s]
        }
        None => v
            .app
            .services
            .iter()
            .filter(|s| s.has_service())
            .map(|s| s.name.as_str())
            .collect(),
    };
    let pod = v.resolver_pod(None)?;
    for name in names {
        v.service(name)?;
        let host = format!("{name}.{}", v.ns);
        if let Err(e) = network::resolve(v.w, &pod, &host) {
            return Err(format!(
                "cluster DNS does not resolve the name of {} ({}); see ConfigMap kube-system/coredns",
                v.name("Service", name),
                e.text()
            ));
        }
    }
    Ok(())
}

/// The workload's pods resolve cluster names with their DNS settings.
fn pod_dns(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    let pod = v.resolver_pod(Some(&wl.template.spec))?;
    // Any existing Service's name will do: the pod's resolver either reaches cluster DNS or not.
    let Some(name) = v
        .app
        .services
        .iter()
        .map(|s| s.name.as_str())
        .find(|s| v.service(s).is_ok())
    else {
        return Err(format!(
            "no Service of application {} exists to resolve",
            v.app.name
        ));
    };
    let host = format!("{name}.{}", v.ns);
    network::resolve(v.w, &pod, &host).map(|_| ()).map_err(|e| {
        let spec = &wl.template.spec;
        let servers = spec
            .dns_config
            .as_ref()
            .map(|d| d.nameservers.join(", "))
            .unwrap_or_default();
        format!(
            "the pods of {} cannot resolve cluster names (dnsPolicy {}, nameservers [{servers}]): {}",
            v.name(wl.kind, service),
            spec.dns_policy,
            e.text()
        )
    })
}
