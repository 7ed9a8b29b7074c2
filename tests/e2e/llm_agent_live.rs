//! An LLM-driven agent (`tests/agents/llm_agent.py`) investigating `collector env up` through the
//! LLM proxy: the scripted model asks for `kubectl get pods`, a PromQL query, then a submit; the
//! agent runs them for real, and the proxy's counter must equal the usage the model served, in
//! streamed and whole answers. Also: faults of the model reach the agent through the proxy
//! unchanged.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::llm_proxy::{self, ProxyTotals, Upstream, UsageCounter};
use e2e::live::{self, NS};
use e2e::llm_server::{Fault, ScriptedLlm, Step, TokenUsage};
use e2e::text;
use schemas::run_result::AgentUsage;
use serde_json::{Value, json};

fn agent_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("agents/llm_agent.py")
}

/// python3 must be installed; the test fails saying how to install it otherwise.
fn python3() -> Command {
    let found = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "python3 is needed to run the test agent: apt-get install -y python3"
    );
    Command::new("python3")
}

/// kubectl must be installed for the agent's tool; the test fails saying how to install it otherwise.
fn require_kubectl() {
    let found = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "kubectl is needed by the test agent: apt-get install -y kubectl (or bash tests/run)"
    );
}

async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// The scripted model, the proxy in front of it, and the runtime serving both.
struct Llm {
    model: ScriptedLlm,
    proxy: SocketAddr,
    usage: Arc<UsageCounter>,
    /// Last, so that it is dropped after the servers it runs.
    rt: tokio::runtime::Runtime,
}

fn llm(script: Vec<Step>) -> Llm {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let usage = Arc::new(UsageCounter::new());
    let (model, proxy) = rt.block_on(async {
        let model = ScriptedLlm::start(script)
            .await
            .expect("the scripted model");
        let upstream = Upstream {
            base_url: model.base_url(),
            api_key: Some("upstream-key".into()),
        };
        let proxy = serve(llm_proxy::router(upstream, usage.clone())).await;
        (model, proxy)
    });
    Llm {
        model,
        proxy,
        usage,
        rt,
    }
}

/// Collects what the agent submits over HTTP.
fn submit_server(rt: &tokio::runtime::Runtime) -> (String, Arc<Mutex<Vec<Value>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    let app = axum::Router::new().route(
        "/submit",
        axum::routing::post(move |axum::Json(v): axum::Json<Value>| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(v);
                "ok"
            }
        }),
    );
    let addr = rt.block_on(serve(app));
    (format!("http://{addr}"), got)
}

/// Runs the agent against the proxy with `env`, and `args`.
fn run_agent(llm: &Llm, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = python3();
    cmd.arg(agent_script())
        .args(args)
        .env("OPENAI_BASE_URL", format!("http://{}/v1", llm.proxy))
        .env("OPENAI_API_KEY", "agent-key")
        .env_remove("FAULTLINE_SUBMIT_URL")
        .env_remove("PROMETHEUS_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("python3 runs")
}

fn investigation() -> Vec<Step> {
    vec![
        Step::tool("kubectl", json!({"args": ["get", "pods", "-n", NS]})).usage(812, 25, 0),
        Step::tool("promql", json!({"query": "up"}))
            .usage(1450, 31, 512)
            .latency(Duration::from_millis(50)),
        Step::tool(
            "submit",
            json!({"answer": "geo's Service targets the wrong port"}),
        )
        .usage(2010, 40, 1024),
    ]
}

fn as_agent_usage(served: TokenUsage, steps: u64) -> AgentUsage {
    AgentUsage {
        input_tokens: served.prompt,
        output_tokens: served.completion,
        cached_input_tokens: served.cached,
        steps,
        cost_usd: None,
    }
}

/// The content of the tool message the agent sent last in `request`.
fn last_tool_result(request: &Value) -> String {
    let messages = request["messages"].as_array().expect("messages");
    let last = messages.last().expect("a message");
    assert_eq!(last["role"], "tool", "{last}");
    last["content"].as_str().expect("tool content").to_string()
}

fn investigate(stream: bool) {
    require_kubectl();
    // Without noise: a noise pod kill would replace a pod between the agent's `kubectl get pods`
    // and the test's own list, whose first pod the agent's output must show.
    let l = live::up("hotel-geo-target-port", &["--no-noise"]);
    let llm = llm(investigation());
    let (submit_url, submitted) = submit_server(&llm.rt);
    let prometheus = l.endpoints["prometheus"]
        .as_str()
        .expect("a prometheus endpoint")
        .to_string();
    let kubeconfig = l.kubeconfig.to_str().expect("a UTF-8 path").to_string();
    let cache = l.cache.to_str().expect("a UTF-8 path").to_string();
    let mut env = vec![
        ("KUBECONFIG", kubeconfig.as_str()),
        ("KUBECACHEDIR", cache.as_str()),
        ("PROMETHEUS_URL", prometheus.as_str()),
    ];
    // One run submits over HTTP, the other prints its answer.
    if stream {
        env.push(("FAULTLINE_SUBMIT_URL", submit_url.as_str()));
    }
    let mut args = vec!["--max-steps", "6"];
    if stream {
        args.push("--stream");
    }
    let out = run_agent(&llm, &env, &args);
    assert!(out.status.success(), "agent: {}", text(&out));

    // The proxy counted exactly what the model reported, three LLM calls.
    let served = llm.model.served();
    assert_eq!(
        served,
        TokenUsage {
            prompt: 812 + 1450 + 2010,
            completion: 25 + 31 + 40,
            cached: 512 + 1024
        },
        "the model reported usage for every answer"
    );
    assert_eq!(llm.usage.snapshot(), as_agent_usage(served, 3));
    let totals = llm.usage.totals();
    assert_eq!(
        (
            totals.requests,
            totals.unmetered_calls,
            totals.upstream_errors
        ),
        (3, 0, 0)
    );
    assert_eq!(llm.model.remaining(), 0);

    let requests = llm.model.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(r["stream"] == true, stream, "{r}");
        // The agent never asks for usage; in a stream the proxy did, so the model reported it.
        assert_eq!(r["stream_options"]["include_usage"] == true, stream, "{r}");
    }
    // The agent's kubectl reached the cluster: its output (fed back to the model) lists the pods
    // the API serves.
    let pods = l.ok(&["-n", NS, "get", "pods", "-o", "name"]);
    let first_pod = pods
        .lines()
        .next()
        .and_then(|p| p.strip_prefix("pod/"))
        .expect("the cluster has pods");
    let kubectl_result = last_tool_result(&requests[1]);
    assert!(
        kubectl_result.contains("READY") && kubectl_result.contains(first_pod),
        "kubectl's table with {first_pod} expected, the agent fed back: {kubectl_result}"
    );
    let promql_result = last_tool_result(&requests[2]);
    assert!(
        promql_result.contains("\"success\"") && promql_result.contains("\"result\""),
        "{promql_result}"
    );

    let answer = "geo's Service targets the wrong port";
    if stream {
        let got = submitted.lock().unwrap().clone();
        assert_eq!(got, vec![json!({"solution": answer})]);
    } else {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let printed: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("one JSON line expected on stdout, got {stdout:?}: {e}"));
        assert_eq!(printed, json!({"submitted": answer}));
        assert!(submitted.lock().unwrap().is_empty());
    }
    l.stop();
}

#[test]
fn an_agent_investigating_live_is_counted_through_the_proxy() {
    investigate(false);
}

#[test]
fn a_streaming_agent_investigating_live_is_counted_through_the_proxy() {
    investigate(true);
}

#[test]
fn a_model_server_error_reaches_the_agent_through_the_proxy() {
    let llm = llm(vec![Step::fault(Fault::ServerError).usage(10, 10, 0)]);
    let out = run_agent(&llm, &[], &["--max-steps", "3"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("HTTP 500") && stderr.contains("scripted server error"),
        "{stderr}"
    );
    assert_eq!(llm.model.served(), TokenUsage::default());
    assert_eq!(
        llm.usage.totals(),
        ProxyTotals {
            requests: 1,
            upstream_errors: 1,
            ..ProxyTotals::default()
        }
    );
}

#[test]
fn a_hung_model_times_the_agent_out_and_counts_no_call() {
    let llm = llm(vec![Step::fault(Fault::Hang)]);
    let out = run_agent(&llm, &[], &["--max-steps", "3", "--timeout", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("timed out"), "{stderr}");
    assert_eq!(llm.model.requests().len(), 1);
    let totals = llm.usage.totals();
    assert_eq!((totals.requests, totals.llm_calls), (1, 0));
}

#[test]
fn an_agent_stops_after_its_step_limit() {
    let script = (0..5)
        .map(|i| {
            Step::tool("promql", json!({"query": format!("up{{n=\"{i}\"}}")})).usage(100, 10, 0)
        })
        .collect();
    let llm = llm(script);
    // No PROMETHEUS_URL: the tool answers with an error, which the agent feeds back and goes on.
    let out = run_agent(&llm, &[], &["--max-steps", "2", "--stream"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(llm.model.remaining(), 3);
    let second = &llm.model.requests()[1];
    assert_eq!(last_tool_result(second), "error: PROMETHEUS_URL is not set");
    assert_eq!(llm.usage.snapshot(), as_agent_usage(llm.model.served(), 2));
    assert_eq!(llm.usage.snapshot().input_tokens, 200);
}

/// The whole loop through `collector live`: the session starts its own proxy in front of the
/// scripted model (`--llm-upstream`), hands the agent OPENAI_BASE_URL, and records in run.json and
/// the trajectory exactly the tokens the model served.
#[test]
fn a_session_records_the_tokens_of_an_llm_agent() {
    require_kubectl();
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let model = rt
        .block_on(ScriptedLlm::start(investigation()))
        .expect("the scripted model");
    let work = tempfile::tempdir().expect("a temporary directory");
    let agent = format!("python3 {}", agent_script().display());
    let out = Command::new(e2e::binary("collector"))
        .args([
            "live",
            "--problem",
            "hotel-geo-target-port",
            "--quiet",
            "--time-limit",
            "2m",
        ])
        .args([
            "--agent",
            &agent,
            "--agent-bind",
            agent_script().to_str().expect("UTF-8 path"),
            "--llm-upstream",
            &model.base_url(),
            "--out",
            "run",
        ])
        .current_dir(work.path())
        .output()
        .expect("collector runs");
    assert!(out.status.success(), "{}", text(&out));
    let run: Value = serde_json::from_str(
        &std::fs::read_to_string(work.path().join("run/run.json")).expect("run.json"),
    )
    .expect("run.json is JSON");
    assert_eq!(model.answered(), 3, "every scripted answer was asked for");
    let expected = as_agent_usage(model.served(), 3);
    let recorded: AgentUsage =
        serde_json::from_value(run["agent_usage"].clone()).expect("agent_usage");
    assert_eq!(recorded, expected, "{run:#}");
    assert_eq!(run["diagnosis"]["submitted"], true, "{run:#}");
    assert_eq!(
        run["output"]["diagnosis"], "geo's Service targets the wrong port",
        "{run:#}"
    );
    let trajectory: Value = serde_json::from_str(
        &std::fs::read_to_string(work.path().join("run/trajectory.json")).expect("trajectory"),
    )
    .expect("trajectory is JSON");
    assert_eq!(
        trajectory["final_metrics"]["total_prompt_tokens"], expected.input_tokens,
        "{trajectory:#}"
    );
    // The agent's kubectl and PromQL calls reached the session's APIs.
    let by_api = &run["api_requests"]["by_api"];
    assert!(by_api["kubernetes"].as_u64().unwrap_or(0) >= 1, "{by_api}");
    assert!(by_api["prometheus"].as_u64().unwrap_or(0) >= 1, "{by_api}");
}
