//! The messages sent to the judge model and the strict reading of its answer.
//!
//! The answer is one JSON object `{"answers": [{"id", "answer", "confidence", "evidence"}, ...]}`
//! with exactly the expected question ids. Anything else is invalid: the caller asks once for a
//! repaired answer, and a response that still fails becomes an error verdict, never a row of "No".

use std::collections::BTreeSet;

use schemas::AgentOutput;
use schemas::GroundTruth;
use schemas::verdict::{Answer, Confidence, YesNo};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::itbench::SemanticQuestion;
use crate::json_text;
use crate::rubric::Checklist;

/// Chat messages as (role, content) pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub system: String,
    pub user: String,
    pub question_ids: Vec<String>,
}

const SYSTEM: &str = "You grade the root-cause diagnosis written by an AI site-reliability agent against the \
known ground truth of an incident. You answer a checklist of yes/no questions.

For each question: read the question and its hint; find what the diagnosis explicitly says about it; \
compare that with the ground truth; then answer. Rules:
- Use only what the diagnosis states. Do not credit what it might have meant.
- \"yes\" is always the good outcome for the diagnosis; \"no\" the bad one.
- Judge each question on its own.
- Naming a component by another kind of the same application service (its Deployment or Pods for \
its Service) counts as naming it.
- evidence: at most 30 words, quoting or pointing at the diagnosis.
- confidence: high, medium or low.

Reply with exactly one JSON object and nothing else (no markdown fence, no preamble):
{\"answers\": [{\"id\": \"<question id>\", \"answer\": \"yes\" | \"no\", \"confidence\": \"high\" | \"medium\" | \"low\", \"evidence\": \"...\"}, ...]}
with one entry for every question id listed, and no other id.";

fn render_truth(gt: &GroundTruth) -> String {
    let mut s = String::new();
    if !gt.description.trim().is_empty() {
        s.push_str(&format!("Description: {}\n", gt.description.trim()));
    }
    let comp = |c: &schemas::ground_truth::Component| {
        let name = c.name.clone().unwrap_or_else(|| c.filter.join(" | "));
        format!(
            "{}/{}/{} (id {})",
            c.namespace.as_deref().unwrap_or("-"),
            c.kind,
            name,
            c.id
        )
    };
    s.push_str("Root cause components:\n");
    for c in gt.components.iter().filter(|c| c.root_cause) {
        s.push_str(&format!("- {}\n", comp(c)));
    }
    let others: Vec<_> = gt.components.iter().filter(|c| !c.root_cause).collect();
    if !others.is_empty() {
        s.push_str("Other involved components:\n");
        for c in others {
            s.push_str(&format!("- {}\n", comp(c)));
        }
    }
    if !gt.aliases.is_empty() {
        s.push_str("Aliases (ids naming the same thing):\n");
        for a in &gt.aliases {
            s.push_str(&format!("- {}\n", a.join(", ")));
        }
    }
    s.push_str("Faults:\n");
    for f in &gt.faults {
        s.push_str(&format!(
            "- target {} {}; mechanism: {}; category: {}; condition: {}\n",
            f.target.kind,
            f.target.name,
            f.mechanism,
            f.category.as_deref().unwrap_or("-"),
            f.condition
        ));
        if let Some(c) = &f.change {
            s.push_str(&format!(
                "  changed {}: from {} to {}\n",
                c.field, c.from, c.to
            ));
        }
    }
    if !gt.propagations.is_empty() {
        s.push_str("Propagation (from the root cause outward):\n");
        for p in &gt.propagations {
            s.push_str(&format!(
                "- {} -> {}: condition: {}; effect: {}\n",
                p.source, p.target, p.condition, p.effect
            ));
        }
    }
    if !gt.symptoms.is_empty() {
        s.push_str("Symptoms:\n");
        for y in &gt.symptoms {
            s.push_str(&format!(
                "- {:?} {} at {}: {}\n",
                y.kind,
                y.name.as_deref().unwrap_or("-"),
                y.component.as_deref().unwrap_or("-"),
                y.description
            ));
        }
    }
    s
}

fn render_output(out: &AgentOutput, s: &mut String) {
    if !out.diagnosis.trim().is_empty() {
        s.push_str(out.diagnosis.trim());
        s.push('\n');
    }
    if !out.entities.is_empty() || !out.propagations.is_empty() {
        #[derive(serde::Serialize)]
        struct Structured<'a> {
            entities: &'a [schemas::agent_output::AgentEntity],
            propagations: &'a [schemas::agent_output::AgentPropagation],
        }
        let structured = Structured {
            entities: &out.entities,
            propagations: &out.propagations,
        };
        s.push_str("Structured answer:\n");
        s.push_str(&serde_json::to_string_pretty(&structured).unwrap_or_default());
        s.push('\n');
    }
    if let Some(summary) = out.extra.get("incident_summary") {
        s.push_str("Incident summary:\n");
        s.push_str(&serde_json::to_string_pretty(summary).unwrap_or_default());
        s.push('\n');
    }
}

/// What every prompt for one ground truth and checklist shares, rendered once: a batch then
/// renders only each agent output.
#[derive(Debug, Clone)]
pub struct Template {
    truth: String,
    checklist: String,
    ids: Vec<String>,
}

impl Template {
    pub fn new(gt: &GroundTruth, checklist: &Checklist) -> Self {
        let mut text = String::new();
        let mut ids = Vec::new();
        for d in &checklist.dimensions {
            text.push_str(&format!("### {} — {}\n{}\n", d.id, d.name, d.definition));
            for q in &d.questions {
                text.push_str(&format!("{}: {}\n", q.id, q.text));
                if !q.hint.is_empty() {
                    text.push_str(&format!("  Hint: {}\n", q.hint));
                }
                ids.push(q.id.clone());
            }
        }
        Self {
            truth: render_truth(gt),
            checklist: text,
            ids,
        }
    }

    /// The prompt for one output, with the semantic questions its entities raise.
    pub fn prompt(&self, out: &AgentOutput, extra: &[SemanticQuestion]) -> Prompt {
        let mut user = String::with_capacity(self.truth.len() + self.checklist.len() + 2048);
        user.push_str("## Ground truth\n");
        user.push_str(&self.truth);
        user.push_str("\n## Agent diagnosis\n");
        render_output(out, &mut user);
        user.push_str("\n## Checklist\n");
        user.push_str(&self.checklist);
        let mut ids = self.ids.clone();
        if !extra.is_empty() {
            user.push_str("### Reasoning of named entities\n");
            for q in extra {
                user.push_str(&format!("{}: {}\n", q.id, q.text));
                ids.push(q.id.clone());
            }
        }
        user.push_str(&format!(
            "\n## Required JSON ({} answers)\nQuestion ids: {}\n",
            ids.len(),
            ids.join(", ")
        ));
        Prompt {
            system: SYSTEM.to_string(),
            user,
            question_ids: ids,
        }
    }
}

/// Builds the prompt for one item.
pub fn build(
    gt: &GroundTruth,
    out: &AgentOutput,
    checklist: &Checklist,
    extra: &[SemanticQuestion],
) -> Prompt {
    Template::new(gt, checklist).prompt(out, extra)
}

impl Prompt {
    /// sha256 over the exact messages.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.system.as_bytes());
        h.update([0]);
        h.update(self.user.as_bytes());
        hex::encode(h.finalize())
    }

    /// The JSON schema the answer must follow (for endpoints with structured output).
    pub fn answer_schema(&self) -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["answers"],
            "properties": {
                "answers": {
                    "type": "array",
                    "minItems": self.question_ids.len(),
                    "maxItems": self.question_ids.len(),
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["id", "answer", "confidence", "evidence"],
                        "properties": {
                            "id": {"type": "string", "enum": self.question_ids},
                            "answer": {"type": "string", "enum": ["yes", "no"]},
                            "confidence": {"type": "string", "enum": ["high", "medium", "low"]},
                            "evidence": {"type": "string"}
                        }
                    }
                }
            }
        })
    }

    /// The follow-up message that asks for a corrected answer.
    pub fn repair_request(&self, problem: &str) -> String {
        format!(
            "Your reply could not be used: {problem}. Reply again with only the JSON object, one entry for each of these ids and no other: {}.",
            self.question_ids.join(", ")
        )
    }

    /// Reads and validates an answer. `strict_json` is true when the endpoint enforced the schema,
    /// so the text must be JSON as it stands; otherwise the JSON is looked for inside the text.
    pub fn parse_answer(&self, text: &str, strict_json: bool) -> Result<Vec<Answer>, String> {
        let value: Value = if strict_json {
            serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?
        } else {
            json_text::parse_lenient(text)?
        };
        let list = match &value {
            Value::Object(m) => m
                .get("answers")
                .and_then(Value::as_array)
                .ok_or("expected an object with an `answers` list")?,
            Value::Array(a) => a,
            _ => return Err("expected a JSON object".into()),
        };
        let expected: BTreeSet<&str> = self.question_ids.iter().map(String::as_str).collect();
        let mut seen = BTreeSet::new();
        let mut answers = Vec::with_capacity(list.len());
        for (i, a) in list.iter().enumerate() {
            let field = |k: &str| -> Result<&str, String> {
                a.get(k)
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("answers[{i}].{k}: missing or not a string"))
            };
            let id = field("id")?.trim();
            if !expected.contains(id) {
                return Err(format!("answers[{i}].id: `{id}` is not a question id"));
            }
            if !seen.insert(id.to_string()) {
                return Err(format!("answers[{i}].id: `{id}` answered twice"));
            }
            let answer = match field("answer")?.trim().to_ascii_lowercase().as_str() {
                "yes" => YesNo::Yes,
                "no" => YesNo::No,
                other => return Err(format!("answers[{i}].answer: `{other}` is not yes or no")),
            };
            let confidence = match field("confidence")?.trim().to_ascii_lowercase().as_str() {
                "high" => Confidence::High,
                "medium" => Confidence::Medium,
                "low" => Confidence::Low,
                other => {
                    return Err(format!(
                        "answers[{i}].confidence: `{other}` is not high, medium or low"
                    ));
                }
            };
            let evidence = field("evidence")?.trim().to_string();
            answers.push(Answer {
                id: id.to_string(),
                answer,
                confidence,
                evidence,
            });
        }
        let missing: Vec<&str> = expected
            .iter()
            .filter(|id| !seen.contains(**id))
            .copied()
            .collect();
        if !missing.is_empty() {
            return Err(format!("missing answers for {}", missing.join(", ")));
        }
        // Keep checklist order, whatever order the model used.
        answers.sort_by_key(|a| self.question_ids.iter().position(|q| *q == a.id));
        Ok(answers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt() -> Prompt {
        Prompt {
            system: String::new(),
            user: String::new(),
            question_ids: vec!["D1-Q1".into(), "D1-Q2".into()],
        }
    }

    #[test]
    fn strict_validation_rejects_every_defect() {
        let p = prompt();
        let ok = r#"{"answers":[{"id":"D1-Q2","answer":"No","confidence":"low","evidence":"x"},{"id":"D1-Q1","answer":"yes","confidence":"High","evidence":"y"}]}"#;
        let a = p.parse_answer(ok, true).unwrap();
        assert_eq!(a[0].id, "D1-Q1");
        assert_eq!(a[1].answer, YesNo::No);
        for (bad, why) in [
            (
                r#"{"answers":[{"id":"D1-Q1","answer":"yes","confidence":"high","evidence":"y"}]}"#,
                "missing answers for D1-Q2",
            ),
            (
                r#"{"answers":[{"id":"D1-Q1","answer":"maybe","confidence":"high","evidence":"y"},{"id":"D1-Q2","answer":"no","confidence":"high","evidence":"y"}]}"#,
                "not yes or no",
            ),
            (
                r#"{"answers":[{"id":"D1-Q1","answer":"yes","confidence":"sure","evidence":"y"},{"id":"D1-Q2","answer":"no","confidence":"high","evidence":"y"}]}"#,
                "confidence",
            ),
            (
                r#"{"answers":[{"id":"D1-Q1","answer":"yes","confidence":"high"},{"id":"D1-Q2","answer":"no","confidence":"high","evidence":"y"}]}"#,
                "evidence",
            ),
            (
                r#"{"answers":[{"id":"D9","answer":"yes","confidence":"high","evidence":"y"}]}"#,
                "not a question id",
            ),
            (
                r#"{"answers":[{"id":"D1-Q1","answer":"yes","confidence":"high","evidence":"y"},{"id":"D1-Q1","answer":"no","confidence":"high","evidence":"y"}]}"#,
                "twice",
            ),
            (
                r#"{"answers":[{"id":"D1-Q1","answer":"yes""#,
                "not valid JSON",
            ),
        ] {
            let e = p.parse_answer(bad, true).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        // Without a schema, the JSON may sit in prose or a fence.
        let fenced = format!("Sure.\n```json\n{ok}\n```");
        assert_eq!(p.parse_answer(&fenced, false).unwrap(), a);
    }
}
