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

mod config;
mod nodes;
mod pod_spec;
mod pods;
mod services;
mod workloads;

pub use config::*;
pub use nodes::*;
pub use pod_spec::*;
pub use pods::*;
pub use services::*;
pub use workloads::*;

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
