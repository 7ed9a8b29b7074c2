//! The `judge` binary end to end: a run killed midway resumes without redoing finished items,
//! help and exit codes, errors that name the bad input, ITBench output files, agreement, and the
//! HTML report rendered in headless Chromium.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::server::{Config, Server};

fn judge() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_judge"));
    c.env_remove("JUDGE_BASE_URL")
        .env_remove("JUDGE_API_KEY")
        .env_remove("JUDGE_MODEL")
        .env_remove("JUDGE_CACHE_DIR");
    c
}

fn run_args(base_url: &str, gt: &Path, outputs: &str, out: &Path) -> Vec<String> {
    [
        "run",
        "--ground-truth",
        &gt.display().to_string(),
        "--outputs",
        outputs,
        "--out",
        &out.display().to_string(),
        "--base-url",
        base_url,
        "--model",
        "judge-test",
        "--backoff-base-ms",
        "2",
        "--backoff-cap-ms",
        "20",
        "--timeout",
        "5",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn finished_items(log: &Path) -> BTreeSet<String> {
    judge::store::read_log(log)
        .unwrap()
        .into_values()
        .map(|v| v.item.id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_resumes_without_redoing_finished_items() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path().join("outputs");
    common::write_outputs(&outputs, 12, 1, |_, _| String::new());
    let gt = common::fixtures().join("judge_inputs/ground_truths.json");
    let srv = Server::start(Config {
        latency: Duration::from_millis(300),
        ..Config::default()
    })
    .await;
    let out = dir.path().join("run");
    let log = out.join(judge::runner::LOG_FILE);
    let mut args = run_args(
        &srv.base_url(),
        &gt,
        &format!("a={}", outputs.display()),
        &out,
    );
    args.extend(["--no-cache", "--concurrency", "2", "--json"].map(String::from));

    let mut child = judge()
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until some, not all, items are in the log, then kill the process outright.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = finished_items(&log).len();
        if done >= 4 {
            break;
        }
        assert!(Instant::now() < deadline, "the run made no progress");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it could be killed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let killed_at = Instant::now();
    let finished = finished_items(&log);
    assert!(finished.len() < 12, "killed too late: {}", finished.len());

    let status = judge().args(&args).stdout(Stdio::null()).status().unwrap();
    assert!(status.success());
    // No request after the kill concerned an item that had finished before it.
    for l in srv.log().iter().filter(|l| l.at > killed_at) {
        for id in &finished {
            let tag = format!("case-{}-1:", id.split('/').nth(1).unwrap());
            assert!(!l.user.contains(&tag), "{id} was judged again");
        }
    }
    let results = judge::report::load_results(&out).unwrap();
    assert_eq!(results.items.len(), 12);
    assert!(results.items.iter().all(|i| i.composite == Some(1.0)));
    // Each item's verdict is in the log exactly once.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 12, "{text}");
}

#[test]
fn every_command_has_help_with_an_example_and_usage_errors_exit_2() {
    for cmd in ["run", "report", "agree"] {
        let out = judge().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Example: judge "), "{cmd}: {text}");
    }
    let out = judge().args(["run", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bad_input_is_named_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let gt = dir.path().join("broken_gt.yaml");
    std::fs::write(&gt, "groups: [ {id: a, kind: Pod\n").unwrap();
    let out = judge()
        .args([
            "run",
            "--no-llm",
            "--ground-truth",
            &gt.display().to_string(),
            "--outputs",
            ".",
            "--out",
            &dir.path().join("o").display().to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("broken_gt.yaml") && err.contains("YAML"),
        "{err}"
    );

    let rubric = dir.path().join("rubric.yaml");
    std::fs::write(
        &rubric,
        judge::rubric::DEFAULT_RUBRIC_YAML.replace("threshold: 0.70", "threshold: 7"),
    )
    .unwrap();
    let good_gt = common::fixtures().join("judge_inputs/ground_truths.json");
    let out = judge()
        .args([
            "run",
            "--rubric",
            &rubric.display().to_string(),
            "--ground-truth",
            &good_gt.display().to_string(),
            "--outputs",
            ".",
            "--out",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rubric.yaml") && err.contains("threshold"),
        "{err}"
    );
}

#[test]
fn deterministic_run_on_the_itbench_fixtures_writes_itbench_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let fx = common::fixtures().join("judge_inputs");
    let status = judge()
        .args([
            "run",
            "--no-llm",
            "--json",
            "--judge-outputs",
            "--ground-truth",
            &fx.display().to_string(),
            "--outputs",
            &format!("itbench-agent={}", fx.join("agent_outputs").display()),
            "--out",
            &out.display().to_string(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let ev: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("evaluation_results.json")).unwrap())
            .unwrap();
    let raw = ev["raw_results"].as_array().unwrap();
    assert_eq!(raw.len(), 4);
    let find = |inc: &str, trial: &str| {
        raw.iter()
            .find(|r| r["incident_id"] == inc && r["trial_id"] == trial)
            .unwrap()
    };
    // Hand-computed in tests/itbench_metrics.rs.
    assert_eq!(
        find("2", "1")["scores"]["root_cause_entity"]["calculation_precision"],
        0.125
    );
    assert_eq!(
        find("2", "2")["scores"]["propagation_chain"]["precision"],
        0.4
    );
    let overall = &ev["statistics"]["overall"];
    // Scenario 1 scores entity F1 0 twice; scenario 2 scores 2/9 and 0.4: macro mean over incidents.
    let f1 = overall["root_cause_entity_f1"]["mean"].as_f64().unwrap();
    assert!(
        (f1 - (0.0 + (2.0 * 0.125 / 1.125 + 0.4) / 2.0) / 2.0).abs() < 1e-9,
        "{f1}"
    );
    assert_eq!(overall["root_cause_entity_f1"]["n_incidents"], 2);
    let jo: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("trials/itbench-agent/Scenario-2/1/judge_output.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(jo["metadata"]["scenario_name"], "Scenario-2");
    assert_eq!(
        jo["flat_scores"]["root_cause_entity_k@2_f1"]
            .as_f64()
            .map(|v| (v * 1e6).round()),
        Some((2.0f64 / 3.0 * 1e6).round())
    );
}

fn write_labels(path: &Path, rows: &[(&str, &str, &str, &str)]) {
    let mut w = csv::Writer::from_path(path).unwrap();
    w.write_record(["item", "question", "answer", "rater"])
        .unwrap();
    for r in rows {
        w.write_record([r.0, r.1, r.2, r.3]).unwrap();
    }
    w.flush().unwrap();
}

#[test]
fn agree_reports_kappa_per_question_and_pooled() {
    let dir = tempfile::tempdir().unwrap();
    let labels = dir.path().join("labels.csv");
    write_labels(
        &labels,
        &[
            ("i1", "Q1", "yes", "ann"),
            ("i1", "Q1", "yes", "bob"),
            ("i2", "Q1", "no", "ann"),
            ("i2", "Q1", "no", "bob"),
            ("i3", "Q1", "yes", "ann"),
            ("i3", "Q1", "no", "bob"),
            ("i1", "Q2", "yes", "ann"),
            ("i1", "Q2", "yes", "bob"),
            ("i2", "Q2", "yes", "ann"),
            ("i2", "Q2", "no", "bob"),
        ],
    );
    let out = judge()
        .args(["agree", "--json", &labels.display().to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["raters"], serde_json::json!(["ann", "bob"]));
    // Q1: agree on 2 of 3; ann yes 2/3, bob yes 1/3 → p_e = 2/9 + 2/9 = 4/9 → κ = (2/3 − 4/9)/(5/9) = 0.4.
    let k = rep["per_question"]["Q1"]["cohen_kappa"].as_f64().unwrap();
    assert!((k - 0.4).abs() < 1e-9, "{k}");
    assert_eq!(rep["pooled"]["units"], 5);
    let one_rater = dir.path().join("one.csv");
    write_labels(&one_rater, &[("i1", "Q1", "yes", "ann")]);
    let out = judge()
        .args(["agree", &one_rater.display().to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let bad = dir.path().join("bad.csv");
    write_labels(&bad, &[("i1", "Q1", "perhaps", "ann")]);
    let out = judge()
        .args(["agree", &bad.display().to_string()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.csv") && err.contains("row 2") && err.contains("perhaps"),
        "{err}"
    );
}

/// Renders a page in headless Chromium and returns the screenshot.
fn screenshot(html: &Path, png: &Path) {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("headless Chromium is required for this test: install the Debian package `chromium` (apt-get install chromium)");
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1000,1400",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(
        png.is_file(),
        "chromium wrote no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Share of pixels that are not near-white, and the number of distinct colours.
fn ink(png: &Path) -> (f64, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let mut colours = BTreeSet::new();
    let mut inked = 0usize;
    let n = pixels.len() / channels;
    for p in pixels.chunks(channels) {
        let rgb = (p[0], p[1], p[2]);
        colours.insert(rgb);
        if rgb.0 < 235 || rgb.1 < 235 || rgb.2 < 235 {
            inked += 1;
        }
    }
    (inked as f64 / n as f64, colours.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_writes_a_leaderboard_and_a_page_chromium_renders() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let gt = common::fixtures().join("judge_inputs/ground_truths.json");
    let srv = Server::start(Config::default()).await;
    let mut runs: Vec<PathBuf> = Vec::new();
    // Two agents: one always right, one that misses the mechanism half the time.
    for (agent, marker) in [("steady", ""), ("sloppy", "no:D2-Q1 no:D2-Q2")] {
        let outputs = dir.path().join(agent);
        common::write_outputs(&outputs, 6, 2, |_, trial| {
            if trial == 1 {
                marker.into()
            } else {
                String::new()
            }
        });
        let out = dir.path().join(format!("run-{agent}"));
        let args = run_args(
            &srv.base_url(),
            &gt,
            &format!("{agent}={}", outputs.display()),
            &out,
        );
        let status = judge()
            .args(&args)
            .args(["--no-cache", "--json"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        runs.push(out);
    }
    let board = dir.path().join("board");
    let out = judge()
        .arg("report")
        .args(&runs)
        .args(["--out", &board.display().to_string(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lb: serde_json::Value =
        serde_json::from_slice(&std::fs::read(board.join("leaderboard.json")).unwrap()).unwrap();
    assert_eq!(lb["metric"], "composite");
    assert_eq!(lb["rows"][0]["agent"], "steady");
    assert_eq!(lb["rows"][0]["score"], 1.0);
    // sloppy: half its trials lose 2 of D2's 3 questions → 1 − 0.33·2/3 on those → mean 1 − 0.11.
    let s = lb["rows"][1]["score"].as_f64().unwrap();
    assert!((s - (1.0 - 0.33 * 2.0 / 3.0 / 2.0)).abs() < 1e-9, "{s}");
    assert_eq!(lb["rows"][1]["pass_at_1"], 1.0);
    let html = std::fs::read_to_string(board.join("index.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 3);
    let png = dir.path().join("shot.png");
    screenshot(&board.join("index.html"), &png);
    let (ink, colours) = ink(&png);
    assert!(ink > 0.03, "the page rendered nearly blank: {ink}");
    assert!(colours > 20, "too few colours for plots: {colours}");
}
