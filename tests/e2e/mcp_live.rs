//! `collector mcp` in front of `collector env up`, driven by the official MCP inspector CLI over
//! stdio (the inspector launches `collector mcp`) and Streamable HTTP: the tool list, a call per
//! API, a kubectl write that really changes the object, a refused pipeline, and a rollback that
//! puts the object back. Then two third-party MCP servers, unmodified, against the same APIs:
//! `mcp-server-kubernetes` (npm) and `prometheus-mcp-server` (PyPI).
//!
//! The tools are installed by `tests/run`; a missing one fails the test with its install
//! command. npx runs with `--no`, so a test never downloads anything.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use e2e::live::{Live, NS, up};
use e2e::mcp::{
    K8S_MCP, PROM_MCP, PROM_MCP_INSTALL, inspector, json_out, result_text, run, third_party,
};
use e2e::{binary, text};
use serde_json::{Value, json};

/// How the inspector reaches a server: the command it launches, or an HTTP URL.
enum Server<'a> {
    Stdio(&'a [String]),
    Http(&'a str),
}

fn target(cmd: &mut Command, server: &Server<'_>) {
    match server {
        Server::Stdio(argv) => {
            cmd.arg("--");
            cmd.args(argv.iter());
        }
        Server::Http(url) => {
            cmd.args(["--transport", "http", "--server-url", url]);
        }
    }
}

fn tool_names(server: &Server<'_>) -> Vec<String> {
    let mut cmd = inspector();
    cmd.args(["--method", "tools/list"]);
    target(&mut cmd, server);
    let out = run(cmd);
    assert!(out.status.success(), "tools/list: {}", text(&out));
    let v = json_out(&out);
    let tools = v
        .pointer("/result/tools")
        .or_else(|| v.get("tools"))
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no tools in {v}"));
    tools
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// Calls a tool; (whether it succeeded, its text). A tool error exits 5 with the result.
fn call(server: &Server<'_>, tool: &str, args: Value) -> (bool, String) {
    let mut cmd = inspector();
    cmd.args(["--method", "tools/call", "--tool-name", tool])
        .arg("--tool-args-json")
        .arg(args.to_string());
    target(&mut cmd, server);
    let out = run(cmd);
    match out.status.code() {
        Some(0) => (true, result_text(&json_out(&out))),
        Some(5) => {
            // The error result is printed on stdout or as the stderr envelope.
            let v: Value = serde_json::from_slice(&out.stdout)
                .or_else(|_| serde_json::from_slice(&out.stderr))
                .unwrap_or_else(|e| panic!("tool error JSON expected ({e}):\n{}", text(&out)));
            (false, v.to_string())
        }
        _ => panic!("{tool} {args}: {}", text(&out)),
    }
}

fn ok(server: &Server<'_>, tool: &str, args: Value) -> String {
    let (done, answer) = call(server, tool, args.clone());
    assert!(done, "{tool} {args} failed: {answer}");
    answer
}

fn endpoint(l: &Live, name: &str) -> String {
    l.endpoints[name]
        .as_str()
        .unwrap_or_else(|| panic!("no {name} endpoint in {}", l.endpoints))
        .trim_end_matches('/')
        .to_string()
}

/// `collector mcp ...` for this environment.
fn mcp_argv(l: &Live) -> Vec<String> {
    let mut argv = vec![binary("collector").display().to_string(), "mcp".into()];
    argv.extend([
        "--kubeconfig".into(),
        l.kubeconfig.display().to_string(),
        "--prometheus".into(),
        endpoint(l, "prometheus"),
        "--jaeger".into(),
        endpoint(l, "jaeger"),
        "--loki".into(),
        endpoint(l, "loki"),
    ]);
    argv
}

/// A `collector mcp --http` process, stopped when dropped.
struct HttpMcp {
    child: Child,
    url: String,
}

impl Drop for HttpMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_http(l: &Live) -> HttpMcp {
    let argv = mcp_argv(l);
    let (program, args) = argv.split_first().expect("a program");
    let mut child = Command::new(program)
        .args(args)
        .args(["--http", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("collector mcp runs");
    let mut line = String::new();
    BufReader::new(child.stderr.take().expect("piped stderr"))
        .read_line(&mut line)
        .expect("the ready line");
    let url = line
        .trim()
        .strip_prefix("mcp: serving ")
        .unwrap_or_else(|| panic!("ready line expected, got {line:?}"))
        .to_string();
    HttpMcp { child, url }
}

const SREGYM_TOOLS: &[&str] = &[
    "exec_kubectl_cmd_safely",
    "rollback_command",
    "get_previous_rollbackable_cmd",
    "get_metrics",
    "get_metrics_range",
    "get_metric_names",
    "get_metric_metadata",
    "get_alerts",
    "get_services",
    "get_operations",
    "get_traces",
    "get_dependency_graph",
    "get_logs",
    "get_labels",
    "get_label_values",
];

#[test]
fn the_inspector_lists_and_calls_every_api_over_stdio() {
    // Without noise: a noise pod kill would replace a pod between the tool listing the pods and
    // kubectl listing them.
    let l = up("hotel-geo-target-port", &["--no-noise"]);
    let argv = mcp_argv(&l);
    let stdio = Server::Stdio(&argv);
    let names = tool_names(&stdio);
    for tool in SREGYM_TOOLS {
        assert!(
            names.iter().any(|n| n == tool),
            "{tool} missing from {names:?}"
        );
    }
    assert!(
        !names.iter().any(|n| n == "submit"),
        "no submit URL, no submit tool"
    );

    // kubectl: the pods real kubectl lists.
    let pods = ok(
        &stdio,
        "exec_kubectl_cmd_safely",
        json!({"cmd": format!("kubectl -n {NS} get pods -o name")}),
    );
    let real = l.ok(&["-n", NS, "get", "pods", "-o", "name"]);
    let mut ours: Vec<&str> = pods.lines().filter(|l| l.starts_with("pod/")).collect();
    let mut theirs: Vec<&str> = real.lines().collect();
    ours.sort();
    theirs.sort();
    assert!(!theirs.is_empty());
    assert_eq!(ours, theirs);

    // Prometheus: an instant query answers a vector with samples.
    let metrics = ok(
        &stdio,
        "get_metrics",
        json!({"query": "count(kube_pod_info)"}),
    );
    let v: Value = serde_json::from_str(&metrics).unwrap_or_else(|e| panic!("{e}: {metrics}"));
    assert_eq!(v["resultType"], "vector", "{v}");
    assert!(
        v["result"][0]["value"][1]
            .as_str()
            .is_some_and(|n| n != "0"),
        "{v}"
    );

    // Jaeger: the services include the app's frontend.
    let services = ok(&stdio, "get_services", json!({}));
    assert!(services.contains("frontend"), "{services}");

    // Loki: lines of the app, formatted with time and labels.
    let logs = ok(
        &stdio,
        "get_logs",
        json!({"query": format!("{{namespace=\"{NS}\"}}"), "last_n_minutes": 10}),
    );
    let first = logs.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("[20") && first.contains("] [") && first.contains("namespace="),
        "{logs}"
    );
}

#[test]
fn over_http_a_write_changes_the_object_a_pipe_is_refused_and_rollback_undoes() {
    let l = up("hotel-geo-target-port", &[]);
    let mcp = serve_http(&l);
    let http = Server::Http(&mcp.url);
    let names = tool_names(&http);
    for tool in SREGYM_TOOLS {
        assert!(
            names.iter().any(|n| n == tool),
            "{tool} missing from {names:?}"
        );
    }

    // One call per API over HTTP too.
    let up_metric = ok(&http, "get_metric_names", json!({}));
    assert!(
        up_metric.lines().any(|n| n == "kube_pod_info"),
        "{up_metric}"
    );
    let ops = ok(&http, "get_operations", json!({"service": "frontend"}));
    assert!(ops.starts_with('['), "{ops}");
    let labels = ok(&http, "get_labels", json!({}));
    assert!(labels.contains("namespace"), "{labels}");

    // A pipeline is refused, and says why.
    let (done, answer) = call(
        &http,
        "exec_kubectl_cmd_safely",
        json!({"cmd": "kubectl get pods | grep geo"}),
    );
    assert!(!done);
    assert!(answer.contains("a pipe"), "{answer}");

    // A write the server refuses in its dry run changes nothing and says why.
    let (done, answer) = call(
        &http,
        "exec_kubectl_cmd_safely",
        json!({"cmd": format!("kubectl -n {NS} scale deployment no-such-thing --replicas=2")}),
    );
    assert!(!done);
    assert!(
        answer.contains("dry run") && answer.contains("not found"),
        "{answer}"
    );

    // The fix, through the tool: the object really changes.
    let before = l.geo_target_port();
    assert_ne!(before, "8083", "the fault is in place before the fix");
    let fixed = ok(
        &http,
        "exec_kubectl_cmd_safely",
        json!({"cmd": format!(
            "kubectl -n {NS} patch svc geo -p '{{\"spec\":{{\"ports\":[{{\"port\":8083,\"targetPort\":8083}}]}}}}'"
        )}),
    );
    assert!(fixed.contains("service/geo patched"), "{fixed}");
    assert_eq!(l.geo_target_port(), "8083");

    let saved = ok(&http, "get_previous_rollbackable_cmd", json!({}));
    assert!(
        saved.contains("1. kubectl -n hotel-reservation patch svc geo"),
        "{saved}"
    );

    // Rollback puts the old target port back.
    let undone = ok(&http, "rollback_command", json!({}));
    assert!(
        undone.contains("restore service/geo -n hotel-reservation: done"),
        "{undone}"
    );
    assert_eq!(l.geo_target_port(), before);
    let empty = ok(&http, "get_previous_rollbackable_cmd", json!({}));
    assert_eq!(empty, "No rollbackable commands.");
}

#[test]
fn third_party_mcp_servers_read_our_apis_unmodified() {
    // Without noise: a noise pod kill would replace a pod between the server listing the pods and
    // kubectl listing them.
    let l = up("hotel-geo-target-port", &["--no-noise"]);

    // mcp-server-kubernetes lists the pods real kubectl lists.
    let kubeconfig = l.kubeconfig.display().to_string();
    let out = third_party(
        &[("KUBECONFIG", kubeconfig)],
        &["npx", "--no", "--", K8S_MCP],
        "kubectl_get",
        json!({"resourceType": "pods", "namespace": NS, "output": "name"}),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains(K8S_MCP) || out.status.success(),
        "is {K8S_MCP} installed? run `npx -y {K8S_MCP} --help` (or bash tests/run)\n{}",
        text(&out)
    );
    assert!(out.status.success(), "kubectl_get: {}", text(&out));
    let answer = result_text(&json_out(&out));
    let real = l.ok(&["-n", NS, "get", "pods", "-o", "name"]);
    assert!(!real.trim().is_empty());
    for pod in real.lines() {
        let name = pod.trim_start_matches("pod/");
        assert!(answer.contains(name), "{name} missing from {answer}");
    }

    // prometheus-mcp-server answers an instant query with the value our API gives.
    let prometheus = endpoint(&l, "prometheus");
    let query = "sum(kube_deployment_spec_replicas)";
    let out = third_party(
        &[("PROMETHEUS_URL", prometheus.clone())],
        &[PROM_MCP],
        "execute_query",
        json!({"query": query}),
    );
    assert!(
        out.status.code() != Some(127) && !String::from_utf8_lossy(&out.stderr).contains("ENOENT"),
        "{PROM_MCP} is not installed: run `{PROM_MCP_INSTALL}` (or bash tests/run)\n{}",
        text(&out)
    );
    assert!(out.status.success(), "execute_query: {}", text(&out));
    let answer = result_text(&json_out(&out));
    let theirs: Value = serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
    let ours: Value = e2e::http_get(format!("{prometheus}/api/v1/query?query={query}"))
        .json()
        .expect("Prometheus JSON");
    let value = |v: &Value| v.pointer("/result/0/value/1").cloned();
    assert_eq!(theirs["resultType"], "vector", "{theirs}");
    assert_eq!(
        value(&theirs),
        ours.pointer("/data/result/0/value/1").cloned(),
        "{theirs} vs {ours}"
    );
    assert!(value(&theirs).is_some());
}
