//! `collector capture`: record a running system (a cluster, or a replay) into a dataset.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use problems::Dur;

use capture::kube::Connection;
use capture::scope::{LabelPattern, Scope};
use capture::{Options, Window, capture, now_ns};
use schemas::time::parse_rfc3339;

#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("span").required(true).args(["duration", "since"])),
    after_help = "Examples:\n  collector capture --kubeconfig ~/.kube/config --namespaces hotel-reservation \\\n    --prometheus http://localhost:9090 --jaeger http://localhost:16686 --duration 15m --out out/live\n  collector capture --in-cluster --namespaces shop --exclude-labels 'app.kubernetes.io/part-of=chaos-*' \\\n    --since 30m --out /data/last-30m\n  collector capture --kubeconfig /tmp/replay.kubeconfig --namespaces hotel-reservation \\\n    --since 2026-11-02T10:00:00Z --until 2026-11-02T10:03:30Z --out out/recaptured --json"
)]
pub struct Args {
    /// Kubeconfig of the cluster (its current context). Default: KUBECONFIG, ~/.kube/config, or
    /// in-cluster.
    #[arg(long, conflicts_with = "in_cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// Use the pod's service account (a capture running as a Kubernetes Job).
    #[arg(long)]
    pub in_cluster: bool,
    /// Namespaces to capture (comma-separated); every namespace when omitted.
    #[arg(long, value_delimiter = ',')]
    pub namespaces: Vec<String>,
    /// Namespaces never captured (the observability stack, the injection machinery).
    #[arg(long, value_delimiter = ',')]
    pub exclude_namespaces: Vec<String>,
    /// Objects whose labels match any of these are not captured: KEY or KEY=VALUE, `*` in VALUE.
    #[arg(long, value_delimiter = ',')]
    pub exclude_labels: Vec<LabelPattern>,
    #[command(flatten)]
    pub observability: super::cluster::ObservabilityArgs,
    /// Capture for this long from now (e.g. `15m`): the watch runs live.
    #[arg(long, conflicts_with_all = ["since", "until"])]
    pub duration: Option<Dur>,
    /// Start of the window: an RFC 3339 time, or a duration meaning that long ago (`30m`).
    #[arg(long)]
    pub since: Option<String>,
    /// End of the window: an RFC 3339 time, a duration ago, or `now` (the default). A window
    /// ending later is captured live until then.
    #[arg(long, requires = "since")]
    pub until: Option<String>,
    /// Output dataset directory; it must not exist. It appears only once the capture is complete.
    #[arg(long, value_parser = schemas::paths::output_dir)]
    pub out: PathBuf,
    /// Key of the keyed hash that replaces Secret values (equal values stay equal); a random key
    /// per capture when omitted.
    #[arg(long, env = "FAULTLINE_REDACTION_KEY", hide_env_values = true)]
    pub redaction_key: Option<String>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// An RFC 3339 time, `now`, or a duration before `now`.
fn parse_time(flag: &str, text: &str, now: i64) -> anyhow::Result<i64> {
    if text == "now" {
        return Ok(now);
    }
    if let Some(t) = parse_rfc3339(text) {
        return Ok(t);
    }
    let ago: Dur = text.parse().map_err(|e| {
        anyhow::anyhow!("{flag}: `{text}` is neither an RFC 3339 time (2026-01-01T00:10:00Z) nor a duration (30m): {e}")
    })?;
    Ok(now - ago.as_micros() as i64 * 1000)
}

fn window(args: &Args, now: i64) -> anyhow::Result<Window> {
    let w = match (&args.duration, &args.since) {
        (Some(d), _) => Window {
            since_ns: now,
            until_ns: now + d.as_micros() as i64 * 1000,
        },
        (None, Some(since)) => Window {
            since_ns: parse_time("--since", since, now)?,
            until_ns: parse_time("--until", args.until.as_deref().unwrap_or("now"), now)?,
        },
        (None, None) => anyhow::bail!("give --duration or --since"),
    };
    anyhow::ensure!(
        w.since_ns < w.until_ns,
        "the window is empty: --since must be before --until"
    );
    Ok(w)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let opts = Options {
        kubernetes: match (&args.kubeconfig, args.in_cluster) {
            (Some(path), _) => Connection::Kubeconfig(path.clone()),
            (None, true) => Connection::InCluster,
            (None, false) => Connection::Infer,
        },
        scope: Scope {
            namespaces: args.namespaces.iter().cloned().collect(),
            exclude_namespaces: args.exclude_namespaces.iter().cloned().collect(),
            exclude_labels: args.exclude_labels.clone(),
        },
        prometheus: args.observability.prometheus.clone(),
        jaeger: args.observability.jaeger.clone(),
        loki: args.observability.loki.clone(),
        window: window(&args, now_ns())?,
        out: args.out.clone(),
        redaction_key: args.redaction_key.clone(),
        progress: !args.json,
    };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let summary = runtime.block_on(capture(&opts))?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "captured {} .. {} into {} ({})",
            summary.window_start,
            summary.window_end,
            summary.dataset.display(),
            summary.dataset_id
        );
        for (table, rows) in &summary.rows {
            println!("  {table:<16} {rows} rows");
        }
        if summary.watch_recoveries > 0 {
            println!(
                "  watch interruptions recovered: {}",
                summary.watch_recoveries
            );
        }
        for g in &summary.log_gaps {
            let which = if g.previous { " (previous)" } else { "" };
            println!(
                "  logs not read: {}/{} container {}{which}: {}",
                g.namespace, g.pod, g.container, g.error
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
