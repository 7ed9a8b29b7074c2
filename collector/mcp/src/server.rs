//! The MCP tools themselves: one rmcp tool per SREGym tool name, with SREGym's argument names,
//! each answering text. A tool that fails (a refused command, an upstream error) answers a tool
//! error result (`isError: true`) with the reason, never a protocol error: the agent reads it
//! and tries something else.
//!
//! Every session of one server shares the kubectl rollback stack and the HTTP client; rmcp makes
//! one `Faultline` per session by cloning it.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde::{Deserialize, Deserializer};

use crate::Targets;
use crate::kubectl::KubectlTools;
use crate::observe::Apis;
use crate::run::Kubectl;

/// Longest answer a tool gives, in bytes: a whole `kubectl get -A -o yaml` would swamp any
/// agent's context, so the end is cut and said to be.
const MAX_ANSWER: usize = 100_000;

/// The MCP server: the session's kubectl and APIs as tools.
#[derive(Clone)]
pub struct Faultline {
    pub(crate) kubectl: KubectlTools,
    pub(crate) apis: Arc<Apis>,
    tool_router: ToolRouter<Faultline>,
}

impl std::fmt::Debug for Faultline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faultline")
            .field("apis", &self.apis)
            .finish_non_exhaustive()
    }
}

impl Faultline {
    /// A server for these targets; `submit` is offered only when a submit URL is given.
    pub fn new(targets: Targets) -> Result<Faultline, crate::Error> {
        let apis = Apis::new(
            targets.prometheus,
            targets.jaeger,
            targets.loki,
            targets.submit,
        )
        .map_err(crate::Error::Setup)?;
        let kubectl = KubectlTools::new(Kubectl {
            program: targets.kubectl,
            kubeconfig: targets.kubeconfig,
            timeout: Duration::from_secs(120),
            max_output: MAX_ANSWER,
        });
        let mut tool_router = Self::tool_router();
        if apis.submit.is_none() {
            tool_router.remove_route("submit");
        }
        if let Some(source) = targets.analysis {
            let source = Arc::new(source);
            for tool in analysis::TOOLS {
                tool_router.add_route(analysis_route(source.clone(), tool));
            }
        }
        Ok(Faultline {
            kubectl,
            apis: Arc::new(apis),
            tool_router,
        })
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CmdArgs {
    /// One kubectl command line, starting with `kubectl`, e.g. `kubectl -n hotel-reservation get pods`.
    pub cmd: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct QueryArgs {
    /// A PromQL expression.
    pub query: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RangeArgs {
    /// A PromQL expression.
    pub query: String,
    /// Start: RFC 3339 or Unix seconds; default 15 minutes before `end`.
    #[serde(default)]
    pub start: Option<String>,
    /// End: RFC 3339 or Unix seconds; default the server's now.
    #[serde(default)]
    pub end: Option<String>,
    /// Resolution: a duration (`30s`, `1m`) or seconds; default about 120 points.
    #[serde(default)]
    pub step: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct MatchArgs {
    /// A series selector limiting the names, e.g. `{namespace="hotel-reservation"}`.
    #[serde(default, rename = "match")]
    pub matcher: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct MetricArgs {
    /// One metric name; all metrics when absent.
    #[serde(default)]
    pub metric: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ServiceArgs {
    /// A service name as `get_services` lists it.
    pub service: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TracesArgs {
    /// A service name as `get_services` lists it.
    pub service: String,
    /// How far back to look, in minutes (default 15).
    #[serde(default, deserialize_with = "minutes")]
    #[schemars(with = "Option<u32>")]
    pub last_n_minutes: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LookbackArgs {
    /// How far back to look, in minutes (default 30).
    #[serde(default, deserialize_with = "minutes")]
    #[schemars(with = "Option<u32>")]
    pub last_n_minutes: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LogsArgs {
    /// A LogQL query, e.g. `{namespace="hotel-reservation", app="geo"} |= "error"`.
    pub query: String,
    /// How far back to look, in minutes (default 15).
    #[serde(default, deserialize_with = "minutes")]
    #[schemars(with = "Option<u32>")]
    pub last_n_minutes: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LabelArgs {
    /// A Loki label name, e.g. `app`.
    pub label: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SubmitArgs {
    /// The answer: a diagnosis in words, or an empty string once mitigated.
    pub ans: String,
}

/// Minutes as a number or a numeric string: clients that pass every argument as a string
/// (`--tool-arg last_n_minutes=30`) are as welcome as JSON ones.
fn minutes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Minutes {
        Number(u32),
        Text(String),
    }
    match Option::<Minutes>::deserialize(d)? {
        None => Ok(None),
        Some(Minutes::Number(n)) => Ok(Some(n)),
        Some(Minutes::Text(t)) => t.trim().parse().map(Some).map_err(|_| {
            serde::de::Error::custom(format!(
                "last_n_minutes `{t}`: expected a whole number of minutes"
            ))
        }),
    }
}

/// Cuts an answer to `MAX_ANSWER` bytes at a character boundary, saying so.
fn capped(answer: Result<String, String>) -> Result<String, String> {
    let cut = |mut s: String| {
        if s.len() > MAX_ANSWER {
            let mut end = MAX_ANSWER;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            s.push_str("\n[answer truncated]");
        }
        s
    };
    answer.map(cut).map_err(cut)
}

/// What a tool call's future is: it owns everything it needs, so it lives as long as asked.
type Answer<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<CallToolResponse, rmcp::ErrorData>> + Send + 'a>,
>;

/// An analysis tool as an MCP tool: its arguments' schema, and a call that runs it off the
/// async threads (polars blocks) and answers its JSON, or its error as a tool error.
fn analysis_route(
    source: Arc<analysis::Source>,
    tool: &'static analysis::Tool,
) -> ToolRoute<Faultline> {
    let schema = match tool.schema() {
        serde_json::Value::Object(mut m) => {
            m.remove("$schema");
            m.remove("title");
            m
        }
        _ => serde_json::Map::new(),
    };
    let attr = rmcp::model::Tool::new(tool.name, tool.description, Arc::new(schema));
    ToolRoute::new_dyn(attr, move |ctx| analyse(ctx, source.clone(), tool))
}

fn analyse<'a>(
    ctx: ToolCallContext<'a, Faultline>,
    source: Arc<analysis::Source>,
    tool: &'static analysis::Tool,
) -> Answer<'a> {
    let arguments = ctx
        .arguments
        .map_or(serde_json::Value::Null, serde_json::Value::Object);
    Box::pin(async move {
        let run = move || analysis::run(&source, tool.name, arguments);
        let answer = match tokio::task::spawn_blocking(run).await {
            Ok(Ok(v)) => serde_json::to_string_pretty(&v).map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("{} stopped: {e}", tool.name)),
        };
        let result = match capped(answer) {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        };
        Ok(result.into())
    })
}

#[tool_router]
impl Faultline {
    #[tool(
        description = "Run one kubectl command against the cluster and return its output. The command must start with `kubectl`; pipes, redirects, `;`, `&&`, `||`, backticks and `$(...)` are refused, as are debug, edit, wait, proxy, port-forward, cp, attach, `logs -f` and `get -w`. Writes are first checked with a server dry run and only run if it succeeds; each write is saved so `rollback_command` can undo it."
    )]
    async fn exec_kubectl_cmd_safely(
        &self,
        Parameters(args): Parameters<CmdArgs>,
    ) -> Result<String, String> {
        capped(self.kubectl.exec(&args.cmd).await)
    }

    #[tool(description = "Undo the last kubectl write made with exec_kubectl_cmd_safely.")]
    async fn rollback_command(&self) -> Result<String, String> {
        capped(self.kubectl.rollback().await)
    }

    #[tool(
        description = "List the kubectl writes that can be rolled back, oldest first (rollback_command undoes the last)."
    )]
    async fn get_previous_rollbackable_cmd(&self) -> String {
        self.kubectl.rollbackable()
    }

    #[tool(description = "Run a Prometheus instant query (PromQL) at the current time.")]
    async fn get_metrics(&self, Parameters(args): Parameters<QueryArgs>) -> Result<String, String> {
        capped(self.apis.metrics(&args.query).await)
    }

    #[tool(
        description = "Run a Prometheus range query (PromQL); start and end default to the last 15 minutes."
    )]
    async fn get_metrics_range(
        &self,
        Parameters(args): Parameters<RangeArgs>,
    ) -> Result<String, String> {
        let answer = self
            .apis
            .metrics_range(
                &args.query,
                args.start.as_deref(),
                args.end.as_deref(),
                args.step.as_deref(),
            )
            .await;
        capped(answer)
    }

    #[tool(description = "List Prometheus metric names, optionally those of a series selector.")]
    async fn get_metric_names(
        &self,
        Parameters(args): Parameters<MatchArgs>,
    ) -> Result<String, String> {
        capped(self.apis.metric_names(args.matcher.as_deref()).await)
    }

    #[tool(description = "Show Prometheus metric metadata (type and help), of one metric or all.")]
    async fn get_metric_metadata(
        &self,
        Parameters(args): Parameters<MetricArgs>,
    ) -> Result<String, String> {
        capped(self.apis.metric_metadata(args.metric.as_deref()).await)
    }

    #[tool(description = "List the Prometheus alerts firing now.")]
    async fn get_alerts(&self) -> Result<String, String> {
        capped(self.apis.alerts().await)
    }

    #[tool(description = "List the services that report traces to Jaeger.")]
    async fn get_services(&self) -> Result<String, String> {
        capped(self.apis.services().await)
    }

    #[tool(description = "List the operations (span names) of a service in Jaeger.")]
    async fn get_operations(
        &self,
        Parameters(args): Parameters<ServiceArgs>,
    ) -> Result<String, String> {
        capped(self.apis.operations(&args.service).await)
    }

    #[tool(
        description = "Summarise up to 20 recent Jaeger traces of a service from the last N minutes: root operation, duration, errors and spans."
    )]
    async fn get_traces(&self, Parameters(args): Parameters<TracesArgs>) -> Result<String, String> {
        let minutes = args.last_n_minutes.unwrap_or(15);
        capped(self.apis.traces(&args.service, minutes).await)
    }

    #[tool(
        description = "Show which services call which (Jaeger dependencies) over the last N minutes."
    )]
    async fn get_dependency_graph(
        &self,
        Parameters(args): Parameters<LookbackArgs>,
    ) -> Result<String, String> {
        capped(
            self.apis
                .dependencies(args.last_n_minutes.unwrap_or(30))
                .await,
        )
    }

    #[tool(
        description = "Query Loki logs with LogQL over the last N minutes (up to 100 lines, newest kept), formatted `[YYYY-mm-dd HH:MM:SS] [labels] line`."
    )]
    async fn get_logs(&self, Parameters(args): Parameters<LogsArgs>) -> Result<String, String> {
        let minutes = args.last_n_minutes.unwrap_or(15);
        capped(self.apis.logs(&args.query, minutes).await)
    }

    #[tool(description = "List the Loki label names.")]
    async fn get_labels(&self) -> Result<String, String> {
        capped(self.apis.labels().await)
    }

    #[tool(description = "List the values of one Loki label.")]
    async fn get_label_values(
        &self,
        Parameters(args): Parameters<LabelArgs>,
    ) -> Result<String, String> {
        capped(self.apis.label_values(&args.label).await)
    }

    #[tool(
        description = "Submit your answer: a diagnosis in words, or an empty string once the problem is mitigated."
    )]
    async fn submit(&self, Parameters(args): Parameters<SubmitArgs>) -> Result<String, String> {
        capped(self.apis.submit(&args.ans).await)
    }
}

#[tool_handler(
    router = self.tool_router,
    name = "faultline",
    instructions = "Tools for an SRE agent: kubectl (dry-run first, with rollback), Prometheus metrics and alerts, Jaeger traces, Loki logs, and (when the session has them) ITBench's offline analysis tools over the session's data: alert_summary first, then get_trace_error_tree, get_context_contract and the others."
)]
impl ServerHandler for Faultline {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_are_numbers_or_numeric_text() {
        let parse = |v: serde_json::Value| serde_json::from_value::<LogsArgs>(v);
        let n = parse(serde_json::json!({"query": "{}", "last_n_minutes": 30})).unwrap();
        assert_eq!(n.last_n_minutes, Some(30));
        let t = parse(serde_json::json!({"query": "{}", "last_n_minutes": " 45"})).unwrap();
        assert_eq!(t.last_n_minutes, Some(45));
        let none = parse(serde_json::json!({"query": "{}"})).unwrap();
        assert_eq!(none.last_n_minutes, None);
        let err = parse(serde_json::json!({"query": "{}", "last_n_minutes": "soon"})).unwrap_err();
        assert!(err.to_string().contains("last_n_minutes `soon`"), "{err}");
    }

    #[test]
    fn long_answers_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_ANSWER);
        let cut = capped(Ok(long)).unwrap();
        assert!(cut.ends_with("[answer truncated]"));
        assert!(cut.len() <= MAX_ANSWER + 20);
        assert_eq!(capped(Err("short".into())), Err("short".into()));
    }

    fn targets(submit: Option<&str>) -> Targets {
        let mut t = Targets::new(
            "/nonexistent/kc".into(),
            "http://127.0.0.1:1".into(),
            "http://127.0.0.1:1".into(),
            "http://127.0.0.1:1".into(),
        );
        t.submit = submit.map(str::to_string);
        t
    }

    #[test]
    fn submit_is_offered_only_with_a_submit_url() {
        let names = |s: &Faultline| -> Vec<String> {
            let mut n: Vec<String> = s
                .tool_router
                .list_all()
                .into_iter()
                .map(|t| t.name.to_string())
                .collect();
            n.sort();
            n
        };
        let without = Faultline::new(targets(None)).unwrap();
        let with = Faultline::new(targets(Some("http://127.0.0.1:1/submit"))).unwrap();
        assert!(!names(&without).contains(&"submit".to_string()));
        assert!(names(&with).contains(&"submit".to_string()));
        assert_eq!(
            names(&without),
            [
                "exec_kubectl_cmd_safely",
                "get_alerts",
                "get_dependency_graph",
                "get_label_values",
                "get_labels",
                "get_logs",
                "get_metric_metadata",
                "get_metric_names",
                "get_metrics",
                "get_metrics_range",
                "get_operations",
                "get_previous_rollbackable_cmd",
                "get_services",
                "get_traces",
                "rollback_command",
            ]
        );
    }
}
