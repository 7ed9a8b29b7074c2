//! `collector mcp`: the MCP server an agent is handed in a live session, over stdio (the
//! default, for clients that launch it) or Streamable HTTP (`--http ADDR`, at `/mcp`). It talks
//! to the APIs whose URLs it is given and to the real kubectl, so it also serves a real cluster.
//! Given the dataset it serves (`--dataset`), it also offers ITBench's analysis tools over it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  collector env up --problem hotel-geo-target-port --write-kubeconfig /tmp/kc --json\n  collector mcp --kubeconfig /tmp/kc --prometheus http://127.0.0.1:PORT1 --jaeger http://127.0.0.1:PORT2 --loki http://127.0.0.1:PORT3\n  npx @modelcontextprotocol/inspector --cli --method tools/list -- collector mcp --kubeconfig /tmp/kc ...\n\nThe URLs may also come from the environment (PROMETHEUS_URL, JAEGER_URL, LOKI_URL, as in the file
`collector env up --env-file` writes; KUBECONFIG; SUBMIT_URL).
With --http 127.0.0.1:8765 the server answers at http://127.0.0.1:8765/mcp instead of stdio.
With --dataset DIR (the dataset a replay serves; add --time-shift when the replay has it) the
analysis tools (alert_summary, get_trace_error_tree, ...) answer over that dataset.\nLogs go to stderr (RUST_LOG); stdout carries MCP messages only."
)]
pub struct Args {
    /// The kubeconfig kubectl uses for exec_kubectl_cmd_safely.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: PathBuf,
    /// The kubectl program.
    #[arg(long, default_value = "kubectl")]
    pub kubectl: PathBuf,
    /// Prometheus base URL (e.g. http://127.0.0.1:9090).
    #[arg(long, env = "PROMETHEUS_URL")]
    pub prometheus: String,
    /// Jaeger query base URL (e.g. http://127.0.0.1:16686).
    #[arg(long, env = "JAEGER_URL")]
    pub jaeger: String,
    /// Loki base URL (e.g. http://127.0.0.1:3100).
    #[arg(long, env = "LOKI_URL")]
    pub loki: String,
    /// Where the submit tool POSTs {"solution": ...}; without it there is no submit tool.
    #[arg(long, env = "SUBMIT_URL")]
    pub submit: Option<String>,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio.
    #[arg(long)]
    pub http: Option<SocketAddr>,
    /// Offer the analysis tools over this dataset (the one a replay serves).
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Answer the analysis tools in the times a `collector replay --time-shift` serves.
    #[arg(long, requires = "dataset")]
    pub time_shift: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let targets = mcp::Targets {
        kubeconfig: args.kubeconfig,
        kubectl: args.kubectl,
        prometheus: args.prometheus,
        jaeger: args.jaeger,
        loki: args.loki,
        submit: args.submit,
        analysis: match &args.dataset {
            Some(dir) => {
                let source = analysis::Source::dataset(dir)?;
                Some(if args.time_shift {
                    let now = source.reading().virtual_now_ns;
                    source.with_clock(schemas::time::Clock::shifted(now))
                } else {
                    source
                })
            }
            None => None,
        },
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        match args.http {
            None => mcp::serve_stdio(targets).await?,
            Some(addr) => {
                let router = mcp::router(targets)?;
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("listening on {addr}"))?;
                let local = listener.local_addr()?;
                // The address is the ready line: with port 0 it is how a caller learns the port.
                eprintln!("mcp: serving http://{local}/mcp");
                axum::serve(listener, router)
                    .with_graceful_shutdown(async {
                        let _ = tokio::signal::ctrl_c().await;
                    })
                    .await
                    .context("serving MCP over HTTP")?;
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
