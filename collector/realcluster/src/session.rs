//! A session on a real cluster (`collector live --env kube`): the problem's faults injected
//! through the API (journaled first, reverted when the session ends; `collector recover` after a
//! kill -9), the agent given a filtering, audited proxy to the cluster's API and the cluster's
//! own Prometheus, Jaeger and Loki (and the analysis tools over the cluster as it sees it,
//! captured when they are asked: `recording`), and a mitigation graded by watching the cluster:
//! the problem's state assertions and the app's pods, read from the API, and (given the cluster's
//! Prometheus) the entry's error ratio, every service's latency against its baseline from before
//! the fault and the app's firing alerts, until they hold, then held for the problem's `sustain`
//! (a relapse inside the window fails).

use std::collections::BTreeMap;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use apis::audit::AuditEvent;
use apis::audit::layer::{AuditLog, AuditSink};
use inject::api::{Cluster, Injector};
use problems::{AppSpec, Catalog, ProblemSpec};
use schemas::time::{Clock, real_now_ns};
use serde_json::Value;
use sim::kinds::Kind;
use sim::world::World;

use super::faults::{self, Active};
use super::filter::{Hidden, PLANE_NAMESPACE};
use super::health::{self, PromHealth};
use super::noise::{self, NoiseRun, Played};
use super::proxy::Proxy;
use super::recording::{self, ClusterRecording};
use apis::replay::Endpoints;
use live::mitigation::{Verdict, unready_pods};

/// The cluster a session runs on.
#[derive(Debug, Clone)]
pub struct KubeTarget {
    /// Where the cluster is reached, its observability, the undo journal.
    pub cluster: super::ClusterAccess,
    /// Namespaces the agent does not see, beside the injection plane's own.
    pub hide: Vec<String>,
    /// How long a fixed cluster may take to settle (rollouts, restarts) before the mitigation
    /// fails.
    pub settle_within: Duration,
    /// The problem's noise, scheduled from this seed over `noise_window` from the onset; none
    /// when `None`.
    pub noise_seed: Option<u64>,
    pub noise_window: Duration,
}

/// A problem in effect on a cluster, behind the agent's proxy.
pub struct OnCluster {
    pub endpoints: Endpoints,
    /// When the faults were in effect.
    pub onset_ns: i64,
    /// The cluster, the problem and its app, and how to grade a mitigation of it.
    graded: ClusterGrading,
    active: Vec<Active>,
    proxy: Proxy,
    audit: mpsc::Receiver<AuditEvent>,
    noise: Option<NoiseRun>,
    /// The cluster as the agent sees it, captured for the analysis tools when they are asked,
    /// through a proxy of its own (unaudited: the capture's requests are not the agent's).
    recording: Arc<ClusterRecording>,
    capture_proxy: Proxy,
}

/// What grading reads: the cluster, the problem, the app, and the cluster's Prometheus with
/// each service's latency before the fault.
#[derive(Clone)]
pub struct ClusterGrading {
    injector: Arc<Injector>,
    problem: ProblemSpec,
    app: AppSpec,
    settle_within: Duration,
    prometheus: Option<(PromHealth, BTreeMap<String, f64>)>,
}

/// How often the cluster is read while a mitigation is graded.
const POLL: Duration = Duration::from_secs(5);

impl OnCluster {
    pub async fn start(
        catalog: &Catalog,
        problem: &ProblemSpec,
        target: &KubeTarget,
    ) -> anyhow::Result<OnCluster> {
        let app = catalog
            .app(&problem.application)
            .with_context(|| format!("no application `{}` in the catalog", problem.application))?
            .clone();
        let cluster = Cluster::connect(target.cluster.kubeconfig.as_deref()).await?;
        let ns_path = format!("/api/v1/namespaces/{}", app.namespace);
        if get(cluster.client(), &ns_path).await.is_err() {
            anyhow::bail!(
                "namespace {} does not exist on the cluster: deploy the app first (collector deploy {} --kubeconfig ...)",
                app.namespace,
                app.name
            );
        }
        let prometheus = match &target.cluster.observability.prometheus {
            Some(_) if target.settle_within.as_secs() < health::WINDOW_SECS => {
                anyhow::bail!(
                    "--settle-within {}s is shorter than the {}s of traffic health is judged on \
                     with --prometheus",
                    target.settle_within.as_secs(),
                    health::WINDOW_SECS
                )
            }
            Some(url) => {
                let prom = PromHealth::new(url, &app.namespace, &app.workload.target)?;
                let baseline = prom
                    .p99(health::WINDOW_SECS)
                    .await
                    .context("reading each service's latency before the fault")?;
                Some((prom, baseline))
            }
            None => {
                tracing::warn!(
                    "without --prometheus the mitigation is graded on the cluster's objects only"
                );
                None
            }
        };
        let noise_plan = match target.noise_seed {
            Some(seed) => noise::plan(catalog, problem, &app, seed, target.noise_window)?,
            None => vec![],
        };
        let journal = inject::journal::Journal::open(&target.cluster.journal)?;
        let injector = Arc::new(Injector { cluster, journal });
        let active = faults::inject_all(&injector, problem, &app, &[]).await?;
        let onset_ns = real_now_ns();
        let noise = (!noise_plan.is_empty())
            .then(|| NoiseRun::start(injector.cluster.clone(), app.clone(), noise_plan, onset_ns));
        let (tx, audit) = mpsc::channel();
        let sink: AuditSink = Arc::new(move |e: AuditEvent| {
            let _ = tx.send(e);
        });
        let log = AuditLog::new(Arc::new(real_now_ns), Clock::frozen(0), sink);
        let hidden = Hidden::new(
            std::iter::once(PLANE_NAMESPACE.to_string()).chain(target.hide.iter().cloned()),
        );
        let client = injector.cluster.client().clone();
        let serving = async {
            let listen: std::net::SocketAddr = "127.0.0.1:0".parse()?;
            let agent =
                Proxy::start(listen, client.clone(), hidden.clone(), Some(log), true).await?;
            let capture = Proxy::start(listen, client, hidden, None, false).await?;
            let ns = &app.namespace;
            let opts = recording::options(capture.url(), ns, target, onset_ns);
            let recording = ClusterRecording::new(tokio::runtime::Handle::current(), opts)?;
            anyhow::Ok((agent, capture, Arc::new(recording)))
        };
        let (proxy, capture_proxy, recording) = match serving.await {
            Ok(p) => p,
            Err(e) => {
                let _ = faults::revert_all(&injector, active).await;
                return Err(e);
            }
        };
        let endpoints = Endpoints {
            kubernetes: proxy.url(),
            prometheus: target
                .cluster
                .observability
                .prometheus
                .clone()
                .unwrap_or_default(),
            jaeger: target
                .cluster
                .observability
                .jaeger
                .clone()
                .unwrap_or_default(),
            loki: target
                .cluster
                .observability
                .loki
                .clone()
                .unwrap_or_default(),
            kubernetes_https: proxy.https.clone(),
        };
        Ok(OnCluster {
            endpoints,
            onset_ns,
            graded: ClusterGrading {
                injector,
                problem: problem.clone(),
                app,
                settle_within: target.settle_within,
                prometheus,
            },
            active,
            proxy,
            audit,
            noise,
            recording,
            capture_proxy,
        })
    }

    /// The analysis tools' tables: the cluster as the agent sees it, from a few minutes before
    /// the onset, captured when asked; times as the cluster's own (the wall clock).
    pub fn analysis(&self) -> analysis::Source {
        analysis::Source::new(self.recording.clone(), Clock::wall())
    }

    pub fn problem(&self) -> &ProblemSpec {
        &self.graded.problem
    }

    pub fn app(&self) -> &AppSpec {
        &self.graded.app
    }

    /// The problem's ground truth, timed from the injection.
    pub fn ground_truth(&self) -> schemas::GroundTruth {
        let start = chrono::DateTime::<chrono::Utc>::from_timestamp_nanos(self.onset_ns);
        self.problem().ground_truth(&self.app().namespace, start)
    }

    /// What to grade the mitigation on; the noise ends here (it exists to mislead a diagnosis,
    /// not to decide a grade).
    pub fn grading(&self) -> ClusterGrading {
        if let Some(n) = &self.noise {
            n.stop();
        }
        self.graded.clone()
    }

    /// Stops the noise and the proxy and reverts the faults (newest first); what the agent
    /// asked of the API, and the noise played. Someone else's later changes to a faulted object
    /// are kept and logged.
    pub async fn stop(self) -> anyhow::Result<(Vec<AuditEvent>, Option<Played>)> {
        let played = self.noise.as_ref().map(NoiseRun::stop);
        self.proxy.stop();
        self.capture_proxy.stop();
        let reverted = faults::revert_all(&self.graded.injector, self.active)
            .await
            .context("reverting the faults (run `collector recover`)")?;
        for kept in reverted.iter().flat_map(|r| r.kept()) {
            tracing::warn!("kept a later change: {kept}");
        }
        Ok((self.audit.try_iter().collect(), played))
    }
}

impl ClusterGrading {
    /// Reads the app's namespace and the nodes into a world the oracle can look at.
    async fn read(&self) -> anyhow::Result<World> {
        let mut w = World::new(0, real_now_ns(), sim::runtime::Runtime::new());
        for &kind in Kind::ALL {
            let path = list_path(kind, &self.app.namespace);
            let list = get(self.injector.cluster.client(), &path).await?;
            for item in list["items"].as_array().into_iter().flatten() {
                let mut item = item.clone();
                item["kind"] = Value::from(kind.name());
                item["apiVersion"] = Value::from(kind.api_version());
                if let Err(causes) = kind.objects().load(&mut w, &item) {
                    tracing::debug!("{path}: an item the model cannot read: {causes:?}");
                }
            }
        }
        Ok(w)
    }

    /// What fails now: the problem's state assertions, the app's pods and what Prometheus
    /// shows of the traffic since `since` (the change being graded): what it shows of the
    /// traffic before is the fault's, and would call a fix a relapse a minute later.
    async fn failing(&self, since: Instant) -> anyhow::Result<Vec<String>> {
        let w = self.read().await?;
        let mut reasons =
            oracle::Verdict::of(&oracle::check_world(&w, &self.app, &self.problem)).reasons;
        let condition = &self.problem.oracle.health;
        if condition.all_pods_ready {
            reasons.extend(unready_pods(&w, &self.app.namespace));
        }
        if let Some((prom, baseline)) = &self.prometheus {
            if since.elapsed().as_secs() < health::WINDOW_SECS {
                reasons.push(format!(
                    "waiting for {}s of traffic since the change",
                    health::WINDOW_SECS
                ));
                return Ok(reasons);
            }
            match prom.read(health::WINDOW_SECS).await {
                Ok(now) => reasons.extend(health::reasons(
                    &now,
                    baseline,
                    condition,
                    &self.app.workload.target,
                )),
                // Health that cannot be read is not health seen.
                Err(e) => reasons.push(format!("the cluster's Prometheus did not answer: {e:#}")),
            }
        }
        Ok(reasons)
    }

    /// Watches the cluster: it must settle within `settle_within`, then hold for the
    /// problem's `sustain`.
    pub async fn grade(self) -> anyhow::Result<Verdict> {
        let started = Instant::now();
        let settle_max = self.settle_within;
        let settled = loop {
            let reasons = self.failing(started).await?;
            if reasons.is_empty() {
                break started.elapsed();
            }
            if started.elapsed() >= settle_max {
                let mut reasons = reasons;
                reasons.insert(0, format!("not recovered after {}s", settle_max.as_secs()));
                return Ok(failed(None, reasons));
            }
            tokio::time::sleep(POLL).await;
        };
        let sustain = self.problem.oracle.health.sustain.to_std();
        let held_from = Instant::now();
        while held_from.elapsed() < sustain {
            tokio::time::sleep(POLL.min(sustain)).await;
            let mut reasons = self.failing(started).await?;
            if !reasons.is_empty() {
                reasons.insert(
                    0,
                    format!("the system relapsed within {}s", sustain.as_secs()),
                );
                return Ok(failed(Some(settled.as_secs() as i64), reasons));
            }
        }
        Ok(Verdict {
            passed: true,
            recovered_after_secs: Some(settled.as_secs() as i64),
            reasons: vec![],
        })
    }
}

fn failed(recovered_after_secs: Option<i64>, reasons: Vec<String>) -> Verdict {
    Verdict {
        passed: false,
        recovered_after_secs,
        reasons,
    }
}

/// A GET of the cluster's API, as JSON.
async fn get(client: &kube::Client, path: &str) -> anyhow::Result<Value> {
    let request = axum::http::Request::get(path).body(Vec::new())?;
    client
        .request::<Value>(request)
        .await
        .with_context(|| format!("GET {path}"))
}

/// The list of a kind in the app's namespace (nodes and other cluster-scoped kinds: all).
fn list_path(kind: Kind, ns: &str) -> String {
    let base = match kind.api_version() {
        "v1" => "/api/v1".to_string(),
        gv => format!("/apis/{gv}"),
    };
    if kind.namespaced() {
        format!("{base}/namespaces/{ns}/{}", kind.resource())
    } else {
        format!("{base}/{}", kind.resource())
    }
}
