//! Noise on a real cluster: the problem's noise profile scheduled from the seed exactly as the
//! simulator schedules it (the same services, times and kinds), and played against the cluster.
//! A pod kill goes through the API (one pod of the service deleted at once; its controller
//! starts another, so nothing is left to undo). CPU bursts, network delays and dropped requests
//! act inside pods and need the node agent: they are recorded as not played, with what they
//! need, never silently dropped. What was played goes to the evaluator's record only.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use inject::api::Cluster;
use problems::{AppSpec, Catalog, NoiseKind, PlannedNoise, ProblemSpec};
use schemas::ground_truth::NoiseEvent;
use schemas::time::real_now_ns;
use serde::Serialize;
use tokio::task::JoinHandle;

/// What the node agent gives that the API does not, for the kinds that need it.
const NEEDS_NODE_AGENT: &str =
    "the faultline node agent (cgroup BPF programs in the target's pods)";

/// The noise of a run on a cluster: what was played and what could not be.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Played {
    pub played: Vec<NoiseEvent>,
    pub not_played: Vec<NotPlayed>,
}

/// A scheduled disturbance that was not played, and why.
#[derive(Debug, Clone, Serialize)]
pub struct NotPlayed {
    pub kind: String,
    pub target: String,
    pub at: DateTime<Utc>,
    pub why: String,
}

/// The problem's noise schedule over `window` from `seed`, as the simulator schedules it (empty
/// when the problem has none).
pub fn plan(
    catalog: &Catalog,
    problem: &ProblemSpec,
    app: &AppSpec,
    seed: u64,
    window: Duration,
) -> anyhow::Result<Vec<PlannedNoise>> {
    let secs = window.as_secs() as i64;
    runner::problem::noise_schedule(catalog, problem, app, seed, secs)
}

/// A schedule being played from a start instant, until stopped.
pub struct NoiseRun {
    task: JoinHandle<()>,
    played: Arc<Mutex<Played>>,
}

impl NoiseRun {
    /// Plays `plan` against the cluster, each disturbance at its offset from `start_ns`.
    pub fn start(cluster: Cluster, app: AppSpec, plan: Vec<PlannedNoise>, start_ns: i64) -> Self {
        let played = Arc::new(Mutex::new(Played::default()));
        let task = tokio::spawn(play(cluster, app, plan, start_ns, played.clone()));
        NoiseRun { task, played }
    }

    /// Stops playing (what is under way ends by itself: killed pods come back) and says what
    /// was played.
    pub fn stop(&self) -> Played {
        self.task.abort();
        self.played.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

impl Drop for NoiseRun {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn instant(ns: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_nanos(ns)
}

async fn play(
    cluster: Cluster,
    app: AppSpec,
    plan: Vec<PlannedNoise>,
    start_ns: i64,
    played: Arc<Mutex<Played>>,
) {
    for n in plan {
        let at = start_ns + n.start.as_millis() as i64 * 1_000_000;
        let wait = at - real_now_ns();
        if wait > 0 {
            tokio::time::sleep(Duration::from_nanos(wait as u64)).await;
        }
        let outcome = match n.kind {
            NoiseKind::PodKill => match cluster.kill_one(&app, &n.target).await {
                Ok(Some(pod)) => {
                    tracing::debug!("noise: killed pod {pod}");
                    Ok(())
                }
                Ok(None) => Err("no running pod to kill".to_string()),
                Err(e) => Err(e.to_string()),
            },
            _ => Err(format!("needs {NEEDS_NODE_AGENT}")),
        };
        let now = real_now_ns();
        let length = (n.end.as_millis() - n.start.as_millis()) as i64 * 1_000_000;
        let Ok(mut record) = played.lock() else {
            return;
        };
        match outcome {
            Ok(()) => record.played.push(NoiseEvent {
                kind: n.kind.name().to_string(),
                target: format!("deployment/{}", n.target),
                start: instant(now),
                end: instant(now + length),
            }),
            Err(why) => record.not_played.push(NotPlayed {
                kind: n.kind.name().to_string(),
                target: format!("deployment/{}", n.target),
                at: instant(now),
                why,
            }),
        }
    }
}
