//! What the judge writes: one [`Verdict`] per judged sample (a line of a run's `verdicts.jsonl`), one
//! [`JudgedItem`] per agent output after majority vote over samples, and the [`JudgeResults`] of a whole
//! run (`results.json`) with its aggregated statistics.
//!
//! Every verdict records what produced it (rubric version, judge model and endpoint, parameters,
//! prompt hash, raw response) so a score can always be traced and reproduced.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::run_result::{AgentUsage, MitigationRecord, SessionEnd};

/// Version of the verdict and judge-results formats.
pub const VERDICT_VERSION: u32 = 1;

/// Which agent output was judged.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ItemRef {
    /// Stable id of the item within a run: `<agent>/<problem>/<trial>`.
    pub id: String,
    /// Canonical problem (ITBench: scenario) id.
    pub problem_id: String,
    pub agent: String,
    pub trial: String,
    /// Where the agent output was read from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

/// Outcome class of a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerdictStatus {
    /// The judge answered every question.
    Scored,
    /// The agent's output could not be read (missing, or not JSON even after repair); it scores 0.
    AgentError,
    /// The judge could not produce a valid answer (transport failures or invalid responses after
    /// every retry). Not a score: counted and reported, and redone by the next run.
    JudgeError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum YesNo {
    Yes,
    No,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    High,
    Medium,
    Low,
}

/// The judge's answer to one checklist question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub id: String,
    pub answer: YesNo,
    pub confidence: Confidence,
    /// The judge's short justification, quoting the diagnosis where it can.
    pub evidence: String,
}

/// The score of one rubric dimension: the share of its questions answered yes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DimensionScore {
    pub id: String,
    pub name: String,
    pub weight: f64,
    pub score: f64,
}

/// Judge model parameters, recorded with every verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JudgeParams {
    pub model: String,
    pub base_url: String,
    pub temperature: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Whether the answer was constrained by a JSON schema (`response_format: json_schema`).
    pub structured_output: bool,
}

/// Tokens and money spent on one verdict.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// From the price table; absent when the model has no price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// One judged sample of one item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub schema_version: u32,
    pub item: ItemRef,
    /// Sample index (0-based) when several samples are drawn per item.
    pub sample: u32,
    pub status: VerdictStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub rubric_id: String,
    pub rubric_version: String,
    /// Absent when no LLM was asked (deterministic metrics only, or an agent error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeParams>,
    /// sha256 of the exact messages sent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prompt_hash: String,
    /// Content address of this verdict in the verdict cache.
    pub cache_key: String,
    #[serde(default)]
    pub answers: Vec<Answer>,
    #[serde(default)]
    pub dimensions: Vec<DimensionScore>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composite: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<bool>,
    /// Flat metric name → value: deterministic ITBench metrics and the LLM-assisted reasoning
    /// metrics, in ITBench's `flat_scores` naming.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_response: Option<String>,
    #[serde(default)]
    pub usage: Usage,
    pub latency_ms: u64,
    /// HTTP requests made for this verdict (0 when served from the cache).
    pub requests: u32,
    /// True when this verdict was served from the verdict cache.
    #[serde(default)]
    pub cached: bool,
    pub judged_at: DateTime<Utc>,
}

/// The result for one item after majority vote over its samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JudgedItem {
    pub item: ItemRef,
    pub status: VerdictStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Samples that were scored, out of those requested.
    pub samples_scored: u32,
    pub samples_requested: u32,
    /// Per-question majority answers (a tie is No).
    #[serde(default)]
    pub answers: Vec<Answer>,
    #[serde(default)]
    pub dimensions: Vec<DimensionScore>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composite: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<bool>,
    /// Deterministic metrics; kept for a judge error too (only the LLM part failed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
    /// The diagnosis pass by the deterministic rule (root causes named), whatever the LLM said;
    /// absent when the rule cannot decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_pass: Option<bool>,
    /// What the session measured, when the item was read from a faultline `run.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunFacts>,
    #[serde(default)]
    pub usage: Usage,
}

/// What a faultline session recorded about a run besides the diagnosis, carried through judging
/// so a board can be built from judge results alone.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunFacts {
    /// Whether the problem's noise ran during the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<SessionEnd>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttd_secs: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttm_secs: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mitigation: Option<MitigationRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_usage: Option<AgentUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_sandbox: Option<crate::run_result::AgentSandbox>,
}

impl RunFacts {
    /// The facts of one session run.
    pub fn of(run: &crate::run_result::RunResult) -> Self {
        Self {
            noise: run.noise,
            seed: run.seed,
            ended: run.ended,
            ttd_secs: run.ttd_secs,
            ttm_secs: run.ttm_secs,
            mitigation: run.mitigation.clone(),
            agent_usage: run.agent_usage.clone(),
            agent_sandbox: run.agent_sandbox,
        }
    }
}

/// Summary statistics of one score over a set of trials.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stat {
    /// Trials that were scored (agent errors included, as 0).
    pub n: usize,
    /// Trials whose agent output could not be read (scored 0 and included in `n`).
    pub agent_errors: usize,
    /// Trials the judge could not score (not in `n`; reported so they are never silently dropped).
    pub judge_errors: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// Standard error of the mean (sample standard deviation / sqrt(n)); absent below 2 values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<f64>,
    /// 95% percentile-bootstrap confidence interval of the mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
    /// Share of trials that pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_at_1: Option<f64>,
    /// Probability that k trials drawn without replacement all pass, k = `k`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_hat_k: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<usize>,
}

/// Statistics for every score of one group of trials (a problem, or everything).
pub type StatTable = BTreeMap<String, Stat>;

/// Aggregated statistics of a run, per agent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentStats {
    /// Per problem id, per score name.
    pub per_problem: BTreeMap<String, StatTable>,
    /// Mean of per-problem means (each problem weighs the same).
    pub macro_overall: StatTable,
    /// Over all trials pooled (each trial weighs the same).
    pub micro_overall: StatTable,
}

/// Everything a `judge run` produced, written as `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JudgeResults {
    pub schema_version: u32,
    pub rubric_id: String,
    pub rubric_version: String,
    pub pass_threshold: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeParams>,
    pub samples_per_item: u32,
    pub items: Vec<JudgedItem>,
    /// Per agent name.
    pub stats: BTreeMap<String, AgentStats>,
    pub usage: Usage,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
}
