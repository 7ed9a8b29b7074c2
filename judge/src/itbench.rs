//! ITBench's diagnosis metrics, computed in code: root-cause entity precision/recall/F1 and @k,
//! propagation chain (components + longest common subsequence), fault localization, and proximity
//! with and without false positives. Only the two reasoning metrics need semantic judgement; for them
//! this module writes yes/no checklist questions and turns the judge's answers into ITBench's
//! 0 / 0.5 / 1 scores.
//!
//! Where faultline deliberately differs from ITBench-Evaluations (whose judge LLM does all of this):
//! - matching is by rule: same kind, same namespace when both are given, name equal to the group's
//!   `name` or fully matching one of its `filter` regexes; a prediction whose candidates include
//!   several groups prefers its own application service's group;
//! - recall, including recall@k, counts each ground-truth alias class once (ITBench's @k recall can
//!   exceed 1);
//! - semantic components group an application service's Service/Deployment/ReplicaSet/Pod/
//!   ServiceOperation by name (Pod and ReplicaSet hash suffixes removed); every other object is its
//!   own component;
//! - paths are walked edge by edge (see [`walk`]) rather than by listing every edge's two ends,
//!   so a repeated edge does not repeat a segment; a ground truth without propagations has the
//!   root-cause components as its path;
//! - the fault-localization P1 rule looks for component names as whole words in the effect text.

use std::collections::BTreeSet;

use schemas::AgentOutput;
use schemas::GroundTruth;
use schemas::verdict::{Answer, YesNo};
use serde_json::{Value, json};

use crate::entities::{EntityRef, GtIndex, display};

/// Words that mark a propagation effect as a performance failure (ITBench's list).
const FAILURE_WORDS: [&str; 9] = [
    "error",
    "high cpu",
    "latency",
    "saturation",
    "failure",
    "threshold",
    "unavailable",
    "imagepullbackoff",
    "crashloopbackoff",
];

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Prf {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

impl Prf {
    pub fn new(precision: f64, recall: f64) -> Self {
        let f1 = if precision + recall > 0.0 {
            2.0 * precision * recall / (precision + recall)
        } else {
            0.0
        };
        Self {
            precision,
            recall,
            f1,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub entity: String,
    pub matches_gt: bool,
    pub matched_to: Option<String>,
    pub component: String,
    /// Agent's reasoning for this entity (own text plus the conditions of edges leaving it).
    pub reasoning: String,
}

/// A yes/no question the judge must answer for a reasoning metric.
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticQuestion {
    pub id: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
struct ReasoningTarget {
    prediction: usize,
    /// 0 for a correctly identified root cause; otherwise hops from the root cause on the path.
    hop_away: usize,
    same_id: String,
    detail_id: String,
}

/// Everything computed without the LLM, plus the questions the LLM must answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub gt_entities: Vec<String>,
    pub predictions: Vec<Prediction>,
    pub entity: Prf,
    /// @1..@5.
    pub entity_at: [Prf; 5],
    pub gt_path: Vec<String>,
    pub model_path: Vec<String>,
    pub lcs: Vec<String>,
    pub chain: Prf,
    pub fault_localization: f64,
    pub fl_details: Value,
    pub proximity_no_fp: Prf,
    pub proximity_with_fp: Prf,
    pub questions: Vec<SemanticQuestion>,
    targets: Vec<ReasoningTarget>,
}

/// The reasoning scores once the judge has answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ReasoningScores {
    pub root_cause_reasoning: f64,
    pub root_cause_reasoning_partial: f64,
    pub details: Vec<Value>,
}

/// The contracted path of a propagation list: edges mapped to components, self-edges (contracted
/// away) and repeated edges dropped, then walked in order: each edge adds its target, preceded by
/// its source when the walk is not already there. When every edge contracts away (a Pod → its
/// Service only), the path is that one component.
fn walk(edges: impl IntoIterator<Item = (String, String)>) -> Vec<String> {
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let mut contracted: Option<String> = None;
    for (a, b) in edges {
        if a == b {
            contracted.get_or_insert(a);
            continue;
        }
        if seen.contains(&(a.clone(), b.clone())) {
            continue;
        }
        seen.push((a.clone(), b.clone()));
        if path.last() != Some(&a) {
            path.push(a);
        }
        path.push(b);
    }
    if path.is_empty() {
        path.extend(contracted);
    }
    path
}

/// Longest common subsequence (classic dynamic programme), returning the subsequence itself.
pub fn lcs(a: &[String], b: &[String]) -> Vec<String> {
    let mut t = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            t[i][j] = if a[i] == b[j] {
                t[i + 1][j + 1] + 1
            } else {
                t[i + 1][j].max(t[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            out.push(a[i].clone());
            i += 1;
            j += 1;
        } else if t[i + 1][j] >= t[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

fn ratio(num: usize, den: usize) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Does `name` occur in `text` as a whole word (hyphens and underscores count as word characters)?
fn names(text: &str, name: &str) -> Option<usize> {
    if name.is_empty() {
        return None;
    }
    let text = text.to_ascii_lowercase();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut from = 0;
    while let Some(i) = text[from..].find(name) {
        let start = from + i;
        let end = start + name.len();
        let before_ok = text[..start].chars().next_back().is_none_or(|c| !word(c));
        let after_ok = text[end..].chars().next().is_none_or(|c| !word(c));
        if before_ok && after_ok {
            return Some(start);
        }
        from = start + 1;
    }
    None
}

/// Resolves a propagation endpoint to an entity name: an entity id, else the given name, else the
/// string itself.
fn endpoint(out: &AgentOutput, raw: &str, name: Option<&str>) -> String {
    out.entities
        .iter()
        .find(|e| e.id.as_deref() == Some(raw))
        .map(|e| e.name.clone())
        .or_else(|| name.map(str::to_string))
        .unwrap_or_else(|| raw.to_string())
}

fn agent_reasoning(out: &AgentOutput, index: usize) -> String {
    let e = &out.entities[index];
    let mut parts: Vec<String> = Vec::new();
    for s in [&e.reasoning, &e.evidence] {
        if !s.trim().is_empty() {
            parts.push(s.trim().to_string());
        }
    }
    if let Some(Value::String(d)) = e.extra.get("description") {
        parts.push(d.clone());
    }
    // Older outputs put the why in `incident_summary.contributing_factors[].description`.
    if let Some(id) = &e.id
        && let Some(Value::Array(cf)) = out
            .extra
            .get("incident_summary")
            .and_then(|s| s.get("contributing_factors"))
    {
        for f in cf {
            if f.get("id").and_then(Value::as_str) == Some(id.as_str())
                && let Some(d) = f.get("description").and_then(Value::as_str)
            {
                parts.push(d.to_string());
            }
        }
    }
    for p in &out.propagations {
        let src = endpoint(out, &p.source, p.source_name.as_deref());
        if src == e.name && !p.condition.trim().is_empty() {
            parts.push(p.condition.trim().to_string());
        }
    }
    parts.dedup();
    parts.join(" ")
}

/// The ground-truth condition at a component: fault conditions of its groups and the conditions of
/// propagations leaving it (or, when none leaves it, the effects arriving at it).
fn gt_condition(gt: &GroundTruth, idx: &GtIndex, component: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for f in &gt.faults {
        let at = match f
            .target
            .component
            .as_deref()
            .and_then(|c| idx.component_of_group(c))
        {
            Some(c) => c == component,
            None => {
                let target = EntityRef {
                    namespace: f.target.namespace.clone(),
                    kind: Some(f.target.kind.clone()),
                    name: f.target.name.clone(),
                };
                idx.component_of(&target) == component
            }
        };
        if at && !f.condition.is_empty() {
            parts.push(f.condition.clone());
        }
    }
    let leaving: Vec<String> = gt
        .propagations
        .iter()
        .filter(|p| idx.component_of_group(&p.source) == Some(component))
        .map(|p| p.condition.clone())
        .filter(|c| !c.is_empty())
        .collect();
    if leaving.is_empty() {
        parts.extend(
            gt.propagations
                .iter()
                .filter(|p| idx.component_of_group(&p.target) == Some(component))
                .map(|p| p.effect.clone())
                .filter(|c| !c.is_empty()),
        );
    } else {
        parts.extend(leaving);
    }
    parts.dedup();
    parts.join("; ")
}

/// Hops between two components along a path (0 for the same component; None when either is off it).
fn hop(path: &[String], a: &str, b: &str) -> Option<usize> {
    if a == b {
        return Some(0);
    }
    let pa: Vec<usize> = path
        .iter()
        .enumerate()
        .filter(|(_, c)| *c == a)
        .map(|(i, _)| i)
        .collect();
    let pb: Vec<usize> = path
        .iter()
        .enumerate()
        .filter(|(_, c)| *c == b)
        .map(|(i, _)| i)
        .collect();
    pa.iter()
        .flat_map(|i| pb.iter().map(move |j| i.abs_diff(*j)))
        .min()
}

fn proximity(
    gt_rc: &[String],
    pf: &[String],
    path: &[String],
    decay: impl Fn(usize) -> f64,
) -> Prf {
    let best = |a: &str, others: &[String]| {
        others
            .iter()
            .filter_map(|o| hop(path, a, o))
            .map(&decay)
            .fold(0.0, f64::max)
    };
    let p: Vec<f64> = pf.iter().map(|j| best(j, gt_rc)).collect();
    let r: Vec<f64> = gt_rc.iter().map(|i| best(i, pf)).collect();
    Prf::new(mean(&p), mean(&r))
}

impl Evaluation {
    pub fn new(gt: &GroundTruth, out: &AgentOutput) -> Self {
        Self::with_index(gt, &GtIndex::new(gt), out)
    }

    /// As [`Evaluation::new`] with the ground truth already indexed (its filters compiled), for
    /// judging many outputs against one ground truth.
    pub fn with_index(gt: &GroundTruth, idx: &GtIndex, out: &AgentOutput) -> Self {
        let gt_entities: Vec<String> = gt.root_cause_ids().map(str::to_string).collect();

        // Root-cause entities.
        let mut claimed: BTreeSet<usize> = BTreeSet::new();
        let mut claims_in_order: Vec<Option<usize>> = Vec::new();
        let mut predictions = Vec::new();
        for (i, e) in out
            .entities
            .iter()
            .enumerate()
            .filter(|(_, e)| e.contributing_factor)
        {
            let r = EntityRef::parse(&e.name);
            let cands = idx.matches(&r);
            let rc: Vec<_> = cands
                .iter()
                .filter(|g| idx.in_root_cause_class(g))
                .collect();
            let chosen = rc
                .iter()
                .find(|g| !claimed.contains(&g.class))
                .or(rc.first());
            let (matches_gt, matched_to, class, component) = match chosen {
                Some(g) => (true, Some(g.id.clone()), Some(g.class), g.component.clone()),
                None => (
                    false,
                    cands.first().map(|g| g.id.clone()),
                    None,
                    idx.component_of(&r),
                ),
            };
            if let Some(c) = class {
                claimed.insert(c);
            }
            claims_in_order.push(class);
            predictions.push(Prediction {
                entity: e.name.clone(),
                matches_gt,
                matched_to,
                component,
                reasoning: agent_reasoning(out, i),
            });
        }
        let n = idx.root_cause_classes;
        let at = |k: usize| {
            let top = &predictions[..k.min(predictions.len())];
            let tp = top.iter().filter(|p| p.matches_gt).count();
            let classes: BTreeSet<usize> = claims_in_order[..top.len()]
                .iter()
                .flatten()
                .copied()
                .collect();
            Prf::new(ratio(tp, top.len()), ratio(classes.len(), n))
        };
        let entity = at(predictions.len());
        let entity_at = [at(1), at(2), at(3), at(4), at(5)];

        // Propagation chain.
        let gt_path = if gt.propagations.is_empty() {
            idx.root_cause_components()
        } else {
            walk(gt.propagations.iter().map(|p| {
                (
                    idx.component_of_id(&p.source),
                    idx.component_of_id(&p.target),
                )
            }))
        };
        let model_path = walk(out.propagations.iter().map(|p| {
            let c = |raw: &str, name: Option<&str>| {
                idx.component_of(&EntityRef::parse(&endpoint(out, raw, name)))
            };
            (
                c(&p.source, p.source_name.as_deref()),
                c(&p.target, p.target_name.as_deref()),
            )
        }));
        let common = lcs(&model_path, &gt_path);
        let chain = Prf::new(
            ratio(common.len(), model_path.len()),
            ratio(common.len(), gt_path.len()),
        );

        // Fault localization.
        let (fl_component, fl_details) = first_impacted(gt, idx, &gt_path);
        let found = fl_component
            .as_ref()
            .is_some_and(|c| model_path.contains(c));
        let mut fl_details = fl_details;
        fl_details["found_in_model_path"] = json!(found);

        // Proximity.
        let gt_rc = idx.root_cause_components();
        let mut pf: Vec<String> = Vec::new();
        for p in &predictions {
            if !pf.contains(&p.component) {
                pf.push(p.component.clone());
            }
        }
        let l = gt_path.len();
        let proximity_no_fp = proximity(&gt_rc, &pf, &gt_path, |h| 1.0 / (1.0 + h as f64));
        let proximity_with_fp = proximity(&gt_rc, &pf, &gt_path, |h| {
            if l == 0 {
                1.0 / (1.0 + h as f64)
            } else {
                1.0 / (1.0 + h as f64 / l as f64)
            }
        });

        // Reasoning questions: only for entities that carry reasoning.
        let mut questions = Vec::new();
        let mut targets = Vec::new();
        for (k, p) in predictions.iter().enumerate() {
            let (hop_away, reference, what) = if p.matches_gt {
                let comp = p
                    .matched_to
                    .as_deref()
                    .and_then(|g| idx.component_of_group(g))
                    .unwrap_or(&p.component)
                    .to_string();
                (0, gt_condition(gt, idx, &comp), "root cause")
            } else {
                let h = gt_rc
                    .iter()
                    .filter_map(|rc| hop(&gt_path, rc, &p.component))
                    .min();
                match h {
                    Some(h) if h > 0 && gt_path.contains(&p.component) => {
                        (h, gt_condition(gt, idx, &p.component), "symptom")
                    }
                    _ => continue,
                }
            };
            if p.reasoning.trim().is_empty() || reference.trim().is_empty() {
                continue;
            }
            let prefix = if hop_away == 0 { "RC" } else { "SY" };
            let same_id = format!("{prefix}{}-SAME", k + 1);
            let detail_id = format!("{prefix}{}-DETAIL", k + 1);
            questions.push(SemanticQuestion {
                id: same_id.clone(),
                text: format!(
                    "The agent says about `{}`: «{}». The ground truth's {what} condition there is: «{}». Does the agent's reasoning describe the same resource and the same change or failure?",
                    p.entity, p.reasoning, reference
                ),
            });
            questions.push(SemanticQuestion {
                id: detail_id.clone(),
                text: format!(
                    "For `{}` (same texts as {same_id}): does the agent's reasoning also give the key detail of the ground truth's condition (the specific flag, field, value, parameter or operation), with nothing essential missing?",
                    p.entity
                ),
            });
            targets.push(ReasoningTarget {
                prediction: k,
                hop_away,
                same_id,
                detail_id,
            });
        }
        Self {
            gt_entities,
            predictions,
            entity,
            entity_at,
            gt_path,
            model_path,
            lcs: common,
            chain,
            fault_localization: if found { 1.0 } else { 0.0 },
            fl_details,
            proximity_no_fp,
            proximity_with_fp,
            questions,
            targets,
        }
    }

    /// ITBench's 0 / 0.5 / 1 per entity from two yes/no answers (same resource and change → 0.5;
    /// and the key detail too → 1), then the mean over correct root causes and the best
    /// hop-discounted score over all predictions.
    pub fn reasoning(&self, answers: &[Answer]) -> ReasoningScores {
        let yes = |id: &str| answers.iter().any(|a| a.id == id && a.answer == YesNo::Yes);
        let mut rc_scores = Vec::new();
        let mut partial: f64 = 0.0;
        let mut details = Vec::new();
        let scored: BTreeSet<usize> = self.targets.iter().map(|t| t.prediction).collect();
        for t in &self.targets {
            let src = match (yes(&t.same_id), yes(&t.detail_id)) {
                (true, true) => 1.0,
                (true, false) => 0.5,
                _ => 0.0,
            };
            let entity_score = src / (1.0 + t.hop_away as f64);
            if t.hop_away == 0 {
                rc_scores.push(src);
            }
            partial = partial.max(entity_score);
            details.push(json!({
                "entity": self.predictions[t.prediction].entity,
                "metric1_is_correct": t.hop_away == 0,
                "hop_away": t.hop_away,
                "SymptomReasoningCorrectness": src,
                "entity_score": entity_score,
            }));
        }
        // A correct root cause with no reasoning to judge scores 0.
        for (k, p) in self.predictions.iter().enumerate() {
            if p.matches_gt && !scored.contains(&k) {
                rc_scores.push(0.0);
            }
        }
        ReasoningScores {
            root_cause_reasoning: mean(&rc_scores),
            root_cause_reasoning_partial: partial,
            details,
        }
    }

    /// ITBench's `scores` object (as in `evaluation_results.json` raw results and
    /// `judge_output.json`), with the reasoning metrics when the judge answered.
    pub fn scores_json(&self, reasoning: Option<&ReasoningScores>) -> Value {
        let prf = |p: &Prf| json!({"calculation_precision": p.precision, "calculation_recall": p.recall, "calculation_f1": p.f1});
        let names = |v: &[String]| v.iter().map(|c| display(c)).collect::<Vec<_>>();
        let mut s = serde_json::Map::new();
        let mut entity = prf(&self.entity);
        entity["gt_entities"] = json!(self.gt_entities);
        entity["predicted_entities"] = json!(
            self.predictions
                .iter()
                .map(|p| {
                    let mut v = json!({"entity": p.entity, "matches_gt": p.matches_gt});
                    if let Some(m) = &p.matched_to {
                        v["matched_to"] = json!(m);
                    }
                    v
                })
                .collect::<Vec<_>>()
        );
        entity["justification"] = json!(
            "computed by rule: kind, namespace and name/filter match against root-cause groups and their aliases"
        );
        s.insert("root_cause_entity".into(), entity);
        for (k, p) in self.entity_at.iter().enumerate() {
            s.insert(format!("root_cause_entity_k@{}", k + 1), prf(p));
        }
        s.insert("root_cause_entity_k".into(), prf(&self.entity_at[2]));
        s.insert("propagation_chain".into(), json!({
            "calculation": self.chain.f1,
            "precision": self.chain.precision,
            "recall": self.chain.recall,
            "details": {
                "contracted_gt_path": names(&self.gt_path),
                "contracted_model_path": names(&self.model_path),
                "lcs_components": names(&self.lcs),
                "true_positives_TP": self.lcs.len(),
                "model_path_length": self.model_path.len(),
                "gt_path_length": self.gt_path.len(),
                "normalization_map": self.predictions.iter().map(|p| (p.entity.clone(), json!(display(&p.component)))).collect::<serde_json::Map<_, _>>(),
            }
        }));
        s.insert(
            "fault_localization_component_identification".into(),
            json!({
                "calculation": self.fault_localization,
                "details": self.fl_details,
            }),
        );
        let mut no_fp = prf(&self.proximity_no_fp);
        no_fp["precision_details"] = json!(names(
            &self
                .predictions
                .iter()
                .map(|p| p.component.clone())
                .collect::<Vec<_>>()
        ));
        s.insert("root_cause_proximity_no_fp".into(), no_fp);
        let mut with_fp = prf(&self.proximity_with_fp);
        with_fp["gt_path_length"] = json!(self.gt_path.len());
        s.insert("root_cause_proximity_with_fp".into(), with_fp);
        if let Some(r) = reasoning {
            s.insert(
                "root_cause_reasoning".into(),
                json!({"calculation": r.root_cause_reasoning, "details": r.details}),
            );
            s.insert(
                "root_cause_reasoning_partial".into(),
                json!({"calculation": r.root_cause_reasoning_partial, "details": r.details}),
            );
        }
        Value::Object(s)
    }

    /// ITBench's `flat_scores` naming.
    pub fn flat(&self, reasoning: Option<&ReasoningScores>) -> Vec<(String, f64)> {
        let mut v = Vec::new();
        let mut prf = |name: &str, p: &Prf| {
            v.push((format!("{name}_precision"), p.precision));
            v.push((format!("{name}_recall"), p.recall));
            v.push((format!("{name}_f1"), p.f1));
        };
        prf("root_cause_entity", &self.entity);
        for (k, p) in self.entity_at.iter().enumerate() {
            prf(&format!("root_cause_entity_k@{}", k + 1), p);
        }
        prf("root_cause_entity_k", &self.entity_at[2]);
        prf("root_cause_proximity_no_fp", &self.proximity_no_fp);
        prf("root_cause_proximity_with_fp", &self.proximity_with_fp);
        v.push(("propagation_chain".into(), self.chain.f1));
        v.push((
            "fault_localization_component_identification".into(),
            self.fault_localization,
        ));
        if let Some(r) = reasoning {
            v.push(("root_cause_reasoning".into(), r.root_cause_reasoning));
            v.push((
                "root_cause_reasoning_partial".into(),
                r.root_cause_reasoning_partial,
            ));
        }
        v
    }
}

/// ITBench's "first impacted component": the first propagation whose effect shows a performance
/// failure decides, by priority P1 (a component named in the effect), P2 (target of a chaos
/// object), P3 (target of flagd), P4 (target); with no such effect, the component after the root
/// cause on the path.
fn first_impacted(gt: &GroundTruth, idx: &GtIndex, gt_path: &[String]) -> (Option<String>, Value) {
    for p in &gt.propagations {
        let effect = p.effect.to_ascii_lowercase();
        if !FAILURE_WORDS.iter().any(|w| effect.contains(w)) {
            continue;
        }
        let (src, tgt) = (
            idx.component_of_id(&p.source),
            idx.component_of_id(&p.target),
        );
        let source_group = idx.group(&p.source);
        // P1: candidates named in the effect, the edge's own ends first.
        let mut named: Vec<(usize, String)> = Vec::new();
        for g in &idx.groups {
            let name = g
                .name
                .as_deref()
                .map(str::to_ascii_lowercase)
                .unwrap_or_else(|| g.base.clone());
            if let Some(pos) = names(&effect, &name) {
                let rank = if g.component == tgt {
                    0
                } else if g.component == src {
                    1
                } else {
                    2 + pos
                };
                named.push((rank, g.component.clone()));
            }
        }
        named.sort();
        let (chosen, rule) = if let Some((_, c)) = named.first() {
            (c.clone(), "P1: component named in the effect")
        } else if source_group
            .is_some_and(|g| g.kind.to_ascii_lowercase().ends_with("chaos") || g.kind == "Schedule")
        {
            (tgt.clone(), "P2: target of a chaos object")
        } else if source_group.is_some_and(|g| g.base.contains("flagd") || g.id.contains("flagd")) {
            (tgt.clone(), "P3: target of flagd")
        } else {
            (tgt.clone(), "P4: target")
        };
        return (
            Some(chosen.clone()),
            json!({"gt_first_impacted_component": display(&chosen), "effect_used": p.effect, "priority_rule_applied": rule}),
        );
    }
    let rc = idx.root_cause_components();
    let after = rc.first().and_then(|r| {
        let pos = gt_path.iter().position(|c| c == r)?;
        gt_path.get(pos + 1).cloned()
    });
    let chosen = after.or_else(|| rc.first().cloned());
    (
        chosen.clone(),
        json!({"gt_first_impacted_component": chosen.as_deref().map(display), "effect_used": null, "priority_rule_applied": "fallback: component after the root cause on the path"}),
    )
}
