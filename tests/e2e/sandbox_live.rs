//! Agents in the sandbox (`collector live --sandbox`), real processes on the real kernel: a hostile
//! agent tries to leave its world (processes, binaries, paths, environment, other ports, writes,
//! kill) and gets nothing, while the same attempts without the sandbox do get something; a
//! reference agent with kubectl, curl and jq diagnoses and fixes its problem inside it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The scripted agents, copied out of the checkout: a sandboxed agent is bound its own code, and
/// the checkout's path is none of its business.
fn agents(into: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents");
    let to = into.join("agents");
    let status = Command::new("cp")
        .arg("-r")
        .arg(&from)
        .arg(&to)
        .status()
        .expect("cp runs");
    assert!(status.success());
    to
}

fn need_bwrap() {
    Command::new("bwrap")
        .arg("--version")
        .output()
        .unwrap_or_else(|_| panic!("the sandbox needs bubblewrap: apt-get install bubblewrap (or bash tests/run)"));
}

fn collector(args: &[&str]) -> Output {
    Command::new(e2e::binary("collector"))
        .args(args)
        .env_remove("JUDGE_BASE_URL")
        .env_remove("JUDGE_MODEL")
        .env_remove("JUDGE_API_KEY")
        // Something of the session's own that no agent may read.
        .env("FAULTLINE_SECRET", "the-answer")
        .output()
        .expect("collector runs")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A server on the host's loopback that is not the session's: it answers every connection.
fn other_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nhi");
        }
    });
    port
}

/// Runs the escaping agent on a live problem, in the sandbox or not; its run.json and output.
fn escape(work: &Path, agents: &Path, sandboxed: bool, name: &str) -> (Value, String) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // An earlier run's answers, the way a session leaves them.
    let earlier = work.join("earlier-run");
    std::fs::create_dir_all(&earlier).expect("earlier run dir");
    std::fs::write(earlier.join("ground_truth.json"), "{}").expect("earlier ground truth");
    let journal = work.join("journal");
    std::fs::create_dir_all(&journal).expect("journal dir");
    let hunt = [
        repo.join("problems/catalog"),
        repo.join("Cargo.toml"),
        earlier.clone(),
        journal,
        e2e::binary("collector"),
        // Where this very run is being written (`--out`'s staging directory).
        work.join(".unfinished"),
    ]
    .iter()
    .map(|p| p.display().to_string())
    .collect::<Vec<_>>()
    .join(":");
    let out = work.join(name);
    let agent = agents.join("hacks/escape.sh");
    let (hunt_env, port_env) = (
        format!("HUNT_PATHS={hunt}"),
        format!("HUNT_PORT={}", other_server()),
    );
    let mut args = vec![
        "live",
        "--problem",
        "hotel-geo-target-port",
        "--no-noise",
        "--agent",
        agent.to_str().expect("UTF-8"),
        "--agent-env",
        &hunt_env,
        "--agent-env",
        &port_env,
        "--time-limit",
        "3m",
        "--quiet",
        "--json",
        "--out",
        out.to_str().expect("UTF-8"),
    ];
    let bind = agents.display().to_string();
    if sandboxed {
        args.extend_from_slice(&["--sandbox", "--agent-bind", &bind]);
    } else {
        // Outside the sandbox it only reads: its kill and writes would reach the session itself,
        // every process named collector on the machine, and the checkout.
        args.extend_from_slice(&["--agent-env", "HUNT_READ_ONLY=1"]);
    }
    let output = collector(&args);
    assert!(output.status.success(), "{}", e2e::text(&output));
    let stdout = std::fs::read_to_string(out.join("agent.stdout")).expect("agent.stdout");
    (read_json(&out.join("run.json")), stdout)
}

#[test]
fn a_hostile_agent_gets_nothing_out_of_its_sandbox() {
    need_bwrap();
    let work = tempfile::tempdir().expect("a temporary directory");
    let agents = agents(work.path());

    let (run, stdout) = escape(work.path(), &agents, true, "sandboxed");
    let got: Vec<&str> = stdout.lines().filter(|l| l.starts_with("GOT:")).collect();
    assert!(got.is_empty(), "the sandbox let through: {got:#?}\n{stdout}");
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("blocked:")).count(),
        7,
        "{stdout}"
    );
    // Its own world works: the session's API answered, the session ended normally.
    assert!(stdout.contains("kubectl works"), "{stdout}");
    assert!(stdout.contains("done"), "{stdout}");
    assert_eq!(run["ended"], "submitted", "{run:#}");
    assert_eq!(run["diagnosis"]["pass"], false, "{run:#}");
    assert_eq!(run["mitigation"]["success"], false, "{run:#}");

    // The same attempts without the sandbox do reach something: the test can fail.
    let (_, open) = escape(work.path(), &agents, false, "unsandboxed");
    assert!(
        open.lines().any(|l| l.starts_with("GOT:")),
        "without the sandbox the agent found nothing, so the test proves nothing:\n{open}"
    );
}

#[test]
fn a_reference_agent_fixes_its_problem_inside_the_sandbox() {
    need_bwrap();
    let work = tempfile::tempdir().expect("a temporary directory");
    let agents = agents(work.path());
    let inputs = work.path().join("inputs");
    std::fs::create_dir_all(&inputs).expect("inputs dir");
    let catalog = problems::Catalog::builtin().expect("the built-in catalog");
    let problem = catalog.problem("hotel-geo-target-port").expect("the problem");
    let fix = inputs.join("fix");
    std::fs::write(
        &fix,
        problem
            .reference_fix
            .as_ref()
            .expect("a reference fix")
            .commands
            .join("\n"),
    )
    .expect("the fix file");
    let truth = problem.ground_truth("hotel-reservation", chrono::Utc::now());
    let diagnosis = format!(
        "DIAGNOSIS={} Root cause: Service geo.",
        truth.description
    );
    let out = work.path().join("run");
    let agent = agents.join("fixers/reference.sh");
    let fix_env = format!("FIX_FILE={}", fix.display());
    let output = collector(&[
        "live",
        "--problem",
        "hotel-geo-target-port",
        "--seed",
        "2",
        "--agent",
        agent.to_str().expect("UTF-8"),
        "--sandbox",
        "--agent-bind",
        agents.to_str().expect("UTF-8"),
        "--agent-bind",
        inputs.to_str().expect("UTF-8"),
        "--agent-env",
        &fix_env,
        "--agent-env",
        &diagnosis,
        "--time-limit",
        "5m",
        "--quiet",
        "--json",
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    assert!(output.status.success(), "{}", e2e::text(&output));
    let run = read_json(&out.join("run.json"));
    assert_eq!(run["ended"], "submitted", "{run:#}");
    assert_eq!(run["diagnosis"]["pass"], true, "{run:#}");
    assert_eq!(run["mitigation"]["success"], true, "{run:#}");
}

#[test]
fn the_probe_says_this_host_can_sandbox_and_a_missing_program_is_refused() {
    need_bwrap();
    let probe = collector(&["agent-sandbox", "probe", "--json"]);
    assert!(probe.status.success(), "{}", e2e::text(&probe));
    let report: Value = serde_json::from_slice(&probe.stdout).expect("JSON");
    assert_eq!(report["usable"], true, "{report:#}");
    // A program the sandbox cannot see is refused before anything starts, saying what to do.
    let work = tempfile::tempdir().expect("a temporary directory");
    let program = work.path().join("agent.sh");
    std::fs::write(&program, "#!/bin/sh\nexit 0\n").expect("the agent");
    let out = work.path().join("run");
    let refused = collector(&[
        "live",
        "--problem",
        "hotel-geo-target-port",
        "--agent",
        program.to_str().expect("UTF-8"),
        "--sandbox",
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    assert!(!refused.status.success());
    let text = e2e::text(&refused);
    assert!(text.contains("outside its sandbox") && text.contains("--agent-bind"), "{text}");
    assert!(!out.join("run.json").exists());
}
