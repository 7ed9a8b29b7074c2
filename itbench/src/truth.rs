//! `ground_truth.yaml`: ITBench's v1 ground truth (bare or wrapped under `spec:`), kept beside the
//! imported dataset as faultline's `ground_truth.json` (never inside it), under a problem id;
//! back, written as ITBench's YAML. What faultline's ground truth says that ITBench's cannot
//! (fault layer and onset, target namespace, non-alert symptoms, the prose description) is
//! reported as not mapped.

use std::path::Path;

use schemas::GroundTruth;
use schemas::itbench::{ItbenchDocument, ItbenchGroundTruth};
use serde_json::Value;

use crate::{Error, Report};

/// The extension key a faultline ground truth keeps its problem id under.
pub const PROBLEM_ID: &str = "problem_id";

/// Whether a file name looks like a ground truth (`ground_truth.yaml`, `groundtruth_v1.yaml`,
/// `gt.json`, ...).
pub fn is_ground_truth(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let ext_ok = [".yaml", ".yml", ".json"]
        .iter()
        .any(|e| lower.ends_with(e));
    ext_ok
        && (lower.contains("ground_truth")
            || lower.contains("groundtruth")
            || lower.starts_with("gt."))
}

/// Reads an ITBench (or faultline) ground truth; `problem_id` is the id it is kept under when the
/// document carries none.
pub fn read(path: &Path, problem_id: &str) -> Result<GroundTruth, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let value: Value = serde_norway::from_str(&text)
        .map_err(|e| Error::invalid(path, format!("not YAML or JSON: {e}")))?;
    let mut truth = if value.get("components").is_some() && value.get("schema_version").is_some() {
        serde_json::from_value::<GroundTruth>(value)
            .map_err(|e| Error::invalid(path, format!("not a faultline ground truth: {e}")))?
    } else {
        let doc = ItbenchDocument::from_value(value)
            .map_err(|e| Error::invalid(path, format!("not an ITBench v1 ground truth: {e}")))?;
        GroundTruth::from(&doc.body)
    };
    truth.check().map_err(|e| Error::invalid(path, e))?;
    let id = match truth.extensions.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => problem_id.to_string(),
    };
    truth
        .extensions
        .entry(PROBLEM_ID.into())
        .or_insert(Value::String(id));
    Ok(truth)
}

/// The ground truth as ITBench's v1 YAML, noting what it cannot say.
pub fn to_itbench(truth: &GroundTruth, report: &mut Report) -> Result<String, Error> {
    for f in &truth.faults {
        if f.layer.is_some()
            || f.onset.is_some()
            || f.target.namespace.is_some()
            || !f.target.aliases.is_empty()
        {
            report.skip("fault layer, onset, target namespace and aliases (ITBench's ground truth has no such fields)", &f.target.name);
        }
    }
    if !truth.description.is_empty() {
        report.skip("ground-truth description (no ITBench field)", "description");
    }
    let other = truth
        .symptoms
        .iter()
        .filter(|s| s.kind != schemas::ground_truth::SymptomKind::Alert)
        .count();
    report.skip_n(
        "non-alert symptoms (ITBench lists alerts only)",
        other as u64,
        "symptoms",
    );
    let body = ItbenchGroundTruth::from(truth);
    serde_norway::to_string(&body)
        .map_err(|e| Error::invalid(Path::new("ground_truth.yaml"), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ground_truth_files_are_recognised() {
        assert!(is_ground_truth("ground_truth.yaml"));
        assert!(is_ground_truth(
            "ground_truth.itbench_repo_groundtruth_v1.yaml"
        ));
        assert!(is_ground_truth("groundtruth_v1.yaml"));
        assert!(!is_ground_truth("k8s_events_raw.tsv"));
        assert!(!is_ground_truth("ground_truth.txt"));
    }
}
