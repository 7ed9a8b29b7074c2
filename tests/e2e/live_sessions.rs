//! `collector live` and `collector eval` end to end, with scripted agents in bash that use the
//! real kubectl, curl and jq: agents that diagnose and fix problems of different layers pass;
//! every reference fix passes through a session; the reward hacks (restart loops, scaling to
//! zero, deleting workloads, silencing alerts, hunting for the answer) fail on every problem
//! with their reasons; a replay session is diagnosis-only; and a killed evaluation leaves nothing
//! that reads as finished, then resumes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents")
}

/// The tools the scripted agents use: present, or the test fails saying how to install them.
fn need_tools() {
    for (tool, arg) in [
        ("kubectl", "version"),
        ("jq", "--version"),
        ("curl", "--version"),
    ] {
        let mut cmd = Command::new(tool);
        if tool == "kubectl" {
            cmd.args([arg, "--client"]);
        } else {
            cmd.arg(arg);
        }
        cmd.output().unwrap_or_else(|_| {
            panic!("{tool} is needed by the scripted agents: apt-get install {tool} (or bash tests/run)")
        });
    }
}

fn collector(args: &[&str], cwd: &Path) -> Output {
    Command::new(e2e::binary("collector"))
        .args(args)
        .current_dir(cwd)
        .env_remove("JUDGE_BASE_URL")
        .env_remove("JUDGE_MODEL")
        .env_remove("JUDGE_API_KEY")
        .output()
        .expect("collector runs")
}

use e2e::read_json;

/// A problem's reference fix (one command per line) and the diagnosis a good agent would give:
/// the incident's description, naming its root causes.
fn reference(
    catalog: &problems::Catalog,
    problem: &problems::ProblemSpec,
    dir: &Path,
) -> (PathBuf, String) {
    let (commands, diagnosis) = e2e::reference(catalog, problem);
    // Not named after the problem: sessions of other tests list open files and process lists.
    let file = tempfile::Builder::new()
        .prefix("fix-")
        .tempfile_in(dir)
        .expect("a fix file");
    std::fs::write(file.path(), commands).expect("writing the fix file");
    let (_, fix) = file.keep().expect("keeping the fix file");
    (fix, diagnosis)
}

/// Runs the reference agent on `problem` through `collector live`; its run.json.
fn live_reference(
    catalog: &problems::Catalog,
    problem: &problems::ProblemSpec,
    work: &Path,
    extra: &[&str],
) -> (Value, PathBuf) {
    let (fix, diagnosis) = reference(catalog, problem, work);
    let out = work.join(&problem.id);
    let agent = agents_dir().join("fixers/reference.sh");
    let mut args = vec![
        "live",
        "--problem",
        &problem.id,
        "--seed",
        "2",
        "--agent",
        agent.to_str().expect("UTF-8 path"),
        "--agent-name",
        "reference",
        "--time-limit",
        "5m",
        // Every fault of a problem is in place five minutes after the first one's onset: the
        // reference fixes assume them all.
        "--since-onset",
        "5m",
        "--quiet",
        "--json",
        "--out",
        out.to_str().expect("UTF-8 path"),
    ];
    args.extend_from_slice(extra);
    let fix_env = format!("FIX_FILE={}", fix.display());
    let diagnosis_env = format!("DIAGNOSIS={diagnosis}");
    args.extend_from_slice(&["--agent-env", &fix_env, "--agent-env", &diagnosis_env]);
    // The sandboxed agent reads its scripts and its fix, nothing else of the test's.
    let (scripts, fix_path) = (agents_dir(), fix.display().to_string());
    let scripts = scripts.to_str().expect("UTF-8 path");
    args.extend_from_slice(&["--agent-bind", scripts, "--agent-bind", &fix_path]);
    let output = collector(&args, work);
    assert!(
        output.status.success(),
        "{}: {}",
        problem.id,
        e2e::text(&output)
    );
    (read_json(&out.join("run.json")), out)
}

#[test]
fn scripted_agents_diagnose_and_fix_problems_of_different_layers() {
    need_tools();
    let catalog = problems::Catalog::builtin().expect("the built-in catalog");
    let work = tempfile::tempdir().expect("a temporary directory");
    // A Service's port (Kubernetes), a configuration value (application), a lock held by a
    // process (runtime state, cleared by a restart).
    for id in [
        "hotel-geo-target-port",
        "hotel-geo-config-drift",
        "astro-postgres-lock",
    ] {
        let problem = catalog.problem(id).expect("problem in the catalog");
        let (run, dir) = live_reference(&catalog, problem, work.path(), &["--speed", "5"]);
        assert_eq!(run["problem_id"], id, "{run:#}");
        assert_eq!(run["ended"], "submitted", "{run:#}");
        assert_eq!(run["mode"], "live");
        assert_eq!(run["diagnosis"]["submitted"], true, "{run:#}");
        assert_eq!(run["diagnosis"]["pass"], true, "{id}: {run:#}");
        assert_eq!(run["mitigation"]["success"], true, "{id}: {run:#}");
        assert_eq!(run["mitigation"]["reasons"], serde_json::json!([]));
        let (ttd, ttm) = (
            run["ttd_secs"].as_f64().unwrap(),
            run["ttm_secs"].as_f64().unwrap(),
        );
        assert!(0.0 < ttd && ttd <= ttm, "ttd {ttd} ttm {ttm}");
        let req = &run["api_requests"];
        assert!(req["writes"].as_u64().unwrap() >= 1, "{req}");
        for api in ["kubernetes", "prometheus", "loki"] {
            assert!(
                req["by_api"][api].as_u64().unwrap_or(0) >= 1,
                "{api}: {req}"
            );
        }
        // The trajectory has the task, the agent's requests and both submissions, in order.
        let t = read_json(&dir.join("trajectory.json"));
        let steps = t["steps"].as_array().expect("steps");
        assert_eq!(steps[0]["source"], "system");
        assert!(
            steps[0]["message"]
                .as_str()
                .unwrap()
                .contains("hotel-reservation")
                || id.starts_with("astro")
        );
        let calls: Vec<&str> = steps[1..]
            .iter()
            .map(|s| s["tool_calls"][0]["function_name"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            calls.iter().filter(|c| **c == "submit").count(),
            2,
            "{calls:?}"
        );
        assert!(
            calls.iter().any(|c| c.starts_with("kubernetes.")),
            "{calls:?}"
        );
        // The dataset has the run, the audit of every request among its tables; the ground truth
        // beside it; the agent's own output.
        let manifest = read_json(&dir.join("dataset/manifest.json"));
        assert!(manifest.to_string().contains("audit"), "{manifest}");
        assert!(dir.join("ground_truth.json").is_file());
        assert!(std::fs::metadata(dir.join("agent.stdout")).unwrap().len() > 0);
    }
    assert!(
        !work.path().join(".unfinished").exists(),
        "finished sessions leave no staging directory"
    );
}

#[test]
fn an_agent_can_work_through_the_session_mcp_tools_alone() {
    need_tools();
    let catalog = problems::Catalog::builtin().expect("the built-in catalog");
    let work = tempfile::tempdir().expect("a temporary directory");
    let problem = catalog
        .problem("hotel-geo-target-port")
        .expect("in the catalog");
    let agent = agents_dir().join("fixers/mcp.sh");
    let (fix, diagnosis) = reference(&catalog, problem, work.path());
    let out = collector(
        &[
            "live",
            "--problem",
            &problem.id,
            "--agent",
            agent.to_str().unwrap(),
            "--quiet",
            "--time-limit",
            "3m",
            "--out",
            "mcp-run",
            "--agent-env",
            &format!("FIX_FILE={}", fix.display()),
            "--agent-env",
            &format!("DIAGNOSIS={diagnosis}"),
            "--agent-bind",
            agents_dir().to_str().unwrap(),
            "--agent-bind",
            fix.to_str().unwrap(),
        ],
        work.path(),
    );
    assert!(out.status.success(), "{}", e2e::text(&out));
    let dir = work.path().join("mcp-run");
    let run = read_json(&dir.join("run.json"));
    let stdout = std::fs::read_to_string(dir.join("agent.stdout")).unwrap_or_default();
    assert!(
        !stdout.contains("is not installed") && !stdout.contains("npm ERR"),
        "the MCP inspector is needed: npx -y @modelcontextprotocol/inspector@2.12.0 --cli --help (or bash tests/run)\n{stdout}"
    );
    assert_eq!(run["ended"], "submitted", "{run:#}\n{stdout}");
    assert_eq!(run["diagnosis"]["pass"], true, "{run:#}");
    assert_eq!(run["mitigation"]["success"], true, "{run:#}\n{stdout}");
    let by_api = &run["api_requests"]["by_api"];
    assert!(by_api["mcp"].as_u64().unwrap_or(0) >= 6, "{by_api}");
    // The tools reached the APIs for the agent: kubectl's write among them, dry run first.
    assert!(
        run["api_requests"]["writes"].as_u64().unwrap() >= 1,
        "{run:#}"
    );
    assert!(by_api["prometheus"].as_u64().unwrap_or(0) >= 1, "{by_api}");
}

#[test]
fn every_reference_fix_passes_through_a_session() {
    need_tools();
    let catalog = problems::Catalog::builtin().expect("the built-in catalog");
    let work = tempfile::tempdir().expect("a temporary directory");
    let with_fix: Vec<&problems::ProblemSpec> = catalog
        .problems()
        .filter(|p| {
            p.reference_fix
                .as_ref()
                .is_some_and(|f| !f.commands.is_empty())
        })
        .collect();
    assert!(
        with_fix.len() >= 70,
        "{} problems with a fix",
        with_fix.len()
    );
    // Three sessions at a time: kubectl's own client-side throttling, not CPU, paces them.
    let failures: Vec<String> = std::thread::scope(|s| {
        let chunks: Vec<Vec<&problems::ProblemSpec>> = (0..3)
            .map(|i| with_fix.iter().skip(i).step_by(3).copied().collect())
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let (work, catalog) = (work.path(), &catalog);
                s.spawn(move || {
                    let mut failed = Vec::new();
                    for p in chunk {
                        let (run, _) = live_reference(catalog, p, work, &["--speed", "10"]);
                        if run["mitigation"]["success"] != true {
                            failed.push(format!("{}: {}", p.id, run["mitigation"]));
                        }
                    }
                    failed
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a session thread"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "reference fixes that failed:\n{}",
        failures.join("\n")
    );
}

/// `collector eval` of one scripted hack on `problems`, into `work/board-<hack>`.
fn eval_hack(work: &Path, hack: &str, problems: &[String]) {
    let agents = format!("hacks-{hack}.toml");
    let script = agents_dir().join(format!("hacks/{hack}.sh"));
    let toml = format!(
        "[[agents]]\nname = \"{hack}\"\ncommand = \"{}\"\n",
        script.display()
    );
    std::fs::write(work.join(&agents), toml).unwrap();
    let out = collector(
        &[
            "eval",
            "--agents",
            &agents,
            "--problems",
            &problems.join(","),
            "--jobs",
            "6",
            "--out",
            &format!("board-{hack}"),
            "--time-limit",
            "2m",
            "--since-onset",
            "1m",
            "--agent-bind",
            agents_dir().to_str().expect("UTF-8 path"),
        ],
        work,
    );
    assert!(out.status.success(), "{hack}: {}", e2e::text(&out));
}

#[test]
fn reward_hacks_fail_on_every_problem_and_say_why() {
    need_tools();
    let catalog = problems::Catalog::builtin().expect("the built-in catalog");
    let work = tempfile::tempdir().expect("a temporary directory");
    let problems: Vec<String> = catalog.problems().map(|p| p.id.clone()).collect();
    // Every problem meets one of the four mitigation hacks (in turn, so each hack meets a
    // quarter of the catalog across every application), and the answer-hunter, whose finds
    // depend on each problem's objects and names, meets them all. Every hack on every problem
    // took 16 minutes of CI's 45.
    let mitigation = [
        "restart-loop",
        "scale-zero",
        "delete-workloads",
        "silence-alerts",
    ];
    // The restart loop meets the problem whose reasons are read below.
    let looped = "hotel-geo-target-port";
    let shift = problems
        .iter()
        .position(|p| p == looped)
        .expect("in the catalog");
    let mut plan: Vec<(&str, Vec<String>)> = mitigation
        .iter()
        .enumerate()
        .map(|(i, hack)| {
            let turn = |k: &usize| (k + 4 - shift % 4) % 4 == i;
            let ids = problems.iter().enumerate().filter(|(k, _)| turn(k));
            (*hack, ids.map(|(_, id)| id.clone()).collect())
        })
        .collect();
    plan.push(("truth-hunt", problems.clone()));
    let mut passes = Vec::new();
    let mut runs = 0;
    for (hack, ids) in &plan {
        eval_hack(work.path(), hack, ids);
        for id in ids {
            runs += 1;
            let dir = work
                .path()
                .join(format!("board-{hack}"))
                .join(hack)
                .join(id)
                .join("noise-1");
            let run = read_json(&dir.join("run.json"));
            let m = &run["mitigation"];
            if m["success"] != false || m["reasons"].as_array().is_none_or(Vec::is_empty) {
                passes.push(format!("{hack} on {id}: {m}"));
            }
            if run["diagnosis"]["pass"] == true {
                passes.push(format!(
                    "{hack} on {id}: diagnosis passed: {}",
                    run["output"]
                ));
            }
            // Whatever the answer-hunter could see, the problem was not in it.
            let seen = std::fs::read_to_string(dir.join("agent.stdout")).unwrap_or_default();
            assert!(
                !seen.contains(id.as_str()),
                "{hack} on {id} found the problem id:\n{seen}"
            );
        }
    }
    assert!(
        passes.is_empty(),
        "{} of {runs} hack runs passed:\n{}",
        passes.len(),
        passes.join("\n")
    );
    // A loop is failed as a loop.
    let run = read_json(&work.path().join(format!(
        "board-restart-loop/restart-loop/{looped}/noise-1/run.json"
    )));
    assert!(
        run["mitigation"]["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("restart loop"),
        "{run:#}"
    );
    let board = read_json(&work.path().join("board-restart-loop/board/board.json"));
    assert!(board.to_string().contains("restart-loop"), "{board}");
}

#[test]
fn a_replay_session_takes_a_diagnosis_only() {
    need_tools();
    let work = tempfile::tempdir().expect("a temporary directory");
    let snap = collector(
        &[
            "snapshot",
            "--problem",
            "hotel-geo-target-port",
            "--seed",
            "3",
            "--out",
            "geo",
        ],
        work.path(),
    );
    assert!(snap.status.success(), "{}", e2e::text(&snap));
    let agent = work.path().join("rca.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/usr/bin/env bash\n. {}\n\
             kubectl -n \"$ns\" get svc geo -o jsonpath='{{.spec.ports[0].targetPort}}'; echo\n\
             kubectl -n \"$ns\" scale deployment geo --replicas=0 && echo WRITE-ACCEPTED\n\
             submit 'The geo Service targets the wrong port: its endpoints are empty.'\n",
            agents_dir().join("lib.sh").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = collector(
        &[
            "live",
            "--dataset",
            "geo/dataset",
            "--agent",
            "./rca.sh",
            "--agent-bind",
            agents_dir().to_str().unwrap(),
            "--json",
            "--quiet",
            "--out",
            "rca",
        ],
        work.path(),
    );
    assert!(out.status.success(), "{}", e2e::text(&out));
    let run = read_json(&work.path().join("rca/run.json"));
    assert_eq!(run["mode"], "replay");
    assert_eq!(run["problem_id"], "hotel-geo-target-port");
    assert_eq!(run["ended"], "submitted", "{run:#}");
    assert_eq!(run["diagnosis"]["pass"], true, "{run:#}");
    assert!(
        run["mitigation"].is_null(),
        "a recording cannot be mitigated: {run:#}"
    );
    assert!(run["ttd_secs"].as_f64().is_some());
    let stdout = std::fs::read_to_string(work.path().join("rca/agent.stdout")).unwrap();
    assert!(
        stdout.contains("9999"),
        "the replayed cluster answers: {stdout}"
    );
    assert!(
        !stdout.contains("WRITE-ACCEPTED"),
        "a replay refuses writes: {stdout}"
    );
    assert!(stdout.contains("Submission received"), "{stdout}");
    // The refused scale is counted: writes are what the agent attempted.
    assert_eq!(run["api_requests"]["writes"], 1, "{run:#}");
}

#[test]
fn a_killed_evaluation_leaves_nothing_finished_and_resumes() {
    need_tools();
    let work = tempfile::tempdir().expect("a temporary directory");
    // The agent works while the marker is there; it sees the marker's directory, read-only.
    let flags = work.path().join("flags");
    std::fs::create_dir(&flags).unwrap();
    let marker = flags.join("keep-working");
    std::fs::write(&marker, "").unwrap();
    let slow = agents_dir().join("fixers/slow.sh");
    std::fs::write(
        work.path().join("agents.toml"),
        format!(
            "[[agents]]\nname = \"slow\"\ncommand = \"{}\"\nenv = {{ SLOW_MARKER = \"{}\" }}\n",
            slow.display(),
            marker.display()
        ),
    )
    .unwrap();
    let (scripts, flags_dir) = (agents_dir(), flags.display().to_string());
    let args = [
        "eval",
        "--agents",
        "agents.toml",
        "--problems",
        "hotel-geo-target-port,hotel-geo-config-drift",
        "--noise",
        "off",
        "--jobs",
        "1",
        "--out",
        "board",
        "--time-limit",
        "5m",
        "--json",
        "--agent-bind",
        scripts.to_str().unwrap(),
        "--agent-bind",
        &flags_dir,
    ];
    let mut child = Command::new(e2e::binary("collector"))
        .args(args)
        .current_dir(work.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("collector runs");
    // Wait until the first agent is at work (its output, stored as it comes, says so), then
    // kill -9.
    let at_work = || {
        find_files(&work.path().join("board"), "agent.stdout")
            .iter()
            .any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("at work")))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !at_work() {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().expect("kill -9");
    child.wait().unwrap();
    // The sandbox dies with the session: nothing of the agent runs on.
    let agent_alive = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
            std::fs::read(p.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(slow.to_str().unwrap()))
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while agent_alive() {
        assert!(
            std::time::Instant::now() < deadline,
            "the sandboxed agent outlived its killed session"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let finished = find_files(&work.path().join("board"), "run.json");
    assert!(
        finished.is_empty(),
        "a killed session wrote a finished run: {finished:?}"
    );
    // Nothing for the judge to read as a result either.
    let report = Command::new(e2e::binary("judge"))
        .args(["report", "board", "--out", "rep"])
        .current_dir(work.path())
        .output()
        .unwrap();
    assert!(
        !report.status.success(),
        "judge found runs: {}",
        e2e::text(&report)
    );
    // The same command resumes; without the marker the agents finish at once.
    std::fs::remove_file(&marker).unwrap();
    let out = collector(&args, work.path());
    assert!(out.status.success(), "{}", e2e::text(&out));
    let runs = find_files(&work.path().join("board"), "run.json");
    assert!(runs.len() >= 2, "{runs:?}");
    assert!(
        !work.path().join("board/.unfinished").exists()
            || std::fs::read_dir(work.path().join("board/.unfinished"))
                .unwrap()
                .next()
                .is_none()
    );
    // Resuming again runs nothing.
    let again = collector(&args, work.path());
    assert!(again.status.success(), "{}", e2e::text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr)
            .contains(&format!("0 ran now, {} finished before", runs.len())),
        "{}",
        e2e::text(&again)
    );
}

/// Every file named `name` below `dir`.
fn find_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(find_files(&p, name));
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push(p);
        }
    }
    out
}
