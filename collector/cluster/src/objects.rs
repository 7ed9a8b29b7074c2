//! The simulated cluster's Kubernetes objects: typed for the controllers that work on them, and
//! rendered as the JSON the API server would return (apiVersion/kind/metadata/spec/status).
//!
//! Spec types derive `Serialize` with Kubernetes field names, so what a controller reads is exactly
//! what an agent sees. Status is rendered by hand because it mixes observed state with timing.

use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::util::{cpu_quantity, memory_quantity, rfc3339};

pub type Labels = BTreeMap<String, String>;
/// Namespace and name.
pub type Key = (String, String);

pub fn key(ns: &str, name: &str) -> Key {
    (ns.to_string(), name.to_string())
}

pub use super::kinds::Kind;

/// Object metadata.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Meta {
    pub name: String,
    pub namespace: Option<String>,
    pub uid: String,
    pub resource_version: u64,
    pub created: i64,
    pub labels: Labels,
    pub annotations: Labels,
    pub owner: Option<OwnerRef>,
    pub generation: i64,
    pub generate_name: Option<String>,
    pub deleted_at: Option<i64>,
    /// `deletionGracePeriodSeconds` of a graceful deletion (30 when not given).
    pub deletion_grace: Option<i64>,
    /// Metadata fields the model does not use (finalizers, managedFields, other owners...),
    /// kept so that what a client wrote comes back.
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OwnerRef {
    pub kind: Kind,
    pub name: String,
    pub uid: String,
}

impl Meta {
    /// Whether the object's controller is the object with this uid.
    pub fn is_owned_by(&self, uid: &str) -> bool {
        self.owner.as_ref().is_some_and(|o| o.uid == uid)
    }

    pub fn to_json(&self, with_generation: bool) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("name".into(), json!(self.name));
        if let Some(g) = &self.generate_name {
            m.insert("generateName".into(), json!(g));
        }
        if let Some(ns) = &self.namespace {
            m.insert("namespace".into(), json!(ns));
        }
        m.insert("uid".into(), json!(self.uid));
        m.insert(
            "resourceVersion".into(),
            json!(self.resource_version.to_string()),
        );
        if with_generation {
            m.insert("generation".into(), json!(self.generation));
        }
        m.insert("creationTimestamp".into(), json!(rfc3339(self.created)));
        if let Some(d) = self.deleted_at {
            m.insert("deletionTimestamp".into(), json!(rfc3339(d)));
            m.insert(
                "deletionGracePeriodSeconds".into(),
                json!(self.deletion_grace.unwrap_or(30)),
            );
        }
        if !self.labels.is_empty() {
            m.insert("labels".into(), json!(self.labels));
        }
        if !self.annotations.is_empty() {
            m.insert("annotations".into(), json!(self.annotations));
        }
        if let Some(o) = &self.owner {
            m.insert(
                "ownerReferences".into(),
                json!([{
                    "apiVersion": o.kind.api_version(),
                    "kind": o.kind.name(),
                    "name": o.name,
                    "uid": o.uid,
                    "controller": true,
                    "blockOwnerDeletion": true,
                }]),
            );
        }
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }
}

/// A status condition with Kubernetes' transition-time semantics.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Condition {
    pub kind: String,
    pub status: bool,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition: i64,
    pub last_update: i64,
}

/// Sets a condition; the transition time moves only when the status flips. Returns whether anything
/// changed.
pub fn set_condition(
    conds: &mut Vec<Condition>,
    kind: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<&str>,
    now: i64,
) -> bool {
    let reason = reason.map(str::to_string);
    let message = message.map(str::to_string);
    if let Some(c) = conds.iter_mut().find(|c| c.kind == kind) {
        if c.status == status && c.reason == reason && c.message == message {
            return false;
        }
        if c.status != status {
            c.last_transition = now;
        }
        c.status = status;
        c.reason = reason;
        c.message = message;
        c.last_update = now;
        return true;
    }
    conds.push(Condition {
        kind: kind.to_string(),
        status,
        reason,
        message,
        last_transition: now,
        last_update: now,
    });
    true
}

fn condition_json(c: &Condition, probe_time: bool, update_time: bool) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("type".into(), json!(c.kind));
    m.insert(
        "status".into(),
        json!(if c.status { "True" } else { "False" }),
    );
    if probe_time {
        m.insert("lastProbeTime".into(), Value::Null);
    }
    if update_time {
        m.insert("lastUpdateTime".into(), json!(rfc3339(c.last_update)));
    }
    m.insert(
        "lastTransitionTime".into(),
        json!(rfc3339(c.last_transition)),
    );
    if let Some(r) = &c.reason {
        m.insert("reason".into(), json!(r));
    }
    if let Some(msg) = &c.message {
        m.insert("message".into(), json!(msg));
    }
    Value::Object(m)
}

fn node_condition_json(c: &Condition, heartbeat: i64, unknown: bool) -> Value {
    json!({
        "type": c.kind,
        "status": if unknown { "Unknown" } else if c.status { "True" } else { "False" },
        "lastHeartbeatTime": rfc3339(heartbeat),
        "lastTransitionTime": rfc3339(c.last_transition),
        "reason": c.reason,
        "message": c.message,
    })
}

// ---------------------------------------------------------------------------------------------
// Pod spec types (shared by pods and the templates of their controllers)

/// `port` fields that take a number or a port name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IntOrString {
    Int(i32),
    Str(String),
}

/// CPU (millicores) and memory (bytes), rendered as quantities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResourceList {
    pub cpu_milli: Option<i64>,
    pub memory: Option<i64>,
}

impl ResourceList {
    pub fn is_empty(&self) -> bool {
        self.cpu_milli.is_none() && self.memory.is_none()
    }
}

impl Serialize for ResourceList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if let Some(c) = self.cpu_milli {
            m.serialize_entry("cpu", &cpu_quantity(c))?;
        }
        if let Some(b) = self.memory {
            m.serialize_entry("memory", &memory_quantity(b))?;
        }
        m.end()
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Resources {
    #[serde(skip_serializing_if = "ResourceList::is_empty")]
    pub limits: ResourceList,
    #[serde(skip_serializing_if = "ResourceList::is_empty")]
    pub requests: ResourceList,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub container_port: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_port: Option<i32>,
    #[serde(default = "defaults::tcp")]
    pub protocol: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRef {
    pub name: String,
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EnvSource {
    ConfigMapKeyRef(KeyRef),
    SecretKeyRef(KeyRef),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "EnvVarWire")]
pub struct EnvVar {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_from: Option<EnvSource>,
    /// A `valueFrom` the model does not resolve (`fieldRef`, `resourceFieldRef`), kept as written.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An env var as written: `valueFrom` is typed only when it is a ConfigMap or Secret key.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvVarWire {
    name: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    value_from: Option<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl From<EnvVarWire> for EnvVar {
    fn from(w: EnvVarWire) -> EnvVar {
        let mut extra = w.extra;
        let value_from = w.value_from.and_then(|raw| {
            serde_json::from_value::<EnvSource>(raw.clone())
                .map_err(|_| extra.insert("valueFrom".into(), raw))
                .ok()
        });
        EnvVar {
            name: w.name,
            value: w.value,
            value_from,
            extra,
        }
    }
}

impl EnvVar {
    pub fn value(name: &str, value: &str) -> EnvVar {
        EnvVar {
            name: name.to_string(),
            value: Some(value.to_string()),
            value_from: None,
            extra: Map::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpGet {
    #[serde(default = "defaults::root")]
    pub path: String,
    pub port: IntOrString,
    #[serde(default = "defaults::http")]
    pub scheme: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortOnly {
    pub port: IntOrString,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecAction {
    pub command: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGet>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<PortOnly>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc: Option<PortOnly>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    #[serde(default)]
    pub initial_delay_seconds: i32,
    #[serde(default = "defaults::one")]
    pub timeout_seconds: i32,
    #[serde(default = "defaults::ten")]
    pub period_seconds: i32,
    #[serde(default = "defaults::one")]
    pub success_threshold: i32,
    #[serde(default = "defaults::three")]
    pub failure_threshold: i32,
}

impl Probe {
    pub fn tcp(port: i32) -> Probe {
        Probe {
            http_get: None,
            tcp_socket: Some(PortOnly {
                port: IntOrString::Int(port),
            }),
            grpc: None,
            exec: None,
            initial_delay_seconds: 5,
            timeout_seconds: 1,
            period_seconds: 10,
            success_threshold: 1,
            failure_threshold: 3,
        }
    }

    pub fn http(path: &str, port: i32) -> Probe {
        Probe {
            http_get: Some(HttpGet {
                path: path.to_string(),
                port: IntOrString::Int(port),
                scheme: "HTTP".into(),
            }),
            tcp_socket: None,
            ..Probe::tcp(port)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub image: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    #[serde(default)]
    pub resources: Resources,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Probe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Probe>,
    #[serde(default = "defaults::termination_message_path")]
    pub termination_message_path: String,
    #[serde(default = "defaults::termination_message_policy")]
    pub termination_message_policy: String,
    /// Empty when a client left it out: defaulting picks it from the image's tag.
    #[serde(default)]
    pub image_pull_policy: String,
    /// Container fields the model does not use (`securityContext`, `startupProbe`, ...),
    /// kept so that what a client wrote comes back.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Container {
    pub fn new(name: &str, image: &str) -> Container {
        Container {
            name: name.to_string(),
            image: image.to_string(),
            command: vec![],
            args: vec![],
            ports: vec![],
            env: vec![],
            resources: Resources::default(),
            volume_mounts: vec![],
            liveness_probe: None,
            readiness_probe: None,
            termination_message_path: "/dev/termination-log".into(),
            termination_message_policy: "File".into(),
            image_pull_policy: "IfNotPresent".into(),
            extra: Map::new(),
        }
    }

    pub fn env_value(&self, name: &str) -> Option<&EnvVar> {
        self.env.iter().find(|e| e.name == name)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapVolume {
    pub name: String,
    #[serde(default = "defaults::file_mode")]
    pub default_mode: i32,
    /// `items`, `optional`: kept as written.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretVolume {
    pub secret_name: String,
    #[serde(default = "defaults::file_mode")]
    pub default_mode: i32,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PvcVolume {
    pub claim_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct EmptyDir {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapVolume>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolume>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PvcVolume>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDir>,
    /// Volume sources the model does not mount (`hostPath`, `projected`, ...), kept as written.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Volume {
    pub fn config_map(name: &str, cm: &str) -> Volume {
        Volume {
            name: name.into(),
            config_map: Some(ConfigMapVolume {
                name: cm.into(),
                default_mode: 420,
                extra: Map::new(),
            }),
            secret: None,
            persistent_volume_claim: None,
            empty_dir: None,
            extra: Map::new(),
        }
    }
    pub fn pvc(name: &str, claim: &str) -> Volume {
        Volume {
            name: name.into(),
            config_map: None,
            secret: None,
            persistent_volume_claim: Some(PvcVolume {
                claim_name: claim.into(),
            }),
            empty_dir: None,
            extra: Map::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operator: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: Labels,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAffinityTerm {
    pub label_selector: LabelSelector,
    pub topology_key: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAntiAffinity {
    pub required_during_scheduling_ignored_during_execution: Vec<PodAffinityTerm>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Affinity {
    pub pod_anti_affinity: PodAntiAffinity,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsConfig {
    #[serde(default)]
    pub nameservers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub searches: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    #[serde(default)]
    pub containers: Vec<Container>,
    #[serde(default = "defaults::restart_policy")]
    pub restart_policy: String,
    #[serde(default = "defaults::grace_seconds")]
    pub termination_grace_period_seconds: i64,
    #[serde(default = "defaults::dns_policy")]
    pub dns_policy: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns_config: Option<DnsConfig>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: Labels,
    #[serde(default = "defaults::service_account")]
    pub service_account_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Kept as written (`{}` when none was).
    #[serde(default)]
    pub security_context: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default = "defaults::scheduler")]
    pub scheduler_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Pod spec fields the model does not use (`hostname`, `priorityClassName`, ...), kept so that
    /// what a client wrote comes back.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PodSpec {
    pub fn new(containers: Vec<Container>) -> PodSpec {
        PodSpec {
            volumes: vec![],
            init_containers: vec![],
            containers,
            restart_policy: "Always".into(),
            termination_grace_period_seconds: 30,
            dns_policy: "ClusterFirst".into(),
            dns_config: None,
            node_selector: Labels::new(),
            service_account_name: "default".into(),
            node_name: None,
            security_context: Map::new(),
            affinity: None,
            scheduler_name: "default-scheduler".into(),
            tolerations: vec![],
            extra: Map::new(),
        }
    }

    /// Requests summed over app containers (the scheduler's view; init containers run first and
    /// their max would count, but ours are small).
    /// Requests as kube-scheduler scores them: a container without a request counts as 100m CPU
    /// and 200Mi memory, so pods without requests still spread over the nodes.
    pub fn scoring_requests(&self) -> (i64, i64) {
        self.containers.iter().fold((0, 0), |(c, m), k| {
            (
                c + k.resources.requests.cpu_milli.unwrap_or(100),
                m + k.resources.requests.memory.unwrap_or(200 << 20),
            )
        })
    }

    pub fn requests(&self) -> (i64, i64) {
        self.containers.iter().fold((0, 0), |(c, m), k| {
            (
                c + k.resources.requests.cpu_milli.unwrap_or(0),
                m + k.resources.requests.memory.unwrap_or(0),
            )
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodTemplate {
    #[serde(default)]
    pub metadata: TemplateMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TemplateMeta {
    #[serde(default)]
    pub labels: Labels,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: Labels,
}

// ---------------------------------------------------------------------------------------------
// Workloads

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdate {
    /// A count or a percentage; written as a number when it is one.
    #[serde(default = "defaults::quarter", with = "int_or_percent")]
    pub max_unavailable: String,
    #[serde(default = "defaults::quarter", with = "int_or_percent")]
    pub max_surge: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    #[serde(rename = "type", default = "defaults::rolling_update")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdate>,
}

impl Strategy {
    pub fn rolling() -> Strategy {
        Strategy {
            kind: "RollingUpdate".into(),
            rolling_update: Some(RollingUpdate {
                max_unavailable: "25%".into(),
                max_surge: "25%".into(),
            }),
        }
    }
}

/// Replica counts a workload controller reports.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplicaCounts {
    pub replicas: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    pub meta: Meta,
    pub replicas: i32,
    pub selector: Labels,
    pub template: PodTemplate,
    pub strategy: Strategy,
    pub observed_generation: i64,
    pub counts: ReplicaCounts,
    pub conditions: Vec<Condition>,
    /// Revision counter for the `deployment.kubernetes.io/revision` annotation.
    pub revision: i64,
    /// Spec fields the model does not use (`paused`, `minReadySeconds`, a client's
    /// `revisionHistoryLimit`...), rendered over the defaults.
    pub spec_extra: Map<String, Value>,
}

impl Deployment {
    pub fn to_json(&self) -> Value {
        let c = &self.counts;
        let mut status = serde_json::Map::new();
        status.insert("observedGeneration".into(), json!(self.observed_generation));
        if c.replicas > 0 {
            status.insert("replicas".into(), json!(c.replicas));
            status.insert("updatedReplicas".into(), json!(c.updated));
        }
        if c.ready > 0 {
            status.insert("readyReplicas".into(), json!(c.ready));
        }
        if c.available > 0 {
            status.insert("availableReplicas".into(), json!(c.available));
        }
        if c.replicas - c.available > 0 {
            status.insert(
                "unavailableReplicas".into(),
                json!(c.replicas - c.available),
            );
        }
        status.insert(
            "conditions".into(),
            Value::Array(
                self.conditions
                    .iter()
                    .map(|c| condition_json(c, false, true))
                    .collect(),
            ),
        );
        let mut spec = json!({
            "replicas": self.replicas,
            "selector": {"matchLabels": self.selector},
            "template": self.template,
            "strategy": self.strategy,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        });
        merge_extra(&mut spec, &self.spec_extra);
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": self.meta.to_json(true),
            "spec": spec,
            "status": status,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct StatefulSet {
    pub meta: Meta,
    pub replicas: i32,
    pub selector: Labels,
    pub service_name: String,
    pub template: PodTemplate,
    pub observed_generation: i64,
    pub counts: ReplicaCounts,
    pub revision: String,
}

impl StatefulSet {
    pub fn to_json(&self) -> Value {
        let c = &self.counts;
        json!({
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": self.meta.to_json(true),
            "spec": {
                "replicas": self.replicas,
                "selector": {"matchLabels": self.selector},
                "serviceName": self.service_name,
                "template": self.template,
                "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "revisionHistoryLimit": 10,
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            },
            "status": {
                "observedGeneration": self.observed_generation,
                "replicas": c.replicas,
                "readyReplicas": c.ready,
                "currentReplicas": c.updated,
                "updatedReplicas": c.updated,
                "availableReplicas": c.available,
                "currentRevision": self.revision,
                "updateRevision": self.revision,
                "collisionCount": 0,
            },
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaSet {
    pub meta: Meta,
    pub replicas: i32,
    pub selector: Labels,
    pub template: PodTemplate,
    pub observed_generation: i64,
    pub counts: ReplicaCounts,
    /// Set while pod creation is refused (quota), for the ReplicaFailure condition.
    pub failure: Option<String>,
}

impl ReplicaSet {
    pub fn to_json(&self) -> Value {
        let c = &self.counts;
        let mut status = serde_json::Map::new();
        status.insert("replicas".into(), json!(c.replicas));
        status.insert("fullyLabeledReplicas".into(), json!(c.replicas));
        if c.ready > 0 {
            status.insert("readyReplicas".into(), json!(c.ready));
        }
        if c.available > 0 {
            status.insert("availableReplicas".into(), json!(c.available));
        }
        status.insert("observedGeneration".into(), json!(self.observed_generation));
        if let Some(msg) = &self.failure {
            status.insert(
                "conditions".into(),
                json!([{
                    "type": "ReplicaFailure",
                    "status": "True",
                    "lastTransitionTime": rfc3339(self.meta.created),
                    "reason": "FailedCreate",
                    "message": msg,
                }]),
            );
        }
        json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": self.meta.to_json(true),
            "spec": {
                "replicas": self.replicas,
                "selector": {"matchLabels": self.selector},
                "template": self.template,
            },
            "status": status,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Pods

#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Terminated {
    pub reason: String,
    pub exit_code: i32,
    pub started: i64,
    pub finished: i64,
    pub container_id: String,
    pub message: Option<String>,
}

impl Terminated {
    fn to_json(&self) -> Value {
        let mut t = json!({
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": rfc3339(self.started),
            "finishedAt": rfc3339(self.finished),
            "containerID": self.container_id,
        });
        if let Some(m) = &self.message {
            t["message"] = json!(m);
        }
        t
    }
}

#[derive(Debug, Clone, PartialEq, Hash)]
pub enum CState {
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started: i64,
    },
    Terminated(Terminated),
}

impl CState {
    pub fn waiting(reason: &str, message: Option<String>) -> CState {
        CState::Waiting {
            reason: reason.to_string(),
            message,
        }
    }
    pub fn waiting_reason(&self) -> Option<&str> {
        match self {
            CState::Waiting { reason, .. } => Some(reason),
            _ => None,
        }
    }
    pub fn is_running(&self) -> bool {
        matches!(self, CState::Running { .. })
    }
    fn to_json(&self) -> Value {
        match self {
            CState::Waiting { reason, message } => {
                let mut w = json!({"reason": reason});
                if let Some(m) = message {
                    w["message"] = json!(m);
                }
                json!({"waiting": w})
            }
            CState::Running { started } => json!({"running": {"startedAt": rfc3339(*started)}}),
            CState::Terminated(t) => json!({"terminated": t.to_json()}),
        }
    }
}

/// One container's status plus the kubelet's private bookkeeping for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerStatus {
    pub name: String,
    pub image: String,
    pub image_id: Option<String>,
    pub container_id: Option<String>,
    pub state: CState,
    pub last: Option<Terminated>,
    pub ready: bool,
    pub started: bool,
    pub restart_count: i32,
    /// Next instant the kubelet may (re)start the container or retry the pull.
    pub backoff_until: i64,
    /// Current back-off step in seconds (10, 20, 40, ... 300).
    pub backoff_secs: i64,
    pub liveness_failures: i32,
    pub readiness_failures: i32,
    pub readiness_successes: i32,
    pub next_probe: i64,
    /// Memory working set in bytes (cAdvisor's view).
    pub working_set: f64,
    /// Cumulative CPU seconds.
    pub cpu_seconds: f64,
    pub cfs_periods: f64,
    pub cfs_throttled_periods: f64,
    pub cfs_throttled_seconds: f64,
    /// Instant the current instance became ready (for the start-up log burst and readiness).
    pub ready_since: Option<i64>,
    /// A scheduled exit of the current instance: (when, exit code, reason).
    pub exit_at: Option<(i64, i32, String)>,
    /// Next instant the kubelet reports the back-off again.
    pub next_backoff_event: i64,
}

impl ContainerStatus {
    pub fn new(name: &str, image: &str) -> ContainerStatus {
        ContainerStatus {
            name: name.to_string(),
            image: image.to_string(),
            image_id: None,
            container_id: None,
            state: CState::waiting("ContainerCreating", None),
            last: None,
            ready: false,
            started: false,
            restart_count: 0,
            backoff_until: 0,
            backoff_secs: 0,
            liveness_failures: 0,
            readiness_failures: 0,
            readiness_successes: 0,
            next_probe: 0,
            working_set: 0.0,
            cpu_seconds: 0.0,
            cfs_periods: 0.0,
            cfs_throttled_periods: 0.0,
            cfs_throttled_seconds: 0.0,
            ready_since: None,
            exit_at: None,
            next_backoff_event: 0,
        }
    }

    fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("name".into(), json!(self.name));
        m.insert("state".into(), self.state.to_json());
        m.insert(
            "lastState".into(),
            match &self.last {
                Some(t) => json!({"terminated": t.to_json()}),
                None => json!({}),
            },
        );
        m.insert("ready".into(), json!(self.ready));
        m.insert("restartCount".into(), json!(self.restart_count));
        m.insert("image".into(), json!(self.image));
        m.insert(
            "imageID".into(),
            json!(self.image_id.clone().unwrap_or_default()),
        );
        if let Some(id) = &self.container_id {
            m.insert("containerID".into(), json!(id));
        }
        m.insert("started".into(), json!(self.started));
        Value::Object(m)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Pod {
    pub meta: Meta,
    pub spec: PodSpec,
    pub phase: String,
    pub conditions: Vec<Condition>,
    pub host_ip: Option<String>,
    pub pod_ip: Option<String>,
    pub start_time: Option<i64>,
    pub init_statuses: Vec<ContainerStatus>,
    pub statuses: Vec<ContainerStatus>,
    /// Status reason/message set when the node evicts or the pod cannot run.
    pub reason: Option<String>,
    /// Next scheduling attempt for a pending pod.
    pub next_schedule: i64,
    pub schedule_backoff: i64,
    /// Which init container is running (index), `len` once all are done.
    pub init_done: usize,
}

impl Pod {
    /// A digest of everything the API shows of the pod (not the kubelet's accounting), to tell
    /// whether a sync changed the object.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        self.phase.hash(&mut h);
        self.conditions.hash(&mut h);
        self.host_ip.hash(&mut h);
        self.pod_ip.hash(&mut h);
        self.start_time.hash(&mut h);
        self.reason.hash(&mut h);
        self.spec.node_name.hash(&mut h);
        self.meta.deleted_at.hash(&mut h);
        for s in self.init_statuses.iter().chain(&self.statuses) {
            s.name.hash(&mut h);
            s.image.hash(&mut h);
            s.image_id.hash(&mut h);
            s.container_id.hash(&mut h);
            s.state.hash(&mut h);
            s.last.hash(&mut h);
            s.ready.hash(&mut h);
            s.started.hash(&mut h);
            s.restart_count.hash(&mut h);
        }
        h.finish()
    }

    pub fn ready(&self) -> bool {
        self.conditions
            .iter()
            .any(|c| c.kind == "Ready" && c.status)
    }

    pub fn qos_class(&self) -> &'static str {
        let all_guaranteed = self.spec.containers.iter().all(|c| {
            let r = &c.resources;
            r.limits.cpu_milli.is_some()
                && r.limits.memory.is_some()
                && r.requests
                    .cpu_milli
                    .unwrap_or(r.limits.cpu_milli.unwrap_or(0))
                    == r.limits.cpu_milli.unwrap_or(0)
                && r.requests.memory.unwrap_or(r.limits.memory.unwrap_or(0))
                    == r.limits.memory.unwrap_or(0)
        });
        let none = self
            .spec
            .containers
            .iter()
            .all(|c| c.resources.limits.is_empty() && c.resources.requests.is_empty());
        if none {
            "BestEffort"
        } else if all_guaranteed {
            "Guaranteed"
        } else {
            "Burstable"
        }
    }

    pub fn to_json(&self) -> Value {
        let mut status = serde_json::Map::new();
        status.insert("phase".into(), json!(self.phase));
        status.insert(
            "conditions".into(),
            Value::Array(
                self.conditions
                    .iter()
                    .map(|c| condition_json(c, true, false))
                    .collect(),
            ),
        );
        if let Some(r) = &self.reason {
            status.insert("reason".into(), json!(r));
        }
        if let Some(ip) = &self.host_ip {
            status.insert("hostIP".into(), json!(ip));
            status.insert("hostIPs".into(), json!([{"ip": ip}]));
        }
        if let Some(ip) = &self.pod_ip {
            status.insert("podIP".into(), json!(ip));
            status.insert("podIPs".into(), json!([{"ip": ip}]));
        }
        if let Some(t) = self.start_time {
            status.insert("startTime".into(), json!(rfc3339(t)));
        }
        if self.start_time.is_some() {
            if !self.init_statuses.is_empty() {
                status.insert(
                    "initContainerStatuses".into(),
                    Value::Array(self.init_statuses.iter().map(|c| c.to_json()).collect()),
                );
            }
            status.insert(
                "containerStatuses".into(),
                Value::Array(self.statuses.iter().map(|c| c.to_json()).collect()),
            );
        }
        status.insert("qosClass".into(), json!(self.qos_class()));
        let mut spec = serde_json::to_value(&self.spec).unwrap_or(Value::Null);
        spec["serviceAccount"] = json!(self.spec.service_account_name);
        spec["enableServiceLinks"] = json!(true);
        spec["priority"] = json!(0);
        spec["preemptionPolicy"] = json!("PreemptLowerPriority");
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": self.meta.to_json(false),
            "spec": spec,
            "status": status,
        })
    }
}

/// The default tolerations the admission controller adds to every pod.
pub fn default_tolerations() -> Vec<Toleration> {
    [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    .into_iter()
    .map(|k| Toleration {
        key: Some(k.into()),
        operator: "Exists".into(),
        value: None,
        effect: Some("NoExecute".into()),
        toleration_seconds: Some(300),
    })
    .collect()
}

// ---------------------------------------------------------------------------------------------
// Services and endpoints

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default = "defaults::tcp")]
    pub protocol: String,
    pub port: i32,
    /// 0 when a client left it out: defaulting sets it to `port`.
    #[serde(default = "defaults::no_port")]
    pub target_port: IntOrString,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    pub meta: Meta,
    pub selector: Labels,
    pub ports: Vec<ServicePort>,
    pub cluster_ip: String,
    pub internal_traffic_policy: String,
    /// Spec fields the model does not use (`type: NodePort`, `sessionAffinity`, ...), rendered
    /// over the defaults.
    pub spec_extra: Map<String, Value>,
}

impl Service {
    pub fn to_json(&self) -> Value {
        let mut spec = json!({
            "clusterIP": self.cluster_ip,
            "clusterIPs": [self.cluster_ip],
            "internalTrafficPolicy": self.internal_traffic_policy,
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": self.ports,
            "sessionAffinity": "None",
            "type": "ClusterIP",
        });
        if !self.selector.is_empty() {
            spec["selector"] = json!(self.selector);
        }
        merge_extra(&mut spec, &self.spec_extra);
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self.meta.to_json(false),
            "spec": spec,
            "status": {"loadBalancer": {}},
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EndpointAddress {
    pub ip: String,
    pub node: String,
    pub pod: String,
    pub pod_uid: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Endpoints {
    pub meta: Meta,
    pub ready: Vec<EndpointAddress>,
    pub not_ready: Vec<EndpointAddress>,
    /// (name, port) the addresses serve.
    pub ports: Vec<(Option<String>, i32)>,
}

impl Endpoints {
    pub fn to_json(&self) -> Value {
        let addr = |a: &EndpointAddress| {
            json!({
                "ip": a.ip,
                "nodeName": a.node,
                "targetRef": {
                    "kind": "Pod",
                    "namespace": self.meta.namespace,
                    "name": a.pod,
                    "uid": a.pod_uid,
                },
            })
        };
        let mut subsets = vec![];
        if (!self.ready.is_empty() || !self.not_ready.is_empty()) && !self.ports.is_empty() {
            let mut s = serde_json::Map::new();
            if !self.ready.is_empty() {
                s.insert(
                    "addresses".into(),
                    Value::Array(self.ready.iter().map(addr).collect()),
                );
            }
            if !self.not_ready.is_empty() {
                s.insert(
                    "notReadyAddresses".into(),
                    Value::Array(self.not_ready.iter().map(addr).collect()),
                );
            }
            s.insert(
                "ports".into(),
                Value::Array(
                    self.ports
                        .iter()
                        .map(|(n, p)| {
                            let mut v = json!({"port": p, "protocol": "TCP"});
                            if let Some(n) = n {
                                v["name"] = json!(n);
                            }
                            v
                        })
                        .collect(),
                ),
            );
            subsets.push(Value::Object(s));
        }
        let mut v = json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": self.meta.to_json(false),
        });
        if !subsets.is_empty() {
            v["subsets"] = Value::Array(subsets);
        }
        v
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration, storage, policy

#[derive(Debug, Clone, PartialEq)]
pub struct ConfigMap {
    pub meta: Meta,
    pub data: BTreeMap<String, String>,
    /// Top-level fields besides `data` (`immutable`, `binaryData`), kept as written.
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Secret {
    pub meta: Meta,
    pub data: BTreeMap<String, String>,
    /// Top-level fields besides `data` (`immutable`, a `type` other than Opaque).
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Pvc {
    pub meta: Meta,
    pub storage: i64,
    pub access_mode: String,
    pub volume_name: String,
    pub storage_class: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResourceQuota {
    pub meta: Meta,
    pub hard: BTreeMap<String, String>,
    pub used: BTreeMap<String, String>,
}

/// A NetworkPolicy reduced to what the data plane needs: which pods it selects and whether it
/// allows any ingress/egress at all (the catalog's policies are deny-all or allow-all).
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkPolicy {
    pub meta: Meta,
    pub pod_selector: Labels,
    pub deny_ingress: bool,
    pub deny_egress: bool,
}

/// Declares kinds the simulator only stores and renders: metadata plus the rest of the object
/// (spec, rules, subjects, ...) kept as JSON.
macro_rules! simple_objects {
    ($($name:ident),*) => {$(
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            pub meta: Meta,
            /// The rest of the object, rendered as is.
            pub body: Value,
        }

        impl $name {
            pub fn to_json(&self) -> Value {
                simple_json(Kind::$name, &self.meta, &self.body)
            }
        }
    )*};
}

simple_objects!(Namespace, ServiceAccount, Role, RoleBinding);

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub meta: Meta,
    pub cpu_milli: i64,
    pub memory: i64,
    pub max_pods: i64,
    pub ip: String,
    pub pod_cidr: String,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub conditions: Vec<Condition>,
    /// Whether the kubelet is posting status (false: condition Ready shows Unknown).
    pub kubelet_up: bool,
    pub heartbeat: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: String,
}

impl Node {
    pub fn ready(&self) -> bool {
        self.kubelet_up
            && self
                .conditions
                .iter()
                .any(|c| c.kind == "Ready" && c.status)
    }

    pub fn to_json(&self) -> Value {
        let alloc_mem = self.memory - (100 << 20);
        let mut spec = json!({"podCIDR": self.pod_cidr, "podCIDRs": [self.pod_cidr], "providerID": format!("kind://docker/kind/{}", self.meta.name)});
        if !self.taints.is_empty() {
            spec["taints"] = json!(self.taints);
        }
        if self.unschedulable {
            spec["unschedulable"] = json!(true);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": self.meta.to_json(false),
            "spec": spec,
            "status": {
                "addresses": [{"type": "InternalIP", "address": self.ip}, {"type": "Hostname", "address": self.meta.name}],
                "allocatable": {"cpu": cpu_quantity(self.cpu_milli), "ephemeral-storage": "102626232Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": format!("{}Ki", alloc_mem >> 10), "pods": self.max_pods.to_string()},
                "capacity": {"cpu": cpu_quantity(self.cpu_milli), "ephemeral-storage": "102626232Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": format!("{}Ki", self.memory >> 10), "pods": self.max_pods.to_string()},
                "conditions": self.conditions.iter().map(|c| node_condition_json(c, self.heartbeat, !self.kubelet_up)).collect::<Vec<_>>(),
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": self.meta.uid,
                    "containerRuntimeVersion": "containerd://1.7.18",
                    "kernelVersion": "6.8.0-49-generic",
                    "kubeProxyVersion": "v1.31.2",
                    "kubeletVersion": "v1.31.2",
                    "machineID": self.meta.uid.replace('-', ""),
                    "operatingSystem": "linux",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "systemUUID": self.meta.uid,
                },
            },
        })
    }
}

impl ConfigMap {
    pub fn to_json(&self) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": self.meta.to_json(false), "data": self.data});
        merge_extra(&mut v, &self.extra);
        v
    }
}

impl Secret {
    /// Values are redacted, as the dataset format requires.
    pub fn to_json(&self) -> Value {
        let data: BTreeMap<&String, &str> = self.data.keys().map(|k| (k, "")).collect();
        let mut v = json!({"apiVersion": "v1", "kind": "Secret", "metadata": self.meta.to_json(false), "type": "Opaque", "data": data});
        merge_extra(&mut v, &self.extra);
        v
    }
}

impl Pvc {
    pub fn to_json(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": self.meta.to_json(false),
            "spec": {
                "accessModes": [self.access_mode],
                "resources": {"requests": {"storage": memory_quantity(self.storage)}},
                "storageClassName": self.storage_class,
                "volumeMode": "Filesystem",
                "volumeName": self.volume_name,
            },
            "status": {
                "accessModes": [self.access_mode],
                "capacity": {"storage": memory_quantity(self.storage)},
                "phase": "Bound",
            },
        })
    }
}

impl ResourceQuota {
    pub fn to_json(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": self.meta.to_json(false),
            "spec": {"hard": self.hard},
            "status": {"hard": self.hard, "used": self.used},
        })
    }
}

impl NetworkPolicy {
    pub fn to_json(&self) -> Value {
        let mut types = vec![];
        let mut spec = json!({"podSelector": {"matchLabels": self.pod_selector}});
        if self.deny_ingress {
            types.push("Ingress");
            spec["ingress"] = json!([]);
        }
        if self.deny_egress {
            types.push("Egress");
            spec["egress"] = json!([]);
        }
        spec["policyTypes"] = json!(types);
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": self.meta.to_json(true), "spec": spec})
    }
}

/// Writes fields kept as written over a rendering: a key the renderer also writes keeps its place
/// and takes the written value.
fn merge_extra(target: &mut Value, extra: &Map<String, Value>) {
    if let Value::Object(m) = target {
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
    }
}

/// Values the API server fills in when a client leaves a field out (serde defaults of the spec
/// types, so a decoded object carries them as a created one would).
mod defaults {
    use super::IntOrString;

    pub fn tcp() -> String {
        "TCP".into()
    }
    pub fn root() -> String {
        "/".into()
    }
    pub fn http() -> String {
        "HTTP".into()
    }
    pub fn one() -> i32 {
        1
    }
    pub fn three() -> i32 {
        3
    }
    pub fn ten() -> i32 {
        10
    }
    pub fn file_mode() -> i32 {
        420
    }
    pub fn grace_seconds() -> i64 {
        30
    }
    pub fn termination_message_path() -> String {
        "/dev/termination-log".into()
    }
    pub fn termination_message_policy() -> String {
        "File".into()
    }
    pub fn restart_policy() -> String {
        "Always".into()
    }
    pub fn dns_policy() -> String {
        "ClusterFirst".into()
    }
    pub fn service_account() -> String {
        "default".into()
    }
    pub fn scheduler() -> String {
        "default-scheduler".into()
    }
    pub fn quarter() -> String {
        "25%".into()
    }
    pub fn rolling_update() -> String {
        "RollingUpdate".into()
    }
    pub fn no_port() -> IntOrString {
        IntOrString::Int(0)
    }
}

/// `maxSurge`/`maxUnavailable`: an int-or-string the model keeps as text (`25%`, `1`).
mod int_or_percent {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::IntOrString;

    pub fn serialize<S: Serializer>(v: &str, s: S) -> Result<S::Ok, S::Error> {
        match v.parse::<i64>() {
            Ok(n) => s.serialize_i64(n),
            Err(_) => s.serialize_str(v),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        Ok(match IntOrString::deserialize(d)? {
            IntOrString::Int(n) => n.to_string(),
            IntOrString::Str(s) => s,
        })
    }
}

fn simple_json(kind: Kind, meta: &Meta, body: &Value) -> Value {
    let mut v = json!({"apiVersion": kind.api_version(), "kind": kind.name(), "metadata": meta.to_json(false)});
    if let (Value::Object(dst), Value::Object(src)) = (&mut v, body) {
        for (k, val) in src {
            dst.insert(k.clone(), val.clone());
        }
    }
    v
}

/// Whether every key/value of `selector` is in `labels` (an empty selector selects nothing here,
/// as a Service without selector has no managed endpoints).
pub fn selects(selector: &Labels, labels: &Labels) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// FNV-1a: the pod fingerprint runs for every pod on every tick, where SipHash's cost shows and
/// its flooding resistance buys nothing.
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
