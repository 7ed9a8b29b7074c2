//! Benchmark P5: how much faster than real time the simulator runs.
//!
//! 1. One hour of hotel-reservation with its noise profile and full telemetry (objects, events,
//!    logs, metrics every 15 s, spans, alerts), rows counted but not written: simulated seconds
//!    per wall second against the wall clock (the peer is real time; the goal is >= 1000x).
//! 2. The same hour written as a dataset (sorting, Parquet encoding, the capture checks and the
//!    leak scan included), and its speed as a share of the simulation's in the same run.
//! 3. Scaling with the number of services: the hotel-reservation graph replicated 1x, 2x, 4x
//!    (the entry service fans each request out to its copies), 10 simulated minutes each.
//!
//! Run: `cargo bench --profile dev -p collector --bench sim_speed [-- simulate|dataset|scaling]`
//! (no argument runs all three parts).

use std::time::Instant;

use problems::{Catalog, Dur};
use runner::snapshot::{self, Options};

// The same allocator as the `collector` binary, so the figures are what users get.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn replicate(app: &problems::AppSpec, copies: usize) -> problems::AppSpec {
    let mut out = app.clone();
    for k in 1..copies {
        for s in &app.services {
            if s.role == problems::app::Role::Loadgen {
                continue;
            }
            let mut c = s.clone();
            let rename = |n: &str| format!("{n}-{k}");
            c.name = rename(&s.name);
            c.container = Some(format!("{}-{k}", s.container_name()));
            for op in &mut c.operations {
                for call in &mut op.calls {
                    call.service = rename(&call.service);
                }
            }
            c.env = c
                .env
                .iter()
                .map(|(key, v)| (key.clone(), v.clone()))
                .collect();
            c.config_mounts.clear();
            c.volumes = c
                .volumes
                .iter()
                .map(|v| problems::app::VolumeSpec {
                    claim: format!("{}-{k}", v.claim),
                    ..v.clone()
                })
                .collect();
            out.services.push(c);
        }
        // The copies take load too: the entry service fans out to its copies in parallel.
        let target = app.workload.target.clone();
        let entry = out
            .services
            .iter_mut()
            .find(|s| s.name == target)
            .expect("entry service");
        for op in &mut entry.operations {
            op.calls.push(problems::app::CallSpec {
                service: format!("{target}-{k}"),
                operation: op.name.clone(),
                probability: 1.0,
                parallel: true,
                is_async: false,
            });
        }
    }
    out
}

fn main() {
    // Benches get `--bench` from cargo; any other argument picks the parts to run.
    let parts: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let part = |name: &str| parts.is_empty() || parts.iter().any(|p| p == name);
    let catalog = Catalog::builtin().expect("catalog");
    let problem = catalog
        .problem("hotel-geo-target-port")
        .expect("problem")
        .clone();
    let hour = Options {
        seed: 1,
        duration: Some(Dur::from_secs(3600)),
        ..Options::default()
    };

    let mut problem_hour = problem.clone();
    problem_hour.duration = Dur::from_secs(3600);
    let mut simulate_secs = None;
    if part("simulate") {
        let t = Instant::now();
        let mut rows = 0u64;
        let outcome = snapshot::simulate(
            &catalog,
            &problem_hour,
            &hour,
            &mut |_| {
                rows += 1;
                Ok(())
            },
            &mut |_, _| {},
        )
        .expect("simulate");
        let secs = t.elapsed().as_secs_f64();
        simulate_secs = Some(secs);
        println!(
            "P5 hotel-reservation, 1 h simulated with noise ({} disturbances), full telemetry:",
            outcome.noise.len()
        );
        println!(
            "  simulate only : {secs:8.2} s wall, {rows} rows, {:8.0}x real time (goal >= 1000x)",
            3600.0 / secs
        );
    }

    if part("dataset") {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = Instant::now();
        let report = snapshot::snapshot(
            &catalog,
            &problem_hour,
            &hour,
            &dir.path().join("hour"),
            &mut |_, _| {},
        )
        .expect("snapshot");
        let secs = t.elapsed().as_secs_f64();
        let total_rows: u64 = report.rows.values().sum();
        println!(
            "  with dataset  : {secs:8.2} s wall, {total_rows} rows written and checked, {:8.0}x real time, peak memory {} MiB",
            3600.0 / secs,
            report.peak_rss_bytes.unwrap_or(0) >> 20
        );
        if let Some(sim) = simulate_secs {
            println!(
                "  dataset speed / simulation speed: {:.2} (goal >= 0.5)",
                sim / secs
            );
        }
    }

    if part("scaling") {
        println!("Scaling with the number of services (10 simulated minutes each):");
        let app = catalog.app(&problem.application).expect("app").clone();
        for copies in [1usize, 2, 4] {
            let scaled = replicate(&app, copies);
            let n_services = scaled.services.len();
            let mut sim = sim::Sim::new(
                &scaled,
                1,
                1_800_000_000_000_000_000,
                sim::SimConfig::default(),
            );
            let t = Instant::now();
            let mut rows = 0usize;
            for _ in 0..600 {
                sim.step();
                rows += sim.drain().len();
            }
            let secs = t.elapsed().as_secs_f64();
            println!(
                "  {n_services:3} services: {secs:7.2} s wall, {rows:8} rows, {:7.0}x real time",
                600.0 / secs
            );
        }
    }
}
