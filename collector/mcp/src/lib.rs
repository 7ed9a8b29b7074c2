//! faultline's MCP server for a live session: the tools an SRE agent is handed, under SREGym's
//! names and argument names so that agents written for SREGym run unmodified.
//!
//! The server holds no simulator state. It is a client of the session's APIs over HTTP
//! (Prometheus, Jaeger, Loki, a submit endpoint) and of the real `kubectl` with the session's
//! kubeconfig, so it serves any cluster and Prometheus just as well.
//!
//! What flows through it: an MCP request (stdio or Streamable HTTP at `/mcp`) reaches a tool in
//! [`server`]; kubectl tools go through the command rules ([`command`], no IO) and then the
//! runner ([`run`]), with writes dry-run first and saved for rollback ([`kubectl`], [`undo`]);
//! the other tools are requests to the APIs whose answers become text ([`observe`]); ITBench's
//! analysis tools (`alert_summary`, `get_trace_error_tree`, ...) run over the session's tables
//! when the session hands them over ([`Targets::analysis`]: a replayed dataset, or a live
//! environment's recording).

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

pub mod command;
pub mod kubectl;
pub mod observe;
pub mod run;
pub mod server;
pub mod sregym;
pub mod sse;
pub mod undo;

pub use server::Faultline;

/// Where the tools send their requests.
#[derive(Debug, Clone)]
pub struct Targets {
    /// The kubeconfig kubectl uses (`KUBECONFIG`).
    pub kubeconfig: PathBuf,
    /// The kubectl program (default `kubectl`, found on `PATH`).
    pub kubectl: PathBuf,
    /// Base URLs: `http://127.0.0.1:PORT`.
    pub prometheus: String,
    pub jaeger: String,
    pub loki: String,
    /// Where `submit` POSTs `{"solution": ...}`; without it there is no `submit` tool.
    pub submit: Option<String>,
    /// The session's tables for the analysis tools; without them there are none.
    pub analysis: Option<analysis::Source>,
}

impl Targets {
    /// Targets with kubectl from `PATH` and no submit endpoint.
    pub fn new(kubeconfig: PathBuf, prometheus: String, jaeger: String, loki: String) -> Self {
        Targets {
            kubeconfig,
            kubectl: PathBuf::from("kubectl"),
            prometheus,
            jaeger,
            loki,
            submit: None,
            analysis: None,
        }
    }
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Setup(String),
    #[error("MCP over stdio: {0}")]
    Stdio(String),
}

/// The Streamable HTTP transport at `/mcp`, and SREGym's SSE mounts beside it (`/kubectl/sse`,
/// `/prometheus/sse`, …: [`sregym`]). Every Streamable HTTP session shares one server: one
/// rollback stack for all of them. Only loopback `Host` headers are accepted there (rmcp's guard
/// against DNS rebinding), which is where a session's agent runs.
pub fn router(targets: Targets) -> Result<axum::Router, Error> {
    let server = Faultline::new(targets)?;
    let mounts = sregym::router(&server);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    Ok(axum::Router::new()
        .nest_service("/mcp", service)
        .merge(mounts))
}

/// The conductor's `submit` tool over SSE at `/submit_mcp/sse`, as SREGym's submission API
/// serves it beside `/submit`; it POSTs to `submit_url`.
pub fn conductor_router(submit_url: String) -> Result<axum::Router, Error> {
    // Only `submit` is served: the other targets are never asked.
    let targets = Targets {
        submit: Some(submit_url),
        ..Targets::new(PathBuf::new(), String::new(), String::new(), String::new())
    };
    let server = Faultline::new(targets)?;
    let mount = sregym::Mount::Conductor;
    Ok(axum::Router::new().nest(mount.path(), sregym::mount_router(&server, mount)))
}

/// Serves MCP on stdin/stdout until the client closes stdin.
pub async fn serve_stdio(targets: Targets) -> Result<(), Error> {
    let server = Faultline::new(targets)?;
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::Stdio(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| Error::Stdio(e.to_string()))?;
    Ok(())
}
