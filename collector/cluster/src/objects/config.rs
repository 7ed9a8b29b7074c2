//! Configuration, storage and policy: ConfigMaps, Secrets, PersistentVolumeClaims,
//! ResourceQuotas, NetworkPolicies, and the kinds only stored and rendered (namespaces, service
//! accounts, roles, role bindings).

use super::*;

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

// HorizontalPodAutoscalers are stored and served as written (`kubectl autoscale`); the model
// has no metrics pipeline to act on them, like a cluster without metrics-server.
simple_objects!(
    Namespace,
    ServiceAccount,
    Role,
    RoleBinding,
    HorizontalPodAutoscaler
);

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
