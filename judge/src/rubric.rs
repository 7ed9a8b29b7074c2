//! The checklist rubric, read from YAML: dimensions of yes/no questions, their weights and the pass
//! threshold, plus extra questions for particular problems. Scoring lives here too, so the formula is
//! next to the data it reads.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use schemas::verdict::{Answer, DimensionScore, YesNo};
use serde::{Deserialize, Serialize};

/// The rubric shipped with faultline.
pub const DEFAULT_RUBRIC_YAML: &str = include_str!("../rubrics/default.yaml");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rubric {
    pub id: String,
    pub version: String,
    pub threshold: f64,
    pub dimensions: Vec<Dimension>,
    /// Problem id → extra questions asked only for that problem.
    #[serde(default)]
    pub problems: BTreeMap<String, Vec<ExtraQuestion>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dimension {
    pub id: String,
    pub name: String,
    /// Missing weights are shared equally by the dimensions that lack one.
    #[serde(default)]
    pub weight: Option<f64>,
    #[serde(default)]
    pub definition: String,
    pub questions: Vec<Question>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    pub id: String,
    pub text: String,
    #[serde(default)]
    pub hint: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraQuestion {
    pub dimension: String,
    pub id: String,
    pub text: String,
    #[serde(default)]
    pub hint: String,
}

/// The questions of one dimension for one problem (rubric questions plus the problem's extras).
#[derive(Debug, Clone, PartialEq)]
pub struct Checklist {
    pub dimensions: Vec<ChecklistDimension>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChecklistDimension {
    pub id: String,
    pub name: String,
    pub weight: f64,
    pub definition: String,
    pub questions: Vec<Question>,
}

impl Rubric {
    pub fn default_rubric() -> Self {
        Self::from_yaml(DEFAULT_RUBRIC_YAML, "built-in rubric")
            .expect("the built-in rubric is valid")
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read rubric {}", path.display()))?;
        Self::from_yaml(&text, &path.display().to_string())
    }

    pub fn from_yaml(text: &str, origin: &str) -> anyhow::Result<Self> {
        let rubric: Rubric = serde_norway::from_str(text)
            .with_context(|| format!("{origin}: not a rubric (expected id, version, threshold, dimensions[{{id, name, weight, questions[{{id, text}}]}}])"))?;
        rubric
            .check()
            .map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        Ok(rubric)
    }

    /// Checks what YAML cannot: ids unique, weights sane, threshold in range, extras attached to
    /// existing dimensions.
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.threshold) {
            return Err(format!("threshold: {} is not within 0..=1", self.threshold));
        }
        if self.dimensions.is_empty() {
            return Err("dimensions: at least one is needed".into());
        }
        let mut ids = std::collections::BTreeSet::new();
        for (i, d) in self.dimensions.iter().enumerate() {
            if !ids.insert(d.id.clone()) {
                return Err(format!("dimensions[{i}].id: `{}` appears twice", d.id));
            }
            if let Some(w) = d.weight
                && !(w.is_finite() && w >= 0.0)
            {
                return Err(format!(
                    "dimensions[{i}].weight: {w} is not a non-negative number"
                ));
            }
            if d.questions.is_empty() {
                return Err(format!("dimensions[{i}].questions: at least one is needed"));
            }
            for (j, q) in d.questions.iter().enumerate() {
                if !ids.insert(q.id.clone()) {
                    return Err(format!(
                        "dimensions[{i}].questions[{j}].id: `{}` appears twice",
                        q.id
                    ));
                }
            }
        }
        let weights = self.weights();
        let sum: f64 = weights.iter().sum();
        if (sum - 1.0).abs() > 1e-6 {
            return Err(format!("dimensions: weights add up to {sum}, expected 1"));
        }
        for (problem, extras) in &self.problems {
            for (j, q) in extras.iter().enumerate() {
                if !self.dimensions.iter().any(|d| d.id == q.dimension) {
                    return Err(format!(
                        "problems.{problem}[{j}].dimension: `{}` is not a dimension id",
                        q.dimension
                    ));
                }
                if ids.contains(&q.id) {
                    return Err(format!(
                        "problems.{problem}[{j}].id: `{}` is already a question id",
                        q.id
                    ));
                }
            }
        }
        Ok(())
    }

    /// Effective weights, in dimension order: explicit ones as given, the rest sharing what is left.
    fn weights(&self) -> Vec<f64> {
        let given: f64 = self.dimensions.iter().filter_map(|d| d.weight).sum();
        let missing = self
            .dimensions
            .iter()
            .filter(|d| d.weight.is_none())
            .count();
        let share = if missing == 0 {
            0.0
        } else {
            (1.0 - given) / missing as f64
        };
        self.dimensions
            .iter()
            .map(|d| d.weight.unwrap_or(share))
            .collect()
    }

    /// The checklist for one problem.
    pub fn checklist(&self, problem_id: &str) -> Checklist {
        let extras = self
            .problems
            .get(problem_id)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let dimensions =
            self.dimensions
                .iter()
                .zip(self.weights())
                .map(|(d, weight)| {
                    let mut questions = d.questions.clone();
                    questions.extend(extras.iter().filter(|q| q.dimension == d.id).map(|q| {
                        Question {
                            id: q.id.clone(),
                            text: q.text.clone(),
                            hint: q.hint.clone(),
                        }
                    }));
                    ChecklistDimension {
                        id: d.id.clone(),
                        name: d.name.clone(),
                        weight,
                        definition: d.definition.clone(),
                        questions,
                    }
                })
                .collect();
        Checklist { dimensions }
    }
}

impl Checklist {
    pub fn question_ids(&self) -> impl Iterator<Item = &str> {
        self.dimensions
            .iter()
            .flat_map(|d| d.questions.iter().map(|q| q.id.as_str()))
    }

    /// Scores a complete set of answers: per dimension the share of yes, composite the weighted sum,
    /// pass when composite ≥ threshold. Answers to questions outside the checklist are ignored here
    /// (they feed other metrics); a missing answer is a bug upstream, since answers are validated.
    pub fn score(&self, answers: &[Answer], threshold: f64) -> (Vec<DimensionScore>, f64, bool) {
        let yes: BTreeMap<&str, bool> = answers
            .iter()
            .map(|a| (a.id.as_str(), a.answer == YesNo::Yes))
            .collect();
        let dims: Vec<DimensionScore> = self
            .dimensions
            .iter()
            .map(|d| {
                let n_yes = d
                    .questions
                    .iter()
                    .filter(|q| yes.get(q.id.as_str()).copied().unwrap_or(false))
                    .count();
                DimensionScore {
                    id: d.id.clone(),
                    name: d.name.clone(),
                    weight: d.weight,
                    score: n_yes as f64 / d.questions.len() as f64,
                }
            })
            .collect();
        let composite: f64 = dims.iter().map(|d| d.weight * d.score).sum();
        // Round away binary noise so 7/9 with weights .33/.33/.34 compares as people expect.
        let composite = (composite * 1e9).round() / 1e9;
        (dims, composite, composite >= threshold - 1e-12)
    }
}

/// Checks that a loaded rubric file is usable; used by `judge run --rubric`.
pub fn load_or_default(path: Option<&Path>) -> anyhow::Result<Rubric> {
    match path {
        Some(p) => Rubric::load(p),
        None => Ok(Rubric::default_rubric()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::verdict::Confidence;

    fn answers(yes: &[&str], all: &Checklist) -> Vec<Answer> {
        all.question_ids()
            .map(|id| Answer {
                id: id.into(),
                answer: if yes.contains(&id) {
                    YesNo::Yes
                } else {
                    YesNo::No
                },
                confidence: Confidence::High,
                evidence: String::new(),
            })
            .collect()
    }

    #[test]
    fn seven_of_nine_passes_and_six_fails() {
        let r = Rubric::default_rubric();
        let c = r.checklist("any");
        let seven = [
            "D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D3-Q1", "D3-Q2",
        ];
        let (dims, composite, pass) = c.score(&answers(&seven, &c), r.threshold);
        assert_eq!(dims[0].score, 1.0);
        assert!((dims[1].score - 2.0 / 3.0).abs() < 1e-12);
        let expected = 0.33 + 0.33 * 2.0 / 3.0 + 0.34 * 2.0 / 3.0;
        assert!((composite - expected).abs() < 1e-9);
        assert!(pass);
        let six = &seven[..6];
        let (_, composite, pass) = c.score(&answers(six, &c), r.threshold);
        assert!(composite < 0.70 && !pass, "{composite}");
    }

    #[test]
    fn problem_extras_join_their_dimension() {
        let yaml = DEFAULT_RUBRIC_YAML.replace(
            "problems: {}",
            "problems:\n  \"2\":\n    - {dimension: D2, id: P2-Q1, text: Does it name the cartFailure flag?}\n",
        );
        let r = Rubric::from_yaml(&yaml, "test").unwrap();
        let c = r.checklist("2");
        assert_eq!(c.dimensions[1].questions.len(), 4);
        assert_eq!(r.checklist("3").dimensions[1].questions.len(), 3);
    }

    #[test]
    fn bad_rubrics_name_the_field() {
        let bad = DEFAULT_RUBRIC_YAML.replace("weight: 0.34", "weight: 0.5");
        let e = Rubric::from_yaml(&bad, "r.yaml").unwrap_err().to_string();
        assert!(e.contains("r.yaml") && e.contains("weights add up"), "{e}");
        let bad = DEFAULT_RUBRIC_YAML.replace("id: D2-Q1", "id: D1-Q1");
        let e = Rubric::from_yaml(&bad, "r.yaml").unwrap_err().to_string();
        assert!(e.contains("D1-Q1") && e.contains("twice"), "{e}");
        let e = Rubric::from_yaml("id: x\n", "r.yaml").unwrap_err();
        assert!(format!("{e:#}").contains("r.yaml"), "{e:#}");
    }
}
