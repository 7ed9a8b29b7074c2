//! The structured ground truth kept beside a dataset (never inside it), and the evaluator-side record
//! of how the dataset was made. Both are for judges and evaluators only.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::manifest::Generator;

/// Version of the ground-truth document format.
pub const GROUND_TRUTH_VERSION: u32 = 1;

/// What went wrong, where, and how it spread.
///
/// Components are the entities an agent may name (ITBench calls them groups); faults point at the
/// root-cause components; propagations are edges between component ids, ordered from the root cause
/// outward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GroundTruth {
    pub schema_version: u32,
    /// Prose description of the incident, for LLM judges and people.
    #[serde(default)]
    pub description: String,
    pub components: Vec<Component>,
    /// Sets of component ids that denote the same thing (a Service and its Pods, say): naming any
    /// member of a set counts as naming each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<Vec<String>>,
    pub faults: Vec<Fault>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub propagations: Vec<Propagation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub symptoms: Vec<Symptom>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommended_actions: Vec<Solution>,
    /// Fields from other formats that have no faultline equivalent, kept so conversions lose nothing.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extensions: BTreeMap<String, serde_json::Value>,
}

/// An entity of the system involved in the incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Component {
    /// Id local to this ground truth, referenced by faults, propagations and aliases.
    pub id: String,
    /// Kubernetes kind (`Service`, `Deployment`, `Pod`, `ConfigMap`, `Node`, ...).
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Exact object name, when one object is meant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Regular expressions matched against object names, when a family of objects is meant (e.g.
    /// `frontend-.*` for a Deployment's Pods).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filter: Vec<String>,
    /// Whether this component is a root cause.
    #[serde(default)]
    pub root_cause: bool,
}

/// The layer of the system a fault acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    Kubernetes,
    Application,
    Network,
    Node,
    Kernel,
    Load,
}

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    pub target: FaultTarget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<Layer>,
    /// Coarse class, in ITBench's vocabulary (`Change`, `Configuration Setting`, `Resource
    /// Unavailable`, `Resource Saturation`, `Latency`, `Other`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// How the fault works, e.g. `service target port mismatch`.
    pub mechanism: String,
    /// The condition it creates, in words.
    #[serde(default)]
    pub condition: String,
    /// The field that was changed, when the fault is a change to an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
    /// When the fault took effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onset: Option<DateTime<Utc>>,
}

/// The object a fault was applied to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultTarget {
    /// The component id this target belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// Other names an agent may reasonably use for the same target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

/// A changed field: a JSON path-like element and its values before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub field: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
}

/// A causal edge: the condition at `source` produced the effect at `target`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Propagation {
    pub source: String,
    pub target: String,
    #[serde(default)]
    pub condition: String,
    #[serde(default)]
    pub effect: String,
}

/// What kind of signal shows a symptom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SymptomKind {
    Alert,
    Metric,
    Log,
    Trace,
    Event,
    Status,
}

/// An expected observable consequence of the fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Symptom {
    pub kind: SymptomKind,
    /// Alert name, metric name, event reason, ... depending on `kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The component id where it shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    #[serde(default)]
    pub description: String,
    /// Extra attributes from other formats (e.g. an ITBench alert's metadata beyond its description).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, serde_json::Value>,
}

/// A way to mitigate the incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Solution {
    pub id: String,
    #[serde(default)]
    pub actions: Vec<String>,
}

impl GroundTruth {
    /// Component ids that are root causes.
    pub fn root_cause_ids(&self) -> impl Iterator<Item = &str> {
        self.components
            .iter()
            .filter(|c| c.root_cause)
            .map(|c| c.id.as_str())
    }

    pub fn component(&self, id: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.id == id)
    }

    /// Checks the version and the internal references: every id named by a fault, propagation, alias set or
    /// symptom is a component; component ids are unique; at least one root cause.
    pub fn check(&self) -> Result<(), String> {
        if self.schema_version != GROUND_TRUTH_VERSION {
            return Err(format!(
                "schema_version: this faultline reads version {GROUND_TRUTH_VERSION}, the ground \
                 truth is version {}",
                self.schema_version
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &self.components {
            if !seen.insert(c.id.as_str()) {
                return Err(format!("components: id `{}` appears twice", c.id));
            }
        }
        let known = |id: &str, at: String| -> Result<(), String> {
            if seen.contains(id) {
                Ok(())
            } else {
                Err(format!("{at}: `{id}` is not a component id"))
            }
        };
        for (i, f) in self.faults.iter().enumerate() {
            if let Some(c) = &f.target.component {
                known(c, format!("faults[{i}].target.component"))?;
            }
        }
        for (i, p) in self.propagations.iter().enumerate() {
            known(&p.source, format!("propagations[{i}].source"))?;
            known(&p.target, format!("propagations[{i}].target"))?;
        }
        for (i, set) in self.aliases.iter().enumerate() {
            for id in set {
                known(id, format!("aliases[{i}]"))?;
            }
        }
        for (i, s) in self.symptoms.iter().enumerate() {
            if let Some(c) = &s.component {
                known(c, format!("symptoms[{i}].component"))?;
            }
        }
        if self.root_cause_ids().next().is_none() {
            return Err("components: none is marked root_cause".into());
        }
        Ok(())
    }
}

/// How a dataset was made: what only an evaluator may see. Written beside the dataset as
/// `evaluation.json`, with the ground truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluatorRecord {
    pub schema_version: u32,
    /// The dataset this record describes (its manifest's `dataset_id`).
    pub dataset_id: String,
    pub problem_id: String,
    pub application: String,
    pub seed: u64,
    pub generator: Generator,
    /// The faults as injected: primitive, target and parameters, with their onset.
    pub injections: Vec<Injection>,
    /// Transient disturbances added on purpose, which are not the answer.
    #[serde(default)]
    pub noise: Vec<NoiseEvent>,
    /// Did the dataset capture what the problem says must be visible?
    #[serde(default)]
    pub capture_quality: Vec<VisibilityCheck>,
}

/// One fault as the runner injected it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Injection {
    pub primitive: String,
    pub target: String,
    #[serde(default)]
    pub params: BTreeMap<String, serde_json::Value>,
    pub onset: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted: Option<DateTime<Utc>>,
    /// A decoy is a harmless look-alike change, not a cause.
    #[serde(default)]
    pub decoy: bool,
}

/// One transient disturbance of the noise schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoiseEvent {
    pub kind: String,
    pub target: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// The outcome of one visibility expectation evaluated over the dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VisibilityCheck {
    pub expectation: String,
    pub passed: bool,
    /// What was found, in words (e.g. `restarts=4`).
    pub observed: String,
}
