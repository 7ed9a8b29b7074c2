//! JSON Schema for every JSON document faultline reads or writes, for people using other languages.
//! `cargo run -p schemas --bin faultline-schemas -- schemas/json` regenerates the checked-in files; a
//! test fails when they are stale.

use schemars::{JsonSchema, Schema, schema_for};

use crate::agent_output::AgentOutput;
use crate::ground_truth::{EvaluatorRecord, GroundTruth};
use crate::manifest::Manifest;
use crate::run_result::RunResult;
use crate::verdict::{JudgeResults, Verdict};

/// Every document type: its file name under `schemas/json/` and its schema.
pub fn documents() -> Vec<(&'static str, Schema)> {
    fn doc<T: JsonSchema>(file: &'static str) -> (&'static str, Schema) {
        (file, schema_for!(T))
    }
    vec![
        doc::<Manifest>("manifest.schema.json"),
        doc::<GroundTruth>("ground_truth.schema.json"),
        doc::<EvaluatorRecord>("evaluation.schema.json"),
        doc::<AgentOutput>("agent_output.schema.json"),
        doc::<Verdict>("verdict.schema.json"),
        doc::<JudgeResults>("judge_results.schema.json"),
        doc::<RunResult>("run_result.schema.json"),
    ]
}

/// The exact bytes of a schema file: pretty JSON with a trailing newline.
pub fn render(schema: &Schema) -> String {
    let mut s = serde_json::to_string_pretty(schema).expect("schemas serialise");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_in_json_schemas_are_fresh() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("json");
        for (file, schema) in documents() {
            let path = dir.join(file);
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                on_disk == render(&schema),
                "{} is stale: run `cargo run -p schemas --bin faultline-schemas -- schemas/json`",
                path.display()
            );
        }
    }
}
