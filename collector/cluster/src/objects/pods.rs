//! Pods: spec, phase and conditions, and each container's status with the kubelet's private
//! bookkeeping (restarts, back-off, probes, resource use).

use super::*;

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
    /// A container that exited 0 on its own (an init container done, or one stopped for a new
    /// image).
    pub fn completed(started: i64, finished: i64, container_id: Option<&str>) -> Terminated {
        Terminated {
            reason: "Completed".into(),
            exit_code: 0,
            started,
            finished,
            container_id: container_id.unwrap_or_default().to_string(),
            message: None,
        }
    }

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
    /// One per `spec.ephemeralContainers`, in order.
    pub ephemeral_statuses: Vec<ContainerStatus>,
    /// Status reason/message set when the node evicts or the pod cannot run.
    pub reason: Option<String>,
    /// Next scheduling attempt for a pending pod.
    pub next_schedule: i64,
    pub schedule_backoff: i64,
    /// Which init container is running (index), `len` once all are done.
    pub init_done: usize,
}

/// One of a pod's running containers: an app container or an ephemeral one, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    App(usize),
    Ephemeral(usize),
}

impl Pod {
    /// The app or ephemeral container named `name`.
    pub fn slot(&self, name: &str) -> Option<Slot> {
        let app = self.spec.containers.iter().position(|c| c.name == name);
        app.map(Slot::App).or_else(|| {
            self.spec
                .ephemeral_containers
                .iter()
                .position(|c| c.name == name)
                .map(Slot::Ephemeral)
        })
    }

    pub fn container(&self, slot: Slot) -> Option<&Container> {
        match slot {
            Slot::App(i) => self.spec.containers.get(i),
            Slot::Ephemeral(i) => self.spec.ephemeral_containers.get(i),
        }
    }

    pub fn status(&self, slot: Slot) -> Option<&ContainerStatus> {
        match slot {
            Slot::App(i) => self.statuses.get(i),
            Slot::Ephemeral(i) => self.ephemeral_statuses.get(i),
        }
    }

    pub fn status_mut(&mut self, slot: Slot) -> Option<&mut ContainerStatus> {
        match slot {
            Slot::App(i) => self.statuses.get_mut(i),
            Slot::Ephemeral(i) => self.ephemeral_statuses.get_mut(i),
        }
    }

    /// The container whose processes a container sees: an ephemeral container started with
    /// `--target` shares that container's process namespace; any other sees its own.
    pub fn process_namespace(&self, slot: Slot) -> Slot {
        let target = self
            .container(slot)
            .and_then(|c| c.extra.get("targetContainerName"))
            .and_then(Value::as_str);
        match (slot, target) {
            (Slot::Ephemeral(_), Some(t)) => self
                .spec
                .containers
                .iter()
                .position(|x| x.name == t)
                .map_or(slot, Slot::App),
            _ => slot,
        }
    }

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
        for s in self
            .init_statuses
            .iter()
            .chain(&self.statuses)
            .chain(&self.ephemeral_statuses)
        {
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
            if !self.ephemeral_statuses.is_empty() {
                status.insert(
                    "ephemeralContainerStatuses".into(),
                    Value::Array(
                        self.ephemeral_statuses
                            .iter()
                            .map(|c| c.to_json())
                            .collect(),
                    ),
                );
            }
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
