//! The record of one agent run on one problem (`run.json`), as faultline's live and replay sessions
//! write it. A directory of runs is laid out `<root>/<agent>/<problem_id>/<trial>/run.json`; the
//! judge reads any `run.json` below a root, so the layout is a convention, not a requirement.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent_output::AgentOutput;

/// Version of the run-result format.
pub const RUN_RESULT_VERSION: u32 = 1;

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
    /// Tokens the agent itself used, when its driver reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_usage: Option<AgentUsage>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub steps: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}
