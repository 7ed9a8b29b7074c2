//! The data plane between pods: how a caller pod reaches a dependency. It reads the address the
//! caller's program is configured with, resolves the name through cluster DNS (CoreDNS's Corefile,
//! the pod's dnsPolicy), maps the Service port to endpoints, and checks that the endpoint pod
//! listens on the port and that no NetworkPolicy drops the packets.

use problems::app::{AppSpec, ServiceSpec};

use super::bootstrap::{CLUSTER_DNS, KUBE_SYSTEM};
use super::controllers::resolve_target_port;
use super::objects::*;
use super::programs;
use super::world::World;

/// Why a connection failed.
#[derive(Debug, Clone, PartialEq)]
pub enum DialError {
    /// The name does not resolve (`resolver` is the nameserver asked).
    NoSuchHost { host: String, resolver: String },
    /// Nothing accepts connections at the address.
    Refused { addr: String },
    /// Packets are dropped (NetworkPolicy): the connect times out.
    Timeout { addr: String },
}

impl DialError {
    /// The Go `net` error text.
    pub fn text(&self) -> String {
        match self {
            DialError::NoSuchHost { host, resolver } => {
                format!("dial tcp: lookup {host} on {resolver}:53: no such host")
            }
            DialError::Refused { addr } => format!("dial tcp {addr}: connect: connection refused"),
            DialError::Timeout { addr } => format!("dial tcp {addr}: i/o timeout"),
        }
    }
}

/// Where a caller's connections to one dependency go.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Pods that accept the connection, with the port they serve it on.
    pub accepting: Vec<(Key, u16)>,
    /// Share of connections that fail, and how (when all fail, share is 1).
    pub failure: Option<(f64, DialError)>,
    /// Host and port dialled, as configured.
    pub host: String,
    pub port: u16,
    /// The Service's ClusterIP when the name resolved.
    pub cluster_ip: Option<String>,
}

/// NXDOMAIN templates in the Corefile: `template ANY ANY <name> { rcode NXDOMAIN }` blocks.
fn nxdomain(corefile: &str, fqdn: &str) -> bool {
    // CoreDNS matches template regexes against the query name with its trailing dot, and only for
    // names inside the template's zones (every name when it lists none).
    let qname = format!("{}.", fqdn.trim_end_matches('.'));
    let in_zone = |zone: &str| {
        let zone = zone.trim_end_matches('.');
        zone.is_empty() || fqdn == zone || fqdn.ends_with(&format!(".{zone}"))
    };
    let mut template: Option<(Vec<String>, Vec<String>, bool)> = None;
    for line in corefile.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("template ") {
            let zones = rest
                .trim_end_matches('{')
                .split_whitespace()
                .skip(2)
                .map(str::to_string)
                .collect();
            template = Some((zones, vec![], false));
            continue;
        }
        let Some((zones, patterns, rcode)) = template.as_mut() else {
            continue;
        };
        if let Some(m) = t.strip_prefix("match ") {
            patterns.push(m.trim().trim_matches('"').to_string());
        } else if t.contains("rcode NXDOMAIN") {
            *rcode = true;
        } else if t == "}" {
            let hit = *rcode
                && (zones.is_empty() || zones.iter().any(|z| in_zone(z)))
                && (patterns.is_empty()
                    || patterns
                        .iter()
                        .any(|p| regex::Regex::new(p).is_ok_and(|re| re.is_match(&qname))));
            if hit {
                return true;
            }
            template = None;
        }
    }
    false
}

/// Resolves `host` from `pod`: the Service it names, or the DNS failure.
pub fn resolve<'a>(w: &'a World, pod: &Pod, host: &str) -> Result<&'a Service, DialError> {
    let ns = pod.meta.namespace.as_deref().unwrap_or_default();
    let (short, svc_ns) = match host.split('.').collect::<Vec<_>>().as_slice() {
        [s] => (s.to_string(), ns.to_string()),
        [s, n, ..] => (s.to_string(), n.to_string()),
        _ => (host.to_string(), ns.to_string()),
    };
    if pod.spec.dns_policy == "None" {
        let resolver = pod
            .spec
            .dns_config
            .as_ref()
            .and_then(|d| d.nameservers.first().cloned())
            .unwrap_or_else(|| "127.0.0.53".into());
        if resolver != CLUSTER_DNS {
            return Err(DialError::NoSuchHost {
                host: host.to_string(),
                resolver,
            });
        }
    }
    let nx = DialError::NoSuchHost {
        host: host.to_string(),
        resolver: CLUSTER_DNS.into(),
    };
    let fqdn = format!("{short}.{svc_ns}.svc.cluster.local");
    let corefile = w
        .configmaps
        .get(&key(KUBE_SYSTEM, "coredns"))
        .and_then(|c| c.data.get("Corefile"));
    if corefile.is_some_and(|c| nxdomain(c, &fqdn)) {
        return Err(nx);
    }
    w.services.get(&key(&svc_ns, &short)).ok_or(nx)
}

/// Labels of a pod match a NetworkPolicy that denies the direction.
fn denied(w: &World, pod: &Pod, ingress: bool) -> bool {
    w.netpols.values().any(|np| {
        np.meta.namespace == pod.meta.namespace
            && (if ingress {
                np.deny_ingress
            } else {
                np.deny_egress
            })
            && (np.pod_selector.is_empty() || selects(&np.pod_selector, &pod.meta.labels))
    })
}

/// Does `pod` have a running app container listening on `port` now?
pub fn listens(w: &World, app: &AppSpec, pod: &Pod, port: u16) -> bool {
    pod.spec.containers.iter().zip(&pod.statuses).any(|(c, s)| {
        let CState::Running { started } = s.state else {
            return false;
        };
        let prog = programs::identify(app, c);
        let startup = prog
            .map(|p| p.spec.usage.startup.as_millis() as i64 * 1_000_000)
            .unwrap_or(0);
        w.now - started >= startup && programs::listen_ports(c, prog.as_ref()).contains(&port)
    })
}

/// The route from `caller` pod (running `caller_spec`) to `callee`. `last_ip` is the address the
/// caller resolved before: Envoy (the proxy role) keeps a STRICT_DNS cluster's hosts when a
/// re-resolution fails, and load generators resolve their target once (wrk2) or keep pooled
/// keep-alive connections (Locust), so they go on dialling that address.
pub fn route(
    w: &World,
    app: &AppSpec,
    caller: &Pod,
    caller_spec: &ServiceSpec,
    callee: &str,
    unreachable: bool,
    last_ip: Option<&str>,
) -> Route {
    let container = caller
        .spec
        .containers
        .iter()
        .find(|c| programs::identify(app, c).is_some_and(|p| p.spec.name == caller_spec.name))
        .or(caller.spec.containers.first());
    let addr =
        container.and_then(|c| programs::dial_address(w, app, caller, c, caller_spec, callee));
    let (host, port) = match addr {
        Some(a) if !unreachable => a,
        Some((_, p)) => ("localhost".to_string(), p),
        None => (
            "localhost".to_string(),
            app.service(callee)
                .and_then(|s| s.ports.first())
                .map(|p| p.port)
                .unwrap_or(80),
        ),
    };
    let keeps_hosts = matches!(
        caller_spec.role,
        problems::app::Role::Proxy | problems::app::Role::Loadgen
    );
    dial(w, app, caller, &host, port, last_ip.filter(|_| keeps_hosts))
}

/// Where a connection from `caller` to `host:port` goes: the Service the name (or ClusterIP)
/// resolves to and the endpoints that accept, a pod dialled by its IP, or the failure. `kept_ip`
/// is an address the caller keeps dialling when a re-resolution fails (see [`route`]).
pub fn dial(
    w: &World,
    app: &AppSpec,
    caller: &Pod,
    host: &str,
    port: u16,
    kept_ip: Option<&str>,
) -> Route {
    let host = host.to_string();
    let fail = |e: DialError| Route {
        accepting: vec![],
        failure: Some((1.0, e)),
        host: host.clone(),
        port,
        cluster_ip: None,
    };
    if host == "localhost" || host == "127.0.0.1" {
        return fail(DialError::Refused {
            addr: format!("127.0.0.1:{port}"),
        });
    }
    if denied(w, caller, false) {
        return fail(DialError::Timeout {
            addr: format!("{host}:{port}"),
        });
    }
    if let Some(pod) = w
        .pods
        .values()
        .find(|p| p.pod_ip.as_deref() == Some(host.as_str()))
    {
        return dial_pod(w, app, pod, &host, port);
    }
    let by_ip = w.services.values().find(|s| s.cluster_ip == host);
    let svc = match by_ip.map_or_else(|| resolve(w, caller, &host), Ok) {
        Ok(s) => s,
        Err(e) => {
            let kept = kept_ip
                .filter(|_| matches!(e, DialError::NoSuchHost { .. }))
                .and_then(|ip| w.services.values().find(|s| s.cluster_ip == ip));
            match kept {
                Some(s) => s,
                None => return fail(e),
            }
        }
    };
    let vip = format!("{}:{port}", svc.cluster_ip);
    let Some(sp) = svc.ports.iter().find(|p| p.port == i32::from(port)) else {
        return Route {
            cluster_ip: Some(svc.cluster_ip.clone()),
            ..fail(DialError::Refused { addr: vip })
        };
    };
    let ns = svc.meta.namespace.clone().unwrap_or_default();
    let mut accepting = vec![];
    let mut refused = 0usize;
    let mut dropped = 0usize;
    let mut total = 0usize;
    if let Some(ep) = w.endpoints.get(&key(&ns, &svc.meta.name)) {
        for a in &ep.ready {
            let Some(p) = w.pods.get(&key(&ns, &a.pod)) else {
                continue;
            };
            let Some(tp) = resolve_target_port(p, &sp.target_port) else {
                continue;
            };
            total += 1;
            let tp = tp as u16;
            if denied(w, p, true) {
                dropped += 1;
            } else if listens(w, app, p, tp) {
                accepting.push((key(&ns, &a.pod), tp));
            } else {
                refused += 1;
            }
        }
    }
    let failure = if total == 0 {
        Some((1.0, DialError::Refused { addr: vip }))
    } else if dropped > 0 && dropped >= refused {
        Some((
            (dropped + refused) as f64 / total as f64,
            DialError::Timeout { addr: vip },
        ))
    } else if refused > 0 {
        Some((
            (dropped + refused) as f64 / total as f64,
            DialError::Refused { addr: vip },
        ))
    } else {
        None
    };
    Route {
        accepting,
        failure,
        host,
        port,
        cluster_ip: Some(svc.cluster_ip.clone()),
    }
}

/// A connection straight to a pod's IP: its NetworkPolicies and whether it listens decide.
fn dial_pod(w: &World, app: &AppSpec, pod: &Pod, host: &str, port: u16) -> Route {
    let addr = format!("{host}:{port}");
    let failure = if denied(w, pod, true) {
        Some((1.0, DialError::Timeout { addr }))
    } else if listens(w, app, pod, port) {
        None
    } else {
        Some((1.0, DialError::Refused { addr }))
    };
    let ns = pod.meta.namespace.clone().unwrap_or_default();
    Route {
        accepting: if failure.is_none() {
            vec![(key(&ns, &pod.meta.name), port)]
        } else {
            vec![]
        },
        failure,
        host: host.to_string(),
        port,
        cluster_ip: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corefile_templates_answer_nxdomain() {
        let cf = "template ANY ANY geo.hotel.svc.cluster.local {\n  match \"^geo[.]hotel[.]svc[.]cluster[.]local[.]$\"\n  rcode NXDOMAIN\n  fallthrough\n}\n";
        assert!(nxdomain(cf, "geo.hotel.svc.cluster.local"));
        assert!(!nxdomain(cf, "rate.hotel.svc.cluster.local"));
        let all =
            "template ANY ANY {\n  match \".*\\.svc\\.cluster\\.local\"\n  rcode NXDOMAIN\n}\n";
        assert!(nxdomain(all, "rate.hotel.svc.cluster.local"));
        assert!(!nxdomain(
            super::super::bootstrap::COREFILE,
            "rate.hotel.svc.cluster.local"
        ));
    }
}
