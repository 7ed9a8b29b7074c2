//! Primitives that change a workload: its pod template (image, command, environment, sidecars and
//! init containers, probes, resources, scheduling, DNS settings, volumes) and its replica count,
//! including the load generator's rate and the client and runtime settings of the load faults.

use problems::Memory;
use problems::edits;
use problems::manifests;
use problems::primitive::Primitive;
use serde_json::{Value, json};

use super::super::object::{array, member};
use super::{Result, Work, invalid};

pub(super) fn apply(w: &mut Work, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::ContainerImage { service, image, .. } => w.edit_container(service, |c| {
            c["image"] = json!(image);
            Ok(())
        }),
        P::EnvRemove { service, var } => w.edit_container(service, |c| {
            let env = c.get_mut("env").and_then(Value::as_array_mut);
            let had = env.as_ref().map_or(0, |e| e.len());
            let left = env.map_or(0, |e| {
                e.retain(|v| v["name"].as_str() != Some(var));
                e.len()
            });
            if left == had {
                return Err(format!("no env var `{var}`"));
            }
            Ok(())
        }),
        P::EnvSet {
            service,
            var,
            value,
        } => w.edit_container(service, |c| {
            array(c, "env").push(json!({"name": var, "value": value}));
            Ok(())
        }),
        P::EnvAddressPort { service, var, port } => w.edit_container(service, |c| {
            let slot = array(c, "env")
                .iter_mut()
                .rev()
                .find(|e| e["name"].as_str() == Some(var))
                .and_then(|e| e.get_mut("value"))
                .ok_or_else(|| format!("no env var `{var}` with a value"))?;
            if let Some(edited) = slot.as_str().and_then(|v| edits::with_address_port(v, *port)) {
                *slot = json!(edited);
            }
            Ok(())
        }),
        P::ReadinessProbe { service, probe } => w.edit_container(service, |c| {
            c["readinessProbe"] = manifests::probe(probe);
            Ok(())
        }),
        P::LivenessProbe { service, probe } => w.edit_pod(service, |pod| {
            pod["terminationGracePeriodSeconds"] = json!(0);
            match array(pod, "containers").first_mut() {
                Some(c) => {
                    c["livenessProbe"] = manifests::probe(probe);
                    Ok(())
                }
                None => Err("the pod template has no container".into()),
            }
        }),
        P::MemoryLimit { service, limit } => w.edit_container(service, |c| {
            limit_memory(c, *limit);
            Ok(())
        }),
        P::CpuLimit { service, limit } => w.edit_container(service, |c| {
            let m = limit.millicores();
            set_resource(c, "limits", "cpu", limit.to_string());
            if cpu_of(c, "requests").is_some_and(|r| r > m) {
                set_resource(c, "requests", "cpu", limit.to_string());
            }
            Ok(())
        }),
        P::ResourceRequests {
            service,
            cpu,
            memory,
        } => w.edit_container(service, |c| {
            // A request above the limit is refused by the API server: the limit follows it up.
            if let Some(cpu) = cpu {
                set_resource(c, "requests", "cpu", cpu.to_string());
                if cpu_of(c, "limits").is_some_and(|l| l < cpu.millicores()) {
                    set_resource(c, "limits", "cpu", cpu.to_string());
                }
            }
            if let Some(mem) = memory {
                set_resource(c, "requests", "memory", mem.to_string());
                if memory_of(c, "limits").is_some_and(|l| l < mem.bytes()) {
                    set_resource(c, "limits", "memory", mem.to_string());
                }
            }
            Ok(())
        }),
        P::NodeSelector { service, selector } => w.edit_pod(service, |pod| {
            let sel = member(pod, "nodeSelector");
            for (k, v) in selector {
                sel[k] = json!(v);
            }
            Ok(())
        }),
        P::AntiAffinityDeadlock { service, replicas } => {
            let labels = manifests::selector(w.app, service);
            w.edit_workload(service, |wl| {
                member(wl, "spec")["replicas"] = json!(replicas);
                super::pod_spec(wl)["affinity"] = json!({"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{
                        "labelSelector": {"matchLabels": labels},
                        "topologyKey": "kubernetes.io/hostname",
                    }],
                }});
                Ok(())
            })
        }
        P::Scale { service, replicas } => w.edit_workload(service, |wl| {
            member(wl, "spec")["replicas"] = json!(replicas);
            Ok(())
        }),
        P::PvcClaimMismatch { service, claim } => w.edit_pod(service, |pod| {
            let mut found = false;
            for v in array(pod, "volumes") {
                if let Some(pvc) = v.get_mut("persistentVolumeClaim") {
                    pvc["claimName"] = json!(claim);
                    found = true;
                }
            }
            if found {
                Ok(())
            } else {
                Err("no volume is a persistentVolumeClaim".into())
            }
        }),
        P::DnsPolicy {
            service,
            nameserver,
        } => w.edit_pod(service, |pod| {
            pod["dnsPolicy"] = json!("None");
            pod["dnsConfig"] = json!({"nameservers": [nameserver]});
            Ok(())
        }),
        P::InitContainerHang { service, waits_for } => w.edit_pod(service, |pod| {
            array(pod, "initContainers").push(json!({
                "name": format!("wait-for-{waits_for}"),
                "image": "busybox:1.28",
                "command": ["sh", "-c", format!("until nslookup {waits_for}; do echo waiting for {waits_for}; sleep 2; done")],
            }));
            Ok(())
        }),
        P::WrongCommand { service, command } => w.edit_container(service, |c| {
            c["command"] = json!(command);
            Ok(())
        }),
        P::SidecarPortConflict { service, port } => w.edit_pod(service, |pod| {
            array(pod, "containers").push(json!({
                "name": "sidecar",
                "image": "busybox:1.36",
                "command": ["sh", "-c", format!("nc -lk -p {port} -e echo ok")],
            }));
            Ok(())
        }),
        P::RpcRetryConfig {
            service,
            timeout,
            retries,
            ..
        } => w.edit_container(service, |c| {
            let env = array(c, "env");
            env.retain(|e| {
                !matches!(
                    e["name"].as_str(),
                    Some("GRPC_CLIENT_TIMEOUT" | "GRPC_CLIENT_RETRIES_ON_ERROR")
                )
            });
            env.push(json!({"name": "GRPC_CLIENT_TIMEOUT", "value": timeout.to_string()}));
            env.push(json!({"name": "GRPC_CLIENT_RETRIES_ON_ERROR", "value": retries.to_string()}));
            Ok(())
        }),
        P::GcPressure {
            services,
            gogc,
            memory_limit,
        } => {
            for s in services {
                w.edit_container(s, |c| {
                    let env = array(c, "env");
                    env.retain(|e| e["name"].as_str() != Some("GOGC"));
                    env.push(json!({"name": "GOGC", "value": gogc.to_string()}));
                    if let Some(m) = memory_limit {
                        limit_memory(c, *m);
                    }
                    Ok(())
                })?;
            }
            Ok(())
        }
        P::LoadSpike { multiplier } => {
            let generator = w.app.workload.generator.clone();
            w.edit_container(&generator, |c| load_rate(c, *multiplier))
        }
        other => invalid(format!(
            "`{}` is not a change of Kubernetes objects",
            other.name()
        )),
    }
}

/// Sets the memory limit, lowering the request to it if it was higher (a request above the
/// limit is refused by the API server).
fn limit_memory(c: &mut Value, limit: Memory) {
    set_resource(c, "limits", "memory", limit.to_string());
    if memory_of(c, "requests").is_some_and(|r| r > limit.bytes()) {
        set_resource(c, "requests", "memory", limit.to_string());
    }
}

fn set_resource(c: &mut Value, list: &str, resource: &str, quantity: String) {
    member(member(c, "resources"), list)[resource] = json!(quantity);
}

/// A quantity of the container's `resources.<list>.<resource>` as text.
fn quantity(c: &Value, list: &str, resource: &str) -> Option<String> {
    match c.pointer(&format!("/resources/{list}/{resource}"))? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn cpu_of(c: &Value, list: &str) -> Option<u64> {
    quantity(c, list, "cpu")?
        .parse::<problems::Cpu>()
        .ok()
        .map(|c| c.millicores())
}

fn memory_of(c: &Value, list: &str) -> Option<u64> {
    quantity(c, list, "memory")?
        .parse::<Memory>()
        .ok()
        .map(|m| m.bytes())
}

/// Multiplies the load generator's rate: wrk2's `-R` requests per second in its command or
/// arguments, else Locust's `LOCUST_USERS`.
fn load_rate(c: &mut Value, multiplier: f64) -> std::result::Result<(), String> {
    let scale = |text: &str| -> Option<String> {
        let n: f64 = text.parse().ok()?;
        Some(((n * multiplier).round().max(1.0) as u64).to_string())
    };
    for list in ["command", "args"] {
        let Some(words) = c.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        if let Some(i) = words.iter().position(|w| w.as_str() == Some("-R"))
            && let Some(rate) = words.get(i + 1).and_then(Value::as_str).and_then(scale)
        {
            words[i + 1] = json!(rate);
            return Ok(());
        }
    }
    if let Some(users) = c
        .get_mut("env")
        .and_then(Value::as_array_mut)
        .and_then(|env| {
            env.iter_mut()
                .find(|e| e["name"].as_str() == Some("LOCUST_USERS"))
        })
        && let Some(scaled) = users["value"].as_str().and_then(scale)
    {
        users["value"] = json!(scaled);
        return Ok(());
    }
    Err("the load generator's rate is neither wrk2's `-R` nor LOCUST_USERS".into())
}
