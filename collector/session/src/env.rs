//! The environment a session hands its agent: a live problem in the simulator (writable, graded
//! by the mitigation oracle), the same problem injected into a real cluster (graded by watching
//! the cluster), or a recorded dataset served as if it were happening now (read-only, diagnosis
//! only). Either way: four API endpoints, an application, an audit of every request,
//! and a ground truth that reaches the run directory only once the agent has ended.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

use anyhow::Context;
use apis::audit::AuditEvent;
use apis::audit::layer::AuditSink;
use problems::{Catalog, Dur, ProblemSpec};

use super::submit::AppInfo;
use apis::replay::{Endpoints, Replay, ReplayOptions};
use live::mitigation::{self, Verdict};
use live::{LiveEnv, LiveOptions};
use realcluster::session::{ClusterGrading, KubeTarget, OnCluster};
use runner::problem::ProblemRun;

/// What the session runs against.
#[derive(Debug, Clone)]
pub enum Target {
    Live {
        problem: Box<ProblemSpec>,
        seed: u64,
        no_noise: bool,
        /// Virtual seconds per wall second.
        speed: f64,
        /// How long the failure has been going on when the agent starts.
        since_onset: Dur,
    },
    /// A dataset directory (`DIR/dataset`, with `DIR/ground_truth.json` beside it, as `collector
    /// snapshot` writes them).
    Replay { dataset: PathBuf },
    /// A real cluster with the problem's app deployed.
    Kube {
        problem: Box<ProblemSpec>,
        cluster: KubeTarget,
    },
}

/// A started environment.
pub enum Env {
    Live(Box<LiveEnv>),
    Replay(Box<Recorded>),
    Kube(Box<OnCluster>),
}

/// What a mitigation is graded on: a fork of the simulated world taken at the instant it was
/// submitted, or the cluster itself, watched from then on.
pub enum Grading {
    Fork(Box<ProblemRun>),
    Cluster(Box<ClusterGrading>),
}

impl Grading {
    pub async fn grade(self) -> anyhow::Result<Verdict> {
        match self {
            Grading::Fork(fork) => grade(*fork).await,
            Grading::Cluster(c) => (*c).grade().await,
        }
    }
}

/// A replayed dataset and what the session needs beside it.
pub struct Recorded {
    replay: Replay,
    dataset: PathBuf,
    app: AppInfo,
    truth: judge::truth::LoadedTruth,
    truth_file: PathBuf,
    audit: mpsc::Receiver<AuditEvent>,
}

/// What a stopped environment leaves.
pub struct Ended {
    pub dataset: Option<PathBuf>,
    pub audit: Vec<AuditEvent>,
}

impl Env {
    /// Starts the environment; a live one keeps its dataset in `out`.
    pub async fn start(
        catalog: &Catalog,
        target: &Target,
        out: &Path,
        listen: SocketAddr,
    ) -> anyhow::Result<Env> {
        match target {
            Target::Live {
                problem,
                seed,
                no_noise,
                speed,
                since_onset,
            } => {
                let opts = LiveOptions {
                    seed: *seed,
                    speed: *speed,
                    since_onset: *since_onset,
                    no_noise: *no_noise,
                    listen,
                    out: Some(out.to_path_buf()),
                    record: true,
                    bare: false,
                    limits: Default::default(),
                };
                Ok(Env::Live(Box::new(
                    LiveEnv::start(catalog, problem, &opts).await?,
                )))
            }
            Target::Replay { dataset } => start_replay(dataset, listen).await,
            Target::Kube { problem, cluster } => Ok(Env::Kube(Box::new(
                OnCluster::start(catalog, problem, cluster).await?,
            ))),
        }
    }

    pub fn endpoints(&self) -> &Endpoints {
        match self {
            Env::Live(env) => &env.endpoints,
            Env::Replay(r) => &r.replay.endpoints,
            Env::Kube(k) => &k.endpoints,
        }
    }

    /// Whether the agent is to mitigate (a recording cannot be fixed).
    pub fn mitigates(&self) -> bool {
        !matches!(self, Env::Replay(_))
    }

    pub fn problem_id(&self) -> String {
        match self {
            Env::Live(env) => env.problem.id.clone(),
            Env::Replay(r) => r.truth.problem_id.clone(),
            Env::Kube(k) => k.problem().id.clone(),
        }
    }

    pub fn app(&self) -> AppInfo {
        match self {
            Env::Live(env) => AppInfo::of(&env.app()),
            Env::Replay(r) => r.app.clone(),
            Env::Kube(k) => AppInfo::of(k.app()),
        }
    }

    /// The ground truth the diagnosis is judged against (in memory: the agent cannot find it).
    pub fn truth(&self) -> judge::truth::LoadedTruth {
        match self {
            Env::Live(env) => judge::truth::LoadedTruth {
                problem_id: env.problem.id.clone(),
                truth: env.ground_truth(),
                origin: "the live problem".into(),
            },
            Env::Replay(r) => r.truth.clone(),
            Env::Kube(k) => judge::truth::LoadedTruth {
                problem_id: k.problem().id.clone(),
                truth: k.ground_truth(),
                origin: "the problem on the cluster".into(),
            },
        }
    }

    /// The session's tables for the analysis tools, served by the session's clock: a live
    /// environment's recording so far, the replayed dataset, or a real cluster captured when the
    /// tools ask.
    pub fn analysis(&self) -> anyhow::Result<Option<analysis::Source>> {
        match self {
            Env::Live(env) => env
                .analysis()
                .context("the live environment keeps no recording")
                .map(Some),
            Env::Replay(r) => Ok(Some(
                analysis::Source::dataset(&r.dataset)?.with_clock(r.replay.clock),
            )),
            Env::Kube(k) => Ok(Some(k.analysis())),
        }
    }

    /// What to grade a mitigation on, from this instant: a copy of the live world, or the
    /// cluster.
    pub fn grading(&self) -> Option<Grading> {
        match self {
            Env::Live(env) => Some(Grading::Fork(Box::new(env.fork()))),
            Env::Replay(_) => None,
            Env::Kube(k) => Some(Grading::Cluster(Box::new(k.grading()))),
        }
    }

    /// Stops serving; writes the live run's dataset and ground truth into `out`, or copies the
    /// replayed dataset's ground truth there.
    pub async fn stop(self, out: &Path) -> anyhow::Result<Ended> {
        match self {
            Env::Live(env) => {
                let stopped = (*env).stop().await?;
                Ok(Ended {
                    dataset: stopped.dataset,
                    audit: stopped.audit,
                })
            }
            Env::Replay(r) => {
                let Recorded {
                    replay,
                    truth_file,
                    audit,
                    ..
                } = *r;
                replay.stop();
                let bytes = std::fs::read(&truth_file)
                    .with_context(|| format!("cannot read {}", truth_file.display()))?;
                datasets::write_atomically(&out.join(super::GROUND_TRUTH_FILE), &bytes)?;
                Ok(Ended {
                    dataset: None,
                    audit: audit.try_iter().collect(),
                })
            }
            Env::Kube(k) => {
                let truth = serde_json::to_vec_pretty(&k.ground_truth())?;
                let (audit, noise) = (*k).stop().await?;
                datasets::write_atomically(&out.join(super::GROUND_TRUTH_FILE), &truth)?;
                if let Some(noise) = noise {
                    let json = serde_json::to_vec_pretty(&noise)?;
                    datasets::write_atomically(&out.join(super::NOISE_FILE), &json)?;
                }
                Ok(Ended {
                    dataset: None,
                    audit,
                })
            }
        }
    }
}

/// Grades the mitigation on a fork, off the async threads (it simulates up to minutes of time).
pub async fn grade(fork: ProblemRun) -> anyhow::Result<Verdict> {
    tokio::task::spawn_blocking(move || mitigation::grade(&fork, &oracle::failure_reasons))
        .await
        .context("grading the mitigation")?
}

/// Serves a dataset shifted so that its end is now, every request audited.
async fn start_replay(dataset: &Path, listen: SocketAddr) -> anyhow::Result<Env> {
    let dir = dataset.parent().unwrap_or(Path::new("."));
    let truth_file = dir.join(super::GROUND_TRUTH_FILE);
    let truth = replayed_truth(dir, &truth_file).with_context(|| {
        format!(
            "a replay session needs the dataset's ground truth at {}",
            truth_file.display()
        )
    })?;
    let (tx, audit) = mpsc::channel();
    let opts = ReplayOptions {
        dataset: dataset.to_path_buf(),
        listen,
        at: None,
        time_shift: true,
        limits: Default::default(),
    };
    let sink: AuditSink = Arc::new(move |e: AuditEvent| {
        let _ = tx.send(e);
    });
    let replay = Replay::start_audited(&opts, Some(sink)).await?;
    let manifest = &replay.manifest;
    let app = AppInfo {
        app_name: manifest.application.clone().unwrap_or_default(),
        namespaces: manifest.namespaces.clone(),
        namespace: manifest.namespaces.first().cloned().unwrap_or_default(),
        descriptions: String::new(),
    };
    Ok(Env::Replay(Box::new(Recorded {
        replay,
        dataset: dataset.to_path_buf(),
        app,
        truth,
        truth_file,
        audit,
    })))
}

/// The ground truth beside a dataset, under the problem id its `evaluation.json` records (as
/// `collector snapshot` writes them); without that record, under the id the ground truth carries.
fn replayed_truth(dir: &Path, truth_file: &Path) -> anyhow::Result<judge::truth::LoadedTruth> {
    let record = std::fs::read_to_string(dir.join("evaluation.json"))
        .ok()
        .and_then(|text| {
            serde_json::from_str::<schemas::ground_truth::EvaluatorRecord>(&text).ok()
        });
    match record {
        Some(r) => judge::in_loop::load_truth(truth_file, &r.problem_id),
        None => judge::truth::load(truth_file)?
            .into_values()
            .next()
            .map(Arc::unwrap_or_clone)
            .with_context(|| format!("{}: no ground truth inside", truth_file.display())),
    }
}
