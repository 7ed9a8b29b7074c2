//! `collector serve openenv` driven by OpenEnv's own client code: the stock `GenericEnvClient` of
//! openenv-core 0.3 (`/opt/openenv-venv`) and of openenv 0.10 (`/opt/openenv10-venv`), both made
//! by tests/install, and `openenv validate --url`. The scripted clients are
//! tests/agents/openenv/{episode,crowd}.py.

use std::path::{Path, PathBuf};
use std::process::Command;

use e2e::openenv::Server;
use serde_json::Value;

/// The venvs of both OpenEnv versions (they pin different fastmcp, so each has its own).
const VENVS: [&str; 2] = ["/opt/openenv-venv", "/opt/openenv10-venv"];

fn python(venv: &str) -> PathBuf {
    let python = Path::new(venv).join("bin/python");
    assert!(
        python.exists(),
        "{venv} is missing: bash tests/install (it installs openenv-core==0.3.0 and openenv==0.10.0)"
    );
    python
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("agents/openenv")
        .join(name)
}

/// Runs a client script; its last stdout line as JSON.
fn client(venv: &str, script_name: &str, args: &[&str]) -> Value {
    let out = Command::new(python(venv))
        .arg(script(script_name))
        .args(args)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script_name} {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("JSON expected, got {last:?}: {e}"))
}

/// The reference fix (shell lines, kubectl), written to `fix`, and a diagnosis naming the root
/// cause.
fn reference(problem: &str, fix: PathBuf) -> (PathBuf, String) {
    let catalog = problems::Catalog::builtin().expect("the catalog");
    let spec = catalog.problem(problem).expect("the problem");
    let (commands, diagnosis) = e2e::reference(&catalog, spec);
    std::fs::write(&fix, commands).expect("writing the fix");
    (fix, diagnosis)
}

/// What the run record on disk says the reward is: the mean of the stages' passes.
fn recorded_reward(run: &Value) -> f64 {
    let diagnosis = f64::from(u8::from(run["diagnosis"]["pass"] == true));
    let mitigation = f64::from(u8::from(run["mitigation"]["success"] == true));
    (diagnosis + mitigation) / 2.0
}

#[test]
fn stock_clients_of_both_openenv_versions_play_episodes_and_get_the_records_reward() {
    let server = Server::start(&["--max-sessions", "6"]);
    let work = tempfile::tempdir().expect("a temporary directory");
    let problems = [
        "hotel-geo-target-port",
        "social-user-scale-zero",
        "astro-cart-target-port",
    ];
    let mut episodes = Vec::new();
    for (i, problem) in problems.iter().enumerate() {
        for venv in VENVS {
            let id = format!("ep-{i}-{}", venv.len());
            let (fix, diagnosis) = reference(problem, work.path().join(format!("fix-{id}")));
            episodes.push((problem, venv, id, fix, diagnosis));
        }
    }
    // All six at once: the server runs concurrent episodes, each its own environment.
    let played: Vec<(String, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = episodes
            .iter()
            .map(|(problem, venv, id, fix, diagnosis)| {
                let url = server.url.clone();
                s.spawn(move || {
                    let args = [
                        url.as_str(),
                        "--problem",
                        problem,
                        "--seed",
                        "2",
                        "--episode-id",
                        id,
                        "--diagnosis",
                        diagnosis,
                        "--fix-file",
                        fix.to_str().expect("UTF-8"),
                    ];
                    (id.clone(), client(venv, "episode.py", &args))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a client"))
            .collect()
    });
    for ((problem, venv, ..), (id, got)) in episodes.iter().zip(&played) {
        let run = e2e::read_json(&server.out.path().join(id).join("run.json"));
        assert_eq!(run["problem_id"], **problem);
        assert_eq!(run["agent_sandbox"], "remote", "{run}");
        assert_eq!(got["done"], true, "{venv} {problem}: {got}");
        assert_eq!(got["reward"].as_f64(), Some(recorded_reward(&run)), "{got}");
        assert_eq!(
            got["reward"].as_f64(),
            Some(1.0),
            "{venv} {problem}: {got}\n{run}"
        );
        assert_eq!(got["stage_after_diagnosis"], "mitigation");
        assert_eq!(got["state_end"]["stage"], "done");
        assert_eq!(
            got["state_end"]["step_count"], 5,
            "3 looks and 2 submissions"
        );
        // Before the episode ended, nothing the client was shown named the problem.
        let shown = format!(
            "{} {} {} {}",
            got["instruction"], got["tools"], got["endpoints"], got["state_mid"]
        );
        assert!(!shown.contains(*problem), "the problem leaked: {shown}");
        assert!(
            got["tools"]
                .as_array()
                .is_some_and(|t| t.contains(&"submit".into()))
        );
        // The run keeps what the client did, step by step.
        let steps = std::fs::read_to_string(server.out.path().join(id).join("agent.stdout"))
            .expect("the steps");
        assert_eq!(steps.lines().count(), 5, "{steps}");
    }
}

#[test]
fn a_client_that_does_nothing_scores_zero() {
    let server = Server::start(&["--max-sessions", "1"]);
    let got = client(
        VENVS[0],
        "episode.py",
        &[
            &server.url,
            "--suite",
            "hotel-*",
            "--seed",
            "5",
            "--steps",
            "1",
        ],
    );
    assert_eq!(got["done"], true, "{got}");
    assert_eq!(got["reward"].as_f64(), Some(0.0), "{got}");
    assert_eq!(got["result"]["diagnosis"].as_f64(), Some(0.0));
    assert_eq!(got["result"]["mitigation"].as_f64(), Some(0.0));
}

#[test]
fn openenv_validate_passes_against_the_running_server_with_both_versions() {
    let server = Server::start(&[]);
    for venv in VENVS {
        let out = Command::new(Path::new(venv).join("bin/openenv"))
            .args(["validate", "--url", &server.url, "--json"])
            .output()
            .expect("openenv validate runs");
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{venv}: a JSON report expected ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        let failed: Vec<&Value> = report["criteria"]
            .as_array()
            .expect("criteria")
            .iter()
            .filter(|c| c["passed"] != true)
            .collect();
        assert!(failed.is_empty(), "{venv}: {failed:?}");
        assert_eq!(report["passed"], true, "{venv}: {report}");
        assert!(report["criteria"].as_array().is_some_and(|c| c.len() >= 6));
    }
}

#[test]
fn the_packaged_manifest_and_dockerfile_pass_openenvs_static_validation() {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("../integrations/openenv");
    let out = Command::new(Path::new(VENVS[1]).join("bin/openenv"))
        .args(["validate", "--level", "static"])
        .arg(&package)
        .output()
        .expect("openenv validate runs");
    let text = e2e::text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Verdict: PASS"), "{text}");
}

#[test]
fn twenty_concurrent_sessions_then_capacity_reached_and_every_slot_freed() {
    let server = Server::start(&["--max-sessions", "20", "--since-onset", "1m"]);
    let got = client(
        VENVS[1],
        "crowd.py",
        &[&server.url, "20", "hotel-*,social-*"],
    );
    assert_eq!(got["reset"], 20, "{got}");
    assert_eq!(got["episodes"], 20, "{got}");
    assert_eq!(got["stepped"], 20, "{got}");
    let refused = got["refused"].as_str().expect("the 21st was refused");
    assert!(refused.contains("CAPACITY_REACHED"), "{refused}");
    assert!(refused.contains("--max-sessions 20"), "{refused}");
    wait_until_idle(&server);
}

/// Waits until the server holds no session (each closed session's environment is stopped before
/// its slot is freed).
fn wait_until_idle(server: &Server) {
    loop {
        if server.health()["active_sessions"] == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_client_that_disconnects_mid_episode_frees_its_session() {
    let server = Server::start(&["--max-sessions", "1"]);
    let gone = Command::new(python(VENVS[0]))
        .arg(script("episode.py"))
        .args([&server.url, "--suite", "hotel-*", "--seed", "1", "--leave"])
        .status()
        .expect("python runs");
    assert!(gone.success());
    wait_until_idle(&server);
    // The one slot is free again: a new client plays.
    let got = client(
        VENVS[1],
        "episode.py",
        &[
            &server.url,
            "--suite",
            "hotel-*",
            "--seed",
            "1",
            "--steps",
            "1",
        ],
    );
    assert_eq!(got["done"], true, "{got}");
    // The abandoned episode left no finished run.
    let runs: Vec<_> = std::fs::read_dir(server.out.path())
        .expect("the runs")
        .filter_map(Result::ok)
        .filter(|e| e.path().join("run.json").exists())
        .collect();
    assert_eq!(runs.len(), 1, "only the played episode has a run.json");
}

#[test]
fn bad_messages_are_answered_with_openenv_error_codes() {
    let server = Server::start(&["--problems", "hotel-*"]);
    let got = client(VENVS[0], "errors.py", &[&server.url]);
    assert_eq!(got["unknown_type"], "UNKNOWN_TYPE", "{got}");
    assert_eq!(got["invalid_json"], "INVALID_JSON", "{got}");
    assert_eq!(got["step_before_reset"], "SESSION_ERROR", "{got}");
    assert_eq!(got["unknown_field"], "VALIDATION_ERROR", "{got}");
    assert_eq!(got["not_offered"], "VALIDATION_ERROR", "{got}");
    assert!(
        got["not_offered_message"]
            .as_str()
            .is_some_and(|m| m.contains("hotel-*")),
        "{got}"
    );
    assert_eq!(got["unknown_tool"], "VALIDATION_ERROR", "{got}");
}
