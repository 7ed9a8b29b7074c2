//! The simulator against the whole catalog: every problem snapshots into a dataset that validates,
//! shows what the problem says must be visible, and leaks nothing; seeds are reproducible; every
//! fault primitive reverts exactly.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use collector::run::snapshot::{self, Options};
use collector::sim::{Sim, SimConfig, faults};
use problems::{Catalog, Dur};

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

#[test]
fn every_catalog_problem_snapshots_visibly_and_without_leaks() {
    let cat = catalog();
    let problems: Vec<_> = cat.problems().collect();
    assert!(
        problems.len() >= 60,
        "catalog has {} problems",
        problems.len()
    );
    let tmp = tempfile::tempdir().unwrap();
    let failures = Mutex::new(Vec::new());
    let queue = Mutex::new(problems.clone());
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
                    let out = tmp.path().join(&p.id);
                    let opts = Options {
                        seed: 3,
                        duration: Some(CI_DURATION),
                        ..Options::default()
                    };
                    match snapshot::snapshot(&cat, p, &opts, &out, &mut |_, _| {}) {
                        Err(e) => failures
                            .lock()
                            .unwrap()
                            .push(format!("{}: run failed: {e:#}", p.id)),
                        Ok(r) => {
                            let report = datasets::validate::validate(&r.dataset);
                            if !report.is_valid() {
                                failures
                                    .lock()
                                    .unwrap()
                                    .push(format!("{}: dataset invalid: {report:?}", p.id));
                            }
                            for c in r.checks.iter().filter(|c| !c.passed) {
                                failures.lock().unwrap().push(format!(
                                    "{}: not visible: {} ({})",
                                    p.id, c.expectation, c.observed
                                ));
                            }
                            for l in &r.leaks {
                                failures
                                    .lock()
                                    .unwrap()
                                    .push(format!("{}: leak: {l}", p.id));
                            }
                            assert!(r.ground_truth.exists() && r.evaluation.exists());
                            assert!(
                                !r.ground_truth.starts_with(&r.dataset),
                                "ground truth must live beside the dataset"
                            );
                        }
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
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
            faults::revert(&mut sim.world, app, undo);
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
