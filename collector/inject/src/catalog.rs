//! The catalog's node-level primitives on a real cluster: which injector request carries each one
//! out (in the cgroups of a service's pods, through the privileged node agent), which are Kubernetes
//! API changes instead, and which this injector cannot do. With a probe's report, which problems a
//! host (or a cluster's nodes) can run.

use std::path::PathBuf;

use problems::app::AppSpec;
use problems::{Catalog, Primitive, ProblemSpec};
use serde::Serialize;

use crate::errno::Errno;
use crate::probe::Report;
use crate::request::{Direction, Fault, Op, Peer, Proto, Rate};

/// One injector request: a fault in the cgroup of every pod of `service`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeRequest {
    pub service: String,
    pub fault: Fault,
    /// What the node agent resolves or what differs from the simulator's model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How a primitive is carried out on a real cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Realization {
    /// By the node agent with this injector.
    Node { requests: Vec<NodeRequest> },
    /// By changing (and restoring) Kubernetes objects: not this injector.
    KubernetesApi,
    /// Not by this injector, and why.
    Unsupported { reason: String },
}

fn unsupported(reason: impl Into<String>) -> Realization {
    Realization::Unsupported {
        reason: reason.into(),
    }
}

fn percent(p: f64) -> Result<Rate, String> {
    Rate::new(p / 100.0)
}

/// The op that fails a syscall of the catalog's `syscall_failure`.
fn op_of_syscall(syscall: &str) -> Option<Op> {
    Some(match syscall {
        "connect" => Op::Connect,
        "sendto" | "sendmsg" | "sendmmsg" => Op::Sendmsg,
        "socket" => Op::Socket,
        "bind" => Op::Bind,
        "accept" | "accept4" => Op::Accept,
        "read" | "pread64" | "readv" | "preadv" | "preadv2" => Op::Read,
        "write" | "pwrite64" | "writev" | "pwritev" | "pwritev2" => Op::Write,
        "open" | "openat" | "openat2" | "creat" => Op::Open,
        "mmap" => Op::Mmap,
        "fork" | "vfork" | "clone" | "clone3" => Op::Fork,
        _ => return None,
    })
}

/// How `primitive` of a problem on `app` is carried out.
pub fn realize(primitive: &Primitive, app: &AppSpec) -> Realization {
    let service = |name: &str| app.services.iter().find(|s| s.name == name);
    let node = |service: &str, fault: Result<Fault, String>, note: Option<String>| match fault {
        Ok(fault) => Realization::Node {
            requests: vec![NodeRequest {
                service: service.to_owned(),
                fault,
                note,
            }],
        },
        Err(reason) => unsupported(reason),
    };
    match primitive {
        Primitive::NetworkLoss {
            from,
            to,
            percent: p,
        } => {
            let Some(target) = service(to).filter(|s| !s.ports.is_empty()) else {
                return unsupported(format!("{to} has no port to single its traffic out by"));
            };
            let rate = match percent(*p) {
                Ok(rate) => rate,
                Err(e) => return unsupported(e),
            };
            // The callee is recognised by its container port: after kube-proxy's DNAT, which runs
            // before the egress hook, a packet to the Service carries a pod's address and port.
            let requests = target
                .ports
                .iter()
                .map(|port| NodeRequest {
                    service: from.clone(),
                    fault: Fault::Drop {
                        rate,
                        direction: Direction::Egress,
                        peer: Peer {
                            port: Some(port.target_port()),
                            addr: None,
                            proto: Proto::Tcp,
                        },
                    },
                    note: Some(format!(
                        "packets from {from}'s pods to port {} ({to}); a pod of another service on that port is hit too",
                        port.target_port()
                    )),
                })
                .collect();
            Realization::Node { requests }
        }
        Primitive::SyscallFailure {
            service,
            syscall,
            errno,
            percent: p,
        } => {
            let Some(op) = op_of_syscall(syscall) else {
                return unsupported(format!(
                    "no cgroup or LSM hook fails `{syscall}`: that needs a kprobe with \
                     bpf_override_return (CONFIG_BPF_KPROBE_OVERRIDE)"
                ));
            };
            let fault = Errno::parse(errno).and_then(|errno| {
                Fault::syscall(op, Some(errno), percent(*p)?, Peer::default(), None)
            });
            node(service, fault, None)
        }
        Primitive::DiskReadErrors {
            service: name,
            percent: p,
        } => {
            let Some(volume) = service(name).and_then(|s| s.volumes.first()) else {
                return unsupported(format!("{name} mounts no volume to fail reads under"));
            };
            let fault = percent(*p).and_then(|rate| {
                Fault::syscall(
                    Op::Read,
                    Some(Errno::EIO),
                    rate,
                    Peer::default(),
                    Some(PathBuf::from(&volume.mount_path)),
                )
            });
            node(
                name,
                fault,
                Some(format!(
                    "the node agent resolves {} to the pod's volume directory on the node",
                    volume.mount_path
                )),
            )
        }
        Primitive::NetworkDelay { .. } => unsupported(
            "cgroup programs can drop packets but not delay them: a delay needs a tc program \
             setting departure times under the fq qdisc, which this injector does not do",
        ),
        Primitive::NodeCpuStress { .. } | Primitive::KubeletDown { .. } => unsupported(
            "a node-level process change (stressors, stopping the kubelet), not a syscall or \
             packet fault",
        ),
        Primitive::DatabaseAuth { .. } | Primitive::DatabaseLock { .. } => unsupported(
            "a change of the database's own state (users, roles, TLS, a held lock) through a \
             client session inside its pod, not a syscall, packet or Kubernetes object fault",
        ),
        _ => Realization::KubernetesApi,
    }
}

/// Whether a problem can run on a host, by the probe's findings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub problem: String,
    /// `runnable`: every fault and decoy can be carried out (node-level ones by the injector here);
    /// `not_here`: a node-level one needs a mechanism this kernel refuses; `unsupported`: one has
    /// no realization by this injector.
    pub status: &'static str,
    /// Whether any of its faults or decoys is node-level (needs the node agent).
    pub node_level: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// The verdict for one problem.
pub fn verdict(problem: &ProblemSpec, app: &AppSpec, report: &Report) -> Verdict {
    let mut node_level = false;
    let mut refused = Vec::new();
    let mut unsupported_reasons = Vec::new();
    for (index, (spec, _)) in problem.injections().enumerate() {
        let label = format!("#{index} {}", spec.primitive.name());
        match realize(&spec.primitive, app) {
            Realization::Node { requests } => {
                node_level = true;
                for request in requests {
                    if let Err(reason) = report.supports(&request.fault) {
                        refused.push(format!("{label}: {reason}"));
                    }
                }
            }
            Realization::KubernetesApi => {}
            Realization::Unsupported { reason } => {
                unsupported_reasons.push(format!("{label}: {reason}"));
            }
        }
    }
    let status = if !unsupported_reasons.is_empty() {
        "unsupported"
    } else if !refused.is_empty() {
        "not_here"
    } else {
        "runnable"
    };
    refused.dedup();
    unsupported_reasons.extend(refused);
    Verdict {
        problem: problem.id.clone(),
        status,
        node_level,
        reasons: unsupported_reasons,
    }
}

/// Verdicts for every problem of the catalog (or those `pattern` matches), in catalog order.
pub fn verdicts(
    catalog: &Catalog,
    pattern: Option<&str>,
    report: &Report,
) -> Result<Vec<Verdict>, String> {
    let problems: Vec<&ProblemSpec> = match pattern {
        Some(p) => catalog.problems_matching(p)?,
        None => catalog.problems().collect(),
    };
    problems
        .into_iter()
        .map(|problem| {
            let app = catalog.app(&problem.application).ok_or_else(|| {
                format!(
                    "problem {} names unknown application {}",
                    problem.id, problem.application
                )
            })?;
            Ok(verdict(problem, app, report))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{Kernel, Mechanism};
    use crate::request::{Hook, Tier};

    /// A report as this kind of machine gives it: cgroup programs load, LSM programs are refused.
    fn cgroup_only() -> Report {
        Report {
            kernel: Kernel {
                release: "test".into(),
                cgroup2: Some("/sys/fs/cgroup".into()),
                btf: true,
                lsm: Some("lockdown,capability,bpf".into()),
                lockdown: None,
                euid: 0,
            },
            mechanisms: Hook::ALL
                .into_iter()
                .map(|hook| Mechanism {
                    hook,
                    section: hook.section(),
                    tier: hook.tier(),
                    used_by: vec![],
                    available: hook.tier() == Tier::Cgroup,
                    refusal: None,
                    reason: (hook.tier() == Tier::Lsm).then(|| "EPERM at load".to_owned()),
                })
                .collect(),
        }
    }

    #[test]
    fn catalog_primitives_map_to_requests_and_verdicts() {
        let catalog = Catalog::builtin().unwrap();
        let verdicts = verdicts(&catalog, None, &cgroup_only()).unwrap();
        let of = |id: &str| verdicts.iter().find(|v| v.problem == id).unwrap();

        let loss = of("social-compose-text-loss");
        assert_eq!((loss.status, loss.node_level), ("runnable", true));
        let disk = of("hotel-geo-mongo-disk-errors");
        assert_eq!(disk.status, "not_here");
        assert!(
            disk.reasons[0].contains("EPERM at load"),
            "{:?}",
            disk.reasons
        );
        let fds = of("hotel-frontend-fd-exhaustion");
        assert_eq!(
            fds.status, "not_here",
            "accept4 needs the LSM socket_accept hook"
        );
        let delay = of("hotel-search-geo-delay");
        assert_eq!(delay.status, "unsupported");
        let api = of("hotel-geo-target-port");
        assert_eq!((api.status, api.node_level), ("runnable", false));

        let problem = catalog.problem("social-compose-text-loss").unwrap();
        let app = catalog.app(&problem.application).unwrap();
        let Realization::Node { requests } = realize(&problem.faults[0].primitive, app) else {
            panic!("network_loss is node-level")
        };
        assert_eq!(requests[0].service, "compose-post-service");
        let Fault::Drop {
            rate,
            direction,
            peer,
        } = requests[0].fault
        else {
            panic!("a drop")
        };
        assert_eq!((rate.value(), direction), (0.4, Direction::Egress));
        assert!(peer.port.is_some());
    }
}
