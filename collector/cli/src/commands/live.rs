//! `collector live`: one agent session on a live problem (diagnose, then mitigate) or on a
//! replayed dataset (diagnose), written as a run directory that `judge` reads.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use problems::Dur;

use super::snapshot::load_catalog;
use realcluster::session::KubeTarget;
use session::{self, AgentSpec, Judging, SessionOptions, Target};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  collector live --problem hotel-geo-target-port --seed 3 --agent 'claude -p \"$(cat prompt.md)\"' --agent-network public --agent-env ANTHROPIC_API_KEY=$ANTHROPIC_API_KEY --time-limit 20m --out runs/one\n  collector live --problem hotel-geo-target-port --agent ./my-agent.sh --agent-bind $PWD/lib --out runs/two\n  collector live --dataset out/geo/dataset --agent ./my-agent.sh --out runs/rca\n  AGENT_MODEL_ID=openai/gpt-4o AGENT_API_KEY=$KEY collector live --problem social-user-scale-zero --agent 'cd ~/SREGym && .venv/bin/python -m clients.stratus.stratus_agent.driver.driver' --agent-bind ~/SREGym --agent-network public --out runs/stratus\n  collector live --env kube --kubeconfig ~/.kube/config --prometheus http://localhost:9090 --problem hotel-geo-target-port --agent ./agent.sh --out runs/real\n\n\
On a real cluster (--env kube, the app deployed with `collector deploy`), the faults are injected through the API (journaled first: `collector recover` undoes them after a crash) and reverted when the session ends; the agent's kubeconfig points at a proxy that hides the injection plane and audits every request, and the mitigation is graded by watching the cluster until it holds.\n\
The agent runs in a sandbox (bubblewrap: its own user, processes, files and network; only the session's endpoints; see `collector agent-sandbox probe`), in a fresh home holding prompt.md (its task) and kubeconfig, with KUBECONFIG, PROMETHEUS_URL, JAEGER_URL, LOKI_URL, FAULTLINE_SUBMIT_URL and FAULTLINE_MCP_URL set, and SREGym's API_HOSTNAME, API_PORT, MCP_SERVER_URL, MCP_SERVER_PORT and AGENT_LOGS_DIR (its agents run unmodified: the MCP server also serves SREGym's SSE mounts, /kubectl/sse and the others, and the submission API /submit_mcp/sse). It submits with POST $FAULTLINE_SUBMIT_URL/submit {\"solution\": \"...\"} (SREGym's API): a diagnosis, then (live) an empty solution once it has mitigated.\n\
The diagnosis is judged deterministically, and by a checklist LLM when JUDGE_BASE_URL / JUDGE_MODEL / JUDGE_API_KEY are set; the mitigation is graded on a fork of the world fast-forwarded until it holds.\n\
Exit codes: 0 the session ran to its end (grades in OUT/run.json); 1 error; 130 interrupted (nothing written as finished)."
)]
pub struct Args {
    /// Problem id to run live (see `collector problems list`).
    #[arg(long, conflicts_with = "dataset", required_unless_present = "dataset")]
    pub problem: Option<String>,
    /// A dataset directory to replay for a diagnosis-only session (its ground_truth.json beside it).
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// The agent: a shell command line.
    #[arg(long)]
    pub agent: String,
    /// The agent's name in records and leaderboards.
    #[arg(long, default_value = "agent")]
    pub agent_name: String,
    /// Extra environment for the agent, KEY=VALUE (repeatable).
    #[arg(long = "agent-env", value_parser = parse_key_value)]
    pub agent_env: Vec<(String, String)>,
    /// A prompt template to use instead of the built-in one; placeholders like {app_name},
    /// {namespace}, {submit_url}, {prometheus_url}, {kubeconfig}, {mcp_url}.
    #[arg(long)]
    pub prompt: Option<PathBuf>,
    /// The agent's wall-clock time (e.g. 20m, 90s).
    #[arg(long, default_value = "20m")]
    pub time_limit: Dur,
    /// How long the agent may go on after submitting its last stage before it is ended (SREGym
    /// gives 60s); an agent that exits sooner ends the session sooner.
    #[arg(long, default_value = "60s")]
    pub after_last_stage: Dur,
    /// The run directory to write (must not exist).
    #[arg(long, value_parser = schemas::paths::output_dir)]
    pub out: PathBuf,
    /// Trial name of this run.
    #[arg(long, default_value = "1")]
    pub trial: String,
    /// Seed of the simulated run, and of the noise schedule (with --env kube too).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run without the problem's noise (with --env kube: no pod is killed as noise).
    #[arg(long)]
    pub no_noise: bool,
    /// Virtual seconds per wall-clock second.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// How long the failure has been going on when the agent starts.
    #[arg(long, default_value = "5m")]
    pub since_onset: Dur,
    /// Don't copy the agent's output to stderr (it is stored in the run either way).
    #[arg(long)]
    pub quiet: bool,
    /// Send the agent's LLM calls through a counting proxy to this OpenAI- or Anthropic-compatible
    /// API (base URL with /v1, e.g. https://api.openai.com/v1): the agent gets OPENAI_BASE_URL and
    /// ANTHROPIC_BASE_URL pointing at the proxy, and run.json the tokens used.
    #[arg(long)]
    pub llm_upstream: Option<String>,
    /// Where the problem runs: `sim`, the embedded simulator; `kube`, a real cluster
    /// (--kubeconfig) with the app deployed.
    #[arg(long, value_enum, default_value = "sim")]
    pub env: super::snapshot::EnvKind,
    #[command(flatten)]
    pub cluster: super::cluster::ClusterArgs,
    /// With --env kube: a namespace the agent must not see (repeatable), beside `faultline`.
    #[arg(long = "hide-namespace")]
    pub hide_namespaces: Vec<String>,
    /// With --env kube: how long the fixed cluster may take to settle (rollouts, restarts)
    /// before the mitigation fails; it must then hold for the problem's sustain window.
    #[arg(long, default_value = "10m")]
    pub settle_within: Dur,
    #[command(flatten)]
    pub sandbox: super::sandbox::SandboxArgs,
    /// Print run.json on stdout at the end.
    #[arg(long)]
    pub json: bool,
    /// Also load specs from this catalog directory.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("`{s}`: expected KEY=VALUE")),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let catalog = load_catalog(args.catalog.as_deref())?;
    let problem = |id: &str| -> anyhow::Result<Box<problems::ProblemSpec>> {
        let p = catalog.problem(id).with_context(|| {
            format!("no problem `{id}` in the catalog (see `collector problems list`)")
        })?;
        Ok(Box::new(p.clone()))
    };
    let kube = args.env == super::snapshot::EnvKind::Kube;
    let target = match (&args.problem, &args.dataset) {
        (Some(id), _) if kube => Target::Kube {
            problem: problem(id)?,
            cluster: KubeTarget {
                cluster: args.cluster.access(),
                hide: args.hide_namespaces.clone(),
                settle_within: args.settle_within.to_std(),
                noise_seed: (!args.no_noise).then_some(args.seed),
                noise_window: Duration::from_millis(args.time_limit.as_millis()),
            },
        },
        (None, Some(_)) if kube => anyhow::bail!("--env kube runs a --problem, not a --dataset"),
        (Some(id), _) => Target::Live {
            problem: problem(id)?,
            seed: args.seed,
            no_noise: args.no_noise,
            speed: args.speed,
            since_onset: args.since_onset,
        },
        (None, Some(ds)) => Target::Replay {
            dataset: ds.clone(),
        },
        (None, None) => anyhow::bail!("give --problem ID or --dataset DIR"),
    };
    let prompt = match &args.prompt {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read --prompt {}", p.display()))?,
        ),
        None => None,
    };
    let opts = SessionOptions {
        agent: AgentSpec {
            name: args.agent_name.clone(),
            command: args.agent.clone(),
            env: args.agent_env.clone(),
            prompt,
        },
        target,
        time_limit: Duration::from_millis(args.time_limit.as_millis()),
        out: args.out.clone(),
        trial: args.trial.clone(),
        echo: !args.quiet,
        judging: Judging::from_env()?,
        staging: None,
        llm_upstream: args.llm_upstream.clone(),
        isolation: args.sandbox.isolation()?,
        after_last_stage: Duration::from_millis(args.after_last_stage.as_millis()),
        listen: session::any_port(),
    };
    eprintln!("judging diagnoses with: {}", opts.judging.describe());
    let runtime = tokio::runtime::Runtime::new()?;
    // Ctrl-C, or the SIGTERM `collector recover` sends a running session: either way the
    // session ends cleanly (on a cluster, its faults reverted). The handlers are installed before
    // the session starts: a signal that comes while a cluster's faults are being injected is
    // held until the session can end, rather than killing it with its faults in place.
    let (mut term, mut int) = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        anyhow::Ok((
            signal(SignalKind::terminate()).context("listening for SIGTERM")?,
            signal(SignalKind::interrupt()).context("listening for SIGINT")?,
        ))
    })?;
    let interrupt = async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    };
    let run = match runtime.block_on(session::run(&catalog, &opts, interrupt)) {
        Ok(run) => run,
        Err(e) if e.to_string().starts_with("interrupted") => {
            eprintln!("{e:#}");
            return Ok(ExitCode::from(130));
        }
        Err(e) => return Err(e),
    };
    if args.json {
        println!("{}", serde_json::to_string(&run)?);
    } else {
        println!("{}", session::summary(&run, &opts.out));
    }
    Ok(ExitCode::SUCCESS)
}
