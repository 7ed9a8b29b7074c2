//! `collector snapshot --env kube`: a dataset of a problem on a real cluster. The capture of a
//! window starts at once (baseline); the problem's faults are injected when the baseline is over
//! and held until the window closes; then they are reverted and the ground truth is written beside
//! the dataset. Ctrl-C or SIGTERM reverts before exiting; a kill -9 leaves the journal to
//! `collector recover`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use capture::scope::Scope;
use capture::{Options, Window, now_ns};
use inject::api::{Cluster, Injector};
use problems::{AppSpec, Catalog, Dur, ProblemSpec};
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};

use super::faults;
use super::noise::{self, NoiseRun};

/// The real cluster a snapshot runs on (`--env kube`).
#[derive(Debug, Clone)]
pub struct KubeOptions {
    pub cluster: super::ClusterAccess,
    /// How long the healthy cluster is captured before the faults.
    pub baseline: Dur,
    /// How long the faults stay in effect (captured) before they are reverted.
    pub hold: Dur,
}

/// What a snapshot on a cluster wrote.
#[derive(Debug, serde::Serialize)]
pub struct KubeReport {
    pub problem: String,
    pub dataset: PathBuf,
    pub ground_truth: PathBuf,
    pub injections: PathBuf,
    pub capture: capture::Summary,
    /// Someone else's later changes that reverting left as found.
    pub kept: Vec<String>,
}

/// Where a snapshot on a cluster runs and what it runs.
pub struct Run<'a> {
    pub catalog: &'a Catalog,
    pub problem: &'a ProblemSpec,
    pub app: &'a AppSpec,
    /// The problem's noise over the whole window, scheduled from this seed; none when `None`.
    pub noise_seed: Option<u64>,
}

/// Runs the problem on the cluster and writes `out/dataset/`, `out/ground_truth.json` and
/// `out/injections.json` (with the noise played).
pub fn snapshot(
    opts: &KubeOptions,
    run: &Run<'_>,
    out: &Path,
    progress: bool,
) -> anyhow::Result<KubeReport> {
    let (problem, app) = (run.problem, run.app);
    anyhow::ensure!(
        !out.join("dataset").exists(),
        "{} exists: choose another --out",
        out.join("dataset").display()
    );
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let (baseline, hold, opts) = (opts.baseline, opts.hold, &opts.cluster);
    let noise_plan = match run.noise_seed {
        Some(seed) => noise::plan(
            run.catalog,
            problem,
            app,
            seed,
            baseline.to_std() + hold.to_std(),
        )?,
        None => vec![],
    };
    let journal = inject::journal::Journal::open(&opts.journal)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let cluster = Cluster::connect(opts.kubeconfig.as_deref()).await?;
        let injector = Injector { cluster, journal };
        let start = now_ns();
        let noise = NoiseRun::start(injector.cluster.clone(), app.clone(), noise_plan, start);
        let ms = |d: Dur| d.as_millis() as i64 * 1_000_000;
        let window = Window {
            since_ns: start,
            until_ns: start + ms(baseline) + ms(hold),
        };
        let capture_opts = Options {
            kubernetes: match &opts.kubeconfig {
                Some(p) => capture::kube::Connection::Kubeconfig(p.clone()),
                None => capture::kube::Connection::Infer,
            },
            scope: Scope {
                namespaces: [app.namespace.clone()].into(),
                ..Scope::default()
            },
            prometheus: opts.observability.prometheus.clone(),
            jaeger: opts.observability.jaeger.clone(),
            loki: opts.observability.loki.clone(),
            window,
            out: out.join("dataset"),
            redaction_key: None,
            progress,
        };
        let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
        let inject_after_baseline = async {
            tokio::time::sleep(baseline.to_std()).await;
            let onset = now_ns();
            faults::inject_all(&injector, problem, app, &[])
                .await
                .map(|a| (onset, a))
        };
        let capturing = capture::capture(&capture_opts);
        tokio::pin!(capturing);
        // The faults, once made, stay until the capture ends (or a signal): then reverted.
        let (onset, active) = tokio::select! {
            made = inject_after_baseline => made?,
            done = &mut capturing => {
                done?;
                anyhow::bail!("the capture ended before the baseline was over");
            }
            _ = term.recv() => anyhow::bail!("stopped before the faults were injected"),
            _ = int.recv() => anyhow::bail!("stopped before the faults were injected"),
        };
        let records: Vec<serde_json::Value> = active
            .iter()
            .map(|a| {
                json!({"index": a.index, "primitive": a.primitive, "decoy": a.decoy,
                       "changes": a.injected.changes()})
            })
            .collect();
        let captured = tokio::select! {
            done = &mut capturing => done,
            _ = term.recv() => Err(anyhow::anyhow!("stopped while the faults were held")),
            _ = int.recv() => Err(anyhow::anyhow!("stopped while the faults were held")),
        };
        let played = noise.stop();
        let reverted = faults::revert_all(&injector, active).await;
        let capture = captured?;
        let reverted = reverted.context("reverting the faults (run `collector recover`)")?;
        let kept: Vec<String> = reverted.iter().flat_map(|r| r.kept()).collect();
        let onset = chrono::DateTime::<chrono::Utc>::from_timestamp_nanos(onset);
        let run_start = chrono::DateTime::<chrono::Utc>::from_timestamp_nanos(start);
        let gt = problem.ground_truth(&app.namespace, run_start);
        let ground_truth = out.join("ground_truth.json");
        datasets::write_atomically(&ground_truth, &serde_json::to_vec_pretty(&gt)?)?;
        let injections = out.join("injections.json");
        let record = json!({"problem": problem.id, "onset": onset.to_rfc3339(),
                            "injections": records, "kept": kept, "noise": played});
        datasets::write_atomically(&injections, &serde_json::to_vec_pretty(&record)?)?;
        Ok(KubeReport {
            problem: problem.id.clone(),
            dataset: capture.dataset.clone(),
            ground_truth,
            injections,
            capture,
            kept,
        })
    })
}
