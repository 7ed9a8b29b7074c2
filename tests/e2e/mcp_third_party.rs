//! Third-party MCP servers, unmodified, driven by the MCP inspector against a live environment
//! and against a replay started without any time flag: `kubernetes-mcp-server` (`pods_top`,
//! `pods_log`, `events_list`, `pods_exec`), `mcp-server-kubernetes` (its equivalents:
//! `kubectl_generic top`, `kubectl_logs`, `kubectl_get events`, `exec_in_pod`), and `prometheus-mcp-server` asking for the last minutes
//! of the real clock. Each answer is checked against what the real kubectl or our Prometheus API
//! answers.

use e2e::live::{Kubectl, NS, snapshot_replay, up};
use e2e::mcp::{
    K8S_MCP, KUBERNETES_MCP, PROM_MCP, PROM_MCP_INSTALL, json_out, result_text, third_party,
};
use e2e::text;
use serde_json::{Value, json};

/// A problem whose pods restart (OOM kills), so that there are events and logs to read.
const PROBLEM: &str = "hotel-profile-oom";

/// A cluster to point the servers at: its kubeconfig and Prometheus.
struct Cluster {
    kubectl: Kubectl,
    prometheus: String,
}

impl Cluster {
    fn kubeconfig(&self) -> String {
        self.kubectl.kubeconfig.display().to_string()
    }

    /// A tool of kubernetes-mcp-server; its text.
    fn kubernetes_mcp(&self, tool: &str, args: Value) -> String {
        let kubeconfig = self.kubeconfig();
        let out = third_party(
            &[],
            &[
                "npx",
                "--no",
                "--",
                KUBERNETES_MCP,
                "--kubeconfig",
                &kubeconfig,
            ],
            tool,
            args.clone(),
        );
        answer(&out, KUBERNETES_MCP, tool, &args)
    }

    /// A tool of mcp-server-kubernetes; its text.
    fn k8s_mcp(&self, tool: &str, args: Value) -> String {
        let out = third_party(
            &[("KUBECONFIG", self.kubeconfig())],
            &["npx", "--no", "--", K8S_MCP],
            tool,
            args.clone(),
        );
        answer(&out, K8S_MCP, tool, &args)
    }

    /// The first pod of the frontend, which logs every request.
    fn frontend_pod(&self) -> String {
        self.kubectl.ok(&[
            "get",
            "pods",
            "-n",
            NS,
            "-l",
            "io.kompose.service=frontend",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ])
    }
}

/// The text of a successful tool call, or a failure that names the install command.
fn answer(out: &std::process::Output, server: &str, tool: &str, args: &Value) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || !stderr.contains(server),
        "is {server} installed? run `npx -y {server} --help` (or bash tests/run)\n{}",
        text(out)
    );
    assert!(out.status.success(), "{tool} {args}: {}", text(out));
    let v = json_out(out);
    assert_ne!(
        v.pointer("/result/isError"),
        Some(&json!(true)),
        "{tool}: {v}"
    );
    result_text(&v)
}

/// Pod names of `kubectl top pods` (the first column).
fn top_pod_names(k: &Kubectl) -> Vec<String> {
    k.ok(&["top", "pods", "-n", NS])
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// The Kubernetes tools of both servers answer as kubectl does.
fn kubernetes_tools_agree_with_kubectl(c: &Cluster) {
    let before = top_pod_names(&c.kubectl);
    let top = c.kubernetes_mcp("pods_top", json!({"namespace": NS}));
    let generic = c.k8s_mcp(
        "kubectl_generic",
        json!({"command": "top", "resourceType": "pods", "namespace": NS}),
    );
    // A live environment replaces pods meanwhile: the pods kubectl lists before and after.
    let after = top_pod_names(&c.kubectl);
    let pods: Vec<&String> = before.iter().filter(|p| after.contains(p)).collect();
    assert!(pods.len() > 5, "{before:?} then {after:?}");
    for pod in pods {
        assert!(
            top.contains(pod.as_str()),
            "{pod} missing from pods_top:\n{top}"
        );
        assert!(
            generic.contains(pod.as_str()),
            "{pod} missing from kubectl top:\n{generic}"
        );
    }
    assert!(top.contains("CPU(cores)") && top.contains("Mi"), "{top}");

    let pod = c.frontend_pod();
    for log in [
        c.kubernetes_mcp("pods_log", json!({"namespace": NS, "name": pod, "tail": 5})),
        c.k8s_mcp(
            "kubectl_logs",
            json!({"resourceType": "pod", "name": pod, "namespace": NS, "tail": 5}),
        ),
    ] {
        // A live pod keeps logging: what the tool read is among what kubectl reads after it.
        // (The frontend's lines, requests handled or failed, all name its source file.)
        let after = c.kubectl.ok(&["logs", "-n", NS, &pod, "--tail=400"]);
        // mcp-server-kubernetes wraps the text in JSON (`{"logs": "..."}`).
        let log = serde_json::from_str::<Value>(&log)
            .ok()
            .and_then(|v| v["logs"].as_str().map(str::to_string))
            .unwrap_or(log);
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("services/frontend/"))
            .collect();
        assert!(!lines.is_empty(), "{log}");
        for line in lines {
            assert!(after.contains(line), "{line:?} not in kubectl logs");
        }
    }

    let reasons = c.kubectl.ok(&[
        "get",
        "events",
        "-n",
        NS,
        "-o",
        "jsonpath={.items[*].reason}",
    ]);
    assert!(
        reasons.contains("BackOff") || reasons.contains("Started"),
        "{reasons}"
    );
    let events = c.kubernetes_mcp("events_list", json!({"namespace": NS}));
    let listed = c.k8s_mcp(
        "kubectl_get",
        json!({"resourceType": "events", "namespace": NS, "output": "json"}),
    );
    for reason in ["Started", "Killing", "BackOff"]
        .into_iter()
        .filter(|r| reasons.split_whitespace().any(|x| x == *r))
    {
        assert!(
            events.contains(reason),
            "{reason} missing from events_list:\n{events}"
        );
        assert!(
            listed.contains(reason),
            "{reason} missing from kubectl_get:\n{listed}"
        );
    }
}

#[test]
fn kubernetes_mcp_servers_read_a_live_environment() {
    // Without noise: a noise pod kill would replace the frontend pod between kubectl naming it
    // and a tool reading it.
    let l = up(PROBLEM, &["--no-noise"]);
    let c = Cluster {
        kubectl: l.client(),
        prometheus: l.endpoints["prometheus"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    };
    kubernetes_tools_agree_with_kubectl(&c);
    commands_run_inside_a_container(&c);
}

/// `pods_exec` and `exec_in_pod` run a command in a container as `kubectl exec` does: what they
/// return is what the container answers (its hostname, its mounted configuration).
fn commands_run_inside_a_container(c: &Cluster) {
    let pod = c.frontend_pod();
    let hostname = c.kubernetes_mcp(
        "pods_exec",
        json!({"namespace": NS, "name": pod, "command": ["hostname"]}),
    );
    assert_eq!(hostname.trim(), pod, "pods_exec hostname");
    let env = c.k8s_mcp(
        "exec_in_pod",
        json!({"name": pod, "namespace": NS, "command": ["sh", "-c", "env | grep ^GEO_SERVICE_PORT="]}),
    );
    let kubectl = c.kubectl.ok(&[
        "exec",
        "-n",
        NS,
        &pod,
        "--",
        "sh",
        "-c",
        "env | grep ^GEO_SERVICE_PORT=",
    ]);
    assert!(kubectl.starts_with("GEO_SERVICE_PORT="), "{kubectl}");
    assert!(env.contains(kubectl.trim()), "exec_in_pod: {env}");
}

#[test]
fn mcp_servers_read_a_replay_started_without_time_flags() {
    let r = snapshot_replay(PROBLEM, &[]);
    let c = Cluster {
        kubectl: r.kubectl.clone(),
        prometheus: r.replay.url("prometheus"),
    };
    kubernetes_tools_agree_with_kubectl(&c);

    // prometheus-mcp-server, asked for the last ten minutes of the real clock (as an agent that
    // reads the time does), sees the incident: the OOM-killed container's restarts.
    let now = chrono::Utc::now();
    let start = now - chrono::Duration::minutes(10);
    let query = format!("max(kube_pod_container_status_restarts_total{{namespace=\"{NS}\"}})");
    let out = third_party(
        &[("PROMETHEUS_URL", c.prometheus.clone())],
        &[PROM_MCP],
        "execute_range_query",
        json!({"query": query, "start": start.to_rfc3339(), "end": now.to_rfc3339(), "step": "30s"}),
    );
    assert!(
        out.status.code() != Some(127) && !String::from_utf8_lossy(&out.stderr).contains("ENOENT"),
        "{PROM_MCP} is not installed: run `{PROM_MCP_INSTALL}` (or bash tests/run)\n{}",
        text(&out)
    );
    assert!(out.status.success(), "execute_range_query: {}", text(&out));
    let answer = result_text(&json_out(&out));
    let range: Value = serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
    let values = range
        .pointer("/result/0/values")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no series in the last ten minutes: {range}"));
    let restarts: Vec<f64> = values
        .iter()
        .filter_map(|v| v[1].as_str()?.parse().ok())
        .collect();
    assert!(restarts.len() > 10, "{range}");
    assert!(
        restarts.last() > Some(&0.0),
        "the OOM-killed container has restarted: {restarts:?}"
    );
    let newest = values
        .last()
        .and_then(|v| v[0].as_f64())
        .unwrap_or_default();
    assert!(
        (now.timestamp() as f64 - newest).abs() < 60.0,
        "the newest point is at the real now: {newest}"
    );
}
