//! Fault primitives: one variant per kind of fault, with its typed parameters and its target. A
//! problem's faults and decoys are values of [`Primitive`]; the simulator (and a real-cluster
//! injector) implements each variant with an exact revert.
//!
//! Targets name things of the application spec: `service` is a service of the app (its workload,
//! its pods and its Service object share the name), `node` a node, `config_map` a ConfigMap.

use std::collections::BTreeMap;

use schemas::ground_truth::Layer;
use serde::{Deserialize, Serialize};

use crate::app::{Probe, TaintEffect};
use crate::units::{Cpu, Dur, Memory};

/// A fault primitive with its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "primitive", rename_all = "snake_case", deny_unknown_fields)]
pub enum Primitive {
    // ----- Kubernetes objects -------------------------------------------------------------------
    /// Sets a Service port's `targetPort` to a port no container listens on. The Service keeps
    /// its endpoints' addresses but connections to the new port are refused: callers log
    /// `connection refused`, their client spans error, error-rate alerts fire upstream.
    ServiceTargetPort {
        service: String,
        /// Name of the Service port to change; the first port when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port_name: Option<String>,
        target_port: u16,
    },
    /// Changes a Service's `port`. Callers still dial the old port from their configuration and
    /// get `connection refused` (or time out), while the pods are healthy.
    ServicePort {
        service: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port_name: Option<String>,
        port: u16,
    },
    /// Adds selector terms to a Service that no pod carries: the Endpoints become empty, callers
    /// fail with `connection refused`/`no healthy upstream`, `kube_endpoint_address_available` is 0.
    ServiceSelector {
        service: String,
        add: BTreeMap<String, String>,
    },
    /// Makes a Service select the pods of another service as well (a shared label added to both
    /// and to the selector): part of the requests land on pods that speak another API and fail
    /// with `Unimplemented`/404, intermittently.
    ServiceSelectsOther {
        service: String,
        other: String,
        label_key: String,
        label_value: String,
    },
    /// Deletes a Service object (the workload keeps running). Callers fail to resolve its name:
    /// `no such host`/NXDOMAIN in their logs, error spans, error-rate alerts.
    ServiceDelete { service: String },
    /// Replaces the container image. `pull_error`: a tag that does not exist, pods go
    /// `ErrImagePull`/`ImagePullBackOff` (events `Failed`, `BackOff`); `crash`: a build that
    /// exits at start, `CrashLoopBackOff`; `incompatible`: starts but fails requests (e.g. a
    /// database version that cannot read its data files, or a buggy build).
    ContainerImage {
        service: String,
        image: String,
        effect: ImageEffect,
    },
    /// Removes an environment variable. For an address the service falls back to its built-in
    /// default (usually `localhost`) and calls fail with `connection refused`; for required
    /// settings the process exits at start (`CrashLoopBackOff`).
    EnvRemove { service: String, var: String },
    /// Sets (or shadows with a duplicate) an environment variable. A dependency address set to a
    /// wrong host sends calls there: `connection refused`/`no such host`.
    EnvSet {
        service: String,
        var: String,
        value: String,
    },
    /// Rewrites the port inside a `host:port` address held by an environment variable (e.g.
    /// `PRODUCT_CATALOG_ADDR=product-catalog:8082`): the caller's calls are refused while the
    /// callee is healthy.
    EnvAddressPort {
        service: String,
        var: String,
        port: u16,
    },
    /// Configuration drift in a ConfigMap: a key (or, with `field`, a JSON field inside the key's
    /// text) is removed, or set to `value`. Consumers restarted after the change read the drifted
    /// configuration: a missing address makes them fail at start or dial a default.
    ConfigMapKeyDrift {
        config_map: String,
        key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        field: Option<String>,
        /// New value; the key or field is removed when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
    },
    /// Deletes a ConfigMap and restarts the pods that mount it: they stay `ContainerCreating`
    /// with `FailedMount` events (`configmap "x" not found`).
    ConfigMapDelete { config_map: String },
    /// Replaces the readiness probe with one that always fails (wrong path or port): pods run
    /// but never become Ready, the Service's endpoints empty, `Unhealthy` events.
    ReadinessProbe { service: String, probe: Probe },
    /// Replaces the liveness probe with one that fails: the kubelet kills the container
    /// repeatedly (`Unhealthy`, `Killing` events), restarts climb, `CrashLoopBackOff`.
    LivenessProbe { service: String, probe: Probe },
    /// Sets a memory limit below the working set: the container is OOM-killed (`OOMKilled`
    /// last state, restarts climb, `BackOff` events, `CrashLoopBackOff`).
    MemoryLimit { service: String, limit: Memory },
    /// Sets a tight CPU limit: CFS throttling (`container_cpu_cfs_throttled_periods_total`
    /// rises), latency grows with load, timeouts upstream.
    CpuLimit { service: String, limit: Cpu },
    /// Sets resource requests no node can satisfy: the new pod stays `Pending` with
    /// `FailedScheduling` (`Insufficient cpu`/`Insufficient memory`).
    ResourceRequests {
        service: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cpu: Option<Cpu>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        memory: Option<Memory>,
    },
    /// Adds a nodeSelector no node matches (e.g. a hostname that does not exist): the pod stays
    /// `Pending` with `FailedScheduling` (`didn't match Pod's node affinity/selector`).
    NodeSelector {
        service: String,
        selector: BTreeMap<String, String>,
    },
    /// Taints nodes and deletes the pods of `evict`: their replacements have no toleration and
    /// stay `Pending` (`FailedScheduling`: `had untolerated taint`).
    NodeTaint {
        nodes: Vec<String>,
        key: String,
        #[serde(default)]
        value: String,
        effect: TaintEffect,
        #[serde(default)]
        evict: Vec<String>,
    },
    /// Adds a required pod anti-affinity on the service's own label and raises replicas above
    /// the node count: the surplus pods stay `Pending` (`didn't match pod anti-affinity rules`).
    AntiAffinityDeadlock { service: String, replicas: u32 },
    /// Scales a workload (to zero: no pods, no endpoints; callers fail, replicas alert).
    Scale { service: String, replicas: u32 },
    /// Points the pod's volume at a PVC that does not exist: pods `Pending` with
    /// `FailedScheduling` (`persistentvolumeclaim "x" not found`).
    PvcClaimMismatch { service: String, claim: String },
    /// Creates a ResourceQuota and deletes the pods of `recreate`: their replacements are
    /// refused by admission (`FailedCreate`: `exceeded quota` / `must specify limits.memory`),
    /// the ReplicaSet stays short of replicas.
    ResourceQuota {
        name: String,
        hard: QuotaHard,
        #[serde(default)]
        recreate: Vec<String>,
    },
    /// Creates a NetworkPolicy selecting the service's pods with no allow rules for the
    /// directions given: connections to (ingress) or from (egress) them time out, pods stay
    /// Running and Ready.
    NetworkPolicyDeny {
        name: String,
        service: String,
        #[serde(default = "yes")]
        ingress: bool,
        #[serde(default)]
        egress: bool,
    },
    /// Makes cluster DNS answer NXDOMAIN for one service's names (a CoreDNS `template` block), or
    /// for every `*.svc.cluster.local` name when `service` is absent: callers log `no such host`.
    DnsFailure {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        service: Option<String>,
    },
    /// Sets `dnsPolicy: None` with an outside nameserver on a workload: its pods cannot resolve
    /// cluster names, every outgoing call fails with `no such host`.
    DnsPolicy { service: String, nameserver: String },
    /// Adds an init container that reads a ConfigMap through the API with a ServiceAccount
    /// lacking the permission: `Init:Error`/`Init:CrashLoopBackOff`, the init container logs
    /// `forbidden`.
    RbacDeniedInit {
        service: String,
        service_account: String,
        config_map: String,
    },
    /// Adds an init container waiting for a name that never resolves: pods stay `Init:0/1`.
    InitContainerHang { service: String, waits_for: String },
    /// Changes the container command (e.g. runs another service's binary): the process serves
    /// the wrong API on the wrong port; readiness fails or callers get `Unimplemented`.
    WrongCommand {
        service: String,
        command: Vec<String>,
    },
    /// Adds a sidecar that listens on the main container's port: the main process fails to bind
    /// (`address already in use`) and crash-loops.
    SidecarPortConflict { service: String, port: u16 },

    // ----- Application --------------------------------------------------------------------------
    /// Sets a feature flag's default variant (flagd `demo.flagd.json`, or a runtime ConfigMap):
    /// the effects the app spec declares for that variant (errors, latency, CPU, leaks, a bad
    /// address) appear in the flagged service.
    FeatureFlag { flag: String, variant: String },
    /// Breaks a database's authentication for its clients (`revoke_roles`, `drop_user`,
    /// `password_changed`, `require_tls`): clients log `not authorized`/`authentication failed`,
    /// requests needing the store fail, the store itself stays healthy.
    DatabaseAuth {
        service: String,
        mode: AuthMode,
        /// Client services restarted after the change (they re-authenticate and fail).
        #[serde(default)]
        restart_clients: Vec<String>,
    },
    /// A session holds an exclusive lock on a table: queries touching it block until the client
    /// times out; connections pile up, latency and timeouts upstream.
    DatabaseLock { service: String, table: String },

    // ----- Network ------------------------------------------------------------------------------
    /// Adds latency (with jitter) to traffic from one service to another.
    NetworkDelay {
        from: String,
        to: String,
        delay: Dur,
        #[serde(default)]
        jitter: Dur,
    },
    /// Drops a percentage of packets from one service to another: retransmits, timeouts,
    /// intermittent errors.
    NetworkLoss {
        from: String,
        to: String,
        percent: f64,
    },

    // ----- Node / OS ----------------------------------------------------------------------------
    /// Runs CPU hogs on a node: pods there compete for CPU, latency rises, node CPU saturates.
    NodeCpuStress { node: String, cpu: Cpu },
    /// Stops the kubelet on a node: the node goes `NotReady` (`NodeNotReady` events), its pods
    /// become `Unknown`/terminating after the toleration and are rescheduled elsewhere if they can.
    KubeletDown { node: String },

    // ----- Kernel -------------------------------------------------------------------------------
    /// Fails a percentage of the storage reads of a service's process with EIO (latent sector
    /// errors): a database logs I/O errors, queries fail, clients see errors.
    DiskReadErrors { service: String, percent: f64 },
    /// Fails a percentage of calls to one syscall in a service's process with an errno (e.g.
    /// `openat`/`EMFILE`, `sendto`/`ECONNREFUSED`).
    SyscallFailure {
        service: String,
        syscall: String,
        errno: String,
        percent: f64,
    },

    // ----- Load ---------------------------------------------------------------------------------
    /// Multiplies the load generator's request rate (revert it with the fault's `duration` for a
    /// transient trigger).
    LoadSpike { multiplier: f64 },
    /// Configures a caller's RPC client with a short timeout and many retries on error: under a
    /// trigger, retries amplify load into a retry storm that persists after the trigger (metastable).
    RpcRetryConfig {
        service: String,
        dependency: String,
        timeout: Dur,
        retries: u32,
    },
    /// Makes the Go garbage collector run very often (`GOGC`) under a memory cap (a LimitRange or
    /// limit): CPU goes to GC, capacity drops, and with a load trigger the services tip into
    /// sustained overload.
    GcPressure {
        services: Vec<String>,
        gogc: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        memory_limit: Option<Memory>,
    },
}

fn yes() -> bool {
    true
}

/// What a replaced image does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageEffect {
    PullError,
    Crash,
    Incompatible,
}

/// How a database's authentication is broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    RevokeRoles,
    DropUser,
    PasswordChanged,
    RequireTls,
}

/// ResourceQuota `spec.hard`, in the real field names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaHard {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<u32>,
    #[serde(
        default,
        rename = "requests.cpu",
        skip_serializing_if = "Option::is_none"
    )]
    pub requests_cpu: Option<Cpu>,
    #[serde(
        default,
        rename = "requests.memory",
        skip_serializing_if = "Option::is_none"
    )]
    pub requests_memory: Option<Memory>,
    #[serde(
        default,
        rename = "limits.cpu",
        skip_serializing_if = "Option::is_none"
    )]
    pub limits_cpu: Option<Cpu>,
    #[serde(
        default,
        rename = "limits.memory",
        skip_serializing_if = "Option::is_none"
    )]
    pub limits_memory: Option<Memory>,
}

impl QuotaHard {
    /// The limits under their Kubernetes resource names (`requests.cpu`, ...), as a
    /// ResourceQuota's `spec.hard` holds them.
    pub fn entries(&self) -> BTreeMap<String, String> {
        let names = [
            ("pods", self.pods.map(|p| p.to_string())),
            ("requests.cpu", self.requests_cpu.map(|c| c.to_string())),
            (
                "requests.memory",
                self.requests_memory.map(|c| c.to_string()),
            ),
            ("limits.cpu", self.limits_cpu.map(|c| c.to_string())),
            ("limits.memory", self.limits_memory.map(|c| c.to_string())),
        ];
        names
            .into_iter()
            .filter_map(|(name, v)| Some((name.to_string(), v?)))
            .collect()
    }
}

/// Something of the application a primitive acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target<'a> {
    Service(&'a str),
    Node(&'a str),
    ConfigMap(&'a str),
    FeatureFlag(&'a str),
    /// Cluster-wide (cluster DNS) or the load generator.
    Cluster,
}

/// Every primitive name, in declaration order.
pub const PRIMITIVE_NAMES: [&str; 41] = [
    "service_target_port",
    "service_port",
    "service_selector",
    "service_selects_other",
    "service_delete",
    "container_image",
    "env_remove",
    "env_set",
    "env_address_port",
    "config_map_key_drift",
    "config_map_delete",
    "readiness_probe",
    "liveness_probe",
    "memory_limit",
    "cpu_limit",
    "resource_requests",
    "node_selector",
    "node_taint",
    "anti_affinity_deadlock",
    "scale",
    "pvc_claim_mismatch",
    "resource_quota",
    "network_policy_deny",
    "dns_failure",
    "dns_policy",
    "rbac_denied_init",
    "init_container_hang",
    "wrong_command",
    "sidecar_port_conflict",
    "feature_flag",
    "database_auth",
    "database_lock",
    "network_delay",
    "network_loss",
    "node_cpu_stress",
    "kubelet_down",
    "disk_read_errors",
    "syscall_failure",
    "load_spike",
    "rpc_retry_config",
    "gc_pressure",
];

impl Primitive {
    /// The primitive's name as written in specs (`service_target_port`, ...).
    pub fn name(&self) -> &'static str {
        use Primitive::*;
        match self {
            ServiceTargetPort { .. } => "service_target_port",
            ServicePort { .. } => "service_port",
            ServiceSelector { .. } => "service_selector",
            ServiceSelectsOther { .. } => "service_selects_other",
            ServiceDelete { .. } => "service_delete",
            ContainerImage { .. } => "container_image",
            EnvRemove { .. } => "env_remove",
            EnvSet { .. } => "env_set",
            EnvAddressPort { .. } => "env_address_port",
            ConfigMapKeyDrift { .. } => "config_map_key_drift",
            ConfigMapDelete { .. } => "config_map_delete",
            ReadinessProbe { .. } => "readiness_probe",
            LivenessProbe { .. } => "liveness_probe",
            MemoryLimit { .. } => "memory_limit",
            CpuLimit { .. } => "cpu_limit",
            ResourceRequests { .. } => "resource_requests",
            NodeSelector { .. } => "node_selector",
            NodeTaint { .. } => "node_taint",
            AntiAffinityDeadlock { .. } => "anti_affinity_deadlock",
            Scale { .. } => "scale",
            PvcClaimMismatch { .. } => "pvc_claim_mismatch",
            ResourceQuota { .. } => "resource_quota",
            NetworkPolicyDeny { .. } => "network_policy_deny",
            DnsFailure { .. } => "dns_failure",
            DnsPolicy { .. } => "dns_policy",
            RbacDeniedInit { .. } => "rbac_denied_init",
            InitContainerHang { .. } => "init_container_hang",
            WrongCommand { .. } => "wrong_command",
            SidecarPortConflict { .. } => "sidecar_port_conflict",
            FeatureFlag { .. } => "feature_flag",
            DatabaseAuth { .. } => "database_auth",
            DatabaseLock { .. } => "database_lock",
            NetworkDelay { .. } => "network_delay",
            NetworkLoss { .. } => "network_loss",
            NodeCpuStress { .. } => "node_cpu_stress",
            KubeletDown { .. } => "kubelet_down",
            DiskReadErrors { .. } => "disk_read_errors",
            SyscallFailure { .. } => "syscall_failure",
            LoadSpike { .. } => "load_spike",
            RpcRetryConfig { .. } => "rpc_retry_config",
            GcPressure { .. } => "gc_pressure",
        }
    }

    /// The layer of the system the primitive acts on.
    pub fn layer(&self) -> Layer {
        use Primitive::*;
        match self {
            FeatureFlag { .. } | DatabaseAuth { .. } | DatabaseLock { .. } => Layer::Application,
            NetworkDelay { .. } | NetworkLoss { .. } => Layer::Network,
            NodeCpuStress { .. } | KubeletDown { .. } => Layer::Node,
            DiskReadErrors { .. } | SyscallFailure { .. } => Layer::Kernel,
            LoadSpike { .. } | RpcRetryConfig { .. } | GcPressure { .. } => Layer::Load,
            // Listed one by one (no `_`), so a new primitive does not compile until it is placed.
            ServiceTargetPort { .. }
            | ServicePort { .. }
            | ServiceSelector { .. }
            | ServiceSelectsOther { .. }
            | ServiceDelete { .. }
            | ContainerImage { .. }
            | EnvRemove { .. }
            | EnvSet { .. }
            | EnvAddressPort { .. }
            | ConfigMapKeyDrift { .. }
            | ConfigMapDelete { .. }
            | ReadinessProbe { .. }
            | LivenessProbe { .. }
            | MemoryLimit { .. }
            | CpuLimit { .. }
            | ResourceRequests { .. }
            | NodeSelector { .. }
            | NodeTaint { .. }
            | AntiAffinityDeadlock { .. }
            | Scale { .. }
            | PvcClaimMismatch { .. }
            | ResourceQuota { .. }
            | NetworkPolicyDeny { .. }
            | DnsFailure { .. }
            | DnsPolicy { .. }
            | RbacDeniedInit { .. }
            | InitContainerHang { .. }
            | WrongCommand { .. }
            | SidecarPortConflict { .. } => Layer::Kubernetes,
        }
    }

    /// What the primitive acts on, first the main target.
    pub fn targets(&self) -> Vec<Target<'_>> {
        use Primitive::*;
        use Target as T;
        match self {
            ServiceTargetPort { service, .. }
            | ServicePort { service, .. }
            | ServiceSelector { service, .. }
            | ServiceDelete { service }
            | ContainerImage { service, .. }
            | EnvRemove { service, .. }
            | EnvSet { service, .. }
            | EnvAddressPort { service, .. }
            | ReadinessProbe { service, .. }
            | LivenessProbe { service, .. }
            | MemoryLimit { service, .. }
            | CpuLimit { service, .. }
            | ResourceRequests { service, .. }
            | NodeSelector { service, .. }
            | AntiAffinityDeadlock { service, .. }
            | Scale { service, .. }
            | PvcClaimMismatch { service, .. }
            | NetworkPolicyDeny { service, .. }
            | DnsPolicy { service, .. }
            | InitContainerHang { service, .. }
            | WrongCommand { service, .. }
            | SidecarPortConflict { service, .. }
            | DatabaseLock { service, .. }
            | DiskReadErrors { service, .. }
            | SyscallFailure { service, .. } => vec![T::Service(service)],
            ServiceSelectsOther { service, other, .. } => {
                vec![T::Service(service), T::Service(other)]
            }
            RbacDeniedInit {
                service,
                config_map,
                ..
            } => vec![T::Service(service), T::ConfigMap(config_map)],
            ConfigMapKeyDrift { config_map, .. } | ConfigMapDelete { config_map } => {
                vec![T::ConfigMap(config_map)]
            }
            NodeTaint { nodes, evict, .. } => nodes
                .iter()
                .map(|n| T::Node(n))
                .chain(evict.iter().map(|s| T::Service(s)))
                .collect(),
            ResourceQuota { recreate, .. } => {
                let mut v = vec![T::Cluster];
                v.extend(recreate.iter().map(|s| T::Service(s)));
                v
            }
            DnsFailure { service } => match service {
                Some(s) => vec![T::Service(s)],
                None => vec![T::Cluster],
            },
            FeatureFlag { flag, .. } => vec![T::FeatureFlag(flag)],
            DatabaseAuth {
                service,
                restart_clients,
                ..
            } => std::iter::once(T::Service(service))
                .chain(restart_clients.iter().map(|s| T::Service(s)))
                .collect(),
            NetworkDelay { from, to, .. } | NetworkLoss { from, to, .. } => {
                vec![T::Service(from), T::Service(to)]
            }
            RpcRetryConfig {
                service,
                dependency,
                ..
            } => vec![T::Service(service), T::Service(dependency)],
            NodeCpuStress { node, .. } | KubeletDown { node } => vec![T::Node(node)],
            LoadSpike { .. } => vec![T::Cluster],
            GcPressure { services, .. } => services.iter().map(|s| T::Service(s)).collect(),
        }
    }

    /// The main target as `kind/name` (`deployment/geo`, `service/geo`, `node/worker-2`,
    /// `configmap/flagd-config`, ...), as recorded in the evaluator's injection record.
    pub fn target_ref(&self) -> String {
        use Primitive::*;
        match self {
            ServiceTargetPort { service, .. }
            | ServicePort { service, .. }
            | ServiceSelector { service, .. }
            | ServiceSelectsOther { service, .. }
            | ServiceDelete { service } => format!("service/{service}"),
            NetworkPolicyDeny { name, .. } => format!("networkpolicy/{name}"),
            ResourceQuota { name, .. } => format!("resourcequota/{name}"),
            ConfigMapKeyDrift { config_map, .. } | ConfigMapDelete { config_map } => {
                format!("configmap/{config_map}")
            }
            FeatureFlag { flag, .. } => format!("flag/{flag}"),
            DnsFailure { service: None } => "configmap/coredns".into(),
            LoadSpike { .. } => "workload/loadgen".into(),
            other => match other.targets().first() {
                Some(Target::Node(n)) => format!("node/{n}"),
                Some(Target::Service(s)) => format!("deployment/{s}"),
                Some(Target::ConfigMap(c)) => format!("configmap/{c}"),
                Some(Target::FeatureFlag(f)) => format!("flag/{f}"),
                Some(Target::Cluster) | None => "cluster".into(),
            },
        }
    }

    /// The parameters as a JSON map, without the `primitive` tag.
    pub fn params(&self) -> BTreeMap<String, serde_json::Value> {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => {
                map.into_iter().filter(|(k, _)| k != "primitive").collect()
            }
            _ => BTreeMap::new(),
        }
    }

    /// Names of objects the primitive creates or writes into the cluster (object names, label
    /// keys and values, image references, ...): what an agent will read, so none may reveal the
    /// problem.
    pub fn introduced_names(&self) -> Vec<&str> {
        use Primitive::*;
        match self {
            ServiceSelector { add, .. } => add.iter().flat_map(|(k, v)| [k.as_str(), v]).collect(),
            ServiceSelectsOther {
                label_key,
                label_value,
                ..
            } => vec![label_key, label_value],
            ContainerImage { image, .. } => vec![image],
            EnvSet { var, value, .. } => vec![var, value],
            ConfigMapKeyDrift { value, .. } => value.iter().map(String::as_str).collect(),
            NodeSelector { selector, .. } => {
                selector.iter().flat_map(|(k, v)| [k.as_str(), v]).collect()
            }
            NodeTaint { key, value, .. } => vec![key, value],
            PvcClaimMismatch { claim, .. } => vec![claim],
            ResourceQuota { name, .. } | NetworkPolicyDeny { name, .. } => vec![name],
            RbacDeniedInit {
                service_account, ..
            } => vec![service_account],
            InitContainerHang { waits_for, .. } => vec![waits_for],
            WrongCommand { command, .. } => command.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_serde_tags() {
        let p: Primitive = toml::from_str(
            "primitive = \"service_target_port\"\nservice = \"geo\"\ntarget_port = 9999\n",
        )
        .unwrap();
        assert_eq!(p.name(), "service_target_port");
        assert_eq!(p.layer(), Layer::Kubernetes);
        assert_eq!(p.target_ref(), "service/geo");
        assert_eq!(
            p.params().get("target_port"),
            Some(&serde_json::json!(9999))
        );
        assert!(!p.params().contains_key("primitive"));
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["primitive"], "service_target_port");
        assert!(PRIMITIVE_NAMES.contains(&p.name()));
    }

    #[test]
    fn unknown_fields_and_primitives_are_rejected() {
        let typo = toml::from_str::<Primitive>(
            "primitive = \"memory_limit\"\nservice = \"geo\"\nlimt = \"10Mi\"\n",
        );
        assert!(typo.is_err());
        let unknown = toml::from_str::<Primitive>("primitive = \"teleport\"\nservice = \"geo\"\n");
        assert!(unknown.unwrap_err().to_string().contains("teleport"));
    }
}
