//! Running one problem in the simulator: a healthy baseline, the faults (and decoys) at their
//! onsets, the noise schedule, the faulty period; every row goes to a sink. [`snapshot`] writes
//! the dataset directory, then beside it the ground truth and the evaluator record with the
//! capture-quality checks evaluated over the written dataset.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use chrono::Duration;
use problems::{Catalog, Dur, NoiseProfile, ProblemSpec, Target};
use schemas::ground_truth::{
    EvaluatorRecord, GROUND_TRUTH_VERSION, Injection, NoiseEvent, VisibilityCheck,
};
use schemas::manifest::TimeWindow;
use schemas::tables::{Row, Table};
use serde::Serialize;

use super::leak;
use super::visibility::{self, Tables};
use sim::faults::{self, Undo};
use sim::util::{NS_PER_SEC, instant};
use sim::{Sim, SimConfig};

/// First instant of seed 0's window; each seed starts an hour later (within a month).
const EPOCH_SECS: i64 = 1_793_610_000;

/// How to run a problem.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    /// Length of the run, baseline included; the problem's own duration when absent.
    pub duration: Option<Dur>,
    /// Turn the problem's noise profile off.
    pub no_noise: bool,
    pub sim: SimConfig,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: 1,
            duration: None,
            no_noise: false,
            sim: SimConfig::default(),
        }
    }
}

/// What happened in a run, for the evaluator record.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub window: TimeWindow,
    pub namespaces: Vec<String>,
    pub injections: Vec<Injection>,
    pub noise: Vec<NoiseEvent>,
    /// Earliest fault onset (ns); the faulty period starts here.
    pub onset_ns: i64,
    pub simulated_secs: i64,
    /// Load generator requests and failures over the run.
    pub entry: (f64, f64),
}

enum Action {
    Apply(usize),
    Revert(usize),
    NoiseOn(usize),
    NoiseOff(usize),
}

fn scaled(d: Dur, scale: f64) -> i64 {
    (d.as_millis() as f64 * scale / 1000.0).round() as i64
}

/// Runs `problem` and hands every row to `sink`; `progress` gets (simulated seconds done, total).
pub fn simulate(
    catalog: &Catalog,
    problem: &ProblemSpec,
    opts: &Options,
    sink: &mut dyn FnMut(Row) -> anyhow::Result<()>,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<Outcome> {
    let app = catalog.app(&problem.application).with_context(|| {
        format!(
            "problem `{}` names application `{}`, which the catalog does not have",
            problem.id, problem.application
        )
    })?;
    let total = opts.duration.unwrap_or(problem.duration);
    let total_secs = (total.as_millis() / 1000) as i64;
    if total_secs < 30 {
        bail!(
            "--duration {total} is too short: a run needs at least 30s (a baseline and a faulty period)"
        );
    }
    // A shorter run keeps the problem's proportions.
    let scale = (total.as_millis() as f64 / problem.duration.as_millis().max(1) as f64).min(1.0);
    let baseline = scaled(problem.baseline, scale).max(10);
    let start_ns = (EPOCH_SECS + (opts.seed % 720) as i64 * 3600) * NS_PER_SEC;
    let mut sim = Sim::new(app, opts.seed, start_ns, opts.sim.clone());

    let injections: Vec<(&problems::FaultSpec, bool)> = problem.injections().collect();
    let mut actions: Vec<(i64, Action)> = vec![];
    for (i, (f, _)) in injections.iter().enumerate() {
        let at = baseline + scaled(f.onset, scale);
        actions.push((at, Action::Apply(i)));
        if let Some(d) = f.duration {
            actions.push((at + scaled(d, scale).max(1), Action::Revert(i)));
        }
    }
    let noise_plan = if opts.no_noise || problem.noise == problems::noise::NO_NOISE {
        vec![]
    } else {
        let profile: &NoiseProfile = catalog.noise(&problem.noise).with_context(|| {
            format!(
                "problem `{}` names noise profile `{}`, which the catalog does not have",
                problem.id, problem.noise
            )
        })?;
        let avoid: Vec<&str> = if profile.avoid_fault_targets {
            injections
                .iter()
                .flat_map(|(f, _)| f.primitive.targets())
                .filter_map(|t| match t {
                    Target::Service(s) => Some(s),
                    _ => None,
                })
                .collect()
        } else {
            vec![]
        };
        let candidates: Vec<&str> = app
            .services
            .iter()
            .filter(|s| {
                !matches!(
                    s.role,
                    problems::app::Role::Loadgen | problems::app::Role::Infra
                )
            })
            .map(|s| s.name.as_str())
            .filter(|s| !avoid.contains(s))
            .collect();
        profile.schedule(opts.seed, Dur::from_secs(total_secs as u64), &candidates)
    };
    for (i, n) in noise_plan.iter().enumerate() {
        actions.push(((n.start.as_millis() / 1000) as i64, Action::NoiseOn(i)));
        actions.push(((n.end.as_millis() / 1000) as i64, Action::NoiseOff(i)));
    }
    // Stable order: by time, reverts before applies at the same instant.
    actions.sort_by_key(|(t, a)| {
        (
            *t,
            match a {
                Action::Revert(_) | Action::NoiseOff(_) => 0,
                _ => 1,
            },
        )
    });

    let mut undos: Vec<Option<Undo>> = vec![None; injections.len()];
    let mut noise_undos: Vec<Option<Undo>> = vec![None; noise_plan.len()];
    let mut records: Vec<Injection> = vec![];
    let mut record_of: Vec<Option<usize>> = vec![None; injections.len()];
    let mut next = 0;
    for t in 0..total_secs {
        while next < actions.len() && actions[next].0 <= t {
            match &actions[next].1 {
                Action::Apply(i) => {
                    let (f, decoy) = injections[*i];
                    let undo = faults::apply(&mut sim.world, &sim.app, &f.primitive).with_context(
                        || {
                            format!(
                                "problem `{}`: cannot apply {} #{} ({})",
                                problem.id,
                                if decoy { "decoy" } else { "fault" },
                                i,
                                f.primitive.name()
                            )
                        },
                    )?;
                    undos[*i] = Some(undo);
                    record_of[*i] = Some(records.len());
                    records.push(Injection {
                        primitive: f.primitive.name().to_string(),
                        target: f.primitive.target_ref(),
                        params: f.primitive.params(),
                        onset: instant(sim.now()),
                        reverted: None,
                        decoy,
                    });
                }
                Action::Revert(i) => {
                    if let Some(u) = undos[*i].take() {
                        faults::revert(&mut sim.world, u);
                        if let Some(r) = record_of[*i] {
                            records[r].reverted = Some(instant(sim.now()));
                        }
                    }
                }
                Action::NoiseOn(i) => {
                    let n = &noise_plan[*i];
                    noise_undos[*i] = Some(faults::apply_noise(
                        &mut sim.world,
                        &sim.app,
                        &n.kind,
                        &n.target,
                    ));
                }
                Action::NoiseOff(i) => {
                    if let Some(u) = noise_undos[*i].take() {
                        faults::revert(&mut sim.world, u);
                    }
                }
            }
            next += 1;
        }
        sim.step();
        for row in sim.drain() {
            sink(row)?;
        }
        progress((t + 1) as u64, total_secs as u64);
    }
    // The last step's rows (log lines inside that second, spans ending after it) stay inside.
    let end_ns = start_ns + (total_secs + 30) * NS_PER_SEC;
    let onset_ns = records
        .iter()
        .filter(|r| !r.decoy)
        .map(|r| r.onset.timestamp_nanos_opt().unwrap_or(0))
        .min()
        .unwrap_or(start_ns + baseline * NS_PER_SEC);
    Ok(Outcome {
        window: TimeWindow {
            start: instant(start_ns),
            end: instant(end_ns),
        },
        namespaces: sim.namespaces.clone(),
        injections: records,
        noise: noise_plan
            .iter()
            .map(|n| NoiseEvent {
                kind: n.kind.name().to_string(),
                target: format!("deployment/{}", n.target),
                start: instant(start_ns) + Duration::milliseconds(n.start.as_millis() as i64),
                end: instant(start_ns) + Duration::milliseconds(n.end.as_millis() as i64),
            })
            .collect(),
        onset_ns,
        simulated_secs: total_secs,
        entry: sim.entry_totals(),
    })
}

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
    if dataset_dir.exists() {
        bail!(
            "{} already exists: choose another --out or remove it",
            dataset_dir.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut writer = datasets::DatasetWriter::create(&dataset_dir)
        .with_context(|| format!("cannot create dataset {}", dataset_dir.display()))?;
    let outcome = simulate(
        catalog,
        problem,
        opts,
        &mut |row| writer.push(row).map_err(anyhow::Error::from),
        progress,
    )?;
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
    let tables = read_tables(&dataset_dir)?;
    let checks: Vec<VisibilityCheck> = problem
        .visibility
        .iter()
        .map(|e| visibility::check(&tables, e, outcome.onset_ns))
        .collect();
    let leaks = leak::scan(&tables, &leak::markers(&problem.id));
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
    })
}

/// Every table of a written dataset, as rows.
pub fn read_tables(dir: &Path) -> anyhow::Result<Tables> {
    let ds = datasets::Dataset::open(dir)
        .with_context(|| format!("cannot open dataset {}", dir.display()))?;
    let mut rows = vec![];
    for t in Table::ALL {
        rows.extend(
            ds.read_rows(t)
                .with_context(|| format!("cannot read table {t} of {}", dir.display()))?,
        );
    }
    Ok(Tables::from_rows(rows))
}
