//! Request bodies recorded from real kubectl 1.32 and 1.33 (`fixtures/protobuf/capture.py`; the
//! command behind each file is in `commands.<minor>.txt`), decoded to API JSON.

use std::path::{Path, PathBuf};

use apiserver::protobuf;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protobuf")
}

/// Every recorded body: (file stem such as `deployment.32`, bytes).
fn recorded() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixtures())
        .expect("fixtures directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .map(|p| {
            let stem = p.file_stem().expect("stem").to_string_lossy().into_owned();
            (stem, std::fs::read(&p).expect("fixture bytes"))
        })
        .collect();
    out.sort();
    out
}

fn decoded(name: &str, minor: u32) -> Value {
    let bytes = std::fs::read(fixtures().join(format!("{name}.{minor}.bin"))).expect("fixture");
    protobuf::decode(&bytes).unwrap_or_else(|e| panic!("{name}.{minor}: {e}"))
}

/// kubectl 1.32/1.33 print `creationTimestamp: null` for an unset time; the current API types
/// (and so the decoder's table) mark the field omitzero and leave it out.
fn without_null_creation_timestamps(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map.get("creationTimestamp") == Some(&Value::Null) {
                map.remove("creationTimestamp");
            }
            map.values_mut().for_each(without_null_creation_timestamps);
        }
        Value::Array(items) => items.iter_mut().for_each(without_null_creation_timestamps),
        _ => {}
    }
}

#[test]
fn every_recorded_body_decodes_to_the_json_kubectl_prints_for_it() {
    let mut compared = 0;
    for (stem, bytes) in recorded() {
        let got = protobuf::decode(&bytes).unwrap_or_else(|e| panic!("{stem}: {e}"));
        let json_path = fixtures().join(format!("{stem}.json"));
        let Ok(text) = std::fs::read(&json_path) else {
            continue;
        };
        let mut want: Value = serde_json::from_slice(&text).expect("kubectl JSON");
        without_null_creation_timestamps(&mut want);
        assert_eq!(got, want, "{stem}");
        compared += 1;
    }
    assert!(compared >= 36, "only {compared} bodies had kubectl's JSON beside them");
}
