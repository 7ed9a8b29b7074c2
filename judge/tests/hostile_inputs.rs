//! The `judge` binary on files from strangers: a `run.json` whose names or ground-truth path lead
//! out of their directories, ground truths that hold nothing or a version this judge does not
//! read, outputs that cannot be read, and a single ground-truth file matched by `--problem`.

use std::path::Path;
use std::process::{Command, Output};

const TRUTH: &str = include_str!("../../fuzz/corpus/ground_truth/seed-faultline.json");

fn judge(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_judge"))
        .env_remove("JUDGE_BASE_URL")
        .env_remove("JUDGE_API_KEY")
        .env_remove("JUDGE_MODEL")
        .env(
            "JUDGE_CACHE_DIR",
            std::env::temp_dir().join("faultline-judge-hostile"),
        )
        .args(args)
        .output()
        .expect("judge runs")
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn run_json(agent: &str, trial: &str, ground_truth: Option<&str>) -> String {
    let mut v = serde_json::json!({
        "schema_version": 2,
        "agent": agent,
        "problem_id": "hotel-geo-target-port",
        "trial": trial,
        "mode": "live",
        "started_at": "2026-01-01T00:00:00Z",
        "output": {"entities": [{"name": "hotel-reservation/Service/geo", "contributing_factor": true}]},
    });
    if let Some(gt) = ground_truth {
        v["ground_truth"] = gt.into();
    }
    v.to_string()
}

fn fails_saying(out: &Output, says: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for s in says {
        assert!(err.contains(s), "expected {s:?} in: {err}");
    }
}

#[test]
fn run_files_cannot_lead_the_judge_out_of_its_directories() {
    let dir = tempfile::tempdir().unwrap();
    let gt = dir.path().join("gt.json");
    std::fs::write(&gt, TRUTH).unwrap();
    for (agent, trial, truth, says) in [
        ("../../../../x", "1", None, "agent: `../../../../x`"),
        ("a", "../../../../x", None, "trial: `../../../../x`"),
        ("a", "1", Some("/etc/passwd"), "ground_truth: `/etc/passwd`"),
        ("a", "1", Some("../gt.json"), "ground_truth: `../gt.json`"),
    ] {
        let runs = dir.path().join("runs");
        let _ = std::fs::remove_dir_all(&runs);
        std::fs::create_dir_all(runs.join("r")).unwrap();
        std::fs::write(runs.join("r/run.json"), run_json(agent, trial, truth)).unwrap();
        let out_dir = dir.path().join("out/deep/deeper/deepest/judged");
        let out = judge(&[
            "run",
            "--no-llm",
            "--judge-outputs",
            "--ground-truth",
            &s(&gt),
            "--outputs",
            &s(&runs),
            "--out",
            &s(&out_dir),
        ]);
        fails_saying(&out, &[says, "not a plain name"]);
        assert!(
            !dir.path().join("x").exists() && !dir.path().join("out/deep/x").exists(),
            "nothing is written outside --out"
        );
    }
}

#[test]
fn ground_truths_that_hold_nothing_or_another_version_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("answer.json");
    std::fs::write(&output, r#"{"entities": []}"#).unwrap();
    for (text, says) in [
        ("{}", "neither a faultline ground truth"),
        (
            &TRUTH.replace("\"schema_version\": 1", "\"schema_version\": 99")[..],
            "schema_version: this faultline reads version 1, the ground truth is version 99",
        ),
    ] {
        let gt = dir.path().join("gt.json");
        std::fs::write(&gt, text).unwrap();
        let out = judge(&[
            "run",
            "--no-llm",
            "--ground-truth",
            &s(&gt),
            "--outputs",
            &s(&output),
            "--problem",
            "hotel-geo-target-port",
            "--out",
            &s(&dir.path().join("o")),
        ]);
        fails_saying(&out, &["gt.json", says]);
    }
}

#[test]
fn unreadable_outputs_are_counted_and_one_truth_file_matches_its_problem() {
    let dir = tempfile::tempdir().unwrap();
    // A single ground-truth file whose name is not the problem id.
    let gt = dir.path().join("truth-of-the-run.json");
    std::fs::write(
        &gt,
        TRUTH.replace("\"problem_id\": \"hotel-geo-target-port\"", "\"x\": 1"),
    )
    .unwrap();
    let garbage = dir.path().join("answer.json");
    std::fs::write(&garbage, "[1, 2, 3]").unwrap();
    let out = judge(&[
        "run",
        "--no-llm",
        "--ground-truth",
        &s(&gt),
        "--outputs",
        &s(&garbage),
        "--problem",
        "hotel-geo-target-port",
        "--out",
        &s(&dir.path().join("o")),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 items"), "{stdout}");
    assert!(
        stdout.contains("1 unreadable outputs (scored 0)"),
        "{stdout}"
    );
}
