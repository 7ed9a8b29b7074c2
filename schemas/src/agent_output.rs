//! What an agent hands in as its diagnosis: free text, optionally with structured entities and
//! propagations in ITBench's `agent_output.json` shape.
//!
//! Both generations of ITBench output read into these types: the current one names entities
//! `namespace/Kind/name` and has propagations refer to those names; the older one gives each entity a
//! hex `id` and a free-form `name` (`"flagd-config ConfigMap"`) and has propagations refer to the ids,
//! with `source_name`/`target_name` beside them. Fields this type does not model are kept in `extra`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An agent's diagnosis of one incident.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct AgentOutput {
    /// The diagnosis in the agent's own words (a SREGym submission, or a summary beside ITBench
    /// entities). Empty when the agent only gave structured entities.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub diagnosis: String,
    /// Entities the agent names, ordered primary causes first: the order is scored (entity@k).
    #[serde(default)]
    pub entities: Vec<AgentEntity>,
    /// Causal edges the agent claims, from the root cause outward.
    #[serde(default)]
    pub propagations: Vec<AgentPropagation>,
    /// Which alerts the agent explained (requested by ITBench's prompt, not scored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts_explained: Vec<AlertExplained>,
    /// Any other top-level key (`incident_summary`, ...), kept as it was.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// One entity the agent names.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct AgentEntity {
    /// Identifier local to this output (older ITBench outputs), referenced by propagations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `namespace/Kind/name`, or in older outputs a free form such as `cart Service`.
    pub name: String,
    /// True for an irreducible, independent cause; false for propagators and victims.
    #[serde(default)]
    pub contributing_factor: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub evidence: String,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// A causal edge between two entities, named as in `entities` (by name or by id).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct AgentPropagation {
    pub source: String,
    pub target: String,
    #[serde(default)]
    pub condition: String,
    #[serde(default)]
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_name: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// An alert and whether the agent's diagnosis explains it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct AlertExplained {
    pub alert: String,
    #[serde(default)]
    pub explanation: String,
    #[serde(default)]
    pub explained: bool,
}

impl AgentOutput {
    /// A free-text diagnosis with no structure.
    pub fn from_text(text: impl Into<String>) -> Self {
        Self {
            diagnosis: text.into(),
            ..Self::default()
        }
    }

    /// True when the agent said nothing at all.
    pub fn is_empty(&self) -> bool {
        self.diagnosis.trim().is_empty() && self.entities.is_empty() && self.propagations.is_empty()
    }

    /// Entities marked as root causes, in the agent's order.
    pub fn root_causes(&self) -> impl Iterator<Item = &AgentEntity> {
        self.entities.iter().filter(|e| e.contributing_factor)
    }
}
