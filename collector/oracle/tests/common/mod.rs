//! What the oracle's tests share: a simulation of a catalog problem, the edits an agent (or a
//! fault) makes to it, and the hacks that must never pass for a fix.

#![allow(dead_code)]

use oracle::{Verdict, check_state};
use problems::{Catalog, ProblemSpec};
use sim::faults::{self, Undo};
use sim::objects::{Deployment, Kind, PodTemplate, Service, StatefulSet, key};
use sim::{Sim, SimConfig};

pub const SEED: u64 = 11;
pub const START_NS: i64 = 1_767_225_600 * 1_000_000_000;
/// How long a fault acts before its symptoms are judged.
pub const FAULTY_SECS: usize = 120;
/// The longest a reverted or fixed problem may take to settle.
pub const SETTLE_SECS: usize = 600;

pub fn catalog() -> Catalog {
    Catalog::builtin().expect("the built-in catalog loads")
}

pub fn problem<'c>(catalog: &'c Catalog, id: &str) -> &'c ProblemSpec {
    catalog
        .problem(id)
        .unwrap_or_else(|| panic!("the catalog has problem {id}"))
}

/// A fresh simulation of the problem's app, warmed up and healthy.
pub fn healthy(catalog: &Catalog, problem: &ProblemSpec) -> Sim {
    let app = catalog
        .app(&problem.application)
        .unwrap_or_else(|| panic!("problem {} names a known app", problem.id));
    Sim::new(app, SEED, START_NS, SimConfig::default())
}

/// Applies the problem's faults (their undos, in order) and decoys (kept).
pub fn inject(sim: &mut Sim, problem: &ProblemSpec) -> Result<Vec<Undo>, String> {
    let mut undos = vec![];
    for (f, decoy) in problem.injections() {
        let undo = faults::apply(&mut sim.world, &sim.app, &f.primitive)
            .map_err(|e| format!("{} does not apply: {e}", f.primitive.name()))?;
        if !decoy {
            undos.push(undo);
        }
    }
    Ok(undos)
}

pub fn step(sim: &mut Sim, secs: usize) {
    for _ in 0..secs {
        sim.step();
    }
}

pub fn verdict(sim: &Sim, problem: &ProblemSpec) -> Verdict {
    Verdict::of(&check_state(sim, problem))
}

/// Steps until the state assertions pass (checked every 5 s), for at most [`SETTLE_SECS`]: the
/// seconds it took, or the reasons still failing.
pub fn settle(sim: &mut Sim, problem: &ProblemSpec) -> Result<usize, Vec<String>> {
    let mut waited = 0;
    loop {
        let v = verdict(sim, problem);
        if v.passed {
            return Ok(waited);
        }
        if waited >= SETTLE_SECS {
            return Err(v.reasons);
        }
        step(sim, 5);
        waited += 5;
    }
}

/// Edits a service's pod template as `kubectl edit` would: a new generation, reported changed.
pub fn edit_template(sim: &mut Sim, service: &str, f: impl FnOnce(&mut PodTemplate)) {
    let k = key(&sim.app.namespace, service);
    if let Some(d) = sim.world.deployments.get_mut(&k) {
        f(&mut d.template);
        d.meta.generation += 1;
        sim.world.touch(Kind::Deployment, &k);
    } else if let Some(s) = sim.world.statefulsets.get_mut(&k) {
        f(&mut s.template);
        s.meta.generation += 1;
        sim.world.touch(Kind::StatefulSet, &k);
    } else {
        panic!("no workload {service} to edit");
    }
}

/// Ways to make symptoms go away without fixing anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hack {
    ScaleToZero,
    DeleteWorkload,
    DeleteService,
}

pub const HACKS: [Hack; 3] = [Hack::ScaleToZero, Hack::DeleteWorkload, Hack::DeleteService];

/// Applies a hack to a service; false when it does not apply (no such object).
pub fn hack(sim: &mut Sim, service: &str, h: Hack) -> bool {
    let k = key(&sim.app.namespace, service);
    let w = &mut sim.world;
    match h {
        Hack::ScaleToZero => {
            if let Some(d) = w.deployments.get_mut(&k) {
                d.replicas = 0;
                d.meta.generation += 1;
                w.touch(Kind::Deployment, &k);
            } else if let Some(s) = w.statefulsets.get_mut(&k) {
                s.replicas = 0;
                s.meta.generation += 1;
                w.touch(Kind::StatefulSet, &k);
            } else {
                return false;
            }
        }
        Hack::DeleteWorkload => {
            if w.remove_object::<Deployment>(&k).is_some() {
                w.touch(Kind::Deployment, &k);
            } else if w.remove_object::<StatefulSet>(&k).is_some() {
                w.touch(Kind::StatefulSet, &k);
            } else {
                return false;
            }
        }
        Hack::DeleteService => {
            if w.remove_object::<Service>(&k).is_none() {
                return false;
            }
            w.touch(Kind::Service, &k);
        }
    }
    true
}
