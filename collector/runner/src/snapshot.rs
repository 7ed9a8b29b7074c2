//! Running one problem in the simulator: a healthy baseline, the faults (and decoys) at their
//! onsets, the noise schedule, the faulty period; every row goes to a sink. [`snapshot`] writes
//! the dataset directory, then beside it the ground truth and the evaluator record with the
//! capture-quality checks evaluated over the written dataset.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use problems::{Catalog, ProblemSpec};
use schemas::ground_truth::{EvaluatorRecord, GROUND_TRUTH_VERSION, VisibilityCheck};
use serde::Serialize;

use super::leak::{self, LeakScan};
pub use super::problem::{Options, Outcome, simulate};
use super::problem::{ProblemRun, run_to_end};
use super::visibility::Probe;

/// What a snapshot produced.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub problem: String,
    pub application: String,
    pub seed: u64,
    pub out: PathBuf,
    pub dataset: PathBuf,
    pub ground_truth: PathBuf,
    pub evaluation: PathBuf,
    pub dataset_id: String,
    pub window_start: String,
    pub window_end: String,
    pub rows: std::collections::BTreeMap<String, u64>,
    pub injections: Vec<String>,
    pub noise_events: usize,
    pub checks: Vec<VisibilityCheck>,
    pub leaks: Vec<String>,
    pub simulated_secs: i64,
    pub wall_secs: f64,
    /// The process's peak resident memory so far (where `/proc` tells it).
    pub peak_rss_bytes: Option<u64>,
}

impl Report {
    pub fn checks_passed(&self) -> usize {
        self.checks.iter().filter(|c| c.passed).count()
    }
}

/// Runs the problem and writes `out/dataset/`, `out/ground_truth.json`, `out/evaluation.json`.
pub fn snapshot(
    catalog: &Catalog,
    problem: &ProblemSpec,
    opts: &Options,
    out: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<Report> {
    let started = Instant::now();
    let dataset_dir = out.join("dataset");
    let mut writer = create_dataset(out)?;
    let run = ProblemRun::new(catalog, problem, opts)?;
    // The checks see the rows on their way into the dataset, from the scheduled onset on.
    let mut checks = Checks::new(problem, run.onset_ns());
    let outcome = run_to_end(
        run,
        problem,
        opts,
        &mut |row| {
            checks.observe(&row);
            writer.push(row).map_err(anyhow::Error::from)
        },
        progress,
    )?;
    anyhow::ensure!(
        outcome.onset_ns == checks.from,
        "problem `{}`: its first fault was applied at {} ns, not at its scheduled {} ns",
        problem.id,
        outcome.onset_ns,
        checks.from
    );
    let app = catalog
        .app(&problem.application)
        .expect("checked by simulate");
    let manifest = writer
        .finish(datasets::DatasetInfo {
            environment: "sim".into(),
            application: Some(app.name.clone()),
            namespaces: outcome.namespaces.clone(),
            window: outcome.window,
            virtual_now: outcome.window.end,
        })
        .with_context(|| format!("cannot finish dataset {}", dataset_dir.display()))?;
    let (checks, leaks) = checks.finish();
    let gt = problem.ground_truth(&app.namespace, outcome.window.start);
    let gt_path = out.join("ground_truth.json");
    datasets::write_atomically(&gt_path, &serde_json::to_vec_pretty(&gt)?)?;
    let record = EvaluatorRecord {
        schema_version: GROUND_TRUTH_VERSION,
        dataset_id: manifest.dataset_id.clone(),
        problem_id: problem.id.clone(),
        application: app.name.clone(),
        seed: opts.seed,
        generator: manifest.generator.clone(),
        injections: outcome.injections.clone(),
        noise: outcome.noise.clone(),
        capture_quality: checks.clone(),
    };
    let eval_path = out.join("evaluation.json");
    datasets::write_atomically(&eval_path, &serde_json::to_vec_pretty(&record)?)?;
    Ok(Report {
        problem: problem.id.clone(),
        application: app.name.clone(),
        seed: opts.seed,
        out: out.to_path_buf(),
        dataset: dataset_dir,
        ground_truth: gt_path,
        evaluation: eval_path,
        dataset_id: manifest.dataset_id.clone(),
        window_start: outcome.window.start.to_rfc3339(),
        window_end: outcome.window.end.to_rfc3339(),
        rows: manifest
            .tables
            .iter()
            .map(|(t, e)| (t.name().to_string(), e.rows))
            .collect(),
        injections: outcome
            .injections
            .iter()
            .map(|i| {
                format!(
                    "{}{} on {}",
                    if i.decoy { "decoy " } else { "" },
                    i.primitive,
                    i.target
                )
            })
            .collect(),
        noise_events: outcome.noise.len(),
        checks,
        leaks: leaks
            .iter()
            .map(|l| format!("{}: {}", l.marker, l.text))
            .collect(),
        simulated_secs: outcome.simulated_secs,
        wall_secs: started.elapsed().as_secs_f64(),
        peak_rss_bytes: peak_rss_bytes(),
    })
}

/// The process's peak resident set (VmHWM), if `/proc` is there to tell it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// A new dataset at `OUT/dataset`, refused when one is there already (a run never writes over
/// another's).
pub fn create_dataset(out: &Path) -> anyhow::Result<datasets::DatasetWriter> {
    let dir = out.join("dataset");
    if dir.exists() {
        bail!(
            "{} already exists: choose another --out or remove it",
            dir.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    datasets::DatasetWriter::create(&dir)
        .with_context(|| format!("cannot create dataset {}", dir.display()))
}

/// The capture-quality checks and the leak scan over the rows of one run.
struct Checks {
    from: i64,
    probes: Vec<Probe>,
    leaks: LeakScan,
}

impl Checks {
    fn new(problem: &ProblemSpec, from: i64) -> Checks {
        Checks {
            from,
            probes: problem
                .visibility
                .iter()
                .map(|e| Probe::new(e, from))
                .collect(),
            leaks: LeakScan::new(&leak::markers(&problem.id)),
        }
    }

    fn observe(&mut self, row: &schemas::tables::Row) {
        self.probes.iter_mut().for_each(|p| p.observe(row));
        self.leaks.observe(row);
    }

    fn finish(self) -> (Vec<VisibilityCheck>, Vec<leak::Leak>) {
        (
            self.probes.into_iter().map(Probe::finish).collect(),
            self.leaks.finish(),
        )
    }
}
