//! Conditions below the Kubernetes API that faults and noise change: node CPU stress and kubelet
//! health, disk and syscall errors inside a process, database authorisation, network impairment
//! between services, and the load generator's rate. Everything an agent could read through the API
//! lives in the objects instead (env vars, ConfigMaps, probes, ...), and the model reads it there.

use std::collections::BTreeMap;

use problems::primitive::ImageEffect;

/// Hidden runtime state. Equality is exact so fault revert can be checked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Runtime {
    /// Multiplier on the load generator's rate (1 = baseline).
    pub load_multiplier: f64,
    pub nodes: BTreeMap<String, NodeRuntime>,
    pub services: BTreeMap<String, ServiceRuntime>,
    /// Impairment on calls from one service to another (`*` as caller matches every caller).
    pub links: BTreeMap<(String, String), Link>,
    /// Fraction of requests the load generator's connections drop (noise).
    pub entry_drop: f64,
    /// Images the registry holds besides the app's own, with what they do.
    pub images: BTreeMap<String, ImageEffect>,
    /// When each database's authentication last changed (clients started later see it at login).
    pub auth_changed_at: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeRuntime {
    /// CPU a stressor burns on the node, in millicores.
    pub cpu_stress_milli: i64,
    /// The kubelet process is stopped.
    pub kubelet_down: bool,
}

/// Whether a database accepts its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DbAuth {
    #[default]
    Ok,
    /// The user exists but lost its roles: queries fail with "not authorized".
    RolesRevoked,
    /// The user was dropped: authentication fails.
    UserRemoved,
    /// The server now requires TLS: plain connections are reset.
    TlsRequired,
    /// The password was changed at runtime (not in the server's configuration).
    PasswordChanged,
}

impl DbAuth {
    /// Whether the change is stored in the database's data, so that it survives a restart of
    /// the server (a dropped user or revoked roles do; a password or TLS mode set at runtime
    /// does not).
    pub fn persists(self) -> bool {
        matches!(self, DbAuth::RolesRevoked | DbAuth::UserRemoved)
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServiceRuntime {
    pub db_auth: DbAuth,
    /// A syscall that fails with a ratio (name, ratio), e.g. `read` with EIO.
    pub syscall_failure: Option<(String, f64)>,
    /// Extra CPU burnt by the process (a noise burst), in millicores.
    pub extra_cpu_milli: i64,
    /// Fraction of the process's storage reads that fail with EIO.
    pub disk_read_errors: f64,
    /// A table held under an exclusive lock: queries touching the store block.
    pub locked_table: Option<String>,
    /// When the conditions held by the service's processes began (the lock's session, leaked
    /// descriptors, a setting changed at runtime): they end once every process of the service
    /// has started after it.
    pub process_since: Option<i64>,
    /// Nodes whose disks fail the reads (the nodes the service ran on when they began to fail).
    pub disk_nodes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Link {
    pub delay_ms: f64,
    pub loss: f64,
    /// When the impairment was set up in the network namespaces of the pods it lives in (the
    /// caller's, or the callee's when every caller is impaired): pods created later are clean.
    pub since: i64,
}

impl Runtime {
    pub fn new() -> Runtime {
        Runtime {
            load_multiplier: 1.0,
            ..Runtime::default()
        }
    }

    pub fn node(&self, name: &str) -> NodeRuntime {
        self.nodes.get(name).cloned().unwrap_or_default()
    }

    pub fn service(&self, name: &str) -> ServiceRuntime {
        self.services.get(name).cloned().unwrap_or_default()
    }

    /// The impairment on calls from `caller` to `callee`, combining exact and wildcard entries.
    pub fn link(&self, caller: &str, callee: &str) -> Link {
        let mut l = Link::default();
        for k in [
            (caller.to_string(), callee.to_string()),
            ("*".to_string(), callee.to_string()),
        ] {
            if let Some(x) = self.links.get(&k) {
                l.delay_ms += x.delay_ms;
                l.loss = 1.0 - (1.0 - l.loss) * (1.0 - x.loss);
            }
        }
        l
    }
}
