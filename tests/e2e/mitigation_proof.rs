//! The catalog-wide mitigation proof (`collector problems check-fixes`): for every problem, its
//! reference fix, run with real kubectl against a live environment, makes it recover, and the
//! same problem left alone does not; and a fix that only treats the symptom is failed, with the
//! reasons said.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

/// Problems whose fix needs more than the Kubernetes API (node access, `kubectl exec`).
const UNREACHABLE: [&str; 3] = [
    "astro-kubelet-down",
    "hotel-geo-mongo-auth-revoked",
    "hotel-rate-mongo-user-dropped",
];

fn check_fixes(args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let out = Command::new(e2e::binary("collector"))
        .args(["problems", "check-fixes", "--json"])
        .args(args)
        .output()
        .expect("collector runs");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a JSON line expected, got {l:?}: {e}"))
        })
        .collect();
    assert!(
        out.status.code().is_some(),
        "check-fixes died: {}",
        e2e::text(&out)
    );
    (out.status.code(), lines)
}

#[test]
fn every_reference_fix_recovers_its_problem_and_no_problem_heals_alone() {
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .expect("kubectl is installed (apt-get install kubectl, or bash tests/run)");
    Command::new("jq")
        .arg("--version")
        .output()
        .expect("jq is installed (apt-get install jq, or bash tests/run)");
    let (code, lines) = check_fixes(&[]);
    let (summary, proofs) = lines.split_last().expect("a summary line");
    let mut unreachable = BTreeSet::new();
    for p in proofs {
        let id = p["problem"].as_str().expect("problem id");
        if p["unreachable"].is_string() {
            unreachable.insert(id.to_string());
            continue;
        }
        assert_eq!(p["passed"], true, "{id}: {p:#}");
        assert_eq!(p["fixed"]["passed"], true, "{id}: {p:#}");
        assert_eq!(p["left_alone"]["passed"], false, "{id}: {p:#}");
        assert!(
            p["left_alone"]["reasons"]
                .as_array()
                .is_some_and(|r| !r.is_empty()),
            "{id}: an unfixed problem says why it failed: {p:#}"
        );
        for c in p["commands"].as_array().expect("commands") {
            assert_eq!(c["ok"], true, "{id}: {c:#}");
        }
    }
    let expected: BTreeSet<String> = UNREACHABLE.iter().map(|s| s.to_string()).collect();
    assert_eq!(unreachable, expected);
    assert_eq!(summary["failed"], 0, "{summary}");
    assert!(
        summary["total"].as_u64().is_some_and(|n| n >= 78),
        "{summary}"
    );
    assert_eq!(code, Some(0));
    println!(
        "mitigation proof: {}/{} problems ({} need more than the Kubernetes API)",
        summary["passed"], summary["total"], summary["unreachable"]
    );
}

#[test]
fn a_fix_that_only_restarts_pods_is_failed_with_its_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../problems/catalog/problems/hotel-geo-target-port.toml"
    );
    let spec = std::fs::read_to_string(src).expect("the problem's spec");
    let (head, _) = spec.split_once("[reference_fix]").expect("a reference fix");
    let spec = head.replace(
        "id = \"hotel-geo-target-port\"",
        "id = \"geo-restart-only\"",
    ) + "[reference_fix]\ncommands = [\"kubectl -n hotel-reservation rollout restart deployment/geo\"]\n";
    std::fs::write(dir.path().join("geo-restart-only.toml"), spec).unwrap();
    let (code, lines) = check_fixes(&[
        "--pattern",
        "geo-restart-only",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{lines:#?}");
    let p = &lines[0];
    assert_eq!(p["passed"], false);
    assert_eq!(p["commands"][0]["ok"], true, "the restart itself succeeds");
    let reasons = p["fixed"]["reasons"].to_string();
    assert!(reasons.contains("error ratio"), "{reasons}");
    assert_eq!(lines[1]["failed"], 1);
}
