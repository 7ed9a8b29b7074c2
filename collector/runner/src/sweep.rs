//! Many snapshots at once: every (problem, seed) pair of a selection, run on a fixed number of
//! worker threads, each into `OUT/<problem>/seed-<n>/`, summarised in `OUT/index.json`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use problems::{Catalog, ProblemSpec};
use serde::Serialize;

use super::snapshot::{self, Options};

/// One run of a sweep, as listed in the index.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub problem: String,
    pub application: String,
    pub seed: u64,
    pub dir: PathBuf,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataset_id: Option<String>,
    pub checks_passed: usize,
    pub checks_total: usize,
    pub leaks: usize,
    pub wall_secs: f64,
}

/// The sweep index written to `OUT/index.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Index {
    pub runs: Vec<Entry>,
    pub failed: usize,
    pub checks_failed: usize,
}

/// Runs `problems` × seeds `1..=seeds` on `jobs` threads; `done` is called after each run.
pub fn sweep(
    catalog: &Catalog,
    problems: &[&ProblemSpec],
    seeds: u64,
    jobs: usize,
    base: &Options,
    out: &Path,
    done: &(dyn Fn(&Entry) + Sync),
) -> anyhow::Result<Index> {
    std::fs::create_dir_all(out)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", out.display()))?;
    let work: Vec<(&ProblemSpec, u64)> = problems
        .iter()
        .flat_map(|p| (1..=seeds).map(move |s| (*p, s)))
        .collect();
    let queue = Mutex::new(work.into_iter().enumerate().collect::<Vec<_>>());
    let results: Mutex<Vec<(usize, Entry)>> = Mutex::new(vec![]);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let Some((i, (p, seed))) = queue.lock().expect("queue lock").pop() else {
                        break;
                    };
                    let dir = out.join(&p.id).join(format!("seed-{seed}"));
                    let opts = Options {
                        seed,
                        ..base.clone()
                    };
                    let entry = match snapshot::snapshot(catalog, p, &opts, &dir, &mut |_, _| {}) {
                        Ok(r) => Entry {
                            problem: p.id.clone(),
                            application: p.application.clone(),
                            seed,
                            dir: dir.clone(),
                            ok: true,
                            error: None,
                            dataset_id: Some(r.dataset_id.clone()),
                            checks_passed: r.checks_passed(),
                            checks_total: r.checks.len(),
                            leaks: r.leaks.len(),
                            wall_secs: r.wall_secs,
                        },
                        Err(e) => Entry {
                            problem: p.id.clone(),
                            application: p.application.clone(),
                            seed,
                            dir: dir.clone(),
                            ok: false,
                            error: Some(format!("{e:#}")),
                            dataset_id: None,
                            checks_passed: 0,
                            checks_total: p.visibility.len(),
                            leaks: 0,
                            wall_secs: 0.0,
                        },
                    };
                    done(&entry);
                    results.lock().expect("results lock").push((i, entry));
                }
            });
        }
    });
    let mut runs = results.into_inner().expect("results lock");
    runs.sort_by_key(|(i, _)| *i);
    let runs: Vec<Entry> = runs.into_iter().map(|(_, e)| e).collect();
    let index = Index {
        failed: runs.iter().filter(|r| !r.ok).count(),
        checks_failed: runs
            .iter()
            .filter(|r| r.ok && r.checks_passed < r.checks_total)
            .count(),
        runs,
    };
    datasets::write_atomically(&out.join("index.json"), &serde_json::to_vec_pretty(&index)?)?;
    Ok(index)
}
