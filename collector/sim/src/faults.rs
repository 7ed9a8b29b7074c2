//! Every fault primitive as a change to the simulated cluster's state, with an exact revert.
//!
//! Applying a primitive saves the prior version of each object or runtime entry it touches (or
//! notes that it did not exist) in an [`Undo`]; reverting puts those back, deleting what the fault
//! created. Pods the fault deleted to make a change take effect are not resurrected: their
//! controllers already replaced them, as on a real cluster. Symptoms are not scripted here: they
//! follow from the changed state through the controllers, kubelet, network and workload models.

use std::collections::BTreeMap;

use problems::NoiseKind;
use problems::app::{AppSpec, TaintEffect};
use problems::primitive::{AuthMode, Primitive, QuotaHard};
use serde_json::json;

use super::bootstrap;
use super::controllers::delete_pod;
use super::objects::*;
use super::runtime::{DbAuth, Link, NodeRuntime, ServiceRuntime};
use super::util;
use super::world::World;

/// A saved prior state of one thing a fault changed.
#[derive(Debug, Clone)]
enum Saved {
    Deployment(Key, Option<Deployment>),
    StatefulSet(Key, Option<StatefulSet>),
    Service(Key, Option<Service>),
    ConfigMap(Key, Option<ConfigMap>),
    Node(String, Option<Node>),
    Quota(Key, Option<ResourceQuota>),
    NetPol(Key, Option<NetworkPolicy>),
    ServiceAccount(Key, Option<Simple>),
    Role(Key, Option<Simple>),
    RoleBinding(Key, Option<Simple>),
    Load(f64),
    NodeRt(String, Option<NodeRuntime>),
    ServiceRt(String, Option<ServiceRuntime>),
    Link((String, String), Option<Link>),
    Image(String, Option<problems::primitive::ImageEffect>),
    AuthAt(String, Option<i64>),
}

/// How to undo one applied fault.
#[derive(Debug, Clone, Default)]
pub struct Undo {
    saved: Vec<Saved>,
}

/// A fault that cannot be applied to this app (names something the app does not have).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FaultError(pub String);

type Result<T> = std::result::Result<T, FaultError>;

struct Ctx<'a> {
    w: &'a mut World,
    app: &'a AppSpec,
    undo: Undo,
}

impl Ctx<'_> {
    fn ns(&self) -> String {
        self.app.namespace.clone()
    }

    fn save_workload(&mut self, service: &str) -> Result<()> {
        let k = key(&self.ns(), service);
        if let Some(d) = self.w.deployments.get(&k) {
            if !self
                .undo
                .saved
                .iter()
                .any(|s| matches!(s, Saved::Deployment(x, _) if *x == k))
            {
                self.undo.saved.push(Saved::Deployment(k, Some(d.clone())));
            }
            return Ok(());
        }
        if let Some(s) = self.w.statefulsets.get(&k) {
            if !self
                .undo
                .saved
                .iter()
                .any(|s| matches!(s, Saved::StatefulSet(x, _) if *x == k))
            {
                self.undo.saved.push(Saved::StatefulSet(k, Some(s.clone())));
            }
            return Ok(());
        }
        Err(FaultError(format!(
            "no workload named `{service}` in namespace {}",
            self.ns()
        )))
    }

    /// Edits a service's pod template and replica count (a `kubectl patch` of the workload).
    fn edit(&mut self, service: &str, f: impl FnOnce(&mut PodTemplate, &mut i32)) -> Result<()> {
        self.save_workload(service)?;
        let k = key(&self.ns(), service);
        if let Some(d) = self.w.deployments.get_mut(&k) {
            f(&mut d.template, &mut d.replicas);
            d.meta.generation += 1;
            let uid = d.meta.uid.clone();
            self.w.touch(Kind::Deployment, &k);
            // Like the delete-and-apply of the real injectors, the change reaches every pod at
            // once: the old ReplicaSets go to zero and their pods are deleted.
            let old: Vec<Key> = super::controllers::owned_by(self.w, &k.0, &uid)
                .map(|(rk, _)| rk.clone())
                .collect();
            for rk in old {
                if let Some(rs) = self.w.replicasets.get_mut(&rk) {
                    rs.replicas = 0;
                    let rs_uid = rs.meta.uid.clone();
                    self.w.touch(Kind::ReplicaSet, &rk);
                    let pods: Vec<Key> = self
                        .w
                        .pods
                        .range((rk.0.clone(), String::new())..)
                        .take_while(|((n, _), _)| *n == rk.0)
                        .filter(|(_, p)| p.meta.is_owned_by(&rs_uid))
                        .map(|(pk, _)| pk.clone())
                        .collect();
                    for pk in pods {
                        delete_pod(self.w, &pk);
                    }
                }
            }
        } else if let Some(s) = self.w.statefulsets.get_mut(&k) {
            f(&mut s.template, &mut s.replicas);
            s.meta.generation += 1;
            s.revision = format!(
                "{}-{}",
                s.meta.name,
                util::template_hash(&serde_json::to_string(&s.template).unwrap_or_default())
            );
            self.w.touch(Kind::StatefulSet, &k);
        }
        Ok(())
    }

    /// Edits the main container of a service.
    fn edit_container(&mut self, service: &str, f: impl FnOnce(&mut Container)) -> Result<()> {
        let name = self
            .app
            .service(service)
            .map(|s| s.container_name().to_string());
        self.edit(service, |t, _| {
            let idx = name
                .as_ref()
                .and_then(|n| t.spec.containers.iter().position(|c| &c.name == n))
                .unwrap_or(0);
            if let Some(c) = t.spec.containers.get_mut(idx) {
                f(c);
            }
        })
    }

    fn save_service(&mut self, service: &str) -> Result<Key> {
        let k = key(&self.ns(), service);
        let s = self
            .w
            .services
            .get(&k)
            .cloned()
            .ok_or_else(|| FaultError(format!("no Service named `{service}`")))?;
        self.undo.saved.push(Saved::Service(k.clone(), Some(s)));
        Ok(k)
    }

    fn save_configmap(&mut self, name: &str) -> Result<Key> {
        let k = key(&self.ns(), name);
        let cm = self
            .w
            .configmaps
            .get(&k)
            .cloned()
            .ok_or_else(|| FaultError(format!("no ConfigMap named `{name}`")))?;
        self.undo.saved.push(Saved::ConfigMap(k.clone(), Some(cm)));
        Ok(k)
    }

    fn save_service_rt(&mut self, service: &str) {
        let prev = self.w.runtime.services.get(service).cloned();
        self.undo
            .saved
            .push(Saved::ServiceRt(service.to_string(), prev));
    }

    fn save_link(&mut self, from: &str, to: &str) {
        let k = (from.to_string(), to.to_string());
        let prev = self.w.runtime.links.get(&k).cloned();
        self.undo.saved.push(Saved::Link(k, prev));
    }

    fn save_node_rt(&mut self, node: &str) -> Result<()> {
        if !self.w.nodes.contains_key(node) {
            return Err(FaultError(format!("no node named `{node}`")));
        }
        let prev = self.w.runtime.nodes.get(node).cloned();
        self.undo.saved.push(Saved::NodeRt(node.to_string(), prev));
        Ok(())
    }

    /// Deletes the pods of a service so its controller recreates them with the current spec.
    fn restart(&mut self, service: &str) {
        let ns = self.ns();
        let sel: Labels = [(self.app.selector_label.clone(), service.to_string())].into();
        let pods: Vec<Key> = self
            .w
            .pods_selected(&ns, &sel)
            .map(|p| key(&ns, &p.meta.name))
            .collect();
        for pk in pods {
            delete_pod(self.w, &pk);
        }
    }

    /// Services whose pods use a ConfigMap (mounted or through env refs).
    fn consumers(&self, cm: &str) -> Vec<String> {
        self.app
            .services
            .iter()
            .filter(|s| {
                let k = key(&self.app.namespace, &s.name);
                let t = self.w.deployments.get(&k).map(|d| &d.template).or(self.w.statefulsets.get(&k).map(|s| &s.template));
                t.is_some_and(|t| {
                    t.spec.volumes.iter().any(|v| v.config_map.as_ref().is_some_and(|c| c.name == cm))
                        || t.spec.containers.iter().flat_map(|c| &c.env).any(|e| matches!(&e.value_from, Some(EnvSource::ConfigMapKeyRef(r)) if r.name == cm))
                })
            })
            .map(|s| s.name.clone())
            .collect()
    }

    fn create_simple(&mut self, kind: Kind, name: &str, body: serde_json::Value) {
        let ns = self.ns();
        let k = key(&ns, name);
        let meta = self.w.meta(Some(&ns), name, self.app.common_labels.clone());
        let map = match kind {
            Kind::ServiceAccount => &mut self.w.service_accounts,
            Kind::Role => &mut self.w.roles,
            _ => &mut self.w.role_bindings,
        };
        let prev = map.insert(k.clone(), Simple { meta, body });
        self.undo.saved.push(match kind {
            Kind::ServiceAccount => Saved::ServiceAccount(k.clone(), prev),
            Kind::Role => Saved::Role(k.clone(), prev),
            _ => Saved::RoleBinding(k.clone(), prev),
        });
        self.w.touch(kind, &k);
    }
}

fn port_matches(p: &ServicePort, name: &Option<String>) -> bool {
    name.as_ref()
        .is_none_or(|n| p.name.as_deref() == Some(n.as_str()))
}

fn effect_name(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

fn quota_hard(h: &QuotaHard) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if let Some(p) = h.pods {
        m.insert("pods".into(), p.to_string());
    }
    if let Some(c) = h.requests_cpu {
        m.insert("requests.cpu".into(), c.to_string());
    }
    if let Some(c) = h.requests_memory {
        m.insert("requests.memory".into(), c.to_string());
    }
    if let Some(c) = h.limits_cpu {
        m.insert("limits.cpu".into(), c.to_string());
    }
    if let Some(c) = h.limits_memory {
        m.insert("limits.memory".into(), c.to_string());
    }
    m
}

/// Edits a JSON document held in a ConfigMap value: removes or sets a top-level or dotted field.
fn edit_json_field(text: &str, field: &str, value: Option<&str>) -> Option<String> {
    let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut cur = &mut v;
    let parts: Vec<&str> = field.split('.').collect();
    for p in &parts[..parts.len() - 1] {
        cur = cur.get_mut(*p)?;
    }
    let last = parts[parts.len() - 1];
    let obj = cur.as_object_mut()?;
    match value {
        Some(val) => {
            let parsed = serde_json::from_str(val).unwrap_or_else(|_| json!(val));
            obj.insert(last.to_string(), parsed);
        }
        None => {
            obj.remove(last);
        }
    }
    serde_json::to_string_pretty(&v).ok()
}

/// Sets a flag's default variant in its ConfigMap text (flagd JSON, `name=value` lines, or a
/// plain value).
fn set_flag_variant(text: &str, flag: &str, variant: &str) -> String {
    if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(text) {
        if v["flags"][flag].is_object() {
            v["flags"][flag]["defaultVariant"] = json!(variant);
            return serde_json::to_string_pretty(&v).unwrap_or_else(|_| text.to_string());
        }
        if v.get(flag).is_some() {
            v[flag] = json!(variant);
            return serde_json::to_string_pretty(&v).unwrap_or_else(|_| text.to_string());
        }
    }
    if text
        .lines()
        .any(|l| l.split_once('=').is_some_and(|(k, _)| k.trim() == flag))
    {
        return text
            .lines()
            .map(|l| match l.split_once('=') {
                Some((k, _)) if k.trim() == flag => format!("{flag}={variant}"),
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    variant.to_string()
}

/// How a Go program reports a failed syscall (`accept4: too many open files`).
fn syscall_error(syscall: &str, errno: &str) -> String {
    let text = match errno.to_ascii_uppercase().as_str() {
        "EMFILE" => "too many open files",
        "ENFILE" => "too many open files in system",
        "EIO" => "input/output error",
        "ECONNREFUSED" => "connection refused",
        "ECONNRESET" => "connection reset by peer",
        "ENOSPC" => "no space left on device",
        "EACCES" => "permission denied",
        "EPERM" => "operation not permitted",
        "ENOMEM" => "cannot allocate memory",
        "EAGAIN" => "resource temporarily unavailable",
        "ETIMEDOUT" => "connection timed out",
        "ENETDOWN" => "network is down",
        other => return format!("{syscall}: errno {other}"),
    };
    match syscall {
        "accept" | "accept4" => format!("accept tcp [::]:0: {syscall}: {text}"),
        "openat" | "open" => format!("open /tmp/data: {text}"),
        _ => format!("{syscall}: {text}"),
    }
}

/// Applies a primitive to the world. On error nothing the error concerns has been changed.
pub fn apply(w: &mut World, app: &AppSpec, p: &Primitive) -> Result<Undo> {
    use Primitive::*;
    let mut cx = Ctx {
        w,
        app,
        undo: Undo::default(),
    };
    let ns = app.namespace.clone();
    match p {
        ServiceTargetPort {
            service,
            port_name,
            target_port,
        } => {
            let k = cx.save_service(service)?;
            let s = cx.w.services.get_mut(&k).expect("saved");
            let sp = s
                .ports
                .iter_mut()
                .find(|p| port_matches(p, port_name))
                .ok_or_else(|| {
                    FaultError(format!("Service `{service}` has no port {port_name:?}"))
                })?;
            sp.target_port = IntOrString::Int(i32::from(*target_port));
            cx.w.touch(Kind::Service, &k);
        }
        ServicePort {
            service,
            port_name,
            port,
        } => {
            let k = cx.save_service(service)?;
            let s = cx.w.services.get_mut(&k).expect("saved");
            let sp = s
                .ports
                .iter_mut()
                .find(|p| port_matches(p, port_name))
                .ok_or_else(|| {
                    FaultError(format!("Service `{service}` has no port {port_name:?}"))
                })?;
            sp.port = i32::from(*port);
            cx.w.touch(Kind::Service, &k);
        }
        ServiceSelector { service, add } => {
            let k = cx.save_service(service)?;
            cx.w.services
                .get_mut(&k)
                .expect("saved")
                .selector
                .extend(add.clone());
            cx.w.touch(Kind::Service, &k);
        }
        ServiceSelectsOther {
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
            let k = cx.save_service(service)?;
            cx.w.services.get_mut(&k).expect("saved").selector =
                [(label_key.clone(), label_value.clone())].into();
            cx.w.touch(Kind::Service, &k);
        }
        ServiceDelete { service } => {
            let k = cx.save_service(service)?;
            cx.w.services.remove(&k);
            cx.w.touch(Kind::Service, &k);
        }
        ContainerImage {
            service,
            image,
            effect,
        } => {
            let prev = cx.w.runtime.images.get(image).copied();
            cx.undo.saved.push(Saved::Image(image.clone(), prev));
            cx.w.runtime.images.insert(image.clone(), *effect);
            cx.edit_container(service, |c| c.image = image.clone())?;
        }
        EnvRemove { service, var } => {
            cx.edit_container(service, |c| c.env.retain(|e| e.name != *var))?
        }
        EnvSet {
            service,
            var,
            value,
        } => cx.edit_container(service, |c| c.env.push(EnvVar::value(var, value)))?,
        EnvAddressPort { service, var, port } => {
            let mut missing = false;
            cx.edit_container(service, |c| {
                match c
                    .env
                    .iter_mut()
                    .rev()
                    .find(|e| e.name == *var)
                    .and_then(|e| e.value.as_mut())
                {
                    Some(v) => {
                        if let Some((host, old)) = util::split_address(v) {
                            let from = format!("{host}:{old}");
                            *v = v.replacen(&from, &format!("{host}:{port}"), 1);
                        }
                    }
                    None => missing = true,
                }
            })?;
            if missing {
                return Err(FaultError(format!(
                    "`{service}` has no env var `{var}` with a value"
                )));
            }
        }
        ConfigMapKeyDrift {
            config_map,
            key: k_name,
            field,
            value,
        } => {
            let k = cx.save_configmap(config_map)?;
            let cm = cx.w.configmaps.get_mut(&k).expect("saved");
            match field {
                Some(f) => {
                    let text = cm.data.get(k_name).ok_or_else(|| {
                        FaultError(format!("ConfigMap `{config_map}` has no key `{k_name}`"))
                    })?;
                    let edited = edit_json_field(text, f, value.as_deref()).ok_or_else(|| FaultError(format!("ConfigMap `{config_map}` key `{k_name}` is not a JSON object with `{f}`")))?;
                    cm.data.insert(k_name.clone(), edited);
                }
                None => match value {
                    Some(v) => {
                        cm.data.insert(k_name.clone(), v.clone());
                    }
                    None => {
                        cm.data.remove(k_name);
                    }
                },
            }
            cx.w.touch(Kind::ConfigMap, &k);
            for s in cx.consumers(config_map) {
                cx.restart(&s);
            }
        }
        ConfigMapDelete { config_map } => {
            let consumers = cx.consumers(config_map);
            let k = cx.save_configmap(config_map)?;
            cx.w.configmaps.remove(&k);
            cx.w.touch(Kind::ConfigMap, &k);
            for s in consumers {
                cx.restart(&s);
            }
        }
        ReadinessProbe { service, probe } => cx.edit_container(service, |c| {
            c.readiness_probe = Some(bootstrap::to_probe(probe))
        })?,
        LivenessProbe { service, probe } => cx.edit(service, |t, _| {
            t.spec.termination_grace_period_seconds = 0;
            if let Some(c) = t.spec.containers.first_mut() {
                c.liveness_probe = Some(bootstrap::to_probe(probe));
            }
        })?,
        MemoryLimit { service, limit } => cx.edit_container(service, |c| {
            let b = limit.bytes() as i64;
            c.resources.limits.memory = Some(b);
            if c.resources.requests.memory.is_some_and(|r| r > b) {
                c.resources.requests.memory = Some(b);
            }
        })?,
        CpuLimit { service, limit } => cx.edit_container(service, |c| {
            let m = limit.millicores() as i64;
            c.resources.limits.cpu_milli = Some(m);
            if c.resources.requests.cpu_milli.is_some_and(|r| r > m) {
                c.resources.requests.cpu_milli = Some(m);
            }
        })?,
        ResourceRequests {
            service,
            cpu,
            memory,
        } => cx.edit_container(service, |c| {
            if let Some(cpu) = cpu {
                let m = cpu.millicores() as i64;
                c.resources.requests.cpu_milli = Some(m);
                if c.resources.limits.cpu_milli.is_some_and(|l| l < m) {
                    c.resources.limits.cpu_milli = Some(m);
                }
            }
            if let Some(mem) = memory {
                let b = mem.bytes() as i64;
                c.resources.requests.memory = Some(b);
                if c.resources.limits.memory.is_some_and(|l| l < b) {
                    c.resources.limits.memory = Some(b);
                }
            }
        })?,
        NodeSelector { service, selector } => cx.edit(service, |t, _| {
            t.spec.node_selector.extend(selector.clone())
        })?,
        NodeTaint {
            nodes,
            key: tkey,
            value,
            effect,
            evict,
        } => {
            for n in nodes {
                let node =
                    cx.w.nodes
                        .get(n)
                        .cloned()
                        .ok_or_else(|| FaultError(format!("no node named `{n}`")))?;
                cx.undo.saved.push(Saved::Node(n.clone(), Some(node)));
                let node = cx.w.nodes.get_mut(n).expect("saved");
                node.taints.push(Taint {
                    key: tkey.clone(),
                    value: (!value.is_empty()).then(|| value.clone()),
                    effect: effect_name(*effect).into(),
                });
                cx.w.touch(Kind::Node, &key("", n));
            }
            for s in evict {
                cx.restart(s);
            }
        }
        AntiAffinityDeadlock { service, replicas } => {
            let sel: Labels = [(app.selector_label.clone(), service.clone())].into();
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
        Scale { service, replicas } => cx.edit(service, |_, r| *r = *replicas as i32)?,
        PvcClaimMismatch { service, claim } => cx.edit(service, |t, _| {
            for v in &mut t.spec.volumes {
                if let Some(p) = &mut v.persistent_volume_claim {
                    p.claim_name = claim.clone();
                }
            }
        })?,
        ResourceQuota {
            name,
            hard,
            recreate,
        } => {
            let k = key(&ns, name);
            let meta = cx.w.meta(Some(&ns), name, Labels::new());
            let prev = cx.w.quotas.insert(
                k.clone(),
                super::objects::ResourceQuota {
                    meta,
                    hard: quota_hard(hard),
                    used: BTreeMap::new(),
                },
            );
            cx.undo.saved.push(Saved::Quota(k.clone(), prev));
            cx.w.touch(Kind::ResourceQuota, &k);
            for s in recreate {
                cx.restart(s);
            }
        }
        NetworkPolicyDeny {
            name,
            service,
            ingress,
            egress,
        } => {
            if app.service(service).is_none() {
                return Err(FaultError(format!("no service named `{service}`")));
            }
            let k = key(&ns, name);
            let mut meta = cx.w.meta(Some(&ns), name, Labels::new());
            meta.generation = 1;
            let prev = cx.w.netpols.insert(
                k.clone(),
                NetworkPolicy {
                    meta,
                    pod_selector: [(app.selector_label.clone(), service.clone())].into(),
                    deny_ingress: *ingress,
                    deny_egress: *egress,
                },
            );
            cx.undo.saved.push(Saved::NetPol(k.clone(), prev));
            cx.w.touch(Kind::NetworkPolicy, &k);
        }
        DnsFailure { service } => {
            let k = key(bootstrap::KUBE_SYSTEM, "coredns");
            let cm =
                cx.w.configmaps
                    .get(&k)
                    .cloned()
                    .ok_or_else(|| FaultError("cluster DNS ConfigMap missing".into()))?;
            cx.undo
                .saved
                .push(Saved::ConfigMap(k.clone(), Some(cm.clone())));
            let block = match service {
                Some(s) => {
                    let fqdn = format!("{s}.{ns}.svc.cluster.local");
                    format!("    template ANY ANY {fqdn} {{\n       match \"^{}[.]$\"\n       rcode NXDOMAIN\n       fallthrough\n    }}\n", fqdn.replace('.', "[.]"))
                }
                None => "    template ANY ANY {\n       match \".*\\.svc\\.cluster\\.local\"\n       rcode NXDOMAIN\n       fallthrough\n    }\n".to_string(),
            };
            let text = cm.data.get("Corefile").cloned().unwrap_or_default();
            let edited = match text.find("    kubernetes ") {
                Some(pos) => format!("{}{block}{}", &text[..pos], &text[pos..]),
                None => format!("{text}{block}"),
            };
            cx.w.configmaps
                .get_mut(&k)
                .expect("present")
                .data
                .insert("Corefile".into(), edited);
            cx.w.touch(Kind::ConfigMap, &k);
        }
        DnsPolicy {
            service,
            nameserver,
        } => cx.edit(service, |t, _| {
            t.spec.dns_policy = "None".into();
            t.spec.dns_config = Some(DnsConfig {
                nameservers: vec![nameserver.clone()],
                searches: vec![],
            });
        })?,
        RbacDeniedInit {
            service,
            service_account,
            config_map,
        } => {
            cx.create_simple(Kind::ServiceAccount, service_account, json!({}));
            cx.create_simple(Kind::Role, service_account, json!({"rules": [{"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["get", "list", "watch"]}]}));
            cx.create_simple(Kind::RoleBinding, service_account, json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": service_account},
                "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": ns}],
            }));
            cx.edit(service, |t, _| {
                t.spec.service_account_name = service_account.clone();
                let mut c = Container::new("fetch-config", "alpine/k8s:1.28.3");
                c.command = vec!["sh".into(), "-c".into(), format!("kubectl get configmap {config_map} -n {ns} -o jsonpath='{{.data}}' > /config/runtime.json")];
                t.spec.init_containers.push(c);
            })?;
        }
        InitContainerHang { service, waits_for } => cx.edit(service, |t, _| {
            let mut c = Container::new(&format!("wait-for-{waits_for}"), "busybox:1.28");
            c.command = vec![
                "sh".into(),
                "-c".into(),
                format!(
                    "until nslookup {waits_for}; do echo waiting for {waits_for}; sleep 2; done"
                ),
            ];
            t.spec.init_containers.push(c);
        })?,
        WrongCommand { service, command } => {
            cx.edit_container(service, |c| c.command = command.clone())?
        }
        SidecarPortConflict { service, port } => cx.edit(service, |t, _| {
            let mut c = Container::new("sidecar", "busybox:1.36");
            c.command = vec![
                "sh".into(),
                "-c".into(),
                format!("nc -lk -p {port} -e echo ok"),
            ];
            t.spec.containers.push(c);
        })?,
        FeatureFlag { flag, variant } => {
            let spec = app
                .feature_flag(flag)
                .ok_or_else(|| FaultError(format!("no feature flag `{flag}`")))?;
            let k = cx.save_configmap(&spec.config_map)?;
            let cm = cx.w.configmaps.get_mut(&k).expect("saved");
            let text = cm.data.get(&spec.key).cloned().unwrap_or_default();
            cm.data
                .insert(spec.key.clone(), set_flag_variant(&text, flag, variant));
            cx.w.touch(Kind::ConfigMap, &k);
        }
        DatabaseAuth {
            service,
            mode,
            restart_clients,
        } => {
            if app.service(service).is_none() {
                return Err(FaultError(format!("no service named `{service}`")));
            }
            cx.save_service_rt(service);
            let prev_at = cx.w.runtime.auth_changed_at.get(service).copied();
            cx.undo.saved.push(Saved::AuthAt(service.clone(), prev_at));
            let now = cx.w.now;
            cx.w.runtime.auth_changed_at.insert(service.clone(), now);
            cx.w.runtime
                .services
                .entry(service.clone())
                .or_default()
                .db_auth = match mode {
                AuthMode::RevokeRoles => DbAuth::RolesRevoked,
                AuthMode::DropUser | AuthMode::PasswordChanged => DbAuth::UserRemoved,
                AuthMode::RequireTls => DbAuth::TlsRequired,
            };
            for s in restart_clients {
                cx.restart(s);
            }
        }
        DatabaseLock { service, table } => {
            cx.save_service_rt(service);
            cx.w.runtime
                .services
                .entry(service.clone())
                .or_default()
                .locked_table = Some(table.clone());
        }
        NetworkDelay {
            from,
            to,
            delay,
            jitter,
        } => {
            cx.save_link(from, to);
            cx.w.runtime
                .links
                .entry((from.clone(), to.clone()))
                .or_default()
                .delay_ms += delay.as_millis() as f64 + jitter.as_millis() as f64 / 2.0;
        }
        NetworkLoss { from, to, percent } => {
            cx.save_link(from, to);
            let l =
                cx.w.runtime
                    .links
                    .entry((from.clone(), to.clone()))
                    .or_default();
            l.loss = 1.0 - (1.0 - l.loss) * (1.0 - percent / 100.0);
        }
        NodeCpuStress { node, cpu } => {
            cx.save_node_rt(node)?;
            cx.w.runtime
                .nodes
                .entry(node.clone())
                .or_default()
                .cpu_stress_milli += cpu.millicores() as i64;
        }
        KubeletDown { node } => {
            cx.save_node_rt(node)?;
            let now = cx.w.now;
            cx.w.runtime
                .nodes
                .entry(node.clone())
                .or_default()
                .kubelet_down = true;
            if let Some(n) = cx.w.nodes.get_mut(node) {
                n.heartbeat = now;
            }
        }
        DiskReadErrors { service, percent } => {
            cx.save_service_rt(service);
            cx.w.runtime
                .services
                .entry(service.clone())
                .or_default()
                .disk_read_errors = percent / 100.0;
        }
        SyscallFailure {
            service,
            syscall,
            errno,
            percent,
        } => {
            cx.save_service_rt(service);
            cx.w.runtime
                .services
                .entry(service.clone())
                .or_default()
                .syscall_failure = Some((syscall_error(syscall, errno), percent / 100.0));
        }
        LoadSpike { multiplier } => {
            cx.undo
                .saved
                .push(Saved::Load(cx.w.runtime.load_multiplier));
            cx.w.runtime.load_multiplier *= multiplier;
        }
        RpcRetryConfig {
            service,
            dependency: _,
            timeout,
            retries,
        } => cx.edit_container(service, |c| {
            c.env.retain(|e| {
                e.name != "GRPC_CLIENT_TIMEOUT" && e.name != "GRPC_CLIENT_RETRIES_ON_ERROR"
            });
            c.env
                .push(EnvVar::value("GRPC_CLIENT_TIMEOUT", &timeout.to_string()));
            c.env.push(EnvVar::value(
                "GRPC_CLIENT_RETRIES_ON_ERROR",
                &retries.to_string(),
            ));
        })?,
        GcPressure {
            services,
            gogc,
            memory_limit,
        } => {
            for s in services {
                cx.edit_container(s, |c| {
                    c.env.retain(|e| e.name != "GOGC");
                    c.env.push(EnvVar::value("GOGC", &gogc.to_string()));
                    if let Some(m) = memory_limit {
                        c.resources.limits.memory = Some(m.bytes() as i64);
                        if c.resources
                            .requests
                            .memory
                            .is_some_and(|r| r > m.bytes() as i64)
                        {
                            c.resources.requests.memory = Some(m.bytes() as i64);
                        }
                    }
                })?;
            }
        }
    }
    Ok(cx.undo)
}

/// Puts back everything an applied fault changed, newest change first.
pub fn revert(w: &mut World, app: &AppSpec, undo: Undo) {
    for s in undo.saved.into_iter().rev() {
        match s {
            Saved::Deployment(k, old) => match (old, w.deployments.get_mut(&k)) {
                (Some(o), Some(cur)) => {
                    cur.template = o.template;
                    cur.replicas = o.replicas;
                    cur.selector = o.selector;
                    cur.strategy = o.strategy;
                    cur.meta.generation += 1;
                    w.touch(Kind::Deployment, &k);
                }
                (Some(o), None) => {
                    w.deployments.insert(k.clone(), o);
                    w.touch(Kind::Deployment, &k);
                }
                (None, _) => {
                    w.deployments.remove(&k);
                    w.touch(Kind::Deployment, &k);
                }
            },
            Saved::StatefulSet(k, old) => match (old, w.statefulsets.get_mut(&k)) {
                (Some(o), Some(cur)) => {
                    cur.template = o.template;
                    cur.replicas = o.replicas;
                    cur.revision = o.revision;
                    cur.meta.generation += 1;
                    w.touch(Kind::StatefulSet, &k);
                }
                (Some(o), None) => {
                    w.statefulsets.insert(k.clone(), o);
                    w.touch(Kind::StatefulSet, &k);
                }
                (None, _) => {
                    w.statefulsets.remove(&k);
                    w.touch(Kind::StatefulSet, &k);
                }
            },
            Saved::Service(k, old) => {
                match (old, w.services.get_mut(&k)) {
                    (Some(o), Some(cur)) => {
                        cur.selector = o.selector;
                        cur.ports = o.ports;
                    }
                    (Some(o), None) => {
                        // A re-created Service is a new object with a new uid and address.
                        let mut o = o;
                        o.meta.uid = util::uuid(&mut w.rng);
                        o.meta.created = w.now;
                        o.cluster_ip = w.cluster_ip();
                        w.services.insert(k.clone(), o);
                    }
                    (None, _) => {
                        w.services.remove(&k);
                    }
                }
                w.touch(Kind::Service, &k);
            }
            Saved::ConfigMap(k, old) => {
                match (old, w.configmaps.get_mut(&k)) {
                    (Some(o), Some(cur)) => cur.data = o.data,
                    (Some(mut o), None) => {
                        o.meta.uid = util::uuid(&mut w.rng);
                        o.meta.created = w.now;
                        w.configmaps.insert(k.clone(), o);
                    }
                    (None, _) => {
                        w.configmaps.remove(&k);
                    }
                }
                w.touch(Kind::ConfigMap, &k);
            }
            Saved::Node(n, old) => {
                if let (Some(o), Some(cur)) = (old, w.nodes.get_mut(&n)) {
                    cur.taints = o.taints;
                    cur.unschedulable = o.unschedulable;
                }
                w.touch(Kind::Node, &key("", &n));
            }
            Saved::Quota(k, old) => {
                match old {
                    Some(o) => w.quotas.insert(k.clone(), o),
                    None => w.quotas.remove(&k),
                };
                w.touch(Kind::ResourceQuota, &k);
            }
            Saved::NetPol(k, old) => {
                match old {
                    Some(o) => w.netpols.insert(k.clone(), o),
                    None => w.netpols.remove(&k),
                };
                w.touch(Kind::NetworkPolicy, &k);
            }
            Saved::ServiceAccount(k, old) => {
                match old {
                    Some(o) => w.service_accounts.insert(k.clone(), o),
                    None => w.service_accounts.remove(&k),
                };
                w.touch(Kind::ServiceAccount, &k);
            }
            Saved::Role(k, old) => {
                match old {
                    Some(o) => w.roles.insert(k.clone(), o),
                    None => w.roles.remove(&k),
                };
                w.touch(Kind::Role, &k);
            }
            Saved::RoleBinding(k, old) => {
                match old {
                    Some(o) => w.role_bindings.insert(k.clone(), o),
                    None => w.role_bindings.remove(&k),
                };
                w.touch(Kind::RoleBinding, &k);
            }
            Saved::Load(v) => w.runtime.load_multiplier = v,
            Saved::NodeRt(n, old) => {
                match old {
                    Some(o) => w.runtime.nodes.insert(n, o),
                    None => w.runtime.nodes.remove(&n),
                };
            }
            Saved::ServiceRt(n, old) => {
                match old {
                    Some(o) => w.runtime.services.insert(n, o),
                    None => w.runtime.services.remove(&n),
                };
            }
            Saved::Link(k, old) => {
                match old {
                    Some(o) => w.runtime.links.insert(k, o),
                    None => w.runtime.links.remove(&k),
                };
            }
            Saved::Image(i, old) => {
                match old {
                    Some(o) => w.runtime.images.insert(i, o),
                    None => w.runtime.images.remove(&i),
                };
            }
            Saved::AuthAt(s, old) => {
                match old {
                    Some(o) => w.runtime.auth_changed_at.insert(s, o),
                    None => w.runtime.auth_changed_at.remove(&s),
                };
            }
        }
    }
    let _ = app;
}

/// Applies one transient noise disturbance to a service; returns its undo.
pub fn apply_noise(w: &mut World, app: &AppSpec, kind: &NoiseKind, target: &str) -> Undo {
    let mut cx = Ctx {
        w,
        app,
        undo: Undo::default(),
    };
    match kind {
        NoiseKind::PodKill => {
            let ns = cx.ns();
            let sel: Labels = [(app.selector_label.clone(), target.to_string())].into();
            let victim =
                cx.w.pods_selected(&ns, &sel)
                    .find(|p| p.meta.deleted_at.is_none())
                    .map(|p| key(&ns, &p.meta.name));
            if let Some(pk) = victim {
                delete_pod(cx.w, &pk);
            }
        }
        NoiseKind::CpuBurst { cpu } => {
            cx.save_service_rt(target);
            cx.w.runtime
                .services
                .entry(target.to_string())
                .or_default()
                .extra_cpu_milli += cpu.millicores() as i64;
        }
        NoiseKind::NetworkDelay { delay, jitter } => {
            cx.save_link("*", target);
            cx.w.runtime
                .links
                .entry(("*".into(), target.to_string()))
                .or_default()
                .delay_ms += delay.as_millis() as f64 + jitter.as_millis() as f64 / 2.0;
        }
        NoiseKind::RequestDrop { percent } => {
            cx.save_link("*", target);
            let l =
                cx.w.runtime
                    .links
                    .entry(("*".into(), target.to_string()))
                    .or_default();
            l.loss = 1.0 - (1.0 - l.loss) * (1.0 - percent / 100.0);
        }
    }
    cx.undo
}

/// The desired state a revert must restore exactly: every object's spec-level content and the
/// runtime conditions, without status, uids, versions or timestamps.
pub fn desired_state(w: &World) -> String {
    let mut parts = vec![];
    for (k, d) in &w.deployments {
        parts.push(format!(
            "deploy {k:?} {} {}",
            d.replicas,
            serde_json::to_string(&d.template).unwrap_or_default()
        ));
    }
    for (k, s) in &w.statefulsets {
        parts.push(format!(
            "sts {k:?} {} {}",
            s.replicas,
            serde_json::to_string(&s.template).unwrap_or_default()
        ));
    }
    for (k, s) in &w.services {
        parts.push(format!(
            "svc {k:?} {:?} {}",
            s.selector,
            serde_json::to_string(&s.ports).unwrap_or_default()
        ));
    }
    for (k, c) in &w.configmaps {
        parts.push(format!("cm {k:?} {:?}", c.data));
    }
    for (n, node) in &w.nodes {
        parts.push(format!("node {n} {:?} {}", node.taints, node.unschedulable));
    }
    parts.push(format!("quotas {:?}", w.quotas.keys().collect::<Vec<_>>()));
    parts.push(format!(
        "netpols {:?}",
        w.netpols.keys().collect::<Vec<_>>()
    ));
    parts.push(format!(
        "sas {:?} roles {:?} rbs {:?}",
        w.service_accounts.keys().collect::<Vec<_>>(),
        w.roles.keys().collect::<Vec<_>>(),
        w.role_bindings.keys().collect::<Vec<_>>()
    ));
    parts.push(format!("runtime {:?}", w.runtime));
    parts.join("\n")
}
