//! SRE analysis over a dataset's tables (or a live session's recording of them), with polars lazy
//! frames: ITBench's offline incident-analysis tools under their names, parameters and output
//! shapes, correct on the data ITBench's own versions mishandle, and a few an SRE would add.
//!
//! What flows through it: a tool name and its arguments (JSON, ITBench's argument names) reach
//! [`run`], which parses them into the tool's parameter type and answers JSON. Every tool reads
//! its tables from a [`Source`]: the table files of a dataset, or the segments a live session has
//! recorded so far, each as a polars `LazyFrame` (filters and projections are pushed into the
//! Parquet scan). Times in arguments and answers are the times the session's APIs serve (a
//! replayed dataset shifted to look live answers in shifted times), through the source's clock.
//!
//! ITBench's tools take file paths (`base_dir`, `events_file`, `trace_file`, ...); here the data
//! is the source's, so those arguments are accepted and ignored, and ITBench prompts work as they
//! are. Polars blocks: call [`run`] off async threads (`tokio::task::spawn_blocking`).

mod alerts;
mod cache;
mod context;
mod events;
mod frame;
mod logs;
mod metrics;
mod owners;
pub mod params;
mod query;
pub mod source;
mod specs;
mod sre;
pub mod topology;
mod traces;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use logs::level as log_level;
pub use polars::prelude::LazyFrame;
pub use source::{Source, Tables};

/// Why a tool could not answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The arguments are wrong: the message names the argument and what was expected.
    #[error("{0}")]
    Param(String),
    /// The data could not be read.
    #[error("reading the data: {0}")]
    Data(String),
}

impl Error {
    pub fn param(message: impl Into<String>) -> Error {
        Error::Param(message.into())
    }
}

impl From<polars::error::PolarsError> for Error {
    fn from(e: polars::error::PolarsError) -> Self {
        Error::Data(e.to_string())
    }
}

impl From<datasets::DatasetError> for Error {
    fn from(e: datasets::DatasetError) -> Self {
        Error::Data(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One tool: its name, what it does (the text an agent reads), its arguments' JSON Schema, and
/// how it runs.
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    /// Whether ITBench's offline server has a tool of this name.
    pub itbench: bool,
    schema: fn() -> Value,
    call: fn(&Source, Value) -> Result<Value>,
}

impl Tool {
    /// The JSON Schema of the tool's arguments (an object schema).
    pub fn schema(&self) -> Value {
        (self.schema)()
    }
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("name", &self.name).finish()
    }
}

/// Parses a tool's arguments; a missing argument object is an empty one.
fn args<T: DeserializeOwned>(tool: &str, value: Value) -> Result<T> {
    let value = if value.is_null() {
        Value::Object(Default::default())
    } else {
        value
    };
    serde_json::from_value(value).map_err(|e| Error::Param(format!("{tool}: {e}")))
}

fn schema_of<T: schemars::JsonSchema>() -> Value {
    let schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    serde_json::to_value(schema).unwrap_or_else(|_| serde_json::json!({"type": "object"}))
}

macro_rules! tools {
    ($( $name:literal, $itbench:literal, $params:ty, $func:path, $desc:expr; )*) => {
        /// Every tool, ITBench's first.
        pub static TOOLS: &[Tool] = &[$(
            Tool {
                name: $name,
                description: $desc,
                itbench: $itbench,
                schema: schema_of::<$params>,
                call: |source, value| $func(source, args::<$params>($name, value)?),
            },
        )*];
    };
}

tools! {
    "alert_summary", true, alerts::SummaryParams, alerts::summary, alerts::SUMMARY;
    "alert_analysis", true, alerts::AnalysisParams, alerts::analysis, alerts::ANALYSIS;
    "event_analysis", true, events::Params, events::analysis, events::DESCRIPTION;
    "metric_analysis", true, metrics::AnalysisParams, metrics::analysis, metrics::ANALYSIS;
    "get_metric_anomalies", true, metrics::AnomalyParams, metrics::anomalies, metrics::ANOMALIES;
    "get_trace_error_tree", true, traces::Params, traces::error_tree, traces::DESCRIPTION;
    "build_topology", true, topology::BuildParams, topology::build, topology::BUILD;
    "topology_analysis", true, topology::AnalysisParams, topology::analysis, topology::ANALYSIS;
    "k8s_spec_change_analysis", true, specs::ChangeParams, specs::changes, specs::CHANGES;
    "get_context_contract", true, context::Params, context::contract, context::DESCRIPTION;
    "get_k8_spec", true, specs::SpecParams, specs::spec, specs::SPEC;
    "log_analysis", true, logs::Params, logs::analysis, logs::DESCRIPTION;
    "service_change_points", false, sre::ChangeParams, sre::change_points, sre::CHANGE_POINTS;
    "restart_timeline", false, sre::RestartParams, sre::restarts, sre::RESTARTS;
}

/// The tool of this name.
pub fn tool(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name)
}

/// Runs a tool by name with JSON arguments (ITBench's argument names).
pub fn run(source: &Source, name: &str, arguments: Value) -> Result<Value> {
    let tool = tool(name).ok_or_else(|| {
        let names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        Error::Param(format!(
            "unknown tool `{name}`: expected one of {}",
            names.join(", ")
        ))
    })?;
    let started = std::time::Instant::now();
    let answer = (tool.call)(source, arguments);
    tracing::debug!(
        tool = name,
        elapsed_ms = started.elapsed().as_millis() as u64,
        ok = answer.is_ok(),
        "analysis tool"
    );
    answer
}
