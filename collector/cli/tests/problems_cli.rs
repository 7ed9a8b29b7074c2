//! `collector problems` end to end: the real binary over the built-in catalog and a user directory.

use std::process::Command;

fn collector(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_collector"))
        .args(args)
        .output()
        .expect("run collector")
}

#[test]
fn validate_builtin_and_list_with_pattern() {
    let out = collector(&["problems", "validate", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["valid"], true);
    assert!(v["problems"].as_u64().unwrap() >= 60);

    let out = collector(&["problems", "list", "--pattern", "social-*", "--json"]);
    assert!(out.status.success());
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["application"] == "social-network"));
}

#[test]
fn show_prints_the_spec_and_unknown_ids_fail() {
    let out = collector(&["problems", "show", "hotel-geo-target-port", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["faults"][0]["primitive"], "service_target_port");
    let out = collector(&["problems", "show", "no-such-problem"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn validate_dir_reports_file_line_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("my-problem.toml");
    std::fs::write(
        &path,
        "id = \"my-problem\"\napplication = \"hotel-reservation\"\ntitle = \"t\"\n\n[[faults]]\nprimitive = \"scale\"\nservice = \"serch\"\nreplicas = 0\n\n[oracle]\nstate = [{ assert = \"fault_cleared\", fault = 0 }]\n\n[ground_truth]\ndescription = \"d\"\ncomponents = [{ id = \"s\", kind = \"Deployment\", name = \"search\", root_cause = true }]\nfaults = [{ target = { component = \"s\", kind = \"Deployment\", name = \"search\" }, mechanism = \"m\" }]\n\n[[visibility]]\ncheck = \"endpoints_empty\"\nservice = \"search\"\n",
    )
    .expect("write");
    let out = collector(&["problems", "validate", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!("{}:7:11: field `faults[0].service`", path.display());
    assert!(stderr.contains(&want), "{stderr}");
    assert!(stderr.contains("serch"), "{stderr}");
}

#[test]
fn catalog_md_check_passes_on_the_committed_file() {
    let md = concat!(env!("CARGO_MANIFEST_DIR"), "/../../problems/CATALOG.md");
    let out = collector(&["problems", "catalog-md", "--check", "--out", md]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
