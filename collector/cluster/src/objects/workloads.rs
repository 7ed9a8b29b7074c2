//! Workloads: Deployments (with their rollout strategy), StatefulSets and ReplicaSets, and the
//! replica counts their controllers report.

use super::*;

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
