//! The spec's assertions about objects (every [`StateAssertion`] but `fault_cleared`): an image,
//! a Service's target port, an env var, a ConfigMap key, a feature flag, resource limits,
//! replica counts, a finished rollout, ready endpoints and a Ready node.
//!
//! Each takes the world through a [`View`] and returns `Err(reason)` when it does not hold.
//! Assertions about a service first require it to be serving (see [`View::serving`]).

use problems::StateAssertion;
use problems::units::{Cpu, Memory};
use sim::objects::{Pod, key};
use sim::util::{cpu_quantity, memory_quantity};
use sim::{flags, programs};

use crate::view::{View, Workload, target_port};

type Outcome = Result<(), String>;

/// Checks one assertion other than `fault_cleared`.
pub(crate) fn check(v: &View, a: &StateAssertion) -> Outcome {
    use StateAssertion as A;
    match a {
        A::FaultCleared { fault } => Err(format!(
            "fault_cleared #{fault} is checked by the fault's primitive, not here"
        )),
        A::ImageNot { service, image } => image_not(v, service, image),
        A::TargetPortIs {
            service,
            port_name,
            target_port,
        } => target_port_is(v, service, port_name.as_deref(), *target_port),
        A::EnvEquals {
            service,
            var,
            value,
        } => env_equals(v, service, var, value),
        A::ConfigMapHasKey {
            config_map,
            key,
            field,
        } => config_map_has_key(v, config_map, key, field.as_deref()),
        A::FlagVariant { flag, variant } => flag_variant(v, flag, variant),
        A::MemoryLimitAtLeast { service, limit } => memory_limit_at_least(v, service, *limit),
        A::CpuLimitAtLeast { service, limit } => cpu_limit_at_least(v, service, *limit),
        A::ReplicasAtLeast { service, replicas } => replicas_at_least(v, service, *replicas),
        A::DeploymentReady { service } => deployment_ready(v, service),
        A::EndpointsReady { service } => endpoints_ready(v, service),
        A::NodeReady { node } => node_ready(v, node),
    }
}

fn image_not(v: &View, service: &str, image: &str) -> Outcome {
    let wl = v.serving(service)?;
    let c = v.main_container(&wl)?;
    if c.image == image {
        return Err(format!(
            "container {} of {} still runs image {image}",
            c.name,
            v.name(wl.kind, service)
        ));
    }
    Ok(())
}

fn target_port_is(v: &View, service: &str, port_name: Option<&str>, want: u16) -> Outcome {
    let wl = v.serving(service)?;
    let sp = v.service_port(service, port_name)?;
    match target_port(wl.template, &sp.target_port) {
        Some(p) if p == want => Ok(()),
        Some(p) => Err(format!(
            "{} port {} targets {p} ({want} expected)",
            v.name("Service", service),
            sp.port
        )),
        None => Err(format!(
            "{} port {} targets {:?}, which names no container port of {} ({want} expected)",
            v.name("Service", service),
            sp.port,
            sp.target_port,
            v.name(wl.kind, service)
        )),
    }
}

fn env_equals(v: &View, service: &str, var: &str, want: &str) -> Outcome {
    let wl = v.serving(service)?;
    let c = v.main_container(&wl)?;
    let what = format!("container {} of {}", c.name, v.name(wl.kind, service));
    match programs::env_value(v.w, v.ns, c, var) {
        Some(found) if found == want => Ok(()),
        Some(found) => Err(format!("{what} sets {var}={found} ({var}={want} expected)")),
        None => Err(format!(
            "{what} has no env var {var} ({var}={want} expected)"
        )),
    }
}

fn config_map_has_key(v: &View, name: &str, k: &str, field: Option<&str>) -> Outcome {
    let what = v.name("ConfigMap", name);
    let cm =
        v.w.configmaps
            .get(&key(v.ns, name))
            .ok_or_else(|| format!("{what} does not exist"))?;
    let text = cm
        .data
        .get(k)
        .ok_or_else(|| format!("{what} has no key {k}"))?;
    match field {
        Some(f) if json_field(text, f).is_none() => {
            Err(format!("{what} key {k} has no JSON field {f}"))
        }
        _ => Ok(()),
    }
}

/// The value of a top-level or dotted field of a JSON document.
pub(crate) fn json_field(text: &str, field: &str) -> Option<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut cur = &doc;
    for part in field.split('.') {
        cur = cur.get(part)?;
    }
    Some(cur.clone())
}

fn flag_variant(v: &View, flag: &str, want: &str) -> Outcome {
    let spec = v
        .app
        .feature_flag(flag)
        .ok_or_else(|| format!("application {} has no feature flag {flag}", v.app.name))?;
    let holder = format!("{} key {}", v.name("ConfigMap", &spec.config_map), spec.key);
    match flags::current_variant(v.w, v.ns, spec) {
        Some(found) if found == want => Ok(()),
        Some(found) => Err(format!(
            "feature flag {flag}'s default variant is {found} ({want} expected; {holder})"
        )),
        None => Err(format!(
            "feature flag {flag} has no variant set: {holder} is missing ({want} expected)"
        )),
    }
}

fn memory_limit_at_least(v: &View, service: &str, min: Memory) -> Outcome {
    let wl = v.serving(service)?;
    let c = v.main_container(&wl)?;
    match c.resources.limits.memory {
        Some(b) if b < min.bytes() as i64 => Err(format!(
            "container {} of {} has memory limit {} (at least {min} expected)",
            c.name,
            v.name(wl.kind, service),
            memory_quantity(b)
        )),
        _ => Ok(()),
    }
}

fn cpu_limit_at_least(v: &View, service: &str, min: Cpu) -> Outcome {
    let wl = v.serving(service)?;
    let c = v.main_container(&wl)?;
    match c.resources.limits.cpu_milli {
        Some(m) if m < min.millicores() as i64 => Err(format!(
            "container {} of {} has CPU limit {} (at least {min} expected)",
            c.name,
            v.name(wl.kind, service),
            cpu_quantity(m)
        )),
        _ => Ok(()),
    }
}

fn replicas_at_least(v: &View, service: &str, min: u32) -> Outcome {
    let wl = v.existing_workload(service)?;
    if i64::from(wl.replicas) < i64::from(min) {
        return Err(format!(
            "{} wants {} replicas (at least {min} expected)",
            v.name(wl.kind, service),
            wl.replicas
        ));
    }
    Ok(())
}

/// The rollout of the current spec finished: every desired replica updated, ready and available,
/// and no pod of an older template left.
fn deployment_ready(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    let what = v.name(wl.kind, service);
    if wl.observed_generation < wl.generation {
        return Err(format!(
            "{what}'s controller has not yet acted on its latest spec (generation {}, observed {})",
            wl.generation, wl.observed_generation
        ));
    }
    let c = wl.counts;
    let want = wl.replicas;
    if c.updated < want || c.ready < want || c.available < want || c.replicas > want {
        return Err(format!(
            "{what} has {} of {want} replicas updated, {} ready, {} available ({} pods in all)",
            c.updated, c.ready, c.available, c.replicas
        ));
    }
    Ok(())
}

/// The Service has ready endpoint addresses, every one a pod of the service's own workload.
fn endpoints_ready(v: &View, service: &str) -> Outcome {
    let wl = v.serving(service)?;
    v.service(service)?;
    let what = v.name("Endpoints", service);
    let ep =
        v.w.endpoints
            .get(&key(v.ns, service))
            .ok_or_else(|| format!("{what} do not exist"))?;
    if ep.ready.is_empty() {
        return Err(format!(
            "{what} have no ready address ({} not ready)",
            ep.not_ready.len()
        ));
    }
    for a in &ep.ready {
        let own =
            v.w.pods
                .get(&key(v.ns, &a.pod))
                .is_some_and(|p| pod_of(v, p, &wl));
        if !own {
            return Err(format!(
                "{what} list pod {}/{}, which is not a pod of {}",
                v.ns,
                a.pod,
                v.name(wl.kind, service)
            ));
        }
    }
    Ok(())
}

/// Whether a pod belongs to the workload (directly, or through one of its ReplicaSets).
fn pod_of(v: &View, pod: &Pod, wl: &Workload) -> bool {
    let Some(owner) = &pod.meta.owner else {
        return false;
    };
    if owner.uid == wl.uid {
        return true;
    }
    v.w.replicasets
        .get(&key(v.ns, &owner.name))
        .is_some_and(|rs| rs.meta.uid == owner.uid && rs.meta.is_owned_by(wl.uid))
}

fn node_ready(v: &View, node: &str) -> Outcome {
    let n =
        v.w.nodes
            .get(node)
            .ok_or_else(|| format!("Node {node} does not exist"))?;
    if !n.ready() {
        let why = if n.kubelet_up {
            "its Ready condition is not True"
        } else {
            "its kubelet is not posting status"
        };
        return Err(format!("Node {node} is not Ready ({why})"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::json_field;

    #[test]
    fn json_fields_are_found_by_dotted_path_and_missing_ones_are_none() {
        let doc = r#"{"GeoMongoAddress": "mongodb-geo:27017", "db": {"user": "admin"}}"#;
        assert_eq!(
            json_field(doc, "GeoMongoAddress"),
            Some(serde_json::json!("mongodb-geo:27017"))
        );
        assert_eq!(json_field(doc, "db.user"), Some(serde_json::json!("admin")));
        assert_eq!(json_field(doc, "db.password"), None);
        assert_eq!(json_field("not json", "db"), None);
    }
}
