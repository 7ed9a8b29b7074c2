//! ITBench ground truths from real public files convert to faultline's and back without loss.

use std::path::PathBuf;

use schemas::GroundTruth;
use schemas::itbench::{ItbenchDocument, ItbenchGroundTruth, normalise};
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/itbench")
}

fn consolidated() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join("judge_inputs/ground_truths.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn all_consolidated_ground_truths_round_trip() {
    let docs = consolidated();
    assert_eq!(docs.len(), 44);
    for value in docs {
        let doc = ItbenchDocument::from_value(value.clone()).unwrap();
        assert!(!doc.wrapped);
        // Real ITBench files are not always internally consistent (scenario 31 names a propagation
        // target that is not a group), so conversion must not depend on `check`.
        let native = GroundTruth::from(&doc.body);
        // faultline -> ITBench -> faultline is exact.
        let back = GroundTruth::from(&ItbenchGroundTruth::from(&native));
        assert_eq!(back, native);
        // ITBench -> faultline -> ITBench equals the normalised original, field for field.
        assert_eq!(ItbenchGroundTruth::from(&native), normalise(&doc.body));
        // The scenario id survives as an extension.
        assert_eq!(native.extensions.get("id"), value.get("id"));
    }
}

#[test]
fn changed_is_read_from_the_fault_or_its_entity() {
    let docs = consolidated();
    let by_id = |id: &str| {
        let v = docs.iter().find(|d| d["id"] == id).unwrap().clone();
        GroundTruth::from(&ItbenchDocument::from_value(v).unwrap().body)
    };
    // Scenario 4 writes `changed` inside the entity, scenario 2 at the fault.
    for id in ["4", "2"] {
        let gt = by_id(id);
        let change = gt
            .faults
            .iter()
            .find_map(|f| f.change.as_ref())
            .expect("a change");
        assert_eq!(change.field, r"data.demo\.flagd\.json");
        assert_ne!(change.from, change.to);
    }
}

#[test]
fn wrapped_yaml_documents_read_and_write_back_in_their_form() {
    for n in [1, 20, 102] {
        let path = fixtures().join(format!(
            "ground_truth_examples/scenario_{n}_groundtruth_v1.yaml"
        ));
        let text = std::fs::read_to_string(&path).unwrap();
        let value: Value = serde_norway::from_str(&text).unwrap();
        let doc = ItbenchDocument::from_value(value.clone()).unwrap();
        assert!(doc.wrapped, "{}", path.display());
        assert_eq!(doc.name.as_deref(), Some(format!("scenario-{n}").as_str()));
        let native = GroundTruth::from(&doc.body);
        native.check().unwrap();
        assert!(native.root_cause_ids().count() >= 1);
        let again = ItbenchDocument::from_value(doc.to_value()).unwrap();
        assert_eq!(again, doc);
    }
}

#[test]
fn broken_references_are_reported_with_their_place() {
    let mut gt = GroundTruth::from(
        &ItbenchDocument::from_value(consolidated()[0].clone())
            .unwrap()
            .body,
    );
    gt.propagations[0].target = "nowhere".into();
    let err = gt.check().unwrap_err();
    assert!(
        err.contains("propagations[0].target") && err.contains("nowhere"),
        "{err}"
    );
}
