//! Each kind's registry [`Strategy`]: the defaults a created object gets, what an update keeps
//! from the stored object, when generation moves, and the kind's validation.

use serde_json::{Value, json};

use super::objects::*;
use super::util;
use super::validate::{self, Causes, NameRule};
use super::world::World;
use super::writes::Strategy;

/// `imagePullPolicy` left out: Always for `:latest` or an untagged image, else IfNotPresent.
fn default_pull_policy(c: &mut Container) {
    if c.image_pull_policy.is_empty() {
        let last = c.image.rsplit('/').next().unwrap_or_default();
        let tagged = last.contains(':') && !last.ends_with(":latest");
        let digest = c.image.contains('@');
        c.image_pull_policy = if tagged || digest {
            "IfNotPresent"
        } else {
            "Always"
        }
        .into();
    }
}

fn default_pod_spec(s: &mut PodSpec) {
    let all = s.containers.iter_mut().chain(s.init_containers.iter_mut());
    for c in all.chain(s.ephemeral_containers.iter_mut()) {
        default_pull_policy(c);
    }
}

fn default_service(s: &mut Service) {
    for p in &mut s.ports {
        if p.target_port == IntOrString::Int(0) || p.target_port == IntOrString::Str(String::new())
        {
            p.target_port = IntOrString::Int(p.port);
        }
    }
}

impl Strategy for Pod {
    fn prepare_create(&mut self, w: &mut World) {
        default_pod_spec(&mut self.spec);
        for t in default_tolerations() {
            if !self
                .spec
                .tolerations
                .iter()
                .any(|x| x.key == t.key && x.effect == t.effect)
            {
                self.spec.tolerations.push(t);
            }
        }
        self.phase = "Pending".into();
        self.conditions.clear();
        self.host_ip = None;
        self.pod_ip = None;
        self.start_time = None;
        self.reason = None;
        self.statuses = self
            .spec
            .containers
            .iter()
            .map(|c| ContainerStatus::new(&c.name, &c.image))
            .collect();
        self.init_statuses = self
            .spec
            .init_containers
            .iter()
            .map(|c| ContainerStatus::new(&c.name, &c.image))
            .collect();
        self.ephemeral_statuses.clear();
        self.next_schedule = w.now;
        self.schedule_backoff = 0;
        self.init_done = 0;
    }

    /// Status and the kubelet's state stay; a container whose image changed is stopped so the
    /// kubelet starts it again with the new image.
    fn prepare_update(&mut self, old: &Pod, now: i64) {
        default_pod_spec(&mut self.spec);
        if self.spec.node_name.is_none() {
            self.spec.node_name = old.spec.node_name.clone();
        }
        let spec = self.spec.clone();
        let meta = self.meta.clone();
        *self = Pod {
            meta,
            spec,
            ..old.clone()
        };
        for (c, s) in self.spec.containers.iter().zip(self.statuses.iter_mut()) {
            if c.image != s.image && s.state.is_running() {
                let started = match s.state {
                    CState::Running { started } => started,
                    _ => now,
                };
                s.last = Some(Terminated::completed(
                    started,
                    now,
                    s.container_id.as_deref(),
                ));
                s.state = CState::waiting("ContainerCreating", None);
                s.ready = false;
                s.backoff_until = 0;
            }
        }
    }

    fn validate(&self, out: &mut Causes) {
        validate::pod_spec("spec", &self.spec, out);
    }

    fn validate_create(&self, out: &mut Causes) {
        if !self.spec.ephemeral_containers.is_empty() {
            out.push(validate::forbidden(
                "spec.ephemeralContainers",
                "cannot be set on create",
            ));
        }
    }

    fn validate_update(&self, old: &Pod, out: &mut Causes) {
        let mut was = old.spec.clone();
        let now = &self.spec;
        // What a pod update may change: images, activeDeadlineSeconds, added tolerations.
        for (a, b) in was
            .containers
            .iter_mut()
            .zip(&now.containers)
            .chain(was.init_containers.iter_mut().zip(&now.init_containers))
        {
            a.image = b.image.clone();
        }
        match now.extra.get("activeDeadlineSeconds") {
            Some(v) => was.extra.insert("activeDeadlineSeconds".into(), v.clone()),
            None => was.extra.shift_remove("activeDeadlineSeconds"),
        };
        if old
            .spec
            .tolerations
            .iter()
            .all(|t| now.tolerations.contains(t))
        {
            was.tolerations = now.tolerations.clone();
        }
        if &was != now {
            out.push(validate::forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            ));
        }
    }

    fn take_status(&mut self, new: Pod) -> bool {
        self.phase = new.phase;
        self.conditions = new.conditions;
        self.host_ip = new.host_ip;
        self.pod_ip = new.pod_ip;
        self.start_time = new.start_time;
        self.reason = new.reason;
        true
    }
}

impl Pod {
    /// A write to the `ephemeralcontainers` subresource: takes `new`'s ephemeral containers,
    /// which may only add to the ones the pod has (a started debugger is neither changed nor
    /// removed); each added one waits for the kubelet to start it.
    pub(crate) fn take_ephemeral(&mut self, new: Pod, out: &mut Causes) {
        let mut added = new.spec.ephemeral_containers;
        for c in &mut added {
            default_pull_policy(c);
        }
        for (i, had) in self.spec.ephemeral_containers.iter().enumerate() {
            match added.iter().find(|c| c.name == had.name) {
                None => out.push(validate::forbidden(
                    &format!("spec.ephemeralContainers[{i}]"),
                    &format!(
                        "existing ephemeral containers {:?} may not be removed",
                        had.name
                    ),
                )),
                Some(c) if c != had => out.push(validate::forbidden(
                    &format!("spec.ephemeralContainers[{i}]"),
                    &format!(
                        "existing ephemeral containers {:?} may not be changed",
                        had.name
                    ),
                )),
                Some(_) => {}
            }
        }
        let mut spec = self.spec.clone();
        spec.ephemeral_containers = added;
        validate::pod_spec("spec", &spec, out);
        let mut had = std::mem::take(&mut self.ephemeral_statuses);
        self.ephemeral_statuses = spec
            .ephemeral_containers
            .iter()
            .map(|c| match had.iter().position(|s| s.name == c.name) {
                Some(i) => had.swap_remove(i),
                None => ContainerStatus::new(&c.name, &c.image),
            })
            .collect();
        self.spec = spec;
    }
}

impl Strategy for Deployment {
    fn prepare_create(&mut self, _w: &mut World) {
        default_pod_spec(&mut self.template.spec);
        self.observed_generation = 0;
        self.counts = ReplicaCounts::default();
        self.conditions.clear();
        self.revision = 0;
    }

    fn prepare_update(&mut self, old: &Deployment, _now: i64) {
        default_pod_spec(&mut self.template.spec);
        self.observed_generation = old.observed_generation;
        self.counts = old.counts.clone();
        self.conditions = old.conditions.clone();
        self.revision = old.revision;
    }

    /// The deployment strategy counts annotations too (a rollback is written there).
    fn new_generation(&self, old: &Deployment) -> bool {
        self.replicas != old.replicas
            || self.selector != old.selector
            || self.template != old.template
            || self.strategy != old.strategy
            || self.spec_extra != old.spec_extra
            || self.meta.annotations != old.meta.annotations
    }

    fn validate(&self, out: &mut Causes) {
        validate::workload(self.replicas, &self.selector, &self.template, out);
        if !["RollingUpdate", "Recreate"].contains(&self.strategy.kind.as_str()) {
            out.push(validate::not_supported(
                "spec.strategy.type",
                &self.strategy.kind,
                &["Recreate", "RollingUpdate"],
            ));
        }
    }

    fn validate_update(&self, old: &Deployment, out: &mut Causes) {
        validate::selector_unchanged(&old.selector, &self.selector, out);
    }

    fn take_status(&mut self, new: Deployment) -> bool {
        self.observed_generation = new.observed_generation;
        self.counts = new.counts;
        self.conditions = new.conditions;
        true
    }
}

impl Strategy for ReplicaSet {
    fn prepare_create(&mut self, _w: &mut World) {
        default_pod_spec(&mut self.template.spec);
        self.observed_generation = 1;
        self.counts = ReplicaCounts::default();
        self.failure = None;
    }

    fn prepare_update(&mut self, old: &ReplicaSet, _now: i64) {
        default_pod_spec(&mut self.template.spec);
        self.observed_generation = old.observed_generation;
        self.counts = old.counts.clone();
        self.failure = old.failure.clone();
    }

    fn new_generation(&self, old: &ReplicaSet) -> bool {
        (self.replicas, &self.selector, &self.template)
            != (old.replicas, &old.selector, &old.template)
    }

    fn validate(&self, out: &mut Causes) {
        validate::workload(self.replicas, &self.selector, &self.template, out);
    }

    fn validate_update(&self, old: &ReplicaSet, out: &mut Causes) {
        validate::selector_unchanged(&old.selector, &self.selector, out);
    }

    fn take_status(&mut self, new: ReplicaSet) -> bool {
        self.observed_generation = new.observed_generation;
        self.counts = new.counts;
        self.failure = new.failure;
        true
    }
}

impl Strategy for StatefulSet {
    fn prepare_create(&mut self, _w: &mut World) {
        default_pod_spec(&mut self.template.spec);
        self.observed_generation = 0;
        self.counts = ReplicaCounts::default();
        let template = serde_json::to_string(&self.template).unwrap_or_default();
        self.revision = format!("{}-{}", self.meta.name, util::template_hash(&template));
    }

    fn prepare_update(&mut self, old: &StatefulSet, _now: i64) {
        default_pod_spec(&mut self.template.spec);
        self.observed_generation = old.observed_generation;
        self.counts = old.counts.clone();
        // A changed template is a new revision, which the controller rolls out.
        let template = serde_json::to_string(&self.template).unwrap_or_default();
        let before = serde_json::to_string(&old.template).unwrap_or_default();
        self.revision = if template == before {
            old.revision.clone()
        } else {
            format!("{}-{}", self.meta.name, util::template_hash(&template))
        };
    }

    fn new_generation(&self, old: &StatefulSet) -> bool {
        (
            self.replicas,
            &self.selector,
            &self.template,
            &self.service_name,
        ) != (
            old.replicas,
            &old.selector,
            &old.template,
            &old.service_name,
        )
    }

    fn validate(&self, out: &mut Causes) {
        validate::workload(self.replicas, &self.selector, &self.template, out);
    }

    fn validate_update(&self, old: &StatefulSet, out: &mut Causes) {
        validate::selector_unchanged(&old.selector, &self.selector, out);
    }

    fn take_status(&mut self, new: StatefulSet) -> bool {
        self.observed_generation = new.observed_generation;
        self.counts = new.counts;
        true
    }
}

impl Strategy for Service {
    const NAME: NameRule = NameRule::Dns1035;

    fn prepare_create(&mut self, w: &mut World) {
        default_service(self);
        if self.cluster_ip.is_empty() {
            self.cluster_ip = w.cluster_ip();
        }
    }

    /// A cluster IP left out of the body is the one allocated.
    fn prepare_update(&mut self, old: &Service, _now: i64) {
        default_service(self);
        if self.cluster_ip.is_empty() {
            self.cluster_ip = old.cluster_ip.clone();
        }
    }

    fn validate(&self, out: &mut Causes) {
        validate::service(self, out);
    }

    fn validate_update(&self, old: &Service, out: &mut Causes) {
        if self.cluster_ip != old.cluster_ip {
            out.push(validate::invalid(
                "spec.clusterIPs[0]",
                &json!([self.cluster_ip]),
                "may not change once set",
            ));
        }
    }
}

/// ConfigMaps and Secrets marked `immutable: true` keep their data and the mark.
fn immutable_update(
    old_extra: &serde_json::Map<String, Value>,
    new_extra: &serde_json::Map<String, Value>,
    data_changed: bool,
    out: &mut Causes,
) {
    let sealed = |e: &serde_json::Map<String, Value>| e.get("immutable") == Some(&json!(true));
    if !sealed(old_extra) {
        return;
    }
    const WHY: &str = "field is immutable when `immutable` is set";
    if data_changed || old_extra.get("binaryData") != new_extra.get("binaryData") {
        out.push(validate::forbidden("data", WHY));
    }
    if !sealed(new_extra) {
        out.push(validate::forbidden("immutable", WHY));
    }
}

impl Strategy for ConfigMap {
    fn validate_update(&self, old: &ConfigMap, out: &mut Causes) {
        immutable_update(&old.extra, &self.extra, self.data != old.data, out);
    }
}

impl Strategy for Secret {
    fn validate_update(&self, old: &Secret, out: &mut Causes) {
        immutable_update(&old.extra, &self.extra, self.data != old.data, out);
    }
}

impl Strategy for Namespace {
    const NAME: NameRule = NameRule::Label;

    fn prepare_create(&mut self, w: &mut World) {
        self.meta
            .labels
            .insert("kubernetes.io/metadata.name".into(), self.meta.name.clone());
        if !self.body.is_object() {
            self.body = json!({});
        }
        if self.body.get("spec").is_none() {
            self.body["spec"] = json!({"finalizers": ["kubernetes"]});
        }
        self.body["status"] = json!({"phase": "Active"});
        // The service account controller gives every namespace its `default` account.
        super::bootstrap::default_service_account(w, &self.meta.name);
    }

    fn prepare_update(&mut self, old: &Namespace, _now: i64) {
        if !self.body.is_object() {
            self.body = json!({});
        }
        self.body["status"] = old.body.get("status").cloned().unwrap_or(Value::Null);
        self.meta
            .labels
            .insert("kubernetes.io/metadata.name".into(), self.meta.name.clone());
    }
}

impl Strategy for Node {
    /// A node's status is its kubelet's.
    fn prepare_update(&mut self, old: &Node, _now: i64) {
        let (meta, taints, unschedulable) =
            (self.meta.clone(), self.taints.clone(), self.unschedulable);
        *self = Node {
            meta,
            taints,
            unschedulable,
            ..old.clone()
        };
    }

    fn take_status(&mut self, new: Node) -> bool {
        self.conditions = new.conditions;
        true
    }
}

impl Strategy for Pvc {
    fn prepare_create(&mut self, w: &mut World) {
        if self.volume_name.is_empty() {
            self.volume_name = format!("pvc-{}", util::uuid(&mut w.rng));
        }
    }

    fn prepare_update(&mut self, old: &Pvc, _now: i64) {
        self.volume_name = old.volume_name.clone();
    }
}

impl Strategy for ResourceQuota {
    fn prepare_create(&mut self, _w: &mut World) {
        self.used.clear();
    }

    fn prepare_update(&mut self, old: &ResourceQuota, _now: i64) {
        self.used = old.used.clone();
    }
}

impl Strategy for NetworkPolicy {
    fn new_generation(&self, old: &NetworkPolicy) -> bool {
        (&self.pod_selector, self.deny_ingress, self.deny_egress)
            != (&old.pod_selector, old.deny_ingress, old.deny_egress)
    }
}

impl Strategy for ServiceAccount {}
impl Strategy for Role {}
impl Strategy for HorizontalPodAutoscaler {}
impl Strategy for RoleBinding {}
impl Strategy for Endpoints {}

impl Strategy for EndpointSlice {
    /// The registry counts a generation for any change of what the slice routes to.
    fn new_generation(&self, old: &EndpointSlice) -> bool {
        (&self.address_type, &self.endpoints, &self.ports)
            != (&old.address_type, &old.endpoints, &old.ports)
    }

    fn validate(&self, out: &mut Causes) {
        const TYPES: [&str; 3] = ["FQDN", "IPv4", "IPv6"];
        if self.address_type.is_empty() {
            out.push(validate::required("addressType", None));
        } else if !TYPES.contains(&self.address_type.as_str()) {
            out.push(validate::not_supported(
                "addressType",
                &self.address_type,
                &TYPES,
            ));
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            if e.addresses.is_empty() {
                out.push(validate::required(
                    &format!("endpoints[{i}].addresses"),
                    Some("must contain at least 1 address"),
                ));
            }
        }
    }

    fn validate_update(&self, old: &EndpointSlice, out: &mut Causes) {
        if self.address_type != old.address_type {
            out.push(validate::invalid(
                "addressType",
                &Value::from(self.address_type.as_str()),
                "field is immutable",
            ));
        }
    }
}
