//! The pod spec types, shared by pods and the templates of their controllers: containers, probes,
//! volumes, resources, scheduling constraints.

use super::*;

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

impl Toleration {
    /// Whether this toleration lets a pod stay on (or be scheduled to) a node with `t`.
    pub fn tolerates(&self, t: &Taint) -> bool {
        let key_ok = if self.operator == "Exists" {
            self.key.is_none() || self.key.as_deref() == Some(t.key.as_str())
        } else {
            self.key.as_deref() == Some(t.key.as_str()) && self.value == t.value
        };
        key_ok && (self.effect.is_none() || self.effect.as_deref() == Some(t.effect.as_str()))
    }
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
    /// Debugging containers added to a running pod through its `ephemeralcontainers`
    /// subresource (`kubectl debug POD --image=...`): never restarted, no ports, probes or
    /// resources, not part of the pod's readiness.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ephemeral_containers: Vec<Container>,
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
            ephemeral_containers: vec![],
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
