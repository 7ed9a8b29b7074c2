//! The record of one agent run on one problem (`run.json`), as faultline's live and replay sessions
//! write it. A directory of runs is laid out `<root>/<agent>/<problem_id>/<trial>/run.json`; the
//! judge reads any `run.json` below a root, so the layout is a convention, not a requirement.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent_output::AgentOutput;

/// Version of the run-result format. Version 2 added what a session measures (stages, mitigation,
/// TTD/TTM, API requests, noise); version 1 files still read.
pub const RUN_RESULT_VERSION: u32 = 2;

/// How the agent met the problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunMode {
    /// Against a live environment with the fault injected.
    Live,
    /// Against a recorded dataset served back through the APIs.
    Replay,
    /// Handed files, with no API in between.
    Static,
}

/// One agent run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunResult {
    pub schema_version: u32,
    pub agent: String,
    pub problem_id: String,
    /// Trial number or name, unique per (agent, problem).
    pub trial: String,
    pub mode: RunMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_id: Option<String>,
    pub started_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Path of the ground truth, relative to this file's directory; when absent the judge looks the
    /// problem up in the ground truths it was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ground_truth: Option<String>,
    /// What the agent submitted; absent when it submitted nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<AgentOutput>,
    /// Why the run ended without an output (timeout, crash, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Tokens the agent itself used: reported on submit, or counted by the session's LLM proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_usage: Option<AgentUsage>,
    /// Seed of the live problem run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Whether the problem's noise ran during the session (aggregated apart: with and without noise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<bool>,
    /// How the session ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<SessionEnd>,
    /// Seconds from the agent's start to its diagnosis submission, net of grading time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttd_secs: Option<f64>,
    /// Seconds from the agent's start to a mitigation that passed, net of grading time; absent
    /// when no mitigation passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttm_secs: Option<f64>,
    /// The diagnosis as judged in the session (re-judging with `judge run` may differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<DiagnosisRecord>,
    /// The mitigation grade (live sessions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mitigation: Option<MitigationRecord>,
    /// Requests the agent made to the session's APIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_requests: Option<ApiRequests>,
    /// Files of the run beside this one (trajectory, agent output streams, dataset), relative paths.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub files: std::collections::BTreeMap<String, String>,
    /// Where the agent ran; absent in runs recorded before sandboxes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_sandbox: Option<AgentSandbox>,
}

/// Where an agent's process ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentSandbox {
    /// In faultline's sandbox (bubblewrap namespaces): it could see nothing of the benchmark.
    Bubblewrap,
    /// Beside `collector`, as its user (`--no-sandbox`): it could have read the answers, so its
    /// scores are not comparable with sandboxed runs'.
    None,
    /// Not a process of ours: a client of a front end (`collector serve openenv`) that reaches
    /// the system only through the session's tools, whose answers are all it sees.
    Remote,
    /// In a harness's environment (a Harbor task's container or namespaces) as an unprivileged
    /// user, beside a `collector` run by root whose files it cannot read.
    Harness,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionEnd {
    /// Every stage was submitted.
    Submitted,
    /// The time limit was reached first.
    TimeLimit,
    /// The agent exited (status 0) before submitting every stage.
    AgentExited,
    /// The agent exited with a failure status or was killed by a signal.
    AgentFailed,
    /// The session was interrupted (Ctrl-C, SIGTERM).
    Interrupted,
}

/// The diagnosis stage of a session.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiagnosisRecord {
    /// Whether the agent submitted a diagnosis.
    pub submitted: bool,
    /// The judge's pass (checklist LLM when configured, otherwise the deterministic rule); absent
    /// when it could not be decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composite: Option<f64>,
    /// Deterministic metrics, in ITBench's `flat_scores` naming; kept even when the LLM failed.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub metrics: std::collections::BTreeMap<String, f64>,
    /// Why the LLM judge gave no verdict (the deterministic metrics stand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_error: Option<String>,
}

/// The mitigation stage of a live session.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MitigationRecord {
    /// Whether the agent submitted its mitigation (false: graded at the time limit or agent's end).
    pub submitted: bool,
    pub success: bool,
    /// Why it failed: each assertion or health condition that did not hold, with the value found.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// Simulated seconds the fixed system took to settle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered_after_secs: Option<i64>,
    /// Wall seconds spent grading (not counted in TTM).
    #[serde(default)]
    pub grading_secs: f64,
}

/// Requests made to the session's APIs, from its audit log. Writes are attempted changes to the
/// cluster (refused ones included, dry runs not); everything else is a read.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiRequests {
    pub reads: u64,
    pub writes: u64,
    /// Requests per API (`kubernetes`, `prometheus`, `jaeger`, `loki`, `mcp`).
    #[serde(default)]
    pub by_api: std::collections::BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache (included in `input_tokens`).
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// LLM calls or agent steps.
    #[serde(default)]
    pub steps: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}
