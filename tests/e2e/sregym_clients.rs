//! SREGym's own agents and MCP clients against `collector live`, unmodified, in the agents'
//! sandbox: its code runs from the pinned snapshot (`../shared/conformance/sregym`, never copied
//! into this repository) with its client packages at its pins (`/opt/sregym-venv`, made by
//! tests/install-sregym.sh). Each is started by SREGym's own launch line and finds the session by
//! the variables SREGym's launcher gives (API_HOSTNAME, API_PORT, MCP_SERVER_PORT, ~/.kube/config).

use std::path::{Path, PathBuf};
use std::process::Command;

use e2e::llm_server::{ScriptedLlm, Step};
use e2e::{read_json, text};
use serde_json::{Value, json};

fn sregym() -> PathBuf {
    let dir = e2e::shared_dir().join("conformance/sregym");
    assert!(
        dir.join("clients").is_dir(),
        "SREGym's code is expected at {} (the shared conformance snapshot)",
        dir.display()
    );
    dir.canonicalize().expect("SREGym's directory")
}

fn venv() -> PathBuf {
    let venv = PathBuf::from("/opt/sregym-venv");
    assert!(
        venv.join("bin/python").exists(),
        "SREGym's client packages are missing: bash tests/install-sregym.sh (or bash tests/run)"
    );
    venv
}

fn need_kubectl() {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .unwrap_or_else(|_| {
            panic!("kubectl is needed: apt-get install kubectl (or bash tests/run)")
        });
}

/// `collector live` on a problem with SREGym's launch line `line` run from SREGym's directory;
/// its run.json and the agent's output (stdout, then stderr after a `=== stderr` line).
fn live(problem: &str, line: &str, extra: &[&str]) -> (Value, String) {
    need_kubectl();
    let (sregym, venv) = (sregym(), venv());
    let work = tempfile::tempdir().expect("a temporary directory");
    let agent = format!(
        "cd {} && PATH={}/bin:$PATH exec {line}",
        sregym.display(),
        venv.display()
    );
    let out = Command::new(e2e::binary("collector"))
        .args(["live", "--problem", problem, "--no-noise", "--quiet"])
        .args(["--time-limit", "5m", "--after-last-stage", "5s"])
        .args(["--agent", &agent, "--agent-name", "sregym", "--out", "run"])
        .args(["--agent-bind", sregym.to_str().expect("UTF-8")])
        .args(["--agent-bind", venv.to_str().expect("UTF-8")])
        // litellm would fetch its price list from the internet; Python would write bytecode caches
        // beside SREGym's code.
        .args(["--agent-env", "LITELLM_LOCAL_MODEL_COST_MAP=True"])
        .args(["--agent-env", "PYTHONDONTWRITEBYTECODE=1"])
        .args(extra)
        .env_remove("JUDGE_BASE_URL")
        .env_remove("JUDGE_MODEL")
        .env_remove("JUDGE_API_KEY")
        .current_dir(work.path())
        .output()
        .expect("collector runs");
    assert!(out.status.success(), "{}", text(&out));
    let run = read_json(&work.path().join("run/run.json"));
    let read =
        |f: &str| std::fs::read_to_string(work.path().join("run").join(f)).unwrap_or_default();
    (
        run,
        format!(
            "{}\n=== stderr\n{}",
            read("agent.stdout"),
            read("agent.stderr")
        ),
    )
}

/// The `=== name` blocks an agent printed, by name.
fn blocks(stdout: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut name: Option<String> = None;
    let mut body = String::new();
    for line in stdout.lines() {
        if let Some(next) = line.strip_prefix("=== ") {
            if let Some(n) = name.replace(next.to_string()) {
                out.insert(n, std::mem::take(&mut body).trim_end().to_string());
            }
            body.clear();
        } else if name.is_some() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some(n) = name {
        out.insert(n, body.trim_end().to_string());
    }
    out
}

fn submitted_both(run: &Value) {
    assert_eq!(run["ended"], "submitted", "{run:#}");
    assert_eq!(run["diagnosis"]["submitted"], true, "{run:#}");
    assert_eq!(run["mitigation"]["submitted"], true, "{run:#}");
}

/// Every SREGym tool through its SSE mount with fastmcp 2.9.2's client as Stratus's tools use it:
/// plain text always (fastmcp raises on a tool error), Python's reprs for data, `Command
/// Rejected` for a refused command, a rollback stack per `sregym_ssid`, and both submit tools.
#[test]
fn fastmcp_clients_get_sregyms_answers_on_every_mount() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/sregym");
    let line = format!("python {}/fastmcp_tools.py", script.display());
    let (run, stdout) = live(
        "social-user-scale-zero",
        &line,
        &["--agent-bind", script.to_str().expect("UTF-8")],
    );
    let b = blocks(&stdout);
    assert!(
        b.contains_key("submit after done"),
        "the agent went through:\n{stdout}"
    );
    let tools = |m: &str| -> Vec<String> {
        serde_json::from_str(&b[&format!("tools {m}")]).expect("a tool list")
    };
    assert_eq!(
        tools("kubectl"),
        [
            "exec_kubectl_cmd_safely",
            "get_previous_rollbackable_cmd",
            "rollback_command"
        ]
    );
    assert_eq!(tools("prometheus"), ["get_alerts", "get_metrics"]);
    assert_eq!(
        tools("loki"),
        ["get_label_values", "get_labels", "get_logs"]
    );
    assert_eq!(tools("submit"), ["submit"]);
    assert!(b["refused"].starts_with("Command Rejected: "), "{stdout}");
    assert!(b["get pods"].contains("compose-post-service"), "{stdout}");
    assert!(b["fix"].contains("scaled"), "{stdout}");
    assert_eq!(
        b["rollbackable mine"],
        "1. kubectl -n social-network scale deployment/user-service --replicas=1"
    );
    assert_eq!(
        b["rollbackable other"], "",
        "another session's stack is its own"
    );
    assert!(
        b["get_metrics"].starts_with("{'resultType': 'vector', 'result': [{'metric': {"),
        "{stdout}"
    );
    let alerts = &b["get_alerts"];
    assert!(
        alerts == "No firing alerts" || alerts.starts_with("[{'labels': "),
        "{alerts}"
    );
    assert!(b["get_services"].starts_with("['"), "{stdout}");
    assert!(b["get_operations"].starts_with('['), "{stdout}");
    assert!(
        b["get_dependency_graph"].starts_with("{'data': ["),
        "{stdout}"
    );
    assert!(
        b["get_labels"].starts_with("Available labels:\n  - "),
        "{stdout}"
    );
    assert!(
        b["get_label_values"].contains("  - social-network"),
        "{stdout}"
    );
    assert!(b["get_logs"].starts_with('['), "{stdout}");
    assert!(
        b["bad promql"].starts_with("[prom_mcp] Error querying get_metrics: "),
        "{stdout}"
    );
    for (name, status) in [
        ("submit diagnosis", "200"),
        ("submit mitigation", "200"),
        ("submit after done", "done"),
    ] {
        let answer: Value = serde_json::from_str(&b[name]).expect("a JSON answer");
        assert_eq!(answer["status"], status, "{name}: {answer}");
    }
    submitted_both(&run);
    assert_eq!(run["mitigation"]["success"], true, "{run:#}");
}

/// SREGym's autosubmit agent, started as its agents.yaml starts it: it finds the conductor by
/// API_HOSTNAME/API_PORT, and its second "yes" a minute later is the mitigation. Neither answer
/// is right.
#[test]
fn sregyms_autosubmit_agent_submits_both_stages() {
    let (run, _) = live(
        "hotel-geo-target-port",
        "python -m clients.autosubmit.autosubmit_agent",
        &[],
    );
    submitted_both(&run);
    assert_eq!(run["output"]["diagnosis"], "yes", "{run:#}");
    assert_eq!(run["mitigation"]["success"], false, "{run:#}");
}

/// SREGym's demo driver (its file-trigger mode, advanced by a loop touching /tmp/next inside the
/// sandbox): its kubectl commands go through our `/kubectl/sse` mount and its submissions through
/// the conductor's `/submit_mcp/sse`; its scale command fixes the scale-to-zero problem.
#[test]
fn sregyms_demo_driver_fixes_scale_to_zero_through_our_mcp() {
    let line =
        "sh -c 'while :; do touch /tmp/next; sleep 1; done & exec python -m clients.demo.driver'";
    let (run, stdout) = live("social-user-scale-zero", line, &[]);
    submitted_both(&run);
    assert_eq!(
        run["output"]["diagnosis"], "Root cause",
        "{run:#}\n{stdout}"
    );
    assert_eq!(run["mitigation"]["success"], true, "{run:#}");
    let kube = run["api_requests"]["by_api"]["kubernetes"]
        .as_u64()
        .unwrap_or(0);
    assert!(kube >= 2, "the demo's commands reached the API: {run:#}");
}

/// SREGym's own MCP server, started as its Dockerfile starts it (`python -m
/// mcp_server.sregym_mcp_server`) inside the agent's sandbox from a copy of its code (it writes its
/// rollback states beside it), with SREGym's demo driver as its client: its filtering proxy
/// insists on HTTPS and reads `~/.kube/config`, so its kubectl reaches our API over TLS with the
/// session's certificate authority; the demo's submissions go to our conductor.
#[test]
fn sregyms_demo_driver_fixes_scale_to_zero_through_sregyms_own_mcp_server() {
    let sregym = sregym();
    let own = 19954;
    let serve = format!(
        "cp -r {} /tmp/sregym && chmod -R u+w /tmp/sregym && cd /tmp/sregym && \
         (MCP_SERVER_PORT={own} EXPOSE_SERVER=false python -m mcp_server.sregym_mcp_server \
           >\"$AGENT_LOGS_DIR/mcp_server.log\" 2>&1 &) && \
         until [ \"$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 1 http://127.0.0.1:{own}/kubectl/sse)\" = 200 ]; do sleep 0.2; done && \
         (while :; do touch /tmp/next; sleep 1; done &) && \
         MCP_SERVER_PORT={own} exec python -m clients.demo.driver",
        sregym.display()
    );
    let line = format!("sh -c '{}'", serve.replace('\'', r"'\''"));
    let (run, out) = live("social-user-scale-zero", &line, &[]);
    submitted_both(&run);
    assert_eq!(run["mitigation"]["success"], true, "{run:#}\n{out}");
    let kube = run["api_requests"]["by_api"]["kubernetes"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        kube >= 2,
        "SREGym's server's kubectl reached the API: {run:#}"
    );
}

/// Stratus itself, with a scripted model behind the session's LLM proxy: it connects to the
/// conductor and the SSE mounts, calls tools, survives a refused command (plain text, where a
/// tool error would end it), and submits both stages.
#[test]
fn stratus_connects_survives_a_refusal_and_submits() {
    let ns = "hotel-reservation";
    let refused = format!("kubectl get pods -n {ns} | grep geo");
    let read = format!("kubectl get pods -n {ns}");
    let script = vec![
        Step::tool("exec_read_only_kubectl_cmd", json!({"command": refused})),
        Step::tool("exec_read_only_kubectl_cmd", json!({"command": read})),
        Step::tool(
            "submit_tool",
            json!({"ans": "geo's Service targets the wrong port"}),
        ),
        Step::text("Summary: geo's Service targets a port its pods do not listen on."),
        Step::tool("exec_kubectl_cmd_safely", json!({"command": refused})),
        Step::tool("exec_kubectl_cmd_safely", json!({"command": read})),
        Step::tool("f_submit_tool", json!({"ans": ""})),
    ];
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let model = rt.block_on(ScriptedLlm::start(script)).expect("the model");
    let (run, stdout) = live(
        "hotel-geo-target-port",
        "python -m clients.stratus.stratus_agent.driver.driver",
        &[
            "--llm-upstream",
            &model.base_url(),
            "--agent-env",
            "AGENT_MODEL_ID=openai/scripted",
            "--agent-env",
            "AGENT_API_KEY=scripted",
        ],
    );
    submitted_both(&run);
    assert_eq!(
        model.remaining(),
        0,
        "every scripted step was asked for\n{stdout}"
    );
    // The refused command came back to the model as text.
    let fed_back = model
        .requests()
        .iter()
        .any(|r| r.to_string().contains("Command Rejected"));
    assert!(fed_back, "the refusal reached the model");
    assert_eq!(
        run["output"]["diagnosis"], "geo's Service targets the wrong port",
        "{run:#}"
    );
}
