//! An application spec as the Kubernetes manifests that deploy it on a real cluster: its
//! Namespace, ConfigMaps, ServiceAccounts, PersistentVolumeClaims, one workload per service
//! (Deployment, or StatefulSet for stores) and one Service per service with ports. Images, commands,
//! ports, environment, probes, resources and mounts are the app TOML's, which follow the upstream
//! DeathStarBench (kompose) and OpenTelemetry demo deployments. IO-free: API JSON in apply order.
//!
//! The nodes of the spec are the cluster's, not the app's, and are not rendered. A `job` service
//! (the DeathStarBench wrk2 load generator) is rendered as a Deployment: the load runs for as long
//! as the app does, as the simulator models it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::app::{AppSpec, Probe, ProbeHandler, ResourceList, ServiceSpec, WorkloadKind};

/// Every object of the app, in the order they are applied (what others refer to first).
pub fn render(app: &AppSpec) -> Vec<Value> {
    let mut out = vec![json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": app.namespace, "labels": app.common_labels},
    })];
    for cm in &app.config_maps {
        out.push(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(app, &cm.name, &app.common_labels),
            "data": cm.data,
        }));
    }
    let mut accounts: Vec<&str> = Vec::new();
    let mut claims: Vec<&str> = Vec::new();
    for s in &app.services {
        if let Some(sa) = s
            .service_account
            .as_deref()
            .filter(|sa| !accounts.contains(sa))
        {
            accounts.push(sa);
            out.push(json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": meta(app, sa, &app.common_labels),
            }));
        }
        for v in &s.volumes {
            if claims.contains(&v.claim.as_str()) {
                continue;
            }
            claims.push(&v.claim);
            let mut spec = json!({
                "accessModes": [v.access_mode],
                "resources": {"requests": {"storage": v.size.to_string()}},
            });
            if let Some(class) = &v.storage_class {
                spec["storageClassName"] = json!(class);
            }
            out.push(json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": meta(app, &v.claim, &pod_labels(app, s)),
                "spec": spec,
            }));
        }
    }
    for s in &app.services {
        out.push(workload(app, s));
    }
    for s in app.services.iter().filter(|s| s.has_service()) {
        out.push(service(app, s));
    }
    out
}

fn meta(app: &AppSpec, name: &str, labels: &BTreeMap<String, String>) -> Value {
    json!({"name": name, "namespace": app.namespace, "labels": labels})
}

/// The labels of a service's pods (and of its workload and Service): the app's common labels
/// and `<selector_label>=<service>`.
pub fn pod_labels(app: &AppSpec, s: &ServiceSpec) -> BTreeMap<String, String> {
    let mut l = app.common_labels.clone();
    l.insert(app.selector_label.clone(), s.name.clone());
    l
}

/// What selects a service's pods.
pub fn selector(app: &AppSpec, service: &str) -> BTreeMap<String, String> {
    [(app.selector_label.clone(), service.to_string())].into()
}

/// The Deployment or StatefulSet of a service.
pub fn workload(app: &AppSpec, s: &ServiceSpec) -> Value {
    let stateful = s.kind == WorkloadKind::StatefulSet;
    let mut spec = json!({
        "replicas": s.replicas,
        "selector": {"matchLabels": selector(app, &s.name)},
        "template": {
            "metadata": {"labels": pod_labels(app, s)},
            "spec": pod_spec(s),
        },
    });
    if stateful {
        spec["serviceName"] = json!(s.name);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": if stateful { "StatefulSet" } else { "Deployment" },
        "metadata": meta(app, &s.name, &pod_labels(app, s)),
        "spec": spec,
    })
}

fn pod_spec(s: &ServiceSpec) -> Value {
    let mut c = json!({"name": s.container_name(), "image": s.image});
    if !s.command.is_empty() {
        c["command"] = json!(s.command);
    }
    if !s.args.is_empty() {
        c["args"] = json!(s.args);
    }
    if !s.ports.is_empty() {
        c["ports"] = s
            .ports
            .iter()
            .map(|p| json!({"containerPort": p.target_port(), "protocol": "TCP"}))
            .collect();
    }
    if !s.env.is_empty() {
        c["env"] = s
            .env
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect();
    }
    let resources = resources(&s.resources.requests, &s.resources.limits);
    if resources.as_object().is_some_and(|r| !r.is_empty()) {
        c["resources"] = resources;
    }
    if let Some(p) = &s.readiness {
        c["readinessProbe"] = probe(p);
    }
    if let Some(p) = &s.liveness {
        c["livenessProbe"] = probe(p);
    }
    let mut volumes: Vec<Value> = Vec::new();
    let mut mounts: Vec<Value> = Vec::new();
    for m in &s.config_mounts {
        if !volumes.iter().any(|v| v["name"] == json!(m.config_map)) {
            volumes.push(json!({"name": m.config_map, "configMap": {"name": m.config_map}}));
        }
        let mut mount = json!({"name": m.config_map, "mountPath": m.mount_path});
        if let Some(sub) = &m.sub_path {
            mount["subPath"] = json!(sub);
        }
        mounts.push(mount);
    }
    for v in &s.volumes {
        let name = format!("{}-data", s.name);
        volumes.push(json!({"name": name, "persistentVolumeClaim": {"claimName": v.claim}}));
        mounts.push(json!({"name": name, "mountPath": v.mount_path}));
    }
    if !mounts.is_empty() {
        c["volumeMounts"] = json!(mounts);
    }
    let mut spec = json!({"containers": [c]});
    if !volumes.is_empty() {
        spec["volumes"] = json!(volumes);
    }
    if let Some(sa) = &s.service_account {
        spec["serviceAccountName"] = json!(sa);
    }
    spec
}

/// A container's `resources` (empty lists left out).
pub fn resources(requests: &ResourceList, limits: &ResourceList) -> Value {
    let list = |l: &ResourceList| {
        let mut m = serde_json::Map::new();
        if let Some(cpu) = l.cpu {
            m.insert("cpu".into(), json!(cpu.to_string()));
        }
        if let Some(mem) = l.memory {
            m.insert("memory".into(), json!(mem.to_string()));
        }
        m
    };
    let mut out = serde_json::Map::new();
    for (name, l) in [("limits", limits), ("requests", requests)] {
        let m = list(l);
        if !m.is_empty() {
            out.insert(name.into(), Value::Object(m));
        }
    }
    Value::Object(out)
}

/// A liveness or readiness probe.
pub fn probe(p: &Probe) -> Value {
    let mut v = match &p.handler {
        ProbeHandler::Http { path, port } => {
            json!({"httpGet": {"path": path, "port": port, "scheme": "HTTP"}})
        }
        ProbeHandler::Tcp { port } => json!({"tcpSocket": {"port": port}}),
        ProbeHandler::Grpc { port } => json!({"grpc": {"port": port}}),
        ProbeHandler::Exec { command } => json!({"exec": {"command": command}}),
    };
    v["initialDelaySeconds"] = json!(p.initial_delay.as_millis() / 1000);
    v["timeoutSeconds"] = json!((p.timeout.as_millis() / 1000).max(1));
    v["periodSeconds"] = json!((p.period.as_millis() / 1000).max(1));
    v["successThreshold"] = json!(1);
    v["failureThreshold"] = json!(p.failure_threshold.max(1));
    v
}

/// The Service of a service: its ports, selecting its pods.
pub fn service(app: &AppSpec, s: &ServiceSpec) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(app, &s.name, &pod_labels(app, s)),
        "spec": {
            "selector": selector(app, &s.name),
            "ports": s.ports.iter().map(|p| json!({
                "name": p.name,
                "port": p.port,
                "targetPort": p.target_port(),
                "protocol": "TCP",
            })).collect::<Vec<_>>(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;

    #[test]
    fn every_app_renders_its_services_with_their_shape() {
        let catalog = Catalog::builtin().unwrap();
        for app in catalog.apps() {
            let objects = render(app);
            let kinds = |k: &str| objects.iter().filter(|o| o["kind"] == k).count();
            assert_eq!(kinds("Namespace"), 1);
            assert_eq!(
                kinds("Deployment") + kinds("StatefulSet"),
                app.services.len(),
                "{}",
                app.name
            );
            assert_eq!(
                kinds("Service"),
                app.services.iter().filter(|s| s.has_service()).count()
            );
            assert_eq!(kinds("ConfigMap"), app.config_maps.len());
        }
        let app = catalog.app("hotel-reservation").unwrap();
        let objects = render(app);
        let geo = objects
            .iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "geo")
            .unwrap();
        let c = &geo["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "deathstarbench/hotel-reservation:latest");
        assert_eq!(c["command"], json!(["geo"]));
        assert_eq!(c["ports"][0]["containerPort"], 8083);
        assert_eq!(
            geo["spec"]["selector"]["matchLabels"]["io.kompose.service"],
            "geo"
        );
    }
}
