//! Every problem of the catalog through the oracle, one table-driven pass per application:
//! (a) the healthy baseline passes every state assertion; (b) with the faults applied, some
//! assertion fails with a reason naming an object the fault acted on; (c) once every fault is
//! reverted the assertions pass again within the settle limit. And on both the faulty and the
//! fixed world, scaling the faulty workload to zero, deleting it or deleting its Service fails.

mod common;

use common::*;
use oracle::fault_services;
use problems::primitive::Target;
use problems::{Catalog, ProblemSpec};
use sim::Sim;

/// What one problem showed; `errors` is empty when it behaved.
#[derive(Default)]
struct Report {
    errors: Vec<String>,
    fixed_after: Option<usize>,
    hacks_run: usize,
}

/// Names a reason may use for the objects the problem's faults act on.
fn target_names(problem: &ProblemSpec, ns: &str) -> Vec<String> {
    let mut out = vec![];
    for f in &problem.faults {
        for t in f.primitive.targets() {
            match t {
                Target::Service(s) => out.push(format!("{ns}/{s}")),
                Target::Node(n) => out.push(format!("Node {n}")),
                Target::ConfigMap(c) => out.push(format!("{ns}/{c}")),
                Target::FeatureFlag(flag) => out.push(format!("feature flag {flag}")),
                Target::Cluster => {
                    out.push("kube-system/coredns".into());
                    out.push("ResourceQuota".into());
                }
            }
        }
    }
    out
}

/// Each hack on the service must make the state assertions fail.
fn hacks_fail(sim: &Sim, problem: &ProblemSpec, when: &str, report: &mut Report) {
    let Some(service) = fault_services(problem).into_iter().next() else {
        return;
    };
    for h in HACKS {
        let mut hacked = sim.clone();
        if !hack(&mut hacked, &service, h) {
            continue;
        }
        step(&mut hacked, 20);
        report.hacks_run += 1;
        if verdict(&hacked, problem).passed {
            report.errors.push(format!(
                "{when}: {h:?} on {service} passed the state assertions"
            ));
        }
    }
}

fn run(catalog: &Catalog, problem: &ProblemSpec) -> Report {
    let mut report = Report::default();
    let mut sim = healthy(catalog, problem);
    let ns = sim.app.namespace.clone();
    let base = verdict(&sim, problem);
    if !base.passed {
        report
            .errors
            .push(format!("(a) healthy baseline fails: {:?}", base.reasons));
    }
    let undos = match inject(&mut sim, problem) {
        Ok(u) => u,
        Err(e) => {
            report.errors.push(e);
            return report;
        }
    };
    step(&mut sim, FAULTY_SECS);
    let faulty = verdict(&sim, problem);
    let names = target_names(problem, &ns);
    let named = faulty
        .reasons
        .iter()
        .any(|r| names.iter().any(|n| r.contains(n.as_str())));
    if faulty.passed || !named {
        report.errors.push(format!(
            "(b) faulty state: passed={}, no reason names one of {names:?}: {:?}",
            faulty.passed, faulty.reasons
        ));
    }
    hacks_fail(&sim, problem, "faulty", &mut report);
    for undo in undos.into_iter().rev() {
        sim::faults::revert(&mut sim.world, undo);
    }
    match settle(&mut sim, problem) {
        Ok(secs) => report.fixed_after = Some(secs),
        Err(reasons) => report.errors.push(format!(
            "(c) not passing {SETTLE_SECS}s after the revert: {reasons:?}"
        )),
    }
    hacks_fail(&sim, problem, "fixed", &mut report);
    report
}

/// Runs every problem of one application; panics listing every problem that misbehaved.
fn run_app(app: &str) {
    let catalog = catalog();
    let problems: Vec<&ProblemSpec> = catalog
        .problems()
        .filter(|p| p.application == app)
        .collect();
    assert!(!problems.is_empty(), "the catalog has problems of {app}");
    let mut failures = vec![];
    let (mut fixed, mut hacks) = (0, 0);
    for p in &problems {
        let r = run(&catalog, p);
        fixed += usize::from(r.fixed_after.is_some());
        hacks += r.hacks_run;
        if let Some(secs) = r.fixed_after {
            eprintln!("{}: fixed state passes after {secs}s", p.id);
        }
        failures.extend(r.errors.into_iter().map(|e| format!("{}: {e}", p.id)));
    }
    eprintln!(
        "{app}: {} problems, {fixed} pass after the revert, {hacks} hacks run, {} failures",
        problems.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn hotel_reservation_problems() {
    run_app("hotel-reservation");
}

#[test]
fn social_network_problems() {
    run_app("social-network");
}

#[test]
fn astronomy_shop_problems() {
    run_app("astronomy-shop");
}
