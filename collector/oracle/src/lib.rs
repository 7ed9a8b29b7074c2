//! The mitigation oracle's state assertions: whether a problem's `[oracle] state` holds on a
//! simulated cluster, one [`Finding`] per assertion, and the [`Verdict`] they add up to.
//!
//! What flows through: a [`Sim`] (its world of typed objects and hidden runtime conditions, and
//! the app spec it runs) and a [`ProblemSpec`] go in; [`check_state`] reads the world without
//! changing it and returns, for every assertion of the spec, whether it holds and, when not, a
//! plain-English reason naming the namespace, kind and name of the object and what was found
//! against what was expected.
//!
//! A mitigation passes only if the fault is really fixed. Every assertion about a service
//! therefore also requires its workload to exist and want at least one replica, and its Service
//! to exist when the manifest has one: scaling to zero or deleting a workload never passes. On
//! top of the spec's assertions [`check_state`] adds one finding, `faulty services serve`, that
//! asks the same of every service a fault acted on, so that a problem whose spec only checks a
//! feature flag or an env var still fails when the workload it concerns was removed.
//!
//! `assertions` checks the spec's assertions about objects; `cleared` decides `fault_cleared`
//! for each primitive family, from what `sim::faults` changed; `view` holds the lookups both
//! share.

mod assertions;
mod cleared;
mod view;

use problems::AppSpec;
use problems::primitive::Target;
use problems::{ProblemSpec, StateAssertion};
use serde::{Deserialize, Serialize};
use sim::Sim;
use sim::world::World;

use view::View;

/// The outcome of one assertion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The assertion, as a short label (`fault_cleared #0 (readiness_probe)`,
    /// `deployment_ready search`).
    pub assertion: String,
    pub passed: bool,
    /// Why it does not hold; `None` when it passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Finding {
    fn of(assertion: String, outcome: Result<(), String>) -> Finding {
        match outcome {
            Ok(()) => Finding {
                assertion,
                passed: true,
                reason: None,
            },
            Err(reason) => Finding {
                assertion,
                passed: false,
                reason: Some(reason),
            },
        }
    }
}

/// Whether the state assertions hold, with the reasons of those that do not (each prefixed with
/// its assertion's label); what a run record stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub passed: bool,
    pub reasons: Vec<String>,
}

impl Verdict {
    /// Sums findings up: passed when every one passed.
    pub fn of(findings: &[Finding]) -> Verdict {
        let reasons: Vec<String> = findings
            .iter()
            .filter_map(|f| f.reason.as_ref().map(|r| format!("{}: {r}", f.assertion)))
            .collect();
        Verdict {
            passed: findings.iter().all(|f| f.passed),
            reasons,
        }
    }
}

/// Checks every state assertion of `problem` on the simulation's current world, plus the
/// implicit `faulty services serve` finding (see the module docs).
pub fn check_state(sim: &Sim, problem: &ProblemSpec) -> Vec<Finding> {
    check_world(&sim.world, &sim.app, problem)
}

/// The same on any world: the simulator's, or a real cluster's objects loaded into one.
pub fn check_world(w: &World, app: &AppSpec, problem: &ProblemSpec) -> Vec<Finding> {
    let v = View::new(w, app);
    let mut out: Vec<Finding> = problem
        .oracle
        .state
        .iter()
        .map(|a| Finding::of(label(a, problem), check_one(&v, a, problem)))
        .collect();
    let targets = fault_services(problem);
    if !targets.is_empty() {
        let outcome = targets.iter().try_for_each(|s| v.serving(s).map(|_| ()));
        out.push(Finding::of("faulty services serve".into(), outcome));
    }
    out
}

/// The reasons the state assertions fail (empty when they all hold), in the shape the live
/// environment's grader takes.
pub fn failure_reasons(sim: &Sim, problem: &ProblemSpec) -> Vec<String> {
    Verdict::of(&check_state(sim, problem)).reasons
}

/// Checks one assertion.
fn check_one(v: &View, a: &StateAssertion, problem: &ProblemSpec) -> Result<(), String> {
    match a {
        StateAssertion::FaultCleared { fault } => match problem.faults.get(*fault) {
            Some(f) => cleared::check(v, &f.primitive),
            None => Err(format!(
                "the assertion names fault #{fault}, but problem {} has {} fault(s)",
                problem.id,
                problem.faults.len()
            )),
        },
        other => assertions::check(v, other),
    }
}

/// A short label for an assertion, naming what it is about.
fn label(a: &StateAssertion, problem: &ProblemSpec) -> String {
    use StateAssertion as A;
    match a {
        A::FaultCleared { fault } => {
            let name = problem
                .faults
                .get(*fault)
                .map(|f| f.primitive.name())
                .unwrap_or("no such fault");
            format!("fault_cleared #{fault} ({name})")
        }
        A::ImageNot { service, .. } => format!("image_not {service}"),
        A::TargetPortIs { service, .. } => format!("target_port_is {service}"),
        A::EnvEquals { service, var, .. } => format!("env_equals {service} {var}"),
        A::ConfigMapHasKey {
            config_map, key, ..
        } => format!("config_map_has_key {config_map} {key}"),
        A::FlagVariant { flag, .. } => format!("flag_variant {flag}"),
        A::MemoryLimitAtLeast { service, .. } => format!("memory_limit_at_least {service}"),
        A::CpuLimitAtLeast { service, .. } => format!("cpu_limit_at_least {service}"),
        A::ReplicasAtLeast { service, .. } => format!("replicas_at_least {service}"),
        A::DeploymentReady { service } => format!("deployment_ready {service}"),
        A::EndpointsReady { service } => format!("endpoints_ready {service}"),
        A::NodeReady { node } => format!("node_ready {node}"),
    }
}

/// The app services the problem's faults (not its decoys) act on, without duplicates.
pub fn fault_services(problem: &ProblemSpec) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for f in &problem.faults {
        for t in f.primitive.targets() {
            if let Target::Service(s) = t
                && s != "*"
                && !out.iter().any(|o| o == s)
            {
                out.push(s.to_string());
            }
        }
    }
    out
}
