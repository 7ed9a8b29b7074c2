//! ITBench's ground truth "v1" (`groundtruth_v1.yaml`, `ground_truths.json`), modelled as the real
//! files are written, and its conversion to and from faultline's [`GroundTruth`].
//!
//! Conversion keeps everything both formats can say. Normalisations, in the ITBench → faultline
//! direction: a fault's `changed` is accepted at the fault or inside its `entity` (both occur in real
//! files) and is written back at the fault; `recommendedActions` is read as `recommended_actions`; a
//! missing `condition` equals an empty one. Top-level keys faultline has no concept for (`id`,
//! `metadata`, `_dir_name`, ...) travel in [`GroundTruth::extensions`]. In the other direction,
//! faultline-only facts (fault layer and onset, target namespace and aliases, non-alert symptoms, the
//! prose description) have no ITBench field and are left out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ground_truth::{
    Change, Component, Fault, FaultTarget, GROUND_TRUTH_VERSION, GroundTruth, Propagation,
    Solution, Symptom, SymptomKind,
};

/// The body of an ITBench v1 ground truth (what sits under `spec:` in the wrapped form).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ItbenchGroundTruth {
    #[serde(default)]
    pub groups: Vec<ItbenchGroup>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<Vec<String>>,
    #[serde(default)]
    pub propagations: Vec<ItbenchPropagation>,
    #[serde(default)]
    pub alerts: Vec<ItbenchAlert>,
    #[serde(default)]
    pub fault: Vec<ItbenchFault>,
    #[serde(
        default,
        alias = "recommendedActions",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub recommended_actions: Vec<ItbenchSolutionItem>,
    /// Every other top-level key, kept as it was.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItbenchGroup {
    pub id: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filter: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_cause: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItbenchPropagation {
    pub source: String,
    pub target: String,
    #[serde(default)]
    pub condition: String,
    #[serde(default)]
    pub effect: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItbenchAlert {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItbenchFault {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    pub entity: ItbenchFaultEntity,
    #[serde(default)]
    pub fault_mechanism: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<ItbenchChange>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItbenchFaultEntity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<ItbenchChange>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItbenchChange {
    pub element: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItbenchSolutionItem {
    pub solution: ItbenchSolution,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItbenchSolution {
    pub id: String,
    #[serde(default)]
    pub actions: Vec<String>,
}

/// Either form of an ITBench ground-truth document: wrapped as a Kubernetes-style resource
/// (`apiVersion: itbench.io/v1`, `kind: GroundTruth`, `metadata.name`, `spec`) or bare.
#[derive(Debug, Clone, PartialEq)]
pub struct ItbenchDocument {
    /// `metadata.name` of the wrapped form.
    pub name: Option<String>,
    pub wrapped: bool,
    pub body: ItbenchGroundTruth,
}

impl ItbenchDocument {
    /// Reads a parsed YAML or JSON value in either form.
    pub fn from_value(value: Value) -> Result<Self, String> {
        let is_wrapped = value
            .get("spec")
            .is_some_and(|s| s.is_object() && value.get("groups").is_none());
        if is_wrapped {
            let name = value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string);
            let spec = value.get("spec").cloned().unwrap_or(Value::Null);
            let body = serde_json::from_value(spec).map_err(|e| format!("spec: {e}"))?;
            Ok(Self {
                name,
                wrapped: true,
                body,
            })
        } else {
            let body = serde_json::from_value(value).map_err(|e| e.to_string())?;
            Ok(Self {
                name: None,
                wrapped: false,
                body,
            })
        }
    }

    /// The document as a value, in the form it was read.
    pub fn to_value(&self) -> Value {
        let body = serde_json::to_value(&self.body).expect("ground truth serialises");
        if self.wrapped {
            serde_json::json!({
                "apiVersion": "itbench.io/v1",
                "kind": "GroundTruth",
                "metadata": {"name": self.name},
                "spec": body,
            })
        } else {
            body
        }
    }
}

impl From<&ItbenchGroundTruth> for GroundTruth {
    fn from(it: &ItbenchGroundTruth) -> Self {
        let components = it
            .groups
            .iter()
            .map(|g| Component {
                id: g.id.clone(),
                kind: g.kind.clone(),
                namespace: g.namespace.clone(),
                name: g.name.clone(),
                filter: g.filter.clone(),
                root_cause: g.root_cause,
            })
            .collect();
        let faults = it
            .fault
            .iter()
            .map(|f| Fault {
                target: FaultTarget {
                    component: f.entity.group_id.clone(),
                    kind: f.entity.kind.clone(),
                    namespace: None,
                    name: f.entity.name.clone(),
                    aliases: Vec::new(),
                },
                layer: None,
                category: f.category.clone(),
                mechanism: f.fault_mechanism.clone(),
                condition: f.condition.clone().unwrap_or_default(),
                change: f
                    .changed
                    .as_ref()
                    .or(f.entity.changed.as_ref())
                    .map(|c| Change {
                        field: c.element.clone(),
                        from: c.from.clone(),
                        to: c.to.clone(),
                    }),
                onset: None,
            })
            .collect();
        let symptoms = it
            .alerts
            .iter()
            .map(|a| {
                let mut metadata = a.metadata.clone();
                let description = match metadata.remove("description") {
                    Some(Value::String(s)) => s,
                    Some(other) => {
                        metadata.insert("description".into(), other);
                        String::new()
                    }
                    None => String::new(),
                };
                Symptom {
                    kind: SymptomKind::Alert,
                    name: Some(a.id.clone()),
                    component: a.group_id.clone(),
                    description,
                    metadata,
                }
            })
            .collect();
        GroundTruth {
            schema_version: GROUND_TRUTH_VERSION,
            description: String::new(),
            components,
            aliases: it.aliases.clone(),
            faults,
            propagations: it
                .propagations
                .iter()
                .map(|p| Propagation {
                    source: p.source.clone(),
                    target: p.target.clone(),
                    condition: p.condition.clone(),
                    effect: p.effect.clone(),
                })
                .collect(),
            symptoms,
            recommended_actions: it
                .recommended_actions
                .iter()
                .map(|s| Solution {
                    id: s.solution.id.clone(),
                    actions: s.solution.actions.clone(),
                })
                .collect(),
            extensions: it.extra.clone(),
        }
    }
}

impl From<&GroundTruth> for ItbenchGroundTruth {
    fn from(gt: &GroundTruth) -> Self {
        ItbenchGroundTruth {
            groups: gt
                .components
                .iter()
                .map(|c| ItbenchGroup {
                    id: c.id.clone(),
                    kind: c.kind.clone(),
                    namespace: c.namespace.clone(),
                    name: c.name.clone(),
                    filter: c.filter.clone(),
                    root_cause: c.root_cause,
                })
                .collect(),
            aliases: gt.aliases.clone(),
            propagations: gt
                .propagations
                .iter()
                .map(|p| ItbenchPropagation {
                    source: p.source.clone(),
                    target: p.target.clone(),
                    condition: p.condition.clone(),
                    effect: p.effect.clone(),
                })
                .collect(),
            alerts: gt
                .symptoms
                .iter()
                .filter(|s| s.kind == SymptomKind::Alert)
                .map(|s| {
                    let mut metadata = s.metadata.clone();
                    if !s.description.is_empty() {
                        metadata.insert("description".into(), Value::String(s.description.clone()));
                    }
                    ItbenchAlert {
                        id: s.name.clone().unwrap_or_default(),
                        group_id: s.component.clone(),
                        metadata,
                    }
                })
                .collect(),
            fault: gt
                .faults
                .iter()
                .map(|f| ItbenchFault {
                    category: f.category.clone(),
                    condition: (!f.condition.is_empty()).then(|| f.condition.clone()),
                    entity: ItbenchFaultEntity {
                        group_id: f.target.component.clone(),
                        kind: f.target.kind.clone(),
                        name: f.target.name.clone(),
                        changed: None,
                    },
                    fault_mechanism: f.mechanism.clone(),
                    changed: f.change.as_ref().map(|c| ItbenchChange {
                        element: c.field.clone(),
                        from: c.from.clone(),
                        to: c.to.clone(),
                    }),
                })
                .collect(),
            recommended_actions: gt
                .recommended_actions
                .iter()
                .map(|s| ItbenchSolutionItem {
                    solution: ItbenchSolution {
                        id: s.id.clone(),
                        actions: s.actions.clone(),
                    },
                })
                .collect(),
            extra: gt.extensions.clone(),
        }
    }
}

/// Moves what ITBench may write in two places into the one place faultline writes it, so two
/// documents that say the same thing compare equal.
pub fn normalise(it: &ItbenchGroundTruth) -> ItbenchGroundTruth {
    ItbenchGroundTruth::from(&GroundTruth::from(it))
}
