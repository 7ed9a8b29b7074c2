//! The checklist judge against a real local OpenAI-compatible server with scripted answers and
//! injected faults.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::server::{self, Config, Fault, RetryAfter, Server};
use judge::llm::StructuredMode;
use judge::runner;
use schemas::verdict::{VerdictStatus, YesNo};

/// Composite of the default rubric from the yes counts per dimension.
fn composite(of_d1: usize, of_d2: usize, of_d3: usize) -> f64 {
    0.33 * of_d1 as f64 / 3.0 + 0.33 * of_d2 as f64 / 3.0 + 0.34 * of_d3 as f64 / 3.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_percent_faults_lose_no_verdict_and_a_rerun_hits_the_cache() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path().join("outputs");
    // Even trials deny two questions, so scores differ between items.
    common::write_outputs(&outputs, 20, 2, |_, trial| {
        if trial % 2 == 0 {
            "no:D1-Q3 no:D3-Q1".into()
        } else {
            String::new()
        }
    });
    let srv = Server::start(Config {
        fault_rate: 0.3,
        stall: Duration::from_secs(3),
        ..Config::default()
    })
    .await;
    let cache = dir.path().join("cache");

    let items = common::items(&outputs, "agent-a");
    assert_eq!(items.len(), 40);
    let cfg = common::run_config(
        common::llm_config(&srv.base_url()),
        &dir.path().join("run1"),
        Some(&cache),
    );
    let (results, report) = runner::run(items.clone(), cfg).await.unwrap();

    assert_eq!(report.judge_errors, 0, "a verdict was lost");
    assert!(
        results
            .items
            .iter()
            .all(|i| i.status == VerdictStatus::Scored)
    );
    for it in &results.items {
        let expected = if it.item.trial == "2" {
            composite(2, 3, 2)
        } else {
            1.0
        };
        assert!(
            (it.composite.unwrap() - expected).abs() < 1e-9,
            "{}: {:?}",
            it.item.id,
            it.composite
        );
        let no: Vec<&str> = it
            .answers
            .iter()
            .filter(|a| a.answer == YesNo::No)
            .map(|a| a.id.as_str())
            .collect();
        if it.item.trial == "2" {
            assert_eq!(no, ["D1-Q3", "D3-Q1"]);
        } else {
            assert!(no.is_empty());
        }
    }
    // Every kind of fault happened, and each cost extra requests.
    let log = srv.log();
    for f in server::ALL_FAULTS {
        assert!(
            log.iter().any(|l| l.fault == Some(f)),
            "fault {f:?} never injected"
        );
    }
    let faulted = log.iter().filter(|l| l.fault.is_some()).count();
    assert!(
        faulted * 5 >= log.len(),
        "fault rate too low: {faulted}/{}",
        log.len()
    );
    assert_eq!(report.requests as usize, log.len());
    assert!(
        log.iter().any(|l| l.follow_ups > 0),
        "no repair request was sent"
    );

    // Re-judging unchanged inputs: every verdict from the cache, zero requests.
    let before = srv.requests();
    let cfg = common::run_config(
        common::llm_config(&srv.base_url()),
        &dir.path().join("run2"),
        Some(&cache),
    );
    let (again, report2) = runner::run(items, cfg).await.unwrap();
    assert_eq!(srv.requests(), before, "a cached re-run sent requests");
    assert_eq!(report2.from_cache, 40);
    assert_eq!(report2.requests, 0);
    for (a, b) in results.items.iter().zip(&again.items) {
        assert_eq!((a.composite, &a.answers), (b.composite, &b.answers));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_that_stay_invalid_are_error_verdicts_never_no() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path().join("outputs");
    common::write_outputs(&outputs, 3, 1, |_, _| String::new());
    let items = common::items(&outputs, "a");
    let cache = dir.path().join("cache");
    let out = dir.path().join("run");
    let bad = Server::start(Config {
        fault_rate: 1.0,
        faults: vec![Fault::InvalidJson, Fault::MissingIds],
        ..Config::default()
    })
    .await;
    let mut cfg = common::run_config(common::llm_config(&bad.base_url()), &out, Some(&cache));
    cfg.exchanges = 2;
    let (results, report) = runner::run(items.clone(), cfg).await.unwrap();
    assert_eq!(report.judge_errors, 3);
    for it in &results.items {
        assert_eq!(it.status, VerdictStatus::JudgeError);
        assert_eq!(it.composite, None);
        assert!(it.answers.is_empty());
        assert!(
            it.error.as_deref().unwrap().contains("invalid answer"),
            "{:?}",
            it.error
        );
    }
    // Two exchanges of (answer + one repair) per item.
    assert_eq!(bad.requests(), 3 * 4);
    // The log keeps the raw response for inspection.
    let log = std::fs::read_to_string(out.join(runner::LOG_FILE)).unwrap();
    assert!(log.contains("raw_response") && log.contains("judge_error"));

    // Errors are not cached: the same run directory against a healthy server redoes exactly them.
    let good = Server::start(Config::default()).await;
    let cfg = common::run_config(common::llm_config(&good.base_url()), &out, Some(&cache));
    let (results, report) = runner::run(items, cfg).await.unwrap();
    assert_eq!(
        (report.judged, report.from_cache, report.judge_errors),
        (3, 0, 0)
    );
    assert!(
        results
            .items
            .iter()
            .all(|i| i.status == VerdictStatus::Scored && i.composite == Some(1.0))
    );
    assert_eq!(good.requests(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_ids_are_repaired_in_one_follow_up() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path().join("outputs");
    common::write_outputs(&outputs, 2, 1, |_, _| String::new());
    let srv = Server::start(Config {
        fault_rate: 1.0,
        faults: vec![Fault::MissingIds],
        faults_on_repair: false,
        ..Config::default()
    })
    .await;
    let cfg = common::run_config(
        common::llm_config(&srv.base_url()),
        &dir.path().join("run"),
        None,
    );
    let (results, report) = runner::run(common::items(&outputs, "a"), cfg)
        .await
        .unwrap();
    assert_eq!(report.judge_errors, 0);
    assert!(results.items.iter().all(|i| i.composite == Some(1.0)));
    let log = srv.log();
    assert_eq!(log.len(), 4);
    // Each repair carries the bad answer and the complaint naming the missing ids.
    assert_eq!(log.iter().filter(|l| l.follow_ups == 2).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_structured_output_support_the_judge_falls_back_to_plain_json() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path().join("outputs");
    common::write_outputs(&outputs, 3, 1, |_, _| String::new());
    let srv = Server::start(Config {
        structured_supported: false,
        ..Config::default()
    })
    .await;
    let mut llm = common::llm_config(&srv.base_url());
    llm.structured = StructuredMode::Auto;
    let mut cfg = common::run_config(llm, &dir.path().join("run"), None);
    cfg.concurrency = 1;
    let (results, report) = runner::run(common::items(&outputs, "a"), cfg)
        .await
        .unwrap();
    assert_eq!(report.judge_errors, 0);
    assert!(results.items.iter().all(|i| i.composite == Some(1.0)));
    let log = srv.log();
    assert!(log[0].structured, "the first request asks for a schema");
    assert!(
        log[1..].iter().all(|l| !l.structured),
        "later requests must not"
    );
    let verdicts = std::fs::read_to_string(dir.path().join("run").join(runner::LOG_FILE)).unwrap();
    assert!(verdicts.contains(r#""structured_output":false"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_in_seconds_is_waited_out() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path().join("outputs");
    common::write_outputs(&outputs, 1, 1, |_, _| String::new());
    let srv = Server::start(Config {
        first_rate_limited: 1,
        retry_after: RetryAfter::Seconds(1),
        ..Config::default()
    })
    .await;
    let cfg = common::run_config(
        common::llm_config(&srv.base_url()),
        &dir.path().join("run"),
        None,
    );
    let (results, _) = runner::run(common::items(&outputs, "a"), cfg)
        .await
        .unwrap();
    assert_eq!(results.items[0].status, VerdictStatus::Scored);
    let log = srv.log();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].fault, Some(Fault::RateLimited));
    // The retry came no earlier than the server asked (backoff alone would be < 40 ms here).
    assert!(log[1].at.duration_since(log[0].at) >= Duration::from_millis(1000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temperature_and_seed_are_sent_recorded_and_samples_vote() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path().join("outputs");
    common::write_outputs(&outputs, 2, 1, |_, _| String::new());
    // Seed 101 says no to D3-Q3 (outvoted 2:1); seeds 101 and 102 say no to D3-Q2 (wins 2:1).
    let script: server::Script = Arc::new(|_user: &str, ids: &[String], seed: Option<i64>| {
        ids.iter()
            .map(|id| {
                !matches!(
                    (id.as_str(), seed),
                    ("D3-Q3", Some(101)) | ("D3-Q2", Some(101 | 102))
                )
            })
            .collect()
    });
    let srv = Server::start(Config {
        script,
        ..Config::default()
    })
    .await;
    let mut llm = common::llm_config(&srv.base_url());
    llm.temperature = 0.25;
    llm.seed = Some(100);
    let out = dir.path().join("run");
    let mut cfg = common::run_config(llm, &out, None);
    cfg.samples = 3;
    let (results, report) = runner::run(common::items(&outputs, "a"), cfg)
        .await
        .unwrap();
    assert_eq!(report.verdicts, 6);
    let mut seeds: Vec<i64> = srv.log().iter().map(|l| l.seed.unwrap()).collect();
    seeds.sort_unstable();
    assert_eq!(seeds, [100, 100, 101, 101, 102, 102]);
    assert!(srv.log().iter().all(|l| l.temperature == Some(0.25)));
    for it in &results.items {
        let get = |id: &str| it.answers.iter().find(|a| a.id == id).unwrap().answer;
        assert_eq!(get("D3-Q3"), YesNo::Yes);
        assert_eq!(get("D3-Q2"), YesNo::No);
        assert_eq!(it.samples_scored, 3);
        assert!((it.composite.unwrap() - composite(3, 3, 2)).abs() < 1e-9);
    }
    // Every verdict records what produced it.
    let log = judge::store::read_log(&out.join(runner::LOG_FILE)).unwrap();
    for v in log.values() {
        let j = v.judge.as_ref().unwrap();
        assert_eq!(
            (j.model.as_str(), j.temperature, j.seed),
            ("judge-test", 0.25, Some(100 + i64::from(v.sample)))
        );
        assert_eq!(v.rubric_version, "1.0");
        assert_eq!(v.prompt_hash.len(), 64);
        assert!(v.raw_response.as_deref().unwrap().contains("answers"));
        assert!(v.usage.prompt_tokens > 0 && v.requests == 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sregym_csv_and_faultline_runs_are_judged_too() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let truths = common::truths();
    // A SREGym results CSV: free-text submissions, the problem id and the attempt.
    let csv_path = dir.path().join("claude_ALL_results.csv");
    let mut w = csv::Writer::from_path(&csv_path).unwrap();
    w.write_record(["problem_id", "attempt", "Diagnosis.submission", "TTL"])
        .unwrap();
    w.write_record([
        "Scenario-2",
        "1",
        "flagd-config turned cartFailure on",
        "12.5",
    ])
    .unwrap();
    w.write_record([
        "scenario_2",
        "2",
        "no:D2-Q2 the cart service is broken",
        "9.0",
    ])
    .unwrap();
    w.write_record(["unknown-problem", "1", "whatever", "1"])
        .unwrap();
    w.flush().unwrap();
    // A faultline run tree: <agent>/<problem>/<trial>/run.json; one run ended without output.
    let run = |trial: &str, output: Option<&str>| {
        serde_json::json!({
            "schema_version": 1, "agent": "fl-agent", "problem_id": "2", "trial": trial, "mode": "replay",
            "started_at": "2026-11-22T08:00:00Z",
            "output": output.map(|d| serde_json::json!({"diagnosis": d})),
            "error": output.is_none().then_some("agent timed out"),
        })
    };
    for (trial, out) in [
        ("1", Some("the flagd-config ConfigMap enabled cartFailure")),
        ("2", None),
    ] {
        let p = dir
            .path()
            .join("runs/fl-agent/2")
            .join(trial)
            .join("run.json");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, serde_json::to_vec(&run(trial, out)).unwrap()).unwrap();
    }
    let mut scan = judge::layout::Scan::default();
    judge::layout::scan(&csv_path, "sregym-agent", None, &truths, &mut scan).unwrap();
    judge::layout::scan(
        &dir.path().join("runs"),
        "ignored",
        None,
        &truths,
        &mut scan,
    )
    .unwrap();
    assert_eq!(scan.items.len(), 4);
    assert_eq!(scan.without_truth.len(), 1, "{:?}", scan.without_truth);
    let ids: Vec<&str> = scan.items.iter().map(|i| i.item.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "sregym-agent/2/1",
            "sregym-agent/2/2",
            "fl-agent/2/1",
            "fl-agent/2/2"
        ]
    );

    let srv = Server::start(Config::default()).await;
    let cfg = common::run_config(
        common::llm_config(&srv.base_url()),
        &dir.path().join("out"),
        None,
    );
    let (results, report) = runner::run(scan.items, cfg).await.unwrap();
    // The run without output is the agent's failure: scored 0 without a call, and counted.
    assert_eq!(report.requests, 3);
    let by_id = |id: &str| results.items.iter().find(|i| i.item.id == id).unwrap();
    assert_eq!(by_id("sregym-agent/2/1").composite, Some(1.0));
    assert!((by_id("sregym-agent/2/2").composite.unwrap() - composite(3, 2, 3)).abs() < 1e-9);
    let failed = by_id("fl-agent/2/2");
    assert_eq!(
        (failed.status, failed.composite),
        (VerdictStatus::AgentError, Some(0.0))
    );
    let fl = &results.stats["fl-agent"].micro_overall["composite"];
    assert_eq!((fl.n, fl.agent_errors, fl.mean), (2, 1, Some(0.5)));
    // Free text has no entities: ITBench's structured metrics are not invented for it.
    assert!(by_id("sregym-agent/2/1").metrics.is_empty());
}
