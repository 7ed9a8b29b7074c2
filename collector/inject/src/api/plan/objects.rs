//! Primitives that change objects other than a workload's pod template: Services, ConfigMaps
//! (configuration drift, deletion, feature flags, cluster DNS), NetworkPolicies, ResourceQuotas,
//! node taints, and the RBAC objects of a denied init container.

use problems::edits;
use problems::manifests;
use problems::primitive::Primitive;
use serde_json::{Value, json};

use super::super::object::{Kind, ObjectRef, array, member};
use super::{Result, Work, invalid, pod_spec};

/// Namespace and name of the cluster DNS configuration.
const KUBE_SYSTEM: &str = "kube-system";
const COREDNS: &str = "coredns";

/// Applies `p` when it is one of this module's; whether it was.
pub(super) fn apply(w: &mut Work, p: &Primitive) -> Result<bool> {
    use Primitive as P;
    match p {
        P::ServiceTargetPort {
            service,
            port_name,
            target_port,
        } => edit_port(w, service, port_name.as_deref(), "targetPort", *target_port)?,
        P::ServicePort {
            service,
            port_name,
            port,
        } => edit_port(w, service, port_name.as_deref(), "port", *port)?,
        P::ServiceSelector { service, add } => w.edit(&w.at(Kind::Service, service), |s| {
            let selector = member(member(s, "spec"), "selector");
            for (k, v) in add {
                selector[k] = json!(v);
            }
            Ok(())
        })?,
        P::ServiceSelectsOther {
            service,
            other,
            label_key,
            label_value,
        } => {
            for s in [service, other] {
                w.edit_workload(s, |wl| {
                    let labels = member(member(member(wl, "spec"), "template"), "metadata");
                    member(labels, "labels")[label_key] = json!(label_value);
                    Ok(())
                })?;
            }
            w.edit(&w.at(Kind::Service, service), |s| {
                member(s, "spec")["selector"] = json!({label_key: label_value});
                Ok(())
            })?;
        }
        P::ServiceDelete { service } => w.delete(&w.at(Kind::Service, service))?,
        P::ConfigMapKeyDrift {
            config_map,
            key,
            field,
            value,
        } => {
            w.edit(&w.at(Kind::ConfigMap, config_map), |cm| {
                drift(cm, key, field.as_deref(), value.as_deref())
            })?;
            restart_consumers(w, config_map)?;
        }
        P::ConfigMapDelete { config_map } => {
            w.delete(&w.at(Kind::ConfigMap, config_map))?;
            restart_consumers(w, config_map)?;
        }
        P::NetworkPolicyDeny {
            name,
            service,
            ingress,
            egress,
        } => network_policy(w, name, service, *ingress, *egress)?,
        P::ResourceQuota {
            name,
            hard,
            recreate,
        } => {
            let body = json!({
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": name, "namespace": w.ns()},
                "spec": {"hard": hard.entries()},
            });
            w.create(&w.at(Kind::ResourceQuota, name), body)?;
            for s in recreate {
                w.restart(s);
            }
        }
        P::NodeTaint {
            nodes,
            key,
            value,
            effect,
            evict,
        } => {
            for n in nodes {
                w.edit(&ObjectRef::node(n), |node| {
                    let mut taint = json!({"key": key, "effect": effect.as_str()});
                    if !value.is_empty() {
                        taint["value"] = json!(value);
                    }
                    array(member(node, "spec"), "taints").push(taint);
                    Ok(())
                })?;
            }
            for s in evict {
                w.restart(s);
            }
        }
        P::DnsFailure { service } => {
            let ns = w.ns();
            let r = ObjectRef::namespaced(Kind::ConfigMap, KUBE_SYSTEM, COREDNS);
            w.edit(&r, |cm| {
                let text = cm
                    .pointer("/data/Corefile")
                    .and_then(Value::as_str)
                    .ok_or("no Corefile key: is this cluster's DNS CoreDNS?")?;
                let edited = edits::corefile_nxdomain(text, service.as_deref(), ns);
                member(cm, "data")["Corefile"] = json!(edited);
                Ok(())
            })?;
        }
        P::RbacDeniedInit {
            service,
            service_account,
            config_map,
        } => rbac_denied_init(w, service, service_account, config_map)?,
        P::FeatureFlag { flag, variant } => {
            let Some(spec) = w.app.feature_flag(flag) else {
                return invalid(format!("no feature flag `{flag}`"));
            };
            w.edit(&w.at(Kind::ConfigMap, &spec.config_map), |cm| {
                let text = cm
                    .pointer(&format!("/data/{}", spec.key))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let edited = edits::set_flag_variant(text, flag, variant);
                member(cm, "data")[&spec.key] = json!(edited);
                Ok(())
            })?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Sets `field` of the Service port named `port_name` (its first port when no name is given).
fn edit_port(
    w: &mut Work,
    service: &str,
    port_name: Option<&str>,
    field: &str,
    value: u16,
) -> Result<()> {
    w.edit(&w.at(Kind::Service, service), |s| {
        let ports = array(member(s, "spec"), "ports");
        let port = ports
            .iter_mut()
            .find(|p| port_name.is_none_or(|n| p["name"].as_str() == Some(n)))
            .ok_or_else(|| format!("no port {port_name:?}"))?;
        port[field] = json!(value);
        Ok(())
    })
}

/// A ConfigMap key (or a JSON field inside its text) removed or set.
fn drift(
    cm: &mut Value,
    key: &str,
    field: Option<&str>,
    value: Option<&str>,
) -> std::result::Result<(), String> {
    let data = member(cm, "data");
    match field {
        Some(f) => {
            let text = data[key]
                .as_str()
                .ok_or_else(|| format!("no key `{key}`"))?;
            let edited = edits::edit_json_field(text, f, value)
                .ok_or_else(|| format!("key `{key}` is not a JSON object with `{f}`"))?;
            data[key] = json!(edited);
        }
        None => match value {
            Some(v) => data[key] = json!(v),
            None => {
                data.as_object_mut().map(|m| m.remove(key));
            }
        },
    }
    Ok(())
}

/// Restarts the app services whose pod templates use the ConfigMap (mounted or by env refs).
fn restart_consumers(w: &mut Work, config_map: &str) -> Result<()> {
    let services: Vec<String> = w.app.services.iter().map(|s| s.name.clone()).collect();
    for s in services {
        let r = w.workload(&s)?;
        let Some(workload) = w.get(&r)? else { continue };
        let pod = pod_spec(workload);
        let mounted = pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v.pointer("/configMap/name").and_then(Value::as_str) == Some(config_map));
        let referenced = ["containers", "initContainers"]
            .iter()
            .filter_map(|k| pod[*k].as_array())
            .flatten()
            .filter_map(|c| c["env"].as_array())
            .flatten()
            .any(|e| {
                e.pointer("/valueFrom/configMapKeyRef/name")
                    .and_then(Value::as_str)
                    == Some(config_map)
            });
        if mounted || referenced {
            w.restart(&s);
        }
    }
    Ok(())
}

fn network_policy(
    w: &mut Work,
    name: &str,
    service: &str,
    ingress: bool,
    egress: bool,
) -> Result<()> {
    if w.app.service(service).is_none() {
        return invalid(format!("no service named `{service}`"));
    }
    let mut spec = json!({"podSelector": {"matchLabels": manifests::selector(w.app, service)}});
    let mut types = Vec::new();
    if ingress {
        types.push("Ingress");
        spec["ingress"] = json!([]);
    }
    if egress {
        types.push("Egress");
        spec["egress"] = json!([]);
    }
    spec["policyTypes"] = json!(types);
    let body = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": w.ns()},
        "spec": spec,
    });
    w.create(&w.at(Kind::NetworkPolicy, name), body)
}

/// A ServiceAccount whose Role lacks `configmaps`, bound to it, and an init container that reads
/// the ConfigMap through the API with it.
fn rbac_denied_init(
    w: &mut Work,
    service: &str,
    service_account: &str,
    config_map: &str,
) -> Result<()> {
    let ns = w.ns();
    let meta = json!({"name": service_account, "namespace": ns, "labels": w.app.common_labels});
    w.create(
        &w.at(Kind::ServiceAccount, service_account),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}),
    )?;
    w.create(
        &w.at(Kind::Role, service_account),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
            "rules": [{"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["get", "list", "watch"]}],
        }),
    )?;
    w.create(
        &w.at(Kind::RoleBinding, service_account),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": service_account},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": ns}],
        }),
    )?;
    w.edit_pod(service, |pod| {
        pod["serviceAccountName"] = json!(service_account);
        array(pod, "initContainers").push(json!({
            "name": "fetch-config",
            "image": "alpine/k8s:1.28.3",
            "command": ["sh", "-c", format!("kubectl get configmap {config_map} -n {ns} -o jsonpath='{{.data}}' > /config/runtime.json")],
        }));
        Ok(())
    })
}
