//! What the simulator's integration tests share: an application's world a few seconds after
//! its start, stepping it, and applying a fault primitive to it.

use problems::Catalog;
use problems::primitive::Primitive;
use sim::{Sim, SimConfig, faults};

const T0: i64 = 1_800_000_000_000_000_000;

/// A built-in application's world, seed 5, 30 simulated seconds in.
pub fn sim_of(app: &str) -> Sim {
    let catalog = Catalog::builtin().unwrap();
    let app = catalog.app(app).unwrap().clone();
    let mut sim = Sim::new(&app, 5, T0, SimConfig::default());
    run(&mut sim, 30);
    sim
}

pub fn run(sim: &mut Sim, secs: u32) {
    for _ in 0..secs {
        sim.step();
        sim.drain();
    }
}

pub fn apply(sim: &mut Sim, p: Primitive) {
    faults::apply(&mut sim.world, &sim.app.clone(), &p).unwrap();
}
