//! Applications as data: the services of a microservice application with the Kubernetes shape of
//! their objects (Deployment/StatefulSet, Service, ConfigMaps, PVCs, probes, resources), the
//! operations each serves with their baseline cost, the downstream calls each operation makes (the
//! call graph), the load generator's workload and the cluster's nodes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::units::{Cpu, Dur, Memory};

/// One application, e.g. DeathStarBench hotel-reservation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    pub name: String,
    pub namespace: String,
    #[serde(default)]
    pub description: String,
    /// Label key the app's manifests select pods by (`io.kompose.service` for DeathStarBench's
    /// kompose-generated manifests, `app.kubernetes.io/component` for the OTel demo chart, ...).
    /// Every workload's pods carry `<selector_label>=<service name>`, and its Service selects it.
    pub selector_label: String,
    /// Labels put on every object of the app (e.g. `app.kubernetes.io/part-of`).
    #[serde(default)]
    pub common_labels: BTreeMap<String, String>,
    pub nodes: Vec<NodeSpec>,
    pub services: Vec<ServiceSpec>,
    #[serde(default)]
    pub config_maps: Vec<ConfigMapSpec>,
    /// Runtime feature flags the app reads (flagd for the OTel demo), with what each variant does.
    #[serde(default)]
    pub feature_flags: Vec<FeatureFlagSpec>,
    pub workload: WorkloadSpec,
}

/// A cluster node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub name: String,
    #[serde(default)]
    pub role: NodeRole,
    /// Allocatable CPU and memory.
    pub cpu: Cpu,
    pub memory: Memory,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub taints: Vec<Taint>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeRole {
    ControlPlane,
    #[default]
    Worker,
}

/// A node taint (`key=value:Effect`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default)]
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    /// The effect as the Kubernetes API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// What a service is for; the simulator derives resource behaviour and log style from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user-facing entry (HTTP/web).
    Frontend,
    /// A reverse proxy or API gateway in front of the frontend (Envoy, nginx).
    Proxy,
    /// A business-logic RPC service.
    Api,
    /// An in-memory cache (memcached, redis/valkey used as cache).
    Cache,
    /// A persistent store (MongoDB, PostgreSQL, redis used as store).
    Database,
    /// A message broker (Kafka).
    Queue,
    /// A queue consumer without an RPC API.
    Worker,
    /// The load generator (wrk2, Locust).
    Loadgen,
    /// Infrastructure the app needs (service registry, tracing backend, feature-flag daemon).
    Infra,
}

/// How a service's pods are managed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    #[default]
    Deployment,
    StatefulSet,
    Job,
}

/// One service: a workload (Deployment by default) and, when it has ports, a Service of the same
/// name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSpec {
    pub name: String,
    pub role: Role,
    #[serde(default)]
    pub kind: WorkloadKind,
    /// Container name; defaults to the service name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Image reference with its tag, as the real manifests deploy it.
    pub image: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default = "one")]
    pub replicas: u32,
    /// Ports of the Service (and the container ports they target). Empty: no Service object.
    #[serde(default)]
    pub ports: Vec<PortSpec>,
    #[serde(default)]
    pub resources: Resources,
    /// Container environment; dependency addresses are `host:port` values here.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// ConfigMaps mounted into the container.
    #[serde(default)]
    pub config_mounts: Vec<ConfigMount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<Probe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness: Option<Probe>,
    /// Persistent volume claims mounted by a store.
    #[serde(default)]
    pub volumes: Vec<VolumeSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// Steady resource use at baseline load, for the simulator's cAdvisor metrics.
    #[serde(default)]
    pub usage: Usage,
    /// Operations this service serves, each with its cost and downstream calls.
    #[serde(default)]
    pub operations: Vec<OperationSpec>,
}

fn one() -> u32 {
    1
}

impl ServiceSpec {
    pub fn container_name(&self) -> &str {
        self.container.as_deref().unwrap_or(&self.name)
    }

    pub fn operation(&self, name: &str) -> Option<&OperationSpec> {
        self.operations.iter().find(|o| o.name == name)
    }

    pub fn port(&self, name_or_number: &str) -> Option<&PortSpec> {
        self.ports
            .iter()
            .find(|p| p.name == name_or_number || p.port.to_string() == name_or_number)
    }

    /// Whether a Kubernetes Service object exists for this workload at baseline.
    pub fn has_service(&self) -> bool {
        !self.ports.is_empty()
    }
}

/// A Service port and the container port it targets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSpec {
    pub name: String,
    /// The Service's port (what callers dial).
    pub port: u16,
    /// The container port the Service forwards to (defaults to `port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<u16>,
    pub protocol: Protocol,
}

impl PortSpec {
    pub fn target_port(&self) -> u16 {
        self.target_port.unwrap_or(self.port)
    }
}

/// Application protocol spoken on a port (all over TCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    Http,
    Grpc,
    Thrift,
    Mongodb,
    Memcached,
    Redis,
    Postgres,
    Kafka,
    /// Raw TCP (consul RPC, jaeger collectors, ...).
    Tcp,
}

/// CPU and memory requests and limits of the main container.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    #[serde(default)]
    pub requests: ResourceList,
    #[serde(default)]
    pub limits: ResourceList,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceList {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
}

/// A ConfigMap mounted into a container (as a directory, or one key as a file with `sub_path`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigMount {
    pub config_map: String,
    pub mount_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
}

/// A liveness or readiness probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    #[serde(flatten)]
    pub handler: ProbeHandler,
    #[serde(default = "Probe::default_initial_delay")]
    pub initial_delay: Dur,
    #[serde(default = "Probe::default_period")]
    pub period: Dur,
    #[serde(default = "Probe::default_timeout")]
    pub timeout: Dur,
    #[serde(default = "Probe::default_failure_threshold")]
    pub failure_threshold: u32,
}

impl Probe {
    fn default_initial_delay() -> Dur {
        Dur::ZERO
    }
    fn default_period() -> Dur {
        Dur::from_secs(10)
    }
    fn default_timeout() -> Dur {
        Dur::from_secs(1)
    }
    fn default_failure_threshold() -> u32 {
        3
    }
}

/// What a probe does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProbeHandler {
    /// HTTP GET; success is a 2xx/3xx status.
    Http { path: String, port: u16 },
    /// TCP connect.
    Tcp { port: u16 },
    /// gRPC health check protocol.
    Grpc { port: u16 },
    /// A command in the container; success is exit status 0.
    Exec { command: Vec<String> },
}

/// A PersistentVolumeClaim mounted by a store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeSpec {
    pub claim: String,
    pub size: Memory,
    pub mount_path: String,
    #[serde(default = "VolumeSpec::default_access_mode")]
    pub access_mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
}

impl VolumeSpec {
    fn default_access_mode() -> String {
        "ReadWriteOnce".into()
    }
}

/// Steady resource use of one replica at baseline load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Memory working set at rest.
    pub memory: Memory,
    /// CPU used with no requests in flight (runtime, GC, background work).
    pub idle_cpu: Cpu,
    /// Time from container start to ready.
    #[serde(default = "Usage::default_startup")]
    pub startup: Dur,
}

impl Usage {
    fn default_startup() -> Dur {
        Dur::from_secs(5)
    }
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            memory: Memory::from_mib(32),
            idle_cpu: Cpu::from_millicores(5),
            startup: Usage::default_startup(),
        }
    }
}

/// An operation a service serves: an HTTP route, an RPC method, a store command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationSpec {
    /// The span name real instrumentation gives it (`HTTP GET /hotels`, `/geo.Geo/Nearby`,
    /// `find`, ...).
    pub name: String,
    /// Own processing time at baseline (median), excluding downstream calls.
    pub latency: Dur,
    /// CPU time one request costs, in milliseconds.
    #[serde(default = "OperationSpec::default_cpu_ms")]
    pub cpu_ms: f64,
    /// Downstream calls, in order.
    #[serde(default)]
    pub calls: Vec<CallSpec>,
}

impl OperationSpec {
    fn default_cpu_ms() -> f64 {
        1.0
    }
}

/// A downstream call made while serving an operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSpec {
    pub service: String,
    pub operation: String,
    /// Chance the call happens per request (e.g. a database read on a cache miss).
    #[serde(default = "CallSpec::default_probability")]
    pub probability: f64,
    /// Made concurrently with the previous call instead of after it.
    #[serde(default)]
    pub parallel: bool,
    /// Asynchronous (fire-and-forget, e.g. a Kafka produce): its failure does not fail the caller.
    #[serde(default, rename = "async")]
    pub is_async: bool,
}

impl CallSpec {
    fn default_probability() -> f64 {
        1.0
    }
}

/// A ConfigMap of the app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigMapSpec {
    pub name: String,
    pub data: BTreeMap<String, String>,
}

/// A runtime feature flag and the effect of each of its variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureFlagSpec {
    pub name: String,
    /// Where the flag is stored (the flagd ConfigMap and its key).
    pub config_map: String,
    pub key: String,
    pub default_variant: String,
    /// Effects of each non-default variant; a variant absent here has no effect.
    #[serde(default)]
    pub variants: BTreeMap<String, Vec<FlagEffect>>,
}

/// What turning a flag variant on does to the running app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "snake_case", deny_unknown_fields)]
pub enum FlagEffect {
    /// A fraction of the operation's requests fail with an application error.
    Error {
        service: String,
        operation: String,
        ratio: f64,
    },
    /// The operation takes this much longer.
    Latency {
        service: String,
        operation: String,
        added: Dur,
    },
    /// The service burns this much extra CPU.
    Cpu { service: String, cpu: Cpu },
    /// The service's working set grows this much per minute (a leak).
    MemoryGrowth { service: String, per_minute: Memory },
    /// The service calls `dependency` at an address where nothing listens.
    Unreachable { service: String, dependency: String },
    /// The load generator's request rate is multiplied.
    Load { multiplier: f64 },
    /// The service's readiness check reports not serving.
    ReadinessFailure { service: String },
}

/// The load generator's workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// The service (role `loadgen`) that generates load.
    pub generator: String,
    /// The service it sends requests to.
    pub target: String,
    /// Requests per second at baseline.
    pub rate: f64,
    /// Client timeout per request.
    #[serde(default = "WorkloadSpec::default_timeout")]
    pub timeout: Dur,
    /// Operation mix of the target service, by weight.
    pub mix: Vec<MixEntry>,
}

impl WorkloadSpec {
    fn default_timeout() -> Dur {
        Dur::from_secs(10)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixEntry {
    pub operation: String,
    pub weight: f64,
}

/// Where a caller finds a dependency's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressSource {
    /// An environment variable of the caller holding `host:port`.
    Env { var: String, port: u16 },
    /// A key of a ConfigMap the caller mounts whose text holds `host:port`.
    ConfigMap {
        config_map: String,
        key: String,
        port: u16,
    },
    /// Cluster DNS on the callee's first Service port.
    Dns { port: u16 },
}

impl AppSpec {
    pub fn service(&self, name: &str) -> Option<&ServiceSpec> {
        self.services.iter().find(|s| s.name == name)
    }

    pub fn node(&self, name: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.name == name)
    }

    pub fn config_map(&self, name: &str) -> Option<&ConfigMapSpec> {
        self.config_maps.iter().find(|c| c.name == name)
    }

    pub fn feature_flag(&self, name: &str) -> Option<&FeatureFlagSpec> {
        self.feature_flags.iter().find(|f| f.name == name)
    }

    /// Services `caller` calls directly, over all its operations, without duplicates.
    pub fn dependencies(&self, caller: &str) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for op in self.service(caller).into_iter().flat_map(|s| &s.operations) {
            for call in &op.calls {
                if !out.contains(&call.service.as_str()) {
                    out.push(&call.service);
                }
            }
        }
        out
    }

    /// Services that call `callee` directly.
    pub fn callers(&self, callee: &str) -> Vec<&str> {
        self.services
            .iter()
            .filter(|s| self.dependencies(&s.name).contains(&callee))
            .map(|s| s.name.as_str())
            .collect()
    }

    /// Where `caller` gets the address of `callee`: an env var or a mounted ConfigMap value of the
    /// form `callee[.<namespace>[.svc[.cluster.local]]]:port`, else cluster DNS on the callee's
    /// first port. `None` when the callee has no Service port.
    pub fn address_of(&self, caller: &str, callee: &str) -> Option<AddressSource> {
        let caller_spec = self.service(caller)?;
        let first_port = self
            .service(callee)
            .and_then(|s| s.ports.first())
            .map(|p| p.port);
        for (var, value) in &caller_spec.env {
            if let Some(port) = address_port(value, callee) {
                return Some(AddressSource::Env {
                    var: var.clone(),
                    port,
                });
            }
        }
        // A host-only variable (`FRONTEND_HOST=frontend`) pairs with the callee's first port.
        for (var, value) in &caller_spec.env {
            if let Some(port) = first_port.filter(|_| is_host_of(value, callee)) {
                return Some(AddressSource::Env {
                    var: var.clone(),
                    port,
                });
            }
        }
        for mount in &caller_spec.config_mounts {
            if let Some(cm) = self.config_map(&mount.config_map) {
                for (key, text) in &cm.data {
                    if let Some(port) = address_port(text, callee) {
                        return Some(AddressSource::ConfigMap {
                            config_map: cm.name.clone(),
                            key: key.clone(),
                            port,
                        });
                    }
                }
            }
        }
        let port = self.service(callee)?.ports.first()?.port;
        Some(AddressSource::Dns { port })
    }
}

/// Finds `host:port` naming `service` in `text` and returns the port. The host may be the short
/// name or a cluster FQDN; a longer name that merely starts with `service` does not match.
pub fn address_port(text: &str, service: &str) -> Option<u16> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(pos) = text[from..].find(service) {
        let start = from + pos;
        from = start + service.len();
        let boundary_before = start == 0 || !is_host_char(bytes[start - 1]);
        if !boundary_before {
            continue;
        }
        let rest = &text[start + service.len()..];
        // Skip an optional `.namespace.svc.cluster.local` style suffix.
        let host_end = rest.find(|c: char| c != '.' && !c.is_ascii_alphanumeric() && c != '-');
        let (suffix, after) = rest.split_at(host_end.unwrap_or(rest.len()));
        if !(suffix.is_empty() || suffix.starts_with('.')) {
            continue;
        }
        if let Some(digits) = after.strip_prefix(':') {
            let end = digits
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(digits.len());
            if let Ok(port) = digits[..end].parse() {
                return Some(port);
            }
        }
    }
    None
}

/// Whether `value` is exactly the service's name or one of its cluster FQDN forms.
fn is_host_of(value: &str, service: &str) -> bool {
    value
        .strip_prefix(service)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

fn is_host_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'.'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_ports_in_addresses() {
        assert_eq!(address_port("cart:8080", "cart"), Some(8080));
        assert_eq!(
            address_port("http://cart.shop.svc.cluster.local:7070/x", "cart"),
            Some(7070)
        );
        assert_eq!(address_port("valkey-cart:6379", "cart"), None);
        assert_eq!(address_port("cartx:1", "cart"), None);
        assert_eq!(
            address_port(r#"{"GeoMongoAddress": "mongodb-geo:27018"}"#, "mongodb-geo"),
            Some(27018)
        );
        assert_eq!(address_port("cart", "cart"), None);
    }
}
