//! `DatasetWriter`: takes rows of every table in any order and produces a complete dataset directory.
//!
//! Rows are handed in chunks to sorting threads ([`crate::sorter`]), so whoever produces them
//! (the simulator, a capture) goes on while they are encoded and sorted, and memory stays bounded
//! whatever the volume: past the budget, sorted runs spill to disk and `finish` merges them
//! straight into the Parquet files. Everything is written inside a hidden sibling directory that
//! is renamed into place only after every file and the manifest are fsynced, so a crash never
//! leaves something a reader would take for a dataset.
//!
//! Every required table is written, empty or not; an optional table (`audit`) is written when it got
//! rows or was asked for with [`DatasetWriter::include`], so a dataset without it stays as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use chrono::{DateTime, Utc};
use schemas::manifest::Generator;
use schemas::tables::{Row, Table};
use schemas::{DATASET_FORMAT_NAME, DATASET_FORMAT_VERSION, Manifest, TableEntry, TimeWindow};
use sha2::{Digest, Sha256};

use crate::error::{DatasetError, Result};
use crate::sorter::{Sorter, TableSort};
use crate::table_file::{TableFileWriter, WriteOptions};
use crate::{MANIFEST_FILE, fsync_dir, sha256_file, write_atomically};

/// Rows handed to the sorting thread at once.
const HANDOFF_ROWS: usize = 4 * 1024;
/// Hand-offs queued for a sorting thread before `push` waits for it.
const HANDOFFS_QUEUED: usize = 4;

/// Sorting threads: metric samples (most of a dataset's rows) on one, every other table on the
/// other.
const LANES: usize = 2;

fn lane(table: Table) -> usize {
    usize::from(table != Table::Metrics)
}

/// One sorting thread and the rows gathered for it.
struct Lane {
    handoff: Vec<Row>,
    to_sorter: Option<SyncSender<Vec<Row>>>,
    sorter: Option<JoinHandle<Result<Sorter>>>,
}

impl Lane {
    fn start(number: usize, runs: PathBuf, config: WriterConfig) -> std::io::Result<Lane> {
        let tables: Vec<Table> = Table::every().filter(|t| lane(*t) == number).collect();
        let (to_sorter, handoffs) = sync_channel::<Vec<Row>>(HANDOFFS_QUEUED);
        let sorter = std::thread::Builder::new()
            .name("dataset-sorter".into())
            .spawn(move || {
                let mut sorter = Sorter::new(runs, config, &tables);
                for rows in handoffs {
                    sorter.push(rows)?;
                }
                Ok(sorter)
            })?;
        Ok(Lane {
            handoff: Vec::with_capacity(HANDOFF_ROWS),
            to_sorter: Some(to_sorter),
            sorter: Some(sorter),
        })
    }

    /// Sends the gathered rows to the sorting thread; false if it has stopped.
    fn hand_off(&mut self) -> bool {
        let rows = std::mem::replace(&mut self.handoff, Vec::with_capacity(HANDOFF_ROWS));
        self.to_sorter
            .as_ref()
            .is_some_and(|tx| tx.send(rows).is_ok())
    }

    /// Waits for the sorting thread to take every row handed to it, and takes it back.
    fn join(&mut self, dir: &Path) -> Result<Sorter> {
        self.to_sorter = None;
        match self.sorter.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            _ => Err(DatasetError::invalid(
                dir,
                "the dataset's sorting thread stopped",
            )),
        }
    }
}

/// What the manifest says about a dataset beyond its tables.
#[derive(Debug, Clone)]
pub struct DatasetInfo {
    pub environment: String,
    pub application: Option<String>,
    pub namespaces: Vec<String>,
    pub window: TimeWindow,
    pub virtual_now: DateTime<Utc>,
}

/// Tuning of the writer; the defaults suit datasets of any size on a small machine.
#[derive(Debug, Clone, Copy)]
pub struct WriterConfig {
    pub file: WriteOptions,
    /// Bytes the tables together hold in memory (encoded rows and their sort keys) before the
    /// largest spills a sorted run to disk.
    pub memory_bytes: usize,
    /// Rows one table holds before it spills, whatever their size.
    pub spill_rows: usize,
    /// Rows per batch handed to the table files (and at most this many per encoded chunk).
    pub batch_rows: usize,
    /// Runs merged at once. Runs are merged in tiers (this many runs of one size become one run of
    /// the next), so a merge holds one batch of at most `merge_fan_in` runs and a long write
    /// never accumulates more than `merge_fan_in` runs per tier.
    pub merge_fan_in: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            file: WriteOptions::default(),
            memory_bytes: 128 << 20,
            spill_rows: usize::MAX,
            batch_rows: 8 * 1024,
            merge_fan_in: 16,
        }
    }
}

/// Writes one dataset directory. Drop it without `finish` and the partial directory is removed.
pub struct DatasetWriter {
    final_dir: PathBuf,
    tmp_dir: PathBuf,
    config: WriterConfig,
    /// Optional tables to write even if they get no rows.
    included: Vec<Table>,
    lanes: Vec<Lane>,
    finished: bool,
}

impl DatasetWriter {
    /// Starts a dataset that will appear at `dir`, which must not exist yet.
    pub fn create(dir: &Path) -> Result<Self> {
        Self::with_config(dir, WriterConfig::default())
    }

    pub fn with_config(dir: &Path, config: WriterConfig) -> Result<Self> {
        if dir.exists() {
            return Err(DatasetError::invalid(
                dir,
                "already exists; choose a new output directory",
            ));
        }
        let name = dir
            .file_name()
            .ok_or_else(|| DatasetError::invalid(dir, "is not a directory name"))?
            .to_string_lossy()
            .into_owned();
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| DatasetError::io(&parent, e))?;
        remove_abandoned(&parent, &name);
        let tmp_dir = parent.join(format!(".{name}.partial-{}", std::process::id()));
        if tmp_dir.exists() {
            std::fs::remove_dir_all(&tmp_dir).map_err(|e| DatasetError::io(&tmp_dir, e))?;
        }
        let runs = tmp_dir.join(".runs");
        std::fs::create_dir_all(&runs).map_err(|e| DatasetError::io(&runs, e))?;
        // Each lane keeps to its share of the budget.
        let lane_config = WriterConfig {
            memory_bytes: config.memory_bytes / LANES,
            ..config
        };
        let lanes = (0..LANES)
            .map(|number| Lane::start(number, runs.clone(), lane_config))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| DatasetError::io(&tmp_dir, e))?;
        Ok(DatasetWriter {
            final_dir: dir.to_path_buf(),
            tmp_dir,
            config,
            included: Vec::new(),
            lanes,
            finished: false,
        })
    }

    /// Writes an optional table even if it gets no rows: "recorded, nothing happened" rather
    /// than "not recorded". Required tables are always written.
    pub fn include(&mut self, table: Table) {
        if table.is_optional() && !self.included.contains(&table) {
            self.included.push(table);
        }
    }

    /// Adds one row to its table.
    pub fn push(&mut self, row: Row) -> Result<()> {
        let lane = lane(row.table());
        let handoff = &mut self.lanes[lane].handoff;
        handoff.push(row);
        if handoff.len() >= HANDOFF_ROWS {
            self.hand_off(lane)?;
        }
        Ok(())
    }

    /// Adds many rows.
    pub fn extend(&mut self, rows: impl IntoIterator<Item = Row>) -> Result<()> {
        rows.into_iter().try_for_each(|row| self.push(row))
    }

    /// Sends a lane's gathered rows to its sorting thread; its error if it has stopped.
    fn hand_off(&mut self, lane: usize) -> Result<()> {
        if self.lanes[lane].hand_off() {
            return Ok(());
        }
        self.lanes[lane].join(&self.tmp_dir).map(|_| ())
    }

    /// Waits for every sorting thread to take the rows handed to it, and takes them back.
    fn join_sorters(&mut self) -> Result<Vec<Sorter>> {
        let dir = self.tmp_dir.clone();
        let joined: Vec<Result<Sorter>> = self.lanes.iter_mut().map(|l| l.join(&dir)).collect();
        joined.into_iter().collect()
    }

    /// Writes each table's file, the largest first (`tables` sorted by weight), as many at once
    /// as there are cores: the sorted rows are merged and encoded only now, after the last row
    /// came.
    fn write_tables(&self, tables: Vec<TableSort>) -> Result<BTreeMap<Table, TableEntry>> {
        let written = Mutex::new(BTreeMap::new());
        let write = |sort: TableSort| -> Result<()> {
            let table = sort.table;
            let path = self.tmp_dir.join(table.file_name());
            let mut file = TableFileWriter::create(&path, table, self.config.file)?;
            sort.drain_sorted(&mut file)?;
            let rows = file.finish()?;
            let entry = table_entry(table, &path, rows)?;
            written.lock().expect("results lock").insert(table, entry);
            Ok(())
        };
        crate::parallel::work_off(tables, self.config.file.threads, write, || {
            DatasetError::invalid(&self.tmp_dir, "a table writer panicked")
        })?;
        Ok(written.into_inner().expect("results lock"))
    }

    /// Sorts and writes every table, writes the manifest, and moves the directory into place.
    pub fn finish(mut self, info: DatasetInfo) -> Result<Manifest> {
        for lane in 0..self.lanes.len() {
            if !self.lanes[lane].handoff.is_empty() {
                self.hand_off(lane)?;
            }
        }
        let mut tables: Vec<TableSort> = self
            .join_sorters()?
            .into_iter()
            .flat_map(Sorter::into_tables)
            .filter(|t| !t.table.is_optional() || self.included.contains(&t.table) || t.received())
            .collect();
        tables.sort_by_key(TableSort::weight);
        let tables = self.write_tables(tables)?;
        let runs = self.tmp_dir.join(".runs");
        std::fs::remove_dir(&runs).map_err(|e| DatasetError::io(&runs, e))?;

        let manifest = Manifest {
            format: DATASET_FORMAT_NAME.to_string(),
            schema_version: DATASET_FORMAT_VERSION,
            dataset_id: dataset_id(&tables),
            environment: info.environment,
            application: info.application,
            namespaces: info.namespaces,
            window: info.window,
            virtual_now: info.virtual_now,
            generator: Generator {
                name: "faultline".to_string(),
                version: env!("CARGO_PKG_VERSION").to_string(),
            },
            tables,
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
        write_atomically(&self.tmp_dir.join(MANIFEST_FILE), &json)?;
        fsync_dir(&self.tmp_dir)?;
        if self.final_dir.exists() {
            return Err(DatasetError::invalid(
                &self.final_dir,
                "appeared while the dataset was being written; the new data is left in place at \
                 the hidden .partial sibling",
            ));
        }
        std::fs::rename(&self.tmp_dir, &self.final_dir)
            .map_err(|e| DatasetError::io(&self.final_dir, e))?;
        if let Some(parent) = self.final_dir.parent() {
            fsync_dir(if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            })?;
        }
        self.finished = true;
        Ok(manifest)
    }
}

/// Removes the `.NAME.partial-PID` directories that writers killed before they could clean up
/// (kill -9 runs no destructor) left in `parent`: those whose process is gone. Only where
/// `/proc` tells which processes live; a directory of a live writer is never touched.
fn remove_abandoned(parent: &Path, name: &str) {
    let proc_dir = Path::new("/proc");
    if !proc_dir.join("self").exists() {
        return;
    }
    let prefix = format!(".{name}.partial-");
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !proc_dir.join(pid.to_string()).exists() {
            tracing::info!(
                "removing {}, left by a writer that was killed",
                entry.path().display()
            );
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for DatasetWriter {
    fn drop(&mut self) {
        if !self.finished {
            // The sorting thread writes runs inside the directory: it ends before it goes.
            let _ = self.join_sorters();
            let _ = std::fs::remove_dir_all(&self.tmp_dir);
        }
    }
}

/// The manifest entry of a finished table file holding `rows` rows.
pub fn table_entry(table: Table, path: &Path, rows: u64) -> Result<TableEntry> {
    let bytes = std::fs::metadata(path)
        .map_err(|e| DatasetError::io(path, e))?
        .len();
    Ok(TableEntry {
        file: table.file_name(),
        rows,
        bytes,
        sha256: sha256_file(path)?,
    })
}

/// The opaque id: a digest of the tables' checksums, so identical data gets an identical id and the
/// id says nothing about how the data was made.
pub fn dataset_id(tables: &BTreeMap<Table, TableEntry>) -> String {
    let mut hasher = Sha256::new();
    for (table, entry) in tables {
        hasher.update(table.name());
        hasher.update(entry.sha256.as_bytes());
    }
    format!("ds-{}", &hex::encode(hasher.finalize())[..20])
}
