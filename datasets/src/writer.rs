//! `DatasetWriter`: takes rows of every table in any order and produces a complete dataset directory.
//!
//! Memory stays bounded whatever the volume: each table buffers at most `spill_rows` rows; a full
//! buffer is sorted and spilled to a temporary Arrow IPC run, and `finish` merges the runs in sort
//! order straight into the Parquet file. Everything is written inside a hidden sibling directory that
//! is renamed into place only after every file and the manifest are fsynced, so a crash never leaves
//! something a reader would take for a dataset.
//!
//! Every required table is written, empty or not; an optional table (`audit`) is written when it got
//! rows or was asked for with [`DatasetWriter::include`], so a dataset without it stays as it was.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, Utc};
use schemas::manifest::Generator;
use schemas::tables::{Row, Table};
use schemas::{DATASET_FORMAT_NAME, DATASET_FORMAT_VERSION, Manifest, TableEntry, TimeWindow};
use sha2::{Digest, Sha256};

use crate::encode::{cmp_rows, decode, encode};
use crate::error::{DatasetError, Result};
use crate::table_file::{TableFileWriter, WriteOptions};
use crate::{MANIFEST_FILE, fsync_dir, sha256_file, write_atomically};

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
    /// Rows a table buffers before it spills a sorted run to disk.
    pub spill_rows: usize,
    /// Rows per batch when encoding sorted rows.
    pub batch_rows: usize,
    /// Runs merged at once. Runs are merged in tiers (this many runs of one size become one run of
    /// the next), so a merge holds at most `merge_fan_in` batches in memory and a long write
    /// never accumulates more than `merge_fan_in` runs per tier.
    pub merge_fan_in: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            file: WriteOptions::default(),
            spill_rows: 1 << 20,
            batch_rows: 64 * 1024,
            merge_fan_in: 16,
        }
    }
}

#[derive(Default)]
struct TableBuffer {
    rows: Vec<Row>,
    /// Sorted runs on disk with their tier (0 = spilled from memory), tiers non-increasing.
    runs: Vec<(PathBuf, u32)>,
    /// Run files created so far, for unique names.
    created: usize,
}

/// Writes one dataset directory. Drop it without `finish` and the partial directory is removed.
pub struct DatasetWriter {
    final_dir: PathBuf,
    tmp_dir: PathBuf,
    config: WriterConfig,
    buffers: BTreeMap<Table, TableBuffer>,
    /// Optional tables to write even if they get no rows.
    included: Vec<Table>,
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
        Ok(DatasetWriter {
            final_dir: dir.to_path_buf(),
            tmp_dir,
            config,
            buffers: Table::every()
                .map(|t| (t, TableBuffer::default()))
                .collect(),
            included: Vec::new(),
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

    /// Whether `finish` writes the table's file.
    fn writes(&self, table: Table) -> bool {
        !table.is_optional()
            || self.included.contains(&table)
            || self
                .buffers
                .get(&table)
                .is_some_and(|b| !b.rows.is_empty() || !b.runs.is_empty())
    }

    /// Adds one row to its table.
    pub fn push(&mut self, row: Row) -> Result<()> {
        let table = row.table();
        let buffer = self
            .buffers
            .get_mut(&table)
            .expect("every table has a buffer");
        buffer.rows.push(row);
        if buffer.rows.len() >= self.config.spill_rows {
            self.spill(table)?;
            self.compact(table)?;
        }
        Ok(())
    }

    /// Adds many rows.
    pub fn extend(&mut self, rows: impl IntoIterator<Item = Row>) -> Result<()> {
        rows.into_iter().try_for_each(|row| self.push(row))
    }

    /// Sorts the buffered rows of a table into a new tier-0 run on disk.
    fn spill(&mut self, table: Table) -> Result<()> {
        let buffer = self
            .buffers
            .get_mut(&table)
            .expect("every table has a buffer");
        let path = run_path(&self.tmp_dir, table, buffer);
        let mut rows = std::mem::take(&mut buffer.rows);
        rows.sort_by(cmp_rows);
        let mut run = RunWriter::create(table, &path)?;
        for chunk in rows.chunks(self.config.batch_rows) {
            run.write(&encode(table, chunk).map_err(|e| DatasetError::arrow(&path, e))?)?;
        }
        run.finish()?;
        buffer.runs.push((path, 0));
        Ok(())
    }

    /// Merges the newest `merge_fan_in` runs into one of the next tier while they share a tier.
    fn compact(&mut self, table: Table) -> Result<()> {
        let fan_in = self.config.merge_fan_in.max(2);
        let buffer = self
            .buffers
            .get_mut(&table)
            .expect("every table has a buffer");
        while buffer.runs.len() >= fan_in {
            let newest = &buffer.runs[buffer.runs.len() - fan_in..];
            let tier = newest[0].1;
            if newest.iter().any(|(_, t)| *t != tier) {
                break;
            }
            let inputs: Vec<PathBuf> = buffer
                .runs
                .drain(buffer.runs.len() - fan_in..)
                .map(|(p, _)| p)
                .collect();
            let path = run_path(&self.tmp_dir, table, buffer);
            let mut run = RunWriter::create(table, &path)?;
            merge_runs(table, &inputs, self.config.batch_rows, |b| run.write(b))?;
            run.finish()?;
            for input in inputs {
                std::fs::remove_file(&input).map_err(|e| DatasetError::io(&input, e))?;
            }
            buffer.runs.push((path, tier + 1));
        }
        Ok(())
    }

    /// Sorts and writes every table, writes the manifest, and moves the directory into place.
    pub fn finish(mut self, info: DatasetInfo) -> Result<Manifest> {
        let mut tables = BTreeMap::new();
        for table in Table::every() {
            if !self.writes(table) {
                continue;
            }
            let path = self.tmp_dir.join(table.file_name());
            let mut file = TableFileWriter::create(&path, table, self.config.file)?;
            let buffer = self
                .buffers
                .get_mut(&table)
                .expect("every table has a buffer");
            if buffer.runs.is_empty() {
                let mut rows = std::mem::take(&mut buffer.rows);
                rows.sort_by(cmp_rows);
                for chunk in rows.chunks(self.config.batch_rows) {
                    let batch = encode(table, chunk).map_err(|e| DatasetError::arrow(&path, e))?;
                    file.write(&batch)?;
                }
            } else {
                // The last rows join the final merge as they are: compacting first would only
                // read them twice.
                if !buffer.rows.is_empty() {
                    self.spill(table)?;
                }
                let runs: Vec<PathBuf> =
                    std::mem::take(&mut self.buffers.get_mut(&table).unwrap().runs)
                        .into_iter()
                        .map(|(p, _)| p)
                        .collect();
                merge_runs(table, &runs, self.config.batch_rows, |b| file.write(b))?;
                for run in runs {
                    std::fs::remove_file(&run).map_err(|e| DatasetError::io(&run, e))?;
                }
            }
            let rows = file.finish()?;
            tables.insert(table, table_entry(table, &path, rows)?);
        }
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

/// A run's next row, ordered for a min-heap; ties go to the earlier run so the merge is stable.
struct Head {
    row: Row,
    run: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_rows(&other.row, &self.row).then(other.run.cmp(&self.run))
    }
}

/// Reads one sorted run batch by batch.
struct RunCursor {
    path: PathBuf,
    reader: FileReader<BufReader<File>>,
    rows: std::vec::IntoIter<Row>,
    table: Table,
}

impl RunCursor {
    fn open(table: Table, path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| DatasetError::io(path, e))?;
        let reader = FileReader::try_new(BufReader::new(file), None)
            .map_err(|e| DatasetError::arrow(path, e))?;
        Ok(RunCursor {
            path: path.to_path_buf(),
            reader,
            rows: Vec::new().into_iter(),
            table,
        })
    }

    fn next_row(&mut self) -> Result<Option<Row>> {
        loop {
            if let Some(row) = self.rows.next() {
                return Ok(Some(row));
            }
            match self.reader.next() {
                None => return Ok(None),
                Some(batch) => {
                    let batch = batch.map_err(|e| DatasetError::arrow(&self.path, e))?;
                    self.rows = decode(self.table, &batch)
                        .map_err(|e| DatasetError::arrow(&self.path, e))?
                        .into_iter();
                }
            }
        }
    }
}

/// The next run file of a table.
fn run_path(tmp_dir: &Path, table: Table, buffer: &mut TableBuffer) -> PathBuf {
    buffer.created += 1;
    tmp_dir
        .join(".runs")
        .join(format!("{}-{}.arrow", table.name(), buffer.created))
}

/// A sorted run being written as Arrow IPC.
struct RunWriter {
    path: PathBuf,
    writer: FileWriter<BufWriter<File>>,
}

impl RunWriter {
    fn create(table: Table, path: &Path) -> Result<Self> {
        let file = File::create(path).map_err(|e| DatasetError::io(path, e))?;
        let writer = FileWriter::try_new(BufWriter::new(file), &table.schema())
            .map_err(|e| DatasetError::arrow(path, e))?;
        Ok(RunWriter {
            path: path.to_path_buf(),
            writer,
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.writer
            .write(batch)
            .map_err(|e| DatasetError::arrow(&self.path, e))
    }

    fn finish(mut self) -> Result<()> {
        self.writer
            .finish()
            .map_err(|e| DatasetError::arrow(&self.path, e))
    }
}

/// Merges sorted runs into `out`, batch by batch: at most one batch per run is held.
fn merge_runs(
    table: Table,
    runs: &[PathBuf],
    batch_rows: usize,
    mut out: impl FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    let mut cursors = runs
        .iter()
        .map(|p| RunCursor::open(table, p))
        .collect::<Result<Vec<_>>>()?;
    let mut heap = BinaryHeap::new();
    for (run, cursor) in cursors.iter_mut().enumerate() {
        if let Some(row) = cursor.next_row()? {
            heap.push(Head { row, run });
        }
    }
    let mut batch = Vec::with_capacity(batch_rows);
    let encoded = |rows: &[Row]| encode(table, rows).map_err(|e| DatasetError::arrow(&runs[0], e));
    while let Some(Head { row, run }) = heap.pop() {
        batch.push(row);
        if let Some(next) = cursors[run].next_row()? {
            heap.push(Head { row: next, run });
        }
        if batch.len() == batch_rows {
            out(&encoded(&batch)?)?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        out(&encoded(&batch)?)?;
    }
    Ok(())
}
