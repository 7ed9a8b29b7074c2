//! The session library without the `collector` binary: a live problem started as a [`Session`],
//! an in-process scripted agent launched through a [`Launcher`] of the test's own, driven step by
//! step, and the run's record read back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use problems::{Catalog, Dur};
use schemas::run_result::{RunResult, SessionEnd};
use serde_json::{Value, json};
use session::{
    AgentSpec, Exit, Handover, Judging, Launcher, RunningAgent, Session, SessionOptions, Stage,
    Target,
};

/// An agent that is a task of this process: what it saw is kept for the test to check.
struct ScriptedAgent {
    diagnosis: String,
    /// Whether it puts the port back before it submits the mitigation.
    fix: bool,
    seen: Arc<Mutex<Vec<String>>>,
}

struct Running(Option<tokio::task::JoinHandle<anyhow::Result<()>>>);

impl Launcher for ScriptedAgent {
    fn launch(&self, handover: &Handover) -> anyhow::Result<Box<dyn RunningAgent>> {
        let (handover, diagnosis, seen, fix) = (
            handover.clone(),
            self.diagnosis.clone(),
            self.seen.clone(),
            self.fix,
        );
        Ok(Box::new(Running(Some(tokio::spawn(async move {
            mend_and_submit(&handover, &diagnosis, fix, &seen).await
        })))))
    }

    /// It runs inside the test's own process.
    fn sandbox(&self) -> schemas::run_result::AgentSandbox {
        schemas::run_result::AgentSandbox::None
    }
}

impl RunningAgent for Running {
    fn wait(&mut self) -> BoxFuture<'_, anyhow::Result<Exit>> {
        Box::pin(async move {
            match self.0.as_mut() {
                Some(task) => {
                    let result = task.await?;
                    self.0 = None;
                    Ok(exit(result))
                }
                None => std::future::pending().await,
            }
        })
    }

    fn end(self: Box<Self>, _grace: Duration) -> BoxFuture<'static, anyhow::Result<Exit>> {
        Box::pin(async move {
            match self.0 {
                Some(task) => {
                    task.abort();
                    Ok(match task.await {
                        Ok(result) => exit(result),
                        Err(_) => Exit {
                            success: false,
                            description: "ended".into(),
                        },
                    })
                }
                None => Ok(Exit {
                    success: true,
                    description: "exited".into(),
                }),
            }
        })
    }
}

fn exit(result: anyhow::Result<()>) -> Exit {
    match result {
        Ok(()) => Exit {
            success: true,
            description: "exited".into(),
        },
        Err(e) => Exit {
            success: false,
            description: format!("{e:#}"),
        },
    }
}

/// What a reference SRE does on this problem, through the handed-over endpoints only: finds the
/// geo Service's wrong targetPort, submits the diagnosis, puts the port back (when `fix`), submits
/// the mitigation.
async fn mend_and_submit(
    handover: &Handover,
    diagnosis: &str,
    fix: bool,
    seen: &Mutex<Vec<String>>,
) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let app: Value = http
        .get(format!("{}/get_app", handover.submit_url))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let ns = app["namespace"].as_str().unwrap_or_default().to_string();
    let svc = format!(
        "{}/api/v1/namespaces/{ns}/services/geo",
        handover.endpoints.kubernetes
    );
    let before: Value = http
        .get(&svc)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    seen.lock().unwrap().push(format!(
        "targetPort {}",
        before["spec"]["ports"][0]["targetPort"]
    ));
    let submit = |solution: String| {
        http.post(format!("{}/submit", handover.submit_url))
            .json(&json!({ "solution": solution }))
            .send()
    };
    submit(diagnosis.to_string()).await?.error_for_status()?;
    // The mitigation stage opens once the diagnosis is evaluated, as SREGym's conductor opens it;
    // a submission before then would be ignored as a duplicate.
    loop {
        let status: Value = http
            .get(format!("{}/status", handover.submit_url))
            .send()
            .await?
            .json()
            .await?;
        if status["stage"] != "diagnosis" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if fix {
        http.patch(&svc)
            .header("Content-Type", "application/json-patch+json")
            .body(r#"[{"op":"replace","path":"/spec/ports/0/targetPort","value":8083}]"#)
            .send()
            .await?
            .error_for_status()?;
    }
    submit(String::new()).await?.error_for_status()?;
    Ok(())
}

/// The catalog, a session on hotel-geo-target-port writing to `out`, and a diagnosis that names
/// its root cause.
fn geo_session(out: &std::path::Path) -> (Catalog, SessionOptions, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let catalog = Catalog::builtin().expect("the built-in catalog");
    let problem = catalog
        .problem("hotel-geo-target-port")
        .expect("the problem")
        .clone();
    let namespace = &catalog
        .app(&problem.application)
        .expect("its app")
        .namespace;
    let truth = problem.ground_truth(namespace, chrono::Utc::now());
    let diagnosis = format!(
        "{} Root cause: Service {}.",
        truth.description,
        truth
            .components
            .iter()
            .filter(|c| c.root_cause)
            .filter_map(|c| c.name.clone())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let opts = SessionOptions {
        agent: AgentSpec {
            name: "scripted".into(),
            command: String::new(),
            env: vec![],
            prompt: None,
        },
        target: Target::Live {
            problem: Box::new(problem),
            seed: 1,
            no_noise: true,
            speed: 1.0,
            since_onset: Dur::from_secs(120),
        },
        time_limit: Duration::from_secs(600),
        after_last_stage: Duration::from_secs(2),
        listen: session::any_port(),
        out: out.to_path_buf(),
        trial: "t1".into(),
        echo: false,
        judging: Judging::default(),
        staging: None,
        llm_upstream: None,
        isolation: Default::default(),
    };
    (catalog, opts, diagnosis)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_runs_from_the_library_step_by_step() {
    let work = tempfile::tempdir().expect("a work dir");
    let out = work.path().join("run");
    let (catalog, opts, diagnosis) = geo_session(&out);
    let namespace = "hotel-reservation";

    let mut session = Session::start(&catalog, opts)
        .await
        .expect("the session starts");
    // What the agent is handed names the application and the endpoints, never the problem.
    let handover = session.handover().clone();
    assert!(handover.workdir.join("kubeconfig").is_file());
    assert!(handover.workdir.join("prompt.md").is_file());
    assert!(handover.prompt.contains(namespace), "{}", handover.prompt);
    for text in [&handover.prompt, &format!("{:?}", handover.env)] {
        assert!(!text.contains("hotel-geo-target-port"), "{text}");
        assert!(!text.contains("targetPort"), "{text}");
    }
    assert_eq!(session.stage(), Stage::Setup);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = ScriptedAgent {
        diagnosis,
        fix: true,
        seen: seen.clone(),
    };
    session.launch(&agent).expect("the agent starts");
    let end = session
        .wait(std::future::pending())
        .await
        .expect("waiting for the agent");
    assert_eq!(end, SessionEnd::Submitted);
    assert_eq!(session.stage(), Stage::Done);
    // The agent saw the fault through the handed-over API before it mended it.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_ne!(seen[0], "targetPort 8083", "{seen:?}");

    let run: RunResult = session.finish().await.expect("the session finishes");
    assert_eq!(run.agent, "scripted");
    assert_eq!(run.problem_id, "hotel-geo-target-port");
    assert_eq!(run.ended, Some(SessionEnd::Submitted));
    let diagnosis = run.diagnosis.as_ref().expect("the diagnosis record");
    assert!(diagnosis.submitted);
    assert_eq!(diagnosis.pass, Some(true), "{diagnosis:?}");
    let mitigation = run.mitigation.as_ref().expect("the mitigation record");
    assert!(
        mitigation.submitted && mitigation.success,
        "{:?}",
        mitigation.reasons
    );
    assert!(run.ttd_secs.is_some() && run.ttm_secs.is_some());
    // Published: the record on disk is the one returned, the ground truth beside it.
    let on_disk: RunResult =
        serde_json::from_slice(&std::fs::read(out.join(session::RUN_FILE)).expect("run.json"))
            .expect("run.json parses");
    assert_eq!(on_disk.problem_id, run.problem_id);
    assert!(out.join(session::GROUND_TRUTH_FILE).is_file());
    assert!(out.join("dataset").is_dir());
}

/// The same agent without the fix: the session still ends on its own and is recorded, and the
/// mitigation it claimed fails, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_mitigation_without_a_fix_fails_with_its_reason() {
    let work = tempfile::tempdir().expect("a work dir");
    let out = work.path().join("run");
    let (catalog, opts, diagnosis) = geo_session(&out);
    let agent = ScriptedAgent {
        diagnosis,
        fix: false,
        seen: Arc::new(Mutex::new(Vec::new())),
    };
    let run = Session::start(&catalog, opts)
        .await
        .expect("the session starts")
        .run(&agent, std::future::pending())
        .await
        .expect("the session runs to its end");
    assert_eq!(run.ended, Some(SessionEnd::Submitted));
    let mitigation = run.mitigation.as_ref().expect("the mitigation record");
    assert!(mitigation.submitted && !mitigation.success);
    assert!(!mitigation.reasons.is_empty());
    assert!(run.ttm_secs.is_none());
    assert!(out.join(session::RUN_FILE).is_file());
}
