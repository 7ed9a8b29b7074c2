//! A judge model that fails (answering 500, or refusing connections) costs only the LLM part of a
//! verdict: the deterministic metrics and the pass rule stand in `judge run` results, its
//! statistics and report, and in a session's in-loop record; the next run redoes the LLM part.

mod common;

use std::sync::Arc;

use common::server::{Config, Fault, Server};
use judge::in_loop::{self, InLoop};
use judge::llm::{Llm, LlmConfig};
use judge::runner;
use schemas::AgentOutput;
use schemas::agent_output::AgentEntity;
use schemas::verdict::VerdictStatus;

/// A judge endpoint nobody listens on: a port bound and released.
fn refused_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}/v1")
}

fn failing(base_url: &str) -> LlmConfig {
    let mut c = common::llm_config(base_url);
    c.max_attempts = 2;
    c
}

async fn always_500() -> Server {
    Server::start(Config {
        fault_rate: 1.0,
        faults: vec![Fault::ServerError],
        ..Config::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judge_run_keeps_deterministic_scores_when_the_judge_is_down() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path().join("outputs");
    common::write_outputs(&outputs, 3, 2, |_, _| String::new());
    let items = common::items(&outputs, "a");
    assert_eq!(items.len(), 6);
    let srv = always_500().await;
    for (name, url) in [("500", srv.base_url()), ("refused", refused_url())] {
        let out = dir.path().join(name);
        let cfg = common::run_config(failing(&url), &out, None);
        let (results, report) = runner::run(items.clone(), cfg).await.unwrap();
        assert_eq!(report.judge_errors, 6, "{name}");
        for it in &results.items {
            assert_eq!(it.status, VerdictStatus::JudgeError, "{name}");
            assert!(it.error.is_some());
            assert_eq!(
                (it.composite, it.pass),
                (None, None),
                "no LLM score invented"
            );
            // Every output names the right root cause: the deterministic part says so.
            assert_eq!(it.metrics.get("root_cause_entity_f1"), Some(&1.0), "{name}");
            assert!(!it.metrics.contains_key("root_cause_reasoning"));
            assert_eq!(it.rule_pass, Some(true));
        }
        let st = &results.stats["a"];
        let f1 = &st.micro_overall["root_cause_entity_f1"];
        assert_eq!((f1.n, f1.judge_errors, f1.mean), (6, 0, Some(1.0)));
        assert_eq!(st.macro_overall["root_cause_entity_f1"].n, 3);
        // The report ranks by the deterministic metric and still shows the judge errors.
        let lb = judge::report::leaderboard(
            &[judge::report::load_results(&out).unwrap()],
            &judge::report::default_metric(std::slice::from_ref(&results)),
        )
        .unwrap();
        assert_eq!(lb.metric, "root_cause_entity_f1");
        assert_eq!(
            (lb.rows[0].score, lb.rows[0].trials, lb.rows[0].judge_errors),
            (Some(1.0), 6, 6)
        );
        let html = judge::report::html(&lb);
        assert!(html.contains("1.000"), "the score is on the page");
    }
    assert!(srv.requests() >= 6 * 2, "every item was tried");

    // The next run with a healthy judge redoes exactly the LLM part, in the same directory.
    let good = Server::start(Config::default()).await;
    let out = dir.path().join("500");
    let cfg = common::run_config(common::llm_config(&good.base_url()), &out, None);
    let (results, report) = runner::run(items, cfg).await.unwrap();
    assert_eq!(
        (report.judged, report.resumed, report.judge_errors),
        (6, 0, 0)
    );
    assert!(
        results
            .items
            .iter()
            .all(|i| i.status == VerdictStatus::Scored
                && i.composite == Some(1.0)
                && i.metrics.contains_key("root_cause_reasoning"))
    );
}

fn right_and_wrong() -> (AgentOutput, AgentOutput, judge::truth::LoadedTruth) {
    let truths = common::truths();
    let truth = truths.values().next().unwrap().as_ref().clone();
    let (rc, name) = common::root_cause(&truth);
    let output = |n: &str, text: &str| AgentOutput {
        diagnosis: text.to_string(),
        entities: vec![AgentEntity {
            name: format!(
                "{}/{}/{n}",
                rc.namespace.as_deref().unwrap_or("default"),
                rc.kind
            ),
            contributing_factor: true,
            reasoning: format!("{n} was changed"),
            ..Default::default()
        }],
        ..Default::default()
    };
    (
        output(&name, "the root cause"),
        // Names something that is not the root cause.
        output("somewhere-else", "no:D1-Q1 no:D1-Q2 no:D1-Q3"),
        truth,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_loop_records_take_the_checklist_pass_and_fall_back_to_the_rule() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let (right, wrong, truth) = right_and_wrong();
    let cfg = |sub: &str, llm: Option<LlmConfig>| {
        let mut c = InLoop::new(dir.path().join(sub), "agent", "1");
        c.llm = llm.map(|l| Arc::new(Llm::new(l).unwrap()));
        c
    };

    // No judge model: the rule decides, the metrics are there, and the verdict is logged.
    let none = cfg("none", None);
    let r = in_loop::judge_diagnosis(&right, &truth, &none).await;
    assert_eq!((r.submitted, r.pass, r.composite), (true, Some(true), None));
    assert_eq!(r.metrics.get("root_cause_entity_f1"), Some(&1.0));
    assert_eq!(r.judge_error, None);
    assert!(dir.path().join("none").join(runner::LOG_FILE).is_file());
    let w = in_loop::judge_diagnosis(&wrong, &truth, &none).await;
    assert_eq!(w.pass, Some(false));
    assert_eq!(w.metrics.get("root_cause_entity_f1"), Some(&0.0));

    // A healthy judge model decides, even against the rule.
    let srv = Server::start(Config::default()).await;
    let live = cfg("live", Some(common::llm_config(&srv.base_url())));
    let r = in_loop::judge_diagnosis(&right, &truth, &live).await;
    assert_eq!(
        (r.pass, r.composite, r.judge_error),
        (Some(true), Some(1.0), None)
    );
    let mut named_but_denied = right.clone();
    named_but_denied.diagnosis = "no:D1-Q1 no:D1-Q2 no:D1-Q3 no:D2-Q1".into();
    let d = in_loop::judge_diagnosis(&named_but_denied, &truth, &live).await;
    assert_eq!(d.pass, Some(false), "the checklist outranks the rule");
    assert!(d.composite.unwrap() < 0.7);
    assert_eq!(d.metrics.get("root_cause_entity_f1"), Some(&1.0));

    // A judge model that fails: the error is recorded, the rule and the metrics stand.
    let bad = always_500().await;
    for (name, url) in [("down500", bad.base_url()), ("refused", refused_url())] {
        let c = cfg(name, Some(failing(&url)));
        let r = in_loop::judge_diagnosis(&right, &truth, &c).await;
        assert!(r.judge_error.is_some(), "{name}");
        assert_eq!((r.pass, r.composite), (Some(true), None), "{name}");
        assert_eq!(r.metrics.get("root_cause_entity_f1"), Some(&1.0), "{name}");
    }

    // The judge cannot even write its log: still a record, with the reason.
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, b"x").unwrap();
    let mut c = cfg("unused", None);
    c.log_dir = blocker.join("log");
    let r = in_loop::judge_diagnosis(&right, &truth, &c).await;
    assert!(
        r.judge_error.as_deref().unwrap().contains("could not run"),
        "{:?}",
        r.judge_error
    );
    assert_eq!(r.pass, Some(true));
    assert_eq!(r.metrics.get("root_cause_entity_f1"), Some(&1.0));

    assert_eq!(in_loop::not_submitted().pass, Some(false));
}

#[test]
fn a_sessions_ground_truth_file_loads_for_its_problem() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, truth) = right_and_wrong();
    let path = dir.path().join("ground_truth.json");
    std::fs::write(&path, serde_json::to_vec(&truth.truth).unwrap()).unwrap();
    let loaded = in_loop::load_truth(&path, "my-problem").unwrap();
    assert_eq!(
        (loaded.problem_id.as_str(), &loaded.truth),
        ("my-problem", &truth.truth)
    );
    let all = common::fixtures().join("judge_inputs/ground_truths.json");
    let e = in_loop::load_truth(&all, "no-such-problem").unwrap_err();
    assert!(e.to_string().contains("no-such-problem"), "{e}");
}
