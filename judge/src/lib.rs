//! faultline's judge: scores agent diagnoses against ground truth with a checklist LLM judge and
//! ITBench's metrics computed in code; re-judges cheaply from a content-addressed cache; measures
//! agreement between judges; renders leaderboards.

pub mod aggregate;
pub mod agree;
pub mod cli;
pub mod entities;
pub mod itbench;
pub mod json_text;
pub mod layout;
pub mod llm;
pub mod prices;
pub mod prompt;
pub mod ratelimit;
pub mod report;
pub mod report_itbench;
pub mod rubric;
pub mod runner;
pub mod store;
pub mod submission;
pub mod truth;
