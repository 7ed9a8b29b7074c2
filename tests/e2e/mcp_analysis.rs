//! ITBench's analysis tools on the MCP server, through the official MCP inspector CLI: `collector
//! mcp --dataset` beside a replay answers as `collector analyze` does; in a replay session and in
//! a live session (which records its rows as it runs) a scripted agent that uses only these tools
//! finds the faulty service of a wrong targetPort, and its answers are in the session's times.
//!
//! The inspector is installed by `tests/run`; a missing one fails the test with its install
//! command. npx runs with `--no`, so a test never downloads anything.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use e2e::fixture::ReplayProcess;
use e2e::mcp::{self, INSPECTOR};
use e2e::{binary, run, text};
use serde_json::{Value, json};

const ITBENCH_TOOLS: [&str; 10] = [
    "alert_summary",
    "alert_analysis",
    "event_analysis",
    "metric_analysis",
    "get_metric_anomalies",
    "get_trace_error_tree",
    "build_topology",
    "topology_analysis",
    "k8s_spec_change_analysis",
    "get_context_contract",
];

fn inspector(argv: &[String], method: &[&str]) -> Output {
    let mut cmd = mcp::inspector();
    cmd.args(method).arg("--").args(argv);
    mcp::run(cmd)
}

/// The text of a tool result, and whether the tool reported an error.
fn call(argv: &[String], tool: &str, args: Value) -> (bool, String) {
    let out = inspector(
        argv,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            tool,
            "--tool-args-json",
            &args.to_string(),
        ],
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .or_else(|_| serde_json::from_slice(&out.stderr))
        .unwrap_or_else(|e| panic!("{tool}: inspector JSON expected ({e}): {}", text(&out)));
    let content = v
        .pointer("/result/content")
        .or_else(|| v.get("content"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let answer: String = content.iter().filter_map(|c| c["text"].as_str()).collect();
    let failed = v
        .pointer("/result/isError")
        .or_else(|| v.get("isError"))
        .and_then(Value::as_bool)
        .unwrap_or(!out.status.success());
    (!failed, answer)
}

fn snapshot(tmp: &Path) -> PathBuf {
    let out = tmp.join("geo");
    let o = run(
        "collector",
        &[
            "snapshot",
            "--problem",
            "hotel-geo-target-port",
            "--duration",
            "12m",
            "--no-noise",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "snapshot: {}", text(&o));
    out.join("dataset")
}

fn onset(ds: &Path) -> String {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(ds.parent().unwrap().join("evaluation.json")).unwrap(),
    )
    .unwrap();
    v["injections"][0]["onset"].as_str().unwrap().to_string()
}

#[test]
fn the_inspector_calls_the_analysis_tools_of_collector_mcp_beside_a_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = snapshot(tmp.path());
    let kubeconfig = tmp.path().join("kc");
    let replay = ReplayProcess::start(&ds, &["--write-kubeconfig", kubeconfig.to_str().unwrap()]);
    let argv: Vec<String> = vec![
        binary("collector").display().to_string(),
        "mcp".into(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--prometheus".into(),
        replay.url("prometheus"),
        "--jaeger".into(),
        replay.url("jaeger"),
        "--loki".into(),
        replay.url("loki"),
        "--dataset".into(),
        ds.display().to_string(),
    ];
    let list = inspector(&argv, &["--method", "tools/list"]);
    assert!(list.status.success(), "{}", text(&list));
    let tools: Value = serde_json::from_slice(&list.stdout).unwrap();
    let tools = tools
        .pointer("/result/tools")
        .or_else(|| tools.get("tools"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap();
    for name in ITBENCH_TOOLS.iter().chain(&[
        "get_k8_spec",
        "log_analysis",
        "service_change_points",
        "restart_timeline",
        "get_metrics",
    ]) {
        let t = tools
            .iter()
            .find(|t| t["name"] == *name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert!(t["inputSchema"]["type"] == "object", "{t}");
    }
    // The same answer as the command line, ITBench's file arguments accepted and ignored.
    let (ok, answer) = call(
        &argv,
        "alert_summary",
        json!({"base_dir": "/nonexistent/alerts"}),
    );
    assert!(ok, "{answer}");
    let cli = run(
        "collector",
        &["analyze", "alert_summary", ds.to_str().unwrap(), "--json"],
    );
    assert!(cli.status.success(), "{}", text(&cli));
    let theirs: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&answer).unwrap(), theirs);
    assert!(theirs.as_array().is_some_and(|a| !a.is_empty()), "{theirs}");
    // The trace error tree names the faulty service.
    let (ok, answer) = call(
        &argv,
        "get_trace_error_tree",
        json!({"pivot_time": onset(&ds), "delta_time": "4m", "trace_file": "otel_traces.tsv"}),
    );
    assert!(ok, "{answer}");
    let tree: Value = serde_json::from_str(&answer).unwrap();
    let suspects: Vec<&str> = tree["critical_paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["root_cause_suspect"]["service"].as_str())
        .collect();
    assert!(suspects.contains(&"geo"), "{tree:#}");
    // Bad arguments are the tool's error, with the reason; the server goes on.
    let (ok, answer) = call(
        &argv,
        "get_trace_error_tree",
        json!({"pivot_time": "yesterday"}),
    );
    assert!(!ok);
    assert!(answer.contains("pivot_time `yesterday`"), "{answer}");
    let (ok, answer) = call(
        &argv,
        "get_context_contract",
        json!({"k8_object": "hotel-reservation/Service/geo"}),
    );
    assert!(ok, "{answer}");
    assert!(answer.contains("\"spec_changes\""), "{answer}");
}

/// Runs the analyst agent in a session (`collector live` with `extra`); its run directory.
fn analyst_session(work: &Path, extra: &[&str]) -> (Value, String) {
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/analysts/itbench-tools.sh");
    let out = Command::new(binary("collector"))
        .arg("live")
        .args(extra)
        .args([
            "--agent",
            agent.to_str().unwrap(),
            "--agent-bind",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("agents")
                .to_str()
                .unwrap(),
            "--quiet",
            "--time-limit",
            "4m",
            "--out",
            "run",
        ])
        .current_dir(work)
        .env_remove("JUDGE_BASE_URL")
        .env_remove("JUDGE_MODEL")
        .env_remove("JUDGE_API_KEY")
        .output()
        .expect("collector runs");
    assert!(out.status.success(), "{}", text(&out));
    let dir = work.join("run");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let stdout = std::fs::read_to_string(dir.join("agent.stdout")).unwrap_or_default();
    let stderr = std::fs::read_to_string(dir.join("agent.stderr")).unwrap_or_default();
    assert!(
        !stderr.contains("mcp-inspector: command not found"),
        "the MCP inspector is needed: npm install -g {INSPECTOR} (or bash tests/run)\n{stderr}"
    );
    (run, stdout)
}

/// The value after `label: ` in the agent's output.
fn printed<'a>(stdout: &'a str, label: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{label}: ")))
        .unwrap_or_else(|| panic!("no {label} in:\n{stdout}"))
}

#[test]
fn an_agent_using_only_the_analysis_tools_diagnoses_a_replay_session() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = snapshot(tmp.path());
    let (run, stdout) = analyst_session(tmp.path(), &["--dataset", ds.to_str().unwrap()]);
    assert_eq!(printed(&stdout, "suspect"), "geo", "{stdout}");
    assert_eq!(run["diagnosis"]["pass"], true, "{run:#}\n{stdout}");
    // A replay session serves the recording as if it were happening now: so do the tools.
    let summary: Value = serde_json::from_str(printed(&stdout, "alert_summary")).unwrap();
    let last = schemas::time::parse_rfc3339(summary[0]["last_seen"].as_str().unwrap()).unwrap();
    let now = schemas::time::real_now_ns();
    assert!(
        (now - 900 * 1_000_000_000..=now).contains(&last),
        "{summary}"
    );
}

#[test]
fn an_agent_using_only_the_analysis_tools_diagnoses_a_live_session() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, stdout) = analyst_session(
        tmp.path(),
        &[
            "--problem",
            "hotel-geo-target-port",
            "--since-onset",
            "4m",
            "--no-noise",
        ],
    );
    assert_eq!(printed(&stdout, "suspect"), "geo", "{stdout}");
    assert_eq!(run["diagnosis"]["pass"], true, "{run:#}\n{stdout}");
    assert!(
        run["api_requests"]["by_api"]["mcp"].as_u64().unwrap_or(0) >= 4,
        "{run:#}"
    );
}
