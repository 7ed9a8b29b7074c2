//! faultline's contracts. Every file faultline reads or writes has its type here, with no IO:
//! the dataset manifest and tables (as Arrow schemas), the ground truth and the evaluator-side
//! record kept beside a dataset, and the JSON Schema export of each JSON document.

pub mod agent_output;
pub mod ground_truth;
pub mod itbench;
pub mod json_schema;
pub mod manifest;
pub mod paths;
pub mod run_result;
pub mod stdout;
pub mod tables;
pub mod time;
pub mod verdict;

pub use agent_output::AgentOutput;
pub use ground_truth::GroundTruth;
pub use manifest::{Manifest, TableEntry, TimeWindow};
pub use tables::Table;

/// Version of the dataset format these types describe. A reader refuses other major versions.
pub const DATASET_FORMAT_VERSION: u32 = 1;

/// The `format` value that marks a directory's `manifest.json` as a faultline dataset.
pub const DATASET_FORMAT_NAME: &str = "faultline-dataset";
