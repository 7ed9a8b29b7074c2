//! faultline's judge: scores agent diagnoses against ground truth with a checklist LLM judge and
//! ITBench's metrics computed in code; re-judges cheaply from a content-addressed cache; measures
//! agreement between judges; renders leaderboards and the board of live sessions (diagnosis,
//! mitigation, time to diagnose and mitigate); judges a diagnosis inside a session (`in_loop`).

pub mod aggregate;
pub mod agree;
pub mod board;
pub mod cli;
pub mod copied;
pub mod entities;
pub mod in_loop;
pub mod itbench;
pub mod json_text;
pub mod layout;
pub mod llm;
pub mod pass_rule;
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
