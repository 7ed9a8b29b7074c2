//! Whether a mitigation holds. The live run is forked and the copy fast-forwarded, so nobody
//! waits: it must settle (the problem's state assertions hold, every pod of the app is ready, the
//! load generator's error ratio is back under the limit) within [`SETTLE_MAX_SECS`], then stay
//! healthy for the problem's `sustain`, checked in slices so that a relapse inside the window
//! fails. Healthy includes performance: every service's p99 latency back near its baseline. For a metastable problem the timed triggers are replayed once it has settled, and the
//! system must settle again after them. Noise is ended in the fork: it exists to mislead a
//! diagnosis, not to decide a grade. Every failure says what was found.

use std::collections::BTreeMap;

use problems::{HealthCondition, ProblemSpec};
use serde::Serialize;
use sim::Sim;

use runner::problem::ProblemRun;

/// The longest a fixed system may take to recover (rollouts, back-offs, rescheduling).
pub const SETTLE_MAX_SECS: i64 = 600;
/// The error ratio is judged over windows this long.
const SLICE_SECS: i64 = 30;

/// The grade of a mitigation.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub passed: bool,
    /// Simulated seconds from the fork until the system settled (before any replayed trigger).
    pub recovered_after_secs: Option<i64>,
    /// Why it failed; empty when it passed.
    pub reasons: Vec<String>,
}

/// Checks the problem's state assertions on a world: the reasons of those that fail.
pub type StateCheck<'a> = &'a dyn Fn(&Sim, &ProblemSpec) -> Vec<String>;

/// Grades the mitigation of `run` as it stands, on a fork of it.
pub fn grade(run: &ProblemRun, state: StateCheck<'_>) -> anyhow::Result<Verdict> {
    let mut fork = run.clone();
    fork.quiet_noise();
    let health = fork.problem.oracle.health.clone();
    let mut probe = Probe::new(&fork);
    let settled = match settle(&mut fork, &mut probe, &health, state)? {
        Ok(secs) => secs,
        Err(reasons) => return Ok(failed(None, reasons)),
    };
    if health.replay_trigger {
        let secs = fork.replay_triggers();
        for _ in 0..secs {
            probe.step(&mut fork)?;
        }
        if let Err(mut reasons) = settle(&mut fork, &mut probe, &health, state)? {
            reasons.insert(
                0,
                "after the trigger was replayed the system did not recover".into(),
            );
            return Ok(failed(Some(settled), reasons));
        }
    }
    let sustain = (health.sustain.as_millis() / 1000).max(1) as i64;
    let mut reasons = vec![];
    for _ in 0..sustain {
        probe.step(&mut fork)?;
        if probe.elapsed() % SLICE_SECS == 0 {
            reasons.extend(probe.error_ratio_over(&health));
            reasons.extend(probe.latency_over(&health, &fork.sim.app.workload.target));
        }
    }
    reasons.extend(probe.error_ratio_over(&health));
    reasons.extend(probe.latency_over(&health, &fork.sim.app.workload.target));
    reasons.extend(instant_health(&fork.sim, &health));
    reasons.extend(state(&fork.sim, &fork.problem));
    reasons.dedup();
    if reasons.is_empty() {
        Ok(Verdict {
            passed: true,
            recovered_after_secs: Some(settled),
            reasons,
        })
    } else {
        reasons.insert(0, format!("the system relapsed within {sustain}s"));
        Ok(failed(Some(settled), reasons))
    }
}

fn failed(recovered_after_secs: Option<i64>, reasons: Vec<String>) -> Verdict {
    Verdict {
        passed: false,
        recovered_after_secs,
        reasons,
    }
}

/// Steps until everything holds at once (checked every 5 s once a slice of traffic is seen):
/// the seconds it took, or why it never settled.
fn settle(
    fork: &mut ProblemRun,
    probe: &mut Probe,
    health: &HealthCondition,
    state: StateCheck<'_>,
) -> anyhow::Result<Result<i64, Vec<String>>> {
    let start = probe.elapsed();
    loop {
        probe.step(fork)?;
        let waited = probe.elapsed() - start;
        if waited >= SLICE_SECS && waited % 5 == 0 || waited >= SETTLE_MAX_SECS {
            let mut reasons = state(&fork.sim, &fork.problem);
            reasons.extend(instant_health(&fork.sim, health));
            reasons.extend(probe.error_ratio_over(health));
            reasons.extend(probe.latency_over(health, &fork.sim.app.workload.target));
            if reasons.is_empty() {
                return Ok(Ok(probe.elapsed()));
            }
            if waited >= SETTLE_MAX_SECS {
                reasons.insert(0, format!("not recovered after {SETTLE_MAX_SECS}s"));
                return Ok(Err(reasons));
            }
        }
    }
}

/// What must hold at an instant: pods ready and no alert firing (when asked).
fn instant_health(sim: &Sim, health: &HealthCondition) -> Vec<String> {
    let ns = &sim.app.namespace;
    let mut out = vec![];
    if health.all_pods_ready {
        out.extend(unready_pods(&sim.world, ns));
    }
    let ours = sim
        .firing_alerts()
        .into_iter()
        .filter(|(_, labels)| labels.get("namespace").is_none_or(|n| n == ns))
        .map(|(name, _)| name);
    out.extend(firing_reasons(ours, health));
    out
}

/// The firing alerts (of the app's namespace) the problem does not excuse, when it asks for none.
pub fn firing_reasons<'a>(
    firing: impl IntoIterator<Item = &'a str>,
    health: &HealthCondition,
) -> Vec<String> {
    if !health.no_firing_alerts {
        return vec![];
    }
    firing
        .into_iter()
        .filter(|name| !health.exclude_alerts.iter().any(|a| a == name))
        .map(|name| format!("alert {name} is firing"))
        .collect()
}

/// Services whose p99 latency (seconds, by service) is well above their baseline (half as much
/// again, and 50 ms more), or the entry service above the problem's own limit. The same
/// judgement for a simulated fork and for a cluster's Prometheus.
pub fn latency_reasons(
    p99: &BTreeMap<String, f64>,
    baseline: &BTreeMap<String, f64>,
    health: &HealthCondition,
    entry: &str,
) -> Vec<String> {
    let mut out = vec![];
    for (service, base) in baseline {
        let limit = (base * 1.5).max(base + 0.05);
        if let Some(now) = p99.get(service).filter(|now| **now > limit) {
            out.push(format!(
                "service {service}'s p99 latency is {:.0} ms (baseline {:.0} ms)",
                now * 1000.0,
                base * 1000.0
            ));
        }
    }
    if let (Some(max), Some(now)) = (health.max_p99_latency, p99.get(entry))
        && *now > max.as_secs_f64()
    {
        out.push(format!(
            "service {entry}'s p99 latency is {:.0} ms (at most {max} expected)",
            now * 1000.0
        ));
    }
    out
}

/// `what`'s error ratio over `secs`, when it is over the problem's limit.
pub fn error_ratio_reason(
    what: &str,
    ratio: f64,
    secs: u64,
    health: &HealthCondition,
) -> Option<String> {
    (ratio > health.max_error_ratio).then(|| {
        format!(
            "{what} over {secs}s is {:.1}% (at most {:.1}% expected)",
            ratio * 100.0,
            health.max_error_ratio * 100.0
        )
    })
}

/// The app's pods that are not running and ready (terminating and completed ones aside), each
/// with why.
pub fn unready_pods(w: &sim::world::World, ns: &str) -> Vec<String> {
    let mut out = vec![];
    for p in w.pods.values() {
        let ours = p.meta.namespace.as_deref() == Some(ns);
        if !ours || p.meta.deleted_at.is_some() || p.phase == "Succeeded" {
            continue;
        }
        if p.phase != "Running" || !p.ready() {
            let why = p
                .statuses
                .iter()
                .find_map(|s| s.state.waiting_reason())
                .or(p.reason.as_deref())
                .unwrap_or("not ready");
            out.push(format!("pod {ns}/{} is {} ({why})", p.meta.name, p.phase));
        }
    }
    out
}

/// What the fork showed, one entry per simulated second: the load generator's totals and each
/// service's server-side p99 latency; and the baseline latencies to compare with.
struct Probe {
    totals: Vec<(f64, f64)>,
    p99: Vec<BTreeMap<String, f64>>,
    baseline_p99: BTreeMap<String, f64>,
}

impl Probe {
    fn new(run: &ProblemRun) -> Probe {
        Probe {
            totals: vec![run.sim.entry_totals()],
            p99: vec![BTreeMap::new()],
            baseline_p99: run.baseline_p99(),
        }
    }

    /// Services whose mean p99 latency over the last slice is too high ([`latency_reasons`]).
    fn latency_over(&self, health: &HealthCondition, entry: &str) -> Vec<String> {
        let from = self.p99.len().saturating_sub(SLICE_SECS as usize);
        let mut seen: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
        for (service, p99) in self.p99[from..].iter().flatten() {
            let s = seen.entry(service).or_default();
            *s = (s.0 + p99, s.1 + 1);
        }
        let mean = seen
            .into_iter()
            .map(|(service, (sum, n))| (service.to_string(), sum / n as f64))
            .collect();
        latency_reasons(&mean, &self.baseline_p99, health, entry)
    }

    fn elapsed(&self) -> i64 {
        self.totals.len() as i64 - 1
    }

    fn step(&mut self, fork: &mut ProblemRun) -> anyhow::Result<()> {
        fork.step(&mut |_| Ok(()))?;
        self.totals.push(fork.sim.entry_totals());
        let health = &fork.sim.workload.service_health;
        self.p99
            .push(health.iter().map(|(s, h)| (s.clone(), h.2)).collect());
        Ok(())
    }

    /// The error ratio of the last slice, when it is over the limit.
    fn error_ratio_over(&self, health: &HealthCondition) -> Option<String> {
        let n = self.totals.len();
        let (a, b) = (
            self.totals[n.saturating_sub(SLICE_SECS as usize + 1)],
            self.totals[n - 1],
        );
        let requests = b.0 - a.0;
        let ratio = if requests > 0.0 {
            (b.1 - a.1) / requests
        } else {
            1.0
        };
        error_ratio_reason(
            "the load generator's error ratio",
            ratio,
            SLICE_SECS as u64,
            health,
        )
    }
}
