//! The tools at SREGym's MCP paths, answering as SREGym's servers answer, so that its agents
//! (Stratus, its demo driver, clients built on fastmcp) read them as they were written to.
//!
//! SREGym serves one SSE app per mount: `/kubectl`, `/prometheus`, `/jaeger`, `/loki` and
//! `/submit`, each `…/sse` + `…/messages/`, and its conductor serves `submit` at `/submit_mcp`.
//! Its tools always answer text and never a tool error: a refused command is the text
//! `Command Rejected: …`, an upstream failure `[prom_mcp] Error querying …`; data is Python's
//! `str()` of the upstream JSON. A fastmcp client raises on a tool error, which Stratus does not
//! catch, so these mounts must never set `isError`. Our own tools (Streamable HTTP at `/mcp`)
//! keep their JSON and tool errors.
//!
//! kubectl's rollback stack is kept per client session as SREGym keeps it: by the `sregym_ssid`
//! header, else by the SSE session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Value, json};

use crate::kubectl::KubectlTools;
use crate::observe::Apis;
use crate::server::{
    CmdArgs, LabelArgs, LogsArgs, LookbackArgs, QueryArgs, ServiceArgs, SubmitArgs, TracesArgs,
};
use crate::{Faultline, sse};

/// One of SREGym's MCP apps: where it is mounted and which tools it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mount {
    Kubectl,
    Prometheus,
    Jaeger,
    Loki,
    /// SREGym's MCP server's `submit`: the submission API's HTTP answer, as it came.
    Submit,
    /// The conductor's own `submit` (`/submit_mcp`): the submission's status and message.
    Conductor,
}

impl Mount {
    /// The mounts of SREGym's MCP server (the conductor's is on the submission API).
    pub const SERVER: [Mount; 5] = [
        Mount::Kubectl,
        Mount::Prometheus,
        Mount::Jaeger,
        Mount::Loki,
        Mount::Submit,
    ];

    pub fn path(self) -> &'static str {
        match self {
            Mount::Kubectl => "/kubectl",
            Mount::Prometheus => "/prometheus",
            Mount::Jaeger => "/jaeger",
            Mount::Loki => "/loki",
            Mount::Submit => "/submit",
            Mount::Conductor => "/submit_mcp",
        }
    }

    fn tools(self) -> &'static [&'static str] {
        match self {
            Mount::Kubectl => &[
                "exec_kubectl_cmd_safely",
                "rollback_command",
                "get_previous_rollbackable_cmd",
            ],
            Mount::Prometheus => &["get_metrics", "get_alerts"],
            Mount::Jaeger => &[
                "get_services",
                "get_operations",
                "get_traces",
                "get_dependency_graph",
            ],
            Mount::Loki => &["get_logs", "get_labels", "get_label_values"],
            Mount::Submit | Mount::Conductor => &["submit"],
        }
    }

    /// The server name the app introduces itself by (SREGym's).
    fn server_name(self) -> &'static str {
        match self {
            Mount::Kubectl => "Kubectl MCP Server",
            Mount::Prometheus => "Prometheus MCP Server",
            Mount::Jaeger => "Jaeger MCP Server",
            Mount::Loki => "Loki MCP Server",
            Mount::Submit => "Submission MCP Server",
            Mount::Conductor => "Submit MCP Server",
        }
    }
}

/// The tools of one mount, answering text only.
#[derive(Clone)]
pub struct Sregym {
    mount: Mount,
    kubectl: KubectlTools,
    apis: Arc<Apis>,
    tool_router: ToolRouter<Sregym>,
}

impl std::fmt::Debug for Sregym {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sregym")
            .field("mount", &self.mount)
            .finish_non_exhaustive()
    }
}

impl Sregym {
    fn new(server: &Faultline, mount: Mount) -> Sregym {
        let mut tool_router = Self::tool_router();
        let names: Vec<String> = tool_router
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        for name in names {
            if !mount.tools().contains(&name.as_str()) {
                tool_router.remove_route(&name);
            }
        }
        Sregym {
            mount,
            kubectl: server.kubectl.clone(),
            apis: server.apis.clone(),
            tool_router,
        }
    }
}

/// SREGym's MCP mounts (`/kubectl/sse`, …), to serve beside our own `/mcp`.
pub fn router(server: &Faultline) -> axum::Router {
    let mut router = axum::Router::new();
    for mount in Mount::SERVER {
        if mount == Mount::Submit && server.apis.submit.is_none() {
            continue;
        }
        router = router.nest(mount.path(), mount_router(server, mount));
    }
    router
}

/// One mount's SSE app, to nest at [`Mount::path`].
pub fn mount_router(server: &Faultline, mount: Mount) -> axum::Router {
    sse::router(Connector {
        base: Sregym::new(server, mount),
        stacks: Mutex::default(),
    })
}

/// Makes each SSE connection's tools: the kubectl mount's with the client session's own
/// rollback stack.
struct Connector {
    base: Sregym,
    stacks: Mutex<HashMap<String, KubectlTools>>,
}

impl sse::Connect for Connector {
    type Handler = Sregym;

    fn connect(&self, headers: &HeaderMap, session_id: &str) -> Sregym {
        let mut tools = self.base.clone();
        if self.base.mount == Mount::Kubectl {
            let key = headers
                .get("sregym_ssid")
                .and_then(|v| v.to_str().ok())
                .unwrap_or(session_id)
                .to_string();
            let mut stacks = self.stacks.lock().unwrap_or_else(|e| e.into_inner());
            tools.kubectl = stacks
                .entry(key)
                .or_insert_with(|| self.base.kubectl.with_own_stack())
                .clone();
        }
        tools
    }
}

/// An answer as SREGym's tools give it: the text, or the error as text with the tool's prefix.
fn text(answer: Result<String, String>, prefix: &str, tool: &str) -> String {
    answer.unwrap_or_else(|e| format!("[{prefix}] Error querying {tool}: {e}"))
}

/// Data as SREGym's tools give it: Python's `str()` of the JSON (never empty: `[]`, `None`).
fn data(answer: Result<Value, String>, prefix: &str, tool: &str) -> String {
    text(answer.map(|v| py_repr(&v)), prefix, tool)
}

#[tool_router]
impl Sregym {
    #[tool(
        description = "Execute one kubectl command against the cluster and return its output. The command must start with `kubectl`; pipes, redirects and compound commands are rejected, as are interactive commands (debug, edit, wait, proxy, port-forward, cp, attach, logs -f). Writes are dry-run on the server first and can be rolled back with rollback_command."
    )]
    async fn exec_kubectl_cmd_safely(&self, Parameters(args): Parameters<CmdArgs>) -> String {
        match self.kubectl.exec(&args.cmd).await {
            Ok(out) => out,
            Err(e) => match e.strip_prefix("Refused: ") {
                Some(why) => format!("Command Rejected: {why}"),
                None => e,
            },
        }
    }

    #[tool(
        description = "Roll back the last kubectl command you successfully executed with exec_kubectl_cmd_safely."
    )]
    async fn rollback_command(&self) -> String {
        self.kubectl.rollback().await.unwrap_or_else(|e| e)
    }

    #[tool(
        description = "List the commands you executed that can be rolled back; rollback_command undoes them from the last of this list."
    )]
    async fn get_previous_rollbackable_cmd(&self) -> String {
        let cmds = self.kubectl.rollbackable_cmds();
        let lines: Vec<String> = cmds
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{}. {c}", i + 1))
            .collect();
        lines.join("\n")
    }

    #[tool(
        description = "Query real-time metrics from Prometheus with a PromQL expression; answers the result with timestamps, values and labels, or error information."
    )]
    async fn get_metrics(&self, Parameters(args): Parameters<QueryArgs>) -> String {
        let answer = self.apis.metrics_data(&args.query).await;
        data(answer, "prom_mcp", "get_metrics")
    }

    #[tool(
        description = "Get the alerts firing now in Prometheus, with their labels and annotations, or \"No firing alerts\"."
    )]
    async fn get_alerts(&self) -> String {
        let answer = self.apis.firing_alerts().await.map(|firing| {
            if firing.is_empty() {
                "No firing alerts".to_string()
            } else {
                py_repr(&Value::Array(firing))
            }
        });
        text(answer, "prom_mcp", "get_alerts")
    }

    #[tool(description = "List the names of the services that report traces.")]
    async fn get_services(&self) -> String {
        data(self.apis.services_data().await, "ob_mcp", "get_services")
    }

    #[tool(description = "List the operations of one service's traces.")]
    async fn get_operations(&self, Parameters(args): Parameters<ServiceArgs>) -> String {
        let answer = self.apis.operations_data(&args.service).await;
        data(answer, "ob_mcp", "get_operations")
    }

    #[tool(description = "Get the traces of one service in the last N minutes (up to 20).")]
    async fn get_traces(&self, Parameters(args): Parameters<TracesArgs>) -> String {
        let minutes = args.last_n_minutes.unwrap_or(15);
        let answer = self.apis.traces_data(&args.service, minutes).await;
        data(answer, "ob_mcp", "get_traces")
    }

    #[tool(
        description = "Get the service dependency graph (who calls whom, and how often) over the last N minutes."
    )]
    async fn get_dependency_graph(&self, Parameters(args): Parameters<LookbackArgs>) -> String {
        let minutes = args.last_n_minutes.unwrap_or(30);
        // SREGym shows Jaeger's whole answer, envelope included.
        let answer = self.apis.dependencies_data(minutes).await.map(|edges| {
            let total = edges.as_array().map_or(0, Vec::len);
            json!({"data": edges, "total": total, "limit": 0, "offset": 0, "errors": null})
        });
        data(answer, "ob_mcp", "get_dependency_graph")
    }

    #[tool(
        description = "Query logs with LogQL over the last N minutes (default 15, up to 100 entries), one entry a line: `[YYYY-mm-dd HH:MM:SS] [labels] line`."
    )]
    async fn get_logs(&self, Parameters(args): Parameters<LogsArgs>) -> String {
        let minutes = args.last_n_minutes.unwrap_or(15);
        let answer = self
            .apis
            .log_lines(&args.query, minutes)
            .await
            .map(|lines| {
                if lines.is_empty() {
                    "No logs found matching the query.".to_string()
                } else {
                    lines.join("\n")
                }
            });
        text(answer, "loki_mcp", "get_logs")
    }

    #[tool(description = "List the label names logs can be selected by.")]
    async fn get_labels(&self) -> String {
        let answer = self.apis.labels_data().await.map(|labels| {
            let names: Vec<String> = strings(&labels).map(|l| format!("  - {l}")).collect();
            format!("Available labels:\n{}", names.join("\n"))
        });
        text(answer, "loki_mcp", "get_labels")
    }

    #[tool(description = "List the values of one log label (e.g. namespace, app, pod).")]
    async fn get_label_values(&self, Parameters(args): Parameters<LabelArgs>) -> String {
        let label = &args.label;
        let answer = self.apis.label_values_data(label).await.map(|values| {
            let values: Vec<String> = strings(&values).map(|v| format!("  - {v}")).collect();
            if values.is_empty() {
                format!("No values found for label '{label}'.")
            } else {
                format!("Values for label '{label}':\n{}", values.join("\n"))
            }
        });
        text(answer, "loki_mcp", "get_label_values")
    }

    #[tool(
        description = "Submit your result to the benchmark: a diagnosis in words, or an empty string once you have mitigated."
    )]
    async fn submit(&self, Parameters(args): Parameters<SubmitArgs>) -> String {
        let answer = match self.apis.post_solution(&args.ans).await {
            Err(e) => {
                json!({"status": "N/A", "text": format!("[submit_mcp] HTTP submission failed: {e}")})
            }
            Ok((status, body)) if self.mount == Mount::Conductor => conductor_answer(status, &body),
            Ok((status, body)) => json!({"status": status.to_string(), "text": body}),
        };
        // fastmcp serialises a tool's dict result as indented JSON.
        serde_json::to_string_pretty(&answer).unwrap_or_default()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Sregym {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.mount.server_name(), "1.9.4"))
    }
}

/// The conductor's own submit tool answers the submission's outcome, not the HTTP exchange:
/// `{"status": "200", "text": "Submission received"}`, or `"error"` with the reason.
fn conductor_answer(status: u16, body: &str) -> Value {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = parsed
        .get("message")
        .or_else(|| parsed.get("detail"))
        .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
        .unwrap_or_else(|| body.to_string());
    let outcome = parsed.get("status").and_then(Value::as_str);
    match outcome {
        Some("done") => json!({"status": "done", "text": message}),
        _ if (200..300).contains(&status) => json!({"status": "200", "text": message}),
        _ => json!({"status": "error", "text": message}),
    }
}

fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

/// Python's `repr` of a JSON value, as `str(response.json())` prints it: `{'k': [1, 'x', None]}`.
pub fn py_repr(v: &Value) -> String {
    let mut out = String::new();
    write_py(v, &mut out);
    out
}

fn write_py(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(f) => out.push_str(&py_float(f)),
            None => out.push_str(&n.to_string()),
        },
        Value::String(s) => py_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_py(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_str(k, out);
                out.push_str(": ");
                write_py(item, out);
            }
            out.push('}');
        }
    }
}

/// A float as Python's `repr`: shortest round trip, `.0` on whole numbers, exponent form
/// (`1e+16`, `1.5e-05`) outside 1e-4..1e16.
fn py_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "nan"
        } else if f > 0.0 {
            "inf"
        } else {
            "-inf"
        }
        .into();
    }
    let a = f.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let e = format!("{f:e}");
        let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    if f.fract() == 0.0 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

/// A string as Python's `repr`: single quotes unless the text has one and no double quote.
fn py_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_shown_as_python_shows_it() {
        let v = json!({"resultType": "vector", "result": [{"metric": {"job": "geo"},
            "value": [1732860000.123, "1"]}], "ok": true, "none": null, "n": 3,
            "q": "it's", "both": "'\"", "nl": "a\nb"});
        assert_eq!(
            py_repr(&v),
            r#"{'resultType': 'vector', 'result': [{'metric': {'job': 'geo'}, 'value': [1732860000.123, '1']}], 'ok': True, 'none': None, 'n': 3, 'q': "it's", 'both': '\'"', 'nl': 'a\nb'}"#
        );
        assert_eq!(py_float(2.0), "2.0");
        assert_eq!(py_float(1e16), "1e+16");
        assert_eq!(py_float(1.5e-5), "1.5e-05");
        assert_eq!(py_float(0.25), "0.25");
        assert_eq!(py_float(0.0), "0.0");
    }

    #[test]
    fn the_conductor_answers_the_outcome_not_the_exchange() {
        let ok = conductor_answer(200, r#"{"status":"200","message":"Submission received"}"#);
        assert_eq!(ok, json!({"status": "200", "text": "Submission received"}));
        let done = conductor_answer(200, r#"{"status":"done","message":"All stages"}"#);
        assert_eq!(done["status"], "done");
        let wrong = conductor_answer(400, r#"{"detail":"Cannot submit at stage: 'setup'"}"#);
        assert_eq!(
            wrong,
            json!({"status": "error", "text": "Cannot submit at stage: 'setup'"})
        );
    }

    #[test]
    fn each_mount_serves_its_own_tools_only() {
        let server = Faultline::new(crate::Targets::new(
            "/nonexistent/kc".into(),
            "http://127.0.0.1:1".into(),
            "http://127.0.0.1:1".into(),
            "http://127.0.0.1:1".into(),
        ))
        .unwrap();
        for mount in Mount::SERVER {
            let tools = Sregym::new(&server, mount);
            let mut names: Vec<String> = tools
                .tool_router
                .list_all()
                .into_iter()
                .map(|t| t.name.to_string())
                .collect();
            names.sort();
            let mut want: Vec<&str> = mount.tools().to_vec();
            want.sort();
            assert_eq!(names, want, "{mount:?}");
        }
    }
}
