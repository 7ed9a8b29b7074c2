//! The diagnosis judged in the loop, with the `judge` library: deterministic metrics always, the
//! checklist LLM when one is configured.

use judge::truth::LoadedTruth;
use schemas::AgentOutput;
use schemas::run_result::DiagnosisRecord;

/// How diagnoses are judged in a session.
#[derive(Debug, Clone, Default)]
pub struct Judging {}

/// Judges one diagnosis against its ground truth.
pub async fn judge(_output: &AgentOutput, _truth: &LoadedTruth, _how: &Judging) -> DiagnosisRecord {
    DiagnosisRecord::default()
}
