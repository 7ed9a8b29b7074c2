//! The simulator against the whole catalog: every problem snapshots into a dataset that validates,
//! shows what the problem says must be visible, and leaks nothing; seeds are reproducible; every
//! fault primitive reverts exactly.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use problems::{Catalog, Dur};
use runner::snapshot::{self, Options};
use sim::{Sim, SimConfig, faults};

/// Short runs keep CI within budget; problems keep their proportions.
const CI_DURATION: Dur = Dur::from_secs(300);

fn catalog() -> Catalog {
    Catalog::builtin().expect("built-in catalog loads")
}

fn checksums(dir: &Path) -> BTreeMap<String, String> {
    let ds = datasets::Dataset::open(dir).expect("dataset opens");
    ds.manifest()
        .tables
        .iter()
        .map(|(t, e)| (t.name().to_string(), e.sha256.clone()))
        .collect()
}

/// Snapshots every catalog problem (short runs, in parallel) and returns each one's outcome.
fn snapshot_all(cat: &Catalog, dir: &Path) -> Vec<(String, Result<snapshot::Report, String>)> {
    let problems: Vec<_> = cat.problems().collect();
    assert!(
        problems.len() >= 60,
        "catalog has {} problems",
        problems.len()
    );
    let results = Mutex::new(Vec::new());
    let queue = Mutex::new(problems);
    let jobs = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(4);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    let Some(p) = queue.lock().unwrap().pop() else {
                        break;
                    };
                    let opts = Options {
                        seed: 3,
                        duration: Some(CI_DURATION),
                        ..Options::default()
                    };
                    let outcome =
                        snapshot::snapshot(cat, p, &opts, &dir.join(&p.id), &mut |_, _| {})
                            .map_err(|e| format!("{e:#}"));
                    results.lock().unwrap().push((p.id.clone(), outcome));
                }
            });
        }
    });
    results.into_inner().unwrap()
}

/// Every problem runs, and its dataset validates, leaks nothing, has its ground truth beside it
/// (not inside), and shows what the problem's spec says must be visible. One snapshot per problem
/// serves all of these, which keeps the catalog run within CI's budget.
#[test]
fn every_catalog_problem_snapshots_into_a_valid_dataset_showing_its_symptoms_without_leaks() {
    let cat = catalog();
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut checks = 0;
    for (id, outcome) in snapshot_all(&cat, tmp.path()) {
        match outcome {
            Err(e) => failures.push(format!("{id}: run failed: {e}")),
            Ok(r) => {
                let report = datasets::validate::validate(&r.dataset);
                for f in &report.findings {
                    failures.push(format!("{id}: dataset invalid: {f}"));
                }
                for l in &r.leaks {
                    failures.push(format!("{id}: leak: {l}"));
                }
                if !(r.ground_truth.exists() && r.evaluation.exists()) {
                    failures.push(format!("{id}: ground truth or evaluation record missing"));
                }
                if r.ground_truth.starts_with(&r.dataset) {
                    failures.push(format!("{id}: ground truth inside the dataset"));
                }
                if r.checks.is_empty() {
                    failures.push(format!("{id}: declares no visibility checks"));
                }
                checks += r.checks.len();
                for c in r.checks.iter().filter(|c| !c.passed) {
                    failures.push(format!(
                        "{id}: not visible: {} ({})",
                        c.expectation, c.observed
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures over {checks} visibility checks:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn same_seed_same_bytes_other_seed_other_data() {
    let cat = catalog();
    let p = cat
        .problem("hotel-geo-target-port")
        .expect("problem exists");
    let tmp = tempfile::tempdir().unwrap();
    let run = |seed: u64, dir: &str| {
        let opts = Options {
            seed,
            duration: Some(Dur::from_secs(180)),
            ..Options::default()
        };
        snapshot::snapshot(&cat, p, &opts, &tmp.path().join(dir), &mut |_, _| {})
            .expect("snapshot runs")
    };
    let a = run(11, "a");
    let b = run(11, "b");
    let c = run(12, "c");
    let (ca, cb, cc) = (
        checksums(&a.dataset),
        checksums(&b.dataset),
        checksums(&c.dataset),
    );
    assert_eq!(ca, cb, "same seed must give identical tables");
    assert_eq!(a.dataset_id, b.dataset_id);
    for t in ["metrics", "spans", "logs", "objects"] {
        assert_ne!(ca[t], cc[t], "another seed must change table {t}");
    }
}

#[test]
fn every_primitive_in_the_catalog_reverts_exactly() {
    let cat = catalog();
    let mut seen = std::collections::BTreeSet::new();
    for p in cat.problems() {
        let app = cat.app(&p.application).unwrap();
        for (f, _) in p.injections() {
            let mut sim = Sim::new(app, 5, 1_800_000_000_000_000_000, SimConfig::default());
            let before = faults::desired_state(&sim.world);
            let undo = faults::apply(&mut sim.world, app, &f.primitive)
                .unwrap_or_else(|e| panic!("{}: {e}", p.id));
            let during = faults::desired_state(&sim.world);
            assert_ne!(
                before,
                during,
                "{}: {} changed nothing",
                p.id,
                f.primitive.name()
            );
            for _ in 0..20 {
                sim.step();
            }
            faults::revert(&mut sim.world, undo);
            assert_eq!(
                before,
                faults::desired_state(&sim.world),
                "{}: {} did not revert exactly",
                p.id,
                f.primitive.name()
            );
            seen.insert(f.primitive.name());
        }
    }
    assert!(
        seen.len() >= 30,
        "catalog exercises {} primitives: {seen:?}",
        seen.len()
    );
}
