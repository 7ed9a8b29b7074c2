//! `collector eval --emit-job` / `--on-cluster`: an evaluation as a Kubernetes Indexed Job. Each
//! pod is one shard (`JOB_COMPLETION_INDEX`) running `collector eval` over the same plan into the
//! same object store; a ConfigMap carries the agents file and its prompts. Nothing else is needed
//! of the cluster: no operator, no scheduler of ours, since one pod runs many sessions.
//!
//! Exit codes are what the Job's `podFailurePolicy` acts on: 75 (a session that could not run, a
//! store that did not answer) is retried within the index's `backoffLimitPerIndex`; 1 and 2 (bad
//! input, which another try would meet again) fail the index at once; a pod evicted or preempted
//! (`DisruptionTarget`) is not counted. A graded run, right or wrong, is a success.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::eval::{Args, ModeArg};
use super::shard::progress;
use session::eval::plan::AgentEntry;

/// The image the pods run: collector, its tools, and (built on it) the agents' own commands.
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/faultline/collector:", env!("CARGO_PKG_VERSION"));
/// Where the ConfigMap is mounted in the pods.
const CONFIG_DIR: &str = "/etc/faultline";

// Resource requests per pod, measured: `collector eval` of the scripted reference fixer (speed 10)
// peaked at 480 MiB for one session and 1.55 GiB for four at once (about 360 MiB a session over a
// base near 120 MiB), using 0.3 core a session; a replay cell records its dataset first (a 1 h
// snapshot peaks at 373 MiB, see the dataset_memory bench). The agent's own needs come on top and
// are the user's to add.
const POD_BASE_MIB: u64 = 256;
const SESSION_MIB: u64 = 384;
const RECORDING_MIB: u64 = 512;
const SESSION_MILLICORES: u64 = 500;

#[derive(Debug, clap::Args)]
pub struct JobArgs {
    /// Print the Kubernetes manifests that run this evaluation on a cluster (a ConfigMap with the
    /// agents file, and an Indexed Job of --shards pods, each a shard) instead of running it.
    #[arg(long, conflicts_with = "on_cluster")]
    pub emit_job: bool,
    /// Apply those manifests to the cluster of --kubeconfig (server-side apply); with --wait,
    /// follow the Job (a progress bar fed by the store and the Job's status) and write the board.
    #[arg(long)]
    pub on_cluster: bool,
    /// The cluster's kubeconfig (default: KUBECONFIG, ~/.kube/config, or the pod's account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// With --on-cluster: wait for the Job and write the board to --board.
    #[arg(long, requires = "on_cluster")]
    pub wait: bool,
    /// Where --wait writes the board.
    #[arg(long, default_value = "board", requires = "wait")]
    pub board: PathBuf,
    /// Pods of the Job, one shard each (its completions).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub shards: u32,
    /// Pods running at once (default: every shard).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub parallelism: Option<u32>,
    /// The pods' image: collector's, or one built on it that holds the agents' commands.
    #[arg(long, default_value = DEFAULT_IMAGE)]
    pub image: String,
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// The Job's and ConfigMap's name (default: faultline-eval- and a hash of the plan).
    #[arg(long)]
    pub job_name: Option<String>,
    /// The Secret whose keys become the pods' environment for the object store (AWS_*, …).
    #[arg(long, default_value = "faultline-store")]
    pub store_secret: String,
    /// The Secret whose keys become the pods' environment for the judge and the agents' LLM
    /// (FAULTLINE_JUDGE_*, AGENT_API_KEY, …).
    #[arg(long, default_value = "faultline-judge")]
    pub judge_secret: String,
    /// Retries of a shard after an infrastructure failure (exit 75, an OOM kill, a lost node).
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
}

/// `--emit-job` / `--on-cluster`.
pub fn run(
    args: &Args,
    agents_file: &Path,
    agents: &[AgentEntry],
    problems: &[String],
) -> anyhow::Result<ExitCode> {
    let out = args.out.as_deref().unwrap_or_default();
    if !out.contains("://") || out.starts_with("file://") {
        bail!(
            "--out {out}: a Job's pods need one store they all reach: name object storage (s3://bucket/prefix, gs://…, az://…)"
        );
    }
    if args.catalog.is_some() {
        bail!("--catalog: the pods use their image's catalog; build yours into the image");
    }
    if args.shard.shard_index.is_some() || args.shard.shard_count.is_some() {
        bail!("--shard-index/--shard-count: the Job gives each pod its shard; set --shards");
    }
    let (config_map, job) = manifests(args, agents_file, agents, problems)?;
    if args.job.emit_job {
        println!(
            "# collector eval as an Indexed Job: kubectl apply -f this; the board: collector eval board --from {out} --out board"
        );
        println!(
            "# The pods read the Secrets {} and {} as their environment (both optional): keys go there, not in the agents' env, which travels in the ConfigMap.",
            args.job.store_secret, args.job.judge_secret
        );
        for doc in [&config_map, &job] {
            // Each document ends with its own newline (a block scalar's last line break is data).
            print!("---\n{}", serde_norway::to_string(doc)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = tokio::runtime::Runtime::new()?;
    let Some(failed) = runtime.block_on(on_cluster(args, config_map, job))? else {
        return Ok(ExitCode::SUCCESS);
    };
    drop(runtime);
    super::eval::board(super::eval::BoardArgs {
        from: out.to_string(),
        out: args.job.board.clone(),
        cache: None,
        k: args.k,
        json: args.json,
    })?;
    match failed {
        Some(why) => {
            eprintln!("the Job failed: {why}");
            Ok(ExitCode::from(crate::EXIT_FAILURE))
        }
        None => Ok(ExitCode::SUCCESS),
    }
}

/// The ConfigMap and the Job, as JSON checked against the Job's and ConfigMap's types.
pub fn manifests(
    args: &Args,
    agents_file: &Path,
    agents: &[AgentEntry],
    problems: &[String],
) -> anyhow::Result<(Value, Value)> {
    let j = &args.job;
    let (data, agents_toml) = config_files(agents_file, agents)?;
    let mut plan_hash = Sha256::new();
    plan_hash.update(agents_toml.as_bytes());
    plan_hash.update(problems.join(",").as_bytes());
    plan_hash.update(args.out.as_deref().unwrap_or_default().as_bytes());
    let name = j.job_name.clone().unwrap_or_else(|| {
        format!(
            "faultline-eval-{}",
            &hex::encode(plan_hash.finalize())[..10]
        )
    });
    let labels = json!({"app.kubernetes.io/name": "faultline", "app.kubernetes.io/component": "eval", "app.kubernetes.io/instance": name});
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": j.namespace, "labels": labels},
        "data": data,
    });
    let session_mib = match args.mode {
        ModeArg::Live => SESSION_MIB,
        ModeArg::Replay => RECORDING_MIB,
    };
    let memory = POD_BASE_MIB + session_mib * args.jobs as u64;
    let cpu = SESSION_MILLICORES * args.jobs as u64;
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": j.namespace, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": j.shards,
            "parallelism": j.parallelism.unwrap_or(j.shards),
            "backoffLimitPerIndex": j.retries,
            "podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                {"action": "Count", "onExitCodes": {"containerName": "collector", "operator": "In", "values": [results::EXIT_RETRY]}},
                {"action": "FailIndex", "onExitCodes": {"containerName": "collector", "operator": "In", "values": [crate::EXIT_FAILURE, crate::EXIT_USAGE]}},
            ]},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    // The agents run inside the pods: they get no account on the cluster.
                    "automountServiceAccountToken": false,
                    "containers": [{
                        "name": "collector",
                        "image": j.image,
                        "command": ["collector"],
                        "args": pod_args(args, problems, j.shards),
                        "envFrom": [
                            {"secretRef": {"name": j.store_secret, "optional": true}},
                            {"secretRef": {"name": j.judge_secret, "optional": true}},
                        ],
                        "resources": {
                            "requests": {"cpu": format!("{cpu}m"), "memory": format!("{memory}Mi")},
                            "limits": {"memory": format!("{}Mi", memory * 2)},
                        },
                        // The agents' sandbox (bubblewrap) makes user, PID, mount and network
                        // namespaces, which the default seccomp and AppArmor profiles refuse.
                        "securityContext": {
                            "seccompProfile": {"type": "Unconfined"},
                            "appArmorProfile": {"type": "Unconfined"},
                        },
                        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": true}],
                    }],
                    "volumes": [{"name": "config", "configMap": {"name": name}}],
                },
            },
        },
    });
    Ok((typed::<ConfigMap>(config_map)?, typed::<Job>(job)?))
}

/// `v` read as a `T` and written back: a field the type lacks would be dropped, so the
/// round trip failing to give `v` back means a misspelt or misplaced field.
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(v: Value) -> anyhow::Result<Value> {
    let back = serde_json::to_value(serde_json::from_value::<T>(v.clone())?)?;
    anyhow::ensure!(
        back == v,
        "internal: a manifest field is not in the Kubernetes schema: {v}"
    );
    Ok(v)
}

/// The pods' command line: this evaluation, its shard count, and the config from the ConfigMap.
/// Each option is one `--flag=value` word: kubectl reads manifests as YAML 1.1, where a value
/// alone such as `on` (of `--noise on`) is a boolean, which the API refuses as an argument.
fn pod_args(args: &Args, problems: &[String], shards: u32) -> Vec<String> {
    let noise: Vec<&str> = args
        .noise
        .iter()
        .map(|n| if *n { "on" } else { "off" })
        .collect();
    let mode = match args.mode {
        ModeArg::Live => "live",
        ModeArg::Replay => "replay",
    };
    let mut options: Vec<(&str, String)> = vec![
        ("agents", format!("{CONFIG_DIR}/agents.toml")),
        ("problems", problems.join(",")),
        ("runs", args.runs.to_string()),
        ("noise", noise.join(",")),
        ("mode", mode.into()),
        ("jobs", args.jobs.to_string()),
        ("out", args.out.clone().unwrap_or_default()),
        ("time-limit", args.time_limit.to_string()),
        ("speed", args.speed.to_string()),
        ("since-onset", args.since_onset.to_string()),
        ("shard-count", shards.to_string()),
    ];
    if let Some(u) = &args.llm_upstream {
        options.push(("llm-upstream", u.clone()));
    }
    for b in &args.sandbox.agent_binds {
        options.push(("agent-bind", b.display().to_string()));
    }
    if args.sandbox.agent_network == super::sandbox::NetworkArg::Public {
        options.push(("agent-network", "public".into()));
    }
    let mut words = vec!["eval".to_string(), "--json".to_string()];
    if args.sandbox.no_sandbox {
        words.push("--no-sandbox".into());
    }
    words.extend(options.into_iter().map(|(k, v)| format!("--{k}={v}")));
    words
}

/// The ConfigMap's files: the agents file, its prompts beside it under keys of their own.
fn config_files(
    agents_file: &Path,
    agents: &[AgentEntry],
) -> anyhow::Result<(BTreeMap<String, String>, String)> {
    let mut data = BTreeMap::new();
    let mut rewritten = agents.to_vec();
    for (i, a) in rewritten.iter_mut().enumerate() {
        if let Some(p) = &a.prompt {
            let text = std::fs::read_to_string(p).with_context(|| {
                format!(
                    "{}: agents[{i}].prompt: cannot read {}",
                    agents_file.display(),
                    p.display()
                )
            })?;
            let key = format!("prompt-{}.md", a.name);
            data.insert(key.clone(), text);
            a.prompt = Some(PathBuf::from(key));
        }
    }
    #[derive(serde::Serialize)]
    struct File<'a> {
        agents: &'a [AgentEntry],
    }
    let toml = toml::to_string(&File { agents: &rewritten })?;
    data.insert("agents.toml".into(), toml.clone());
    Ok((data, toml))
}

/// `--on-cluster`: applies the manifests, then (with `--wait`) follows the Job to its end:
/// `None` without `--wait`, else whether (and why) the Job failed.
async fn on_cluster(
    args: &Args,
    config_map: Value,
    job: Value,
) -> anyhow::Result<Option<Option<String>>> {
    use kube::api::{Api, Patch, PatchParams};
    let j = &args.job;
    let config = match &j.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?
        }
        None => kube::Config::infer()
            .await
            .context("no cluster: pass --kubeconfig")?,
    };
    let cluster = config.cluster_url.to_string();
    let client = kube::Client::try_from(config)?;
    let name = job["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let apply = PatchParams::apply("faultline").force();
    Api::<ConfigMap>::namespaced(client.clone(), &j.namespace)
        .patch(&name, &apply, &Patch::Apply(&config_map))
        .await
        .with_context(|| format!("applying ConfigMap {name} to {cluster}"))?;
    let jobs = Api::<Job>::namespaced(client, &j.namespace);
    jobs.patch(&name, &apply, &Patch::Apply(&job))
        .await
        .map_err(|e| match &e {
            // 404: no such resource; 405: the resource is known but cannot be written there.
            kube::Error::Api(s) if s.code == 404 || s.code == 405 => anyhow::anyhow!(
                "{cluster} does not serve batch/v1 Jobs in namespace {} (HTTP {}): {e}",
                j.namespace,
                s.code
            ),
            _ => anyhow::Error::from(e),
        })
        .with_context(|| format!("applying Job {name} to {cluster}"))?;
    let out = args.out.as_deref().unwrap_or_default();
    eprintln!(
        "applied Job {}/{name} ({} shards) to {cluster}",
        j.namespace, j.shards
    );
    if !j.wait {
        eprintln!(
            "follow: kubectl -n {} get job {name} -w; the board: collector eval board --from {out} --out board",
            j.namespace
        );
        return Ok(None);
    }
    let store = super::shard::open_store(out, session::RUN_FILE)?;
    let plan = loop {
        // The first pod to start writes the plan.
        if let Some(p) = store.plan().await? {
            break p;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let bar = progress(false, plan.work.len() as u64, "runs");
    let failed = loop {
        let done = store.completed(&plan.work).await?.len();
        bar.set_position(done as u64);
        let status = jobs.get_status(&name).await?.status.unwrap_or_default();
        bar.set_message(format!(
            "pods: {} active, {} succeeded, {} failed",
            status.active.unwrap_or(0),
            status.succeeded.unwrap_or(0),
            status.failed.unwrap_or(0)
        ));
        let ended = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"));
        if let Some(c) = ended {
            break (c.type_ == "Failed").then(|| {
                format!(
                    "{}{}",
                    c.message.clone().unwrap_or_default(),
                    status
                        .failed_indexes
                        .map(|f| format!(" (failed indexes {f})"))
                        .unwrap_or_default()
                )
            });
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    bar.finish_and_clear();
    Ok(Some(failed))
}
