//! Many snapshots: every (problem, seed) pair of a selection, the run `<problem>/seed-<n>` of a
//! results store (a directory or object storage, see [`results::Store`]), on a fixed number of
//! worker threads. The work list is split into shards that every shard computes alike, a run
//! already in the store is not made again (a sweep resumes), and each run is made in a scratch
//! directory and published whole. [`merge`] reads the store back into the index, with the runs
//! still missing.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context;
use futures_util::{StreamExt, TryStreamExt};
use problems::{Catalog, ProblemSpec};
use results::{Plan, Published, Shard, Store};
use serde::{Deserialize, Serialize};

use super::snapshot::{self, Options};

/// Each run's summary, written into it (and so into its store marker).
pub const ENTRY_FILE: &str = "sweep.json";
/// The index a whole sweep (or a merge) writes at the store's root.
pub const INDEX_FILE: &str = "index.json";

/// One run of a sweep, as listed in the index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub problem: String,
    pub application: String,
    pub seed: u64,
    /// Where in the store: `<problem>/seed-<n>`.
    pub key: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_id: Option<String>,
    pub checks_passed: usize,
    pub checks_total: usize,
    pub leaks: usize,
    pub wall_secs: f64,
}

/// The sweep index.
#[derive(Debug, Clone, Serialize)]
pub struct Index {
    pub runs: Vec<Entry>,
    pub failed: usize,
    pub checks_failed: usize,
    /// Runs of the plan not in the store (yet): their keys.
    pub missing: Vec<String>,
}

/// What a sweep (one shard of it) sets out to do.
pub struct Sweep<'a> {
    pub catalog: &'a Catalog,
    pub problems: Vec<&'a ProblemSpec>,
    pub seeds: u64,
    pub base: Options,
    pub jobs: usize,
    pub shard: Shard,
}

/// What one shard did.
#[derive(Debug, Default)]
pub struct ShardReport {
    /// Runs made now (failed snapshots included: a failure is their result).
    pub made: Vec<Entry>,
    /// This shard's runs found in the store.
    pub resumed: usize,
    /// Runs made but not stored, with why: worth another try.
    pub unstored: Vec<(String, String)>,
    /// Runs another writer had stored first.
    pub raced: usize,
}

/// The run key of a problem and seed.
pub fn key(problem: &str, seed: u64) -> String {
    format!("{problem}/seed-{seed}")
}

impl Sweep<'_> {
    /// Every run, in the order shards split them.
    fn work(&self) -> Vec<(&ProblemSpec, u64)> {
        self.problems
            .iter()
            .flat_map(|p| (1..=self.seeds).map(move |s| (*p, s)))
            .collect()
    }

    pub fn plan(&self) -> Plan {
        Plan {
            kind: "sweep".into(),
            settings: serde_json::json!({
                "seeds": self.seeds,
                "duration": self.base.duration.map(|d| d.to_string()),
                "noise": !self.base.no_noise,
            }),
            work: self.work().iter().map(|(p, s)| key(&p.id, *s)).collect(),
        }
    }

    /// Runs this shard's share of the work that the store lacks; `done` is called after each run.
    pub fn run(
        &self,
        store: &Store,
        rt: &tokio::runtime::Handle,
        done: &(dyn Fn(&Entry) + Sync),
    ) -> anyhow::Result<ShardReport> {
        rt.block_on(store.put_plan(&self.plan()))?;
        let mine = self.shard.take(self.work());
        let keys: Vec<String> = mine.iter().map(|(p, s)| key(&p.id, *s)).collect();
        let stored = rt.block_on(store.completed(&keys))?;
        let todo: Vec<_> = mine
            .into_iter()
            .filter(|(p, s)| !stored.contains(&key(&p.id, *s)))
            .collect();
        let scratch = store.scratch(self.shard)?;
        let report = Mutex::new(ShardReport {
            resumed: stored.len(),
            ..ShardReport::default()
        });
        let queue = Mutex::new(todo.into_iter().rev().collect::<Vec<_>>());
        std::thread::scope(|scope| {
            for _ in 0..self.jobs.max(1) {
                scope.spawn(|| {
                    while let Some((p, seed)) = lock(&queue).pop() {
                        let (entry, dir) = self.make(p, seed, &scratch);
                        let stored = dir.and_then(|d| rt.block_on(store.publish(&entry.key, &d)));
                        done(&entry);
                        let mut r = lock(&report);
                        match stored {
                            Ok(Published::Mine) => r.made.push(entry),
                            Ok(Published::AlreadyThere) => r.raced += 1,
                            Err(e) => r.unstored.push((entry.key, format!("{e:#}"))),
                        }
                    }
                });
            }
        });
        // Every run was published (renamed or uploaded and removed) or is reported unstored.
        let _ = std::fs::remove_dir_all(&scratch);
        Ok(report.into_inner().unwrap_or_else(|e| e.into_inner()))
    }

    /// Makes one run in a fresh directory under `scratch`: the snapshot and its entry, or only
    /// the entry of a failed snapshot.
    fn make(&self, p: &ProblemSpec, seed: u64, scratch: &Path) -> (Entry, anyhow::Result<PathBuf>) {
        let dir = scratch.join(uuid::Uuid::new_v4().simple().to_string());
        let opts = Options {
            seed,
            ..self.base.clone()
        };
        let mut entry = Entry {
            problem: p.id.clone(),
            application: p.application.clone(),
            seed,
            key: key(&p.id, seed),
            ok: false,
            error: None,
            dataset_id: None,
            checks_passed: 0,
            checks_total: p.visibility.len(),
            leaks: 0,
            wall_secs: 0.0,
        };
        match snapshot::snapshot(self.catalog, p, &opts, &dir, &mut |_, _| {}) {
            Ok(r) => {
                entry.ok = true;
                entry.dataset_id = Some(r.dataset_id.clone());
                entry.checks_passed = r.checks_passed();
                entry.leaks = r.leaks.len();
                entry.wall_secs = r.wall_secs;
            }
            Err(e) => {
                entry.error = Some(format!("{e:#}"));
                // What a failed snapshot left is not a dataset; its entry says why.
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        let written = std::fs::create_dir_all(&dir)
            .map_err(anyhow::Error::from)
            .and_then(|()| {
                let bytes = serde_json::to_vec_pretty(&entry)?;
                datasets::write_atomically(&dir.join(ENTRY_FILE), &bytes)?;
                Ok(())
            })
            .with_context(|| format!("cannot write {}", dir.display()))
            .map(|()| dir);
        (entry, written)
    }
}

/// The index of everything the store holds of its plan: each stored run's entry, in plan order,
/// and the keys still missing.
pub async fn merge(store: &Store) -> anyhow::Result<Index> {
    let progress = store.progress("sweep").await?;
    let entries: Vec<Entry> = futures_util::stream::iter(&progress.done)
        .map(|k| async move {
            let summary = store.summary(k).await?;
            serde_json::from_value::<Entry>(summary)
                .with_context(|| format!("{k}/{ENTRY_FILE}: not a sweep entry"))
        })
        .buffered(32)
        .try_collect()
        .await?;
    let missing = progress.missing;
    Ok(Index {
        failed: entries.iter().filter(|r| !r.ok).count(),
        checks_failed: entries
            .iter()
            .filter(|r| r.ok && r.checks_passed < r.checks_total)
            .count(),
        runs: entries,
        missing,
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
