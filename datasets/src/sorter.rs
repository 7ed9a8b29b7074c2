//! The external sort behind [`crate::DatasetWriter`]: rows of every table arrive in any order and
//! leave each table sorted by its key, in memory that does not grow with their number.
//!
//! Rows are encoded into Arrow chunks as they arrive, each with its sort key as order-preserving
//! bytes ([`crate::sort_key`]): a group many rows share (a series, a container), stored once and
//! ranked once per sort, and a short tail (time, id). When the chunks of all tables together
//! reach the memory budget, the largest table's are sorted (by key bytes, ties in arrival order)
//! and spilled to a run file (Arrow IPC, the keys as a last column). Runs are merged in tiers
//! while rows keep coming, and a table's file is written from one last merge, or straight from
//! memory when nothing spilled.
//! Sorting and merging gather rows with Arrow's `interleave`, never turning them back into rows.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::compute::interleave_record_batch;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::record_batch::RecordBatch;
use arrow_array::builder::BinaryBuilder;
use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, BinaryArray};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use rustc_hash::FxHashMap;
use schemas::tables::{Row, Table};

use crate::encode::encode;
use crate::error::{DatasetError, Result};
use crate::sort_key::split_sort_key;
use crate::writer::WriterConfig;

/// Rows per encoded chunk, and at most per batch of a run file.
const CHUNK_ROWS: usize = 8 * 1024;

/// About the bytes of one batch of a run file: a merge holds one batch of each run it merges
/// (and those its pending output draws from), so heavy rows (spans, with their attribute maps)
/// get fewer rows per batch than light ones.
const RUN_BATCH_BYTES: usize = 1 << 20;

/// The run files' extra column: each row's sort key.
const KEY_COLUMN: &str = "__sort_key";

/// One table's rows between arrival and its file.
#[derive(Default)]
struct TableBuffer {
    /// Rows not encoded yet (fewer than a chunk).
    rows: Vec<Row>,
    /// Encoded chunks, in arrival order.
    batches: Vec<RecordBatch>,
    /// The distinct groups of the buffered rows' keys (a series, a container, an object): many
    /// rows share one, so each is stored once and the sort compares them once.
    group_ids: FxHashMap<Box<[u8]>, u32>,
    groups: Vec<Box<[u8]>>,
    /// Per buffered row, in arrival order: its group, and the end of its key's tail in `tails`.
    row_groups: Vec<u32>,
    tails: Vec<u8>,
    tail_ends: Vec<usize>,
    /// The current row's group, before it is looked up.
    scratch: Vec<u8>,
    /// Bytes of `batches` and the keys: this table's share of the budget.
    bytes: usize,
    /// Sorted runs on disk with their tier (0 = spilled from memory), tiers non-increasing.
    runs: Vec<(PathBuf, u32)>,
    /// Run files created so far, for unique names.
    created: usize,
    /// Rows received in all.
    received: u64,
    /// Bytes an encoded row takes, as the last chunk had it.
    row_bytes: usize,
}

impl TableBuffer {
    /// Rows per batch of this table's run files.
    fn run_batch_rows(&self, chunk_rows: usize) -> usize {
        (RUN_BATCH_BYTES / self.row_bytes.max(1)).clamp(256, chunk_rows.max(256))
    }

    fn len(&self) -> usize {
        self.row_groups.len()
    }

    /// Takes a row's key; returns the bytes it holds.
    fn add_key(&mut self, row: &Row) -> usize {
        let before = self.tails.len();
        self.scratch.clear();
        split_sort_key(row, &mut self.scratch, &mut self.tails);
        self.tail_ends.push(self.tails.len());
        let mut added = self.tails.len() - before + size_of::<usize>() + size_of::<u32>();
        let id = match self.group_ids.get(self.scratch.as_slice()) {
            Some(id) => *id,
            None => {
                let id = self.groups.len() as u32;
                let group: Box<[u8]> = self.scratch.as_slice().into();
                added += 2 * group.len() + 32;
                self.group_ids.insert(group.clone(), id);
                self.groups.push(group);
                id
            }
        };
        self.row_groups.push(id);
        added
    }

    fn tail(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.tail_ends[i - 1] };
        &self.tails[start..self.tail_ends[i]]
    }

    /// Arrival indices in sort order; equal keys keep their arrival order.
    fn sorted(&self) -> Vec<usize> {
        let mut by_bytes: Vec<usize> = (0..self.groups.len()).collect();
        by_bytes.sort_unstable_by(|&a, &b| self.groups[a].cmp(&self.groups[b]));
        let mut rank = vec![0u32; self.groups.len()];
        for (r, &g) in by_bytes.iter().enumerate() {
            rank[g] = r as u32;
        }
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_by(|&a, &b| {
            let (ga, gb) = (self.row_groups[a] as usize, self.row_groups[b] as usize);
            rank[ga]
                .cmp(&rank[gb])
                .then_with(|| self.tail(a).cmp(self.tail(b)))
        });
        order
    }

    /// Forgets the buffered rows (they went to a run or a file).
    fn clear(&mut self) {
        self.batches.clear();
        self.group_ids = FxHashMap::default();
        self.groups = Vec::new();
        self.row_groups = Vec::new();
        self.tails = Vec::new();
        self.tail_ends = Vec::new();
    }

    /// The (chunk, row in chunk) of every arrival index.
    fn locations(&self) -> Vec<(usize, usize)> {
        self.batches
            .iter()
            .enumerate()
            .flat_map(|(b, batch)| (0..batch.num_rows()).map(move |r| (b, r)))
            .collect()
    }

    /// The buffered rows in sort order, `batch_rows` at a time, with their keys when asked.
    fn sorted_batches(
        &self,
        batch_rows: usize,
        with_keys: Option<&SchemaRef>,
        mut out: impl FnMut(RecordBatch) -> Result<()>,
        path: &Path,
    ) -> Result<()> {
        let order = self.sorted();
        let at = self.locations();
        let chunks: Vec<&RecordBatch> = self.batches.iter().collect();
        let arrow = |e| DatasetError::arrow(path, e);
        let mut key = Vec::new();
        for part in order.chunks(batch_rows.max(1)) {
            let picks: Vec<(usize, usize)> = part.iter().map(|&i| at[i]).collect();
            let batch = interleave_record_batch(&chunks, &picks).map_err(arrow)?;
            out(match with_keys {
                None => batch,
                Some(schema) => {
                    let mut keys = BinaryBuilder::new();
                    for &i in part {
                        key.clear();
                        key.extend_from_slice(&self.groups[self.row_groups[i] as usize]);
                        key.extend_from_slice(self.tail(i));
                        keys.append_value(&key);
                    }
                    with_key_column(schema, batch, Arc::new(keys.finish())).map_err(arrow)?
                }
            })?;
        }
        Ok(())
    }

    /// Encodes the rows not in a chunk yet; returns the bytes that added.
    fn encode_pending(&mut self, table: Table, runs_dir: &Path) -> Result<usize> {
        if self.rows.is_empty() {
            return Ok(0);
        }
        let batch = encode(table, &self.rows).map_err(|e| DatasetError::arrow(runs_dir, e))?;
        self.rows.clear();
        let bytes = batch.get_array_memory_size();
        self.row_bytes = bytes / batch.num_rows().max(1);
        self.bytes += bytes;
        self.batches.push(batch);
        Ok(bytes)
    }

    /// Sorts the encoded rows into a new tier-0 run on disk; returns the bytes that freed.
    fn spill(&mut self, table: Table, runs_dir: &Path, chunk_rows: usize) -> Result<usize> {
        if self.batches.is_empty() {
            return Ok(0);
        }
        let path = run_path(runs_dir, table, self);
        let mut run = RunWriter::create(table, &path)?;
        let schema = run.schema.clone();
        let batch_rows = self.run_batch_rows(chunk_rows);
        self.sorted_batches(batch_rows, Some(&schema), |b| run.write(&b), &path)?;
        run.finish()?;
        self.clear();
        self.runs.push((path, 0));
        Ok(std::mem::take(&mut self.bytes))
    }
}

/// Sorts every table of one dataset; run files go to `runs_dir`.
pub(crate) struct Sorter {
    runs_dir: PathBuf,
    config: WriterConfig,
    buffers: BTreeMap<Table, TableBuffer>,
    /// Bytes held by every table's chunks and keys.
    held: usize,
}

impl Sorter {
    /// A sorter for some of the tables (it is handed their rows only).
    pub fn new(runs_dir: PathBuf, config: WriterConfig, tables: &[Table]) -> Self {
        Sorter {
            runs_dir,
            config,
            buffers: tables
                .iter()
                .map(|t| (*t, TableBuffer::default()))
                .collect(),
            held: 0,
        }
    }

    fn chunk_rows(&self) -> usize {
        self.config.batch_rows.clamp(1, CHUNK_ROWS)
    }

    fn buffer(&mut self, table: Table) -> &mut TableBuffer {
        self.buffers
            .get_mut(&table)
            .expect("a sorter is handed rows of its own tables only")
    }

    /// Takes rows of any tables, spilling whatever the budget requires.
    pub fn push(&mut self, rows: Vec<Row>) -> Result<()> {
        let chunk_rows = self.chunk_rows();
        for row in rows {
            let table = row.table();
            let buffer = self.buffer(table);
            let added = buffer.add_key(&row);
            buffer.rows.push(row);
            buffer.received += 1;
            buffer.bytes += added;
            let (pending, buffered) = (buffer.rows.len(), buffer.len());
            self.held += added;
            if pending >= chunk_rows {
                self.encode_pending(table)?;
            }
            let full = if buffered >= self.config.spill_rows {
                Some(table)
            } else if self.held >= self.config.memory_bytes {
                self.buffers
                    .iter()
                    .max_by_key(|(_, b)| b.bytes)
                    .map(|(t, _)| *t)
            } else {
                None
            };
            if let Some(full) = full {
                self.spill(full)?;
                self.compact(full)?;
            }
        }
        Ok(())
    }

    /// Encodes the rows of a table that are not in a chunk yet.
    fn encode_pending(&mut self, table: Table) -> Result<()> {
        let runs_dir = self.runs_dir.clone();
        self.held += self.buffer(table).encode_pending(table, &runs_dir)?;
        Ok(())
    }

    /// Sorts a table's buffered rows into a new tier-0 run on disk.
    fn spill(&mut self, table: Table) -> Result<()> {
        let (runs_dir, chunk_rows) = (self.runs_dir.clone(), self.chunk_rows());
        let buffer = self.buffer(table);
        let added = buffer.encode_pending(table, &runs_dir)?;
        let freed = buffer.spill(table, &runs_dir, chunk_rows)?;
        self.held = self.held + added - freed;
        Ok(())
    }

    /// Merges the newest `merge_fan_in` runs into one of the next tier while they share a tier.
    fn compact(&mut self, table: Table) -> Result<()> {
        let fan_in = self.config.merge_fan_in.max(2);
        let (runs_dir, chunk_rows) = (self.runs_dir.clone(), self.chunk_rows());
        let buffer = self.buffer(table);
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
            let path = run_path(&runs_dir, table, buffer);
            let mut run = RunWriter::create(table, &path)?;
            let batch_rows = buffer.run_batch_rows(chunk_rows);
            merge_runs(&inputs, batch_rows, true, |b| run.write(&b))?;
            run.finish()?;
            remove_runs(&inputs)?;
            buffer.runs.push((path, tier + 1));
        }
        Ok(())
    }

    /// Every table's rows, each to be drained into its file on its own (in parallel if need be).
    pub fn into_tables(self) -> Vec<TableSort> {
        let chunk_rows = self.chunk_rows();
        self.buffers
            .into_iter()
            .map(|(table, buffer)| TableSort {
                table,
                buffer,
                runs_dir: self.runs_dir.clone(),
                chunk_rows,
                batch_rows: self.config.batch_rows.max(1),
            })
            .collect()
    }
}

/// One table's sorted rows, ready to go to its file.
pub(crate) struct TableSort {
    pub table: Table,
    buffer: TableBuffer,
    runs_dir: PathBuf,
    chunk_rows: usize,
    batch_rows: usize,
}

impl TableSort {
    /// Whether the table got any row.
    pub fn received(&self) -> bool {
        self.buffer.received > 0
    }

    /// Roughly how much work draining is, to start the largest tables first.
    pub fn weight(&self) -> u64 {
        self.buffer.received
    }

    /// Writes the table's rows, sorted, into `out`, `batch_rows` at a time.
    pub fn drain_sorted(mut self, out: &mut crate::TableFileWriter) -> Result<()> {
        let (table, runs_dir) = (self.table, self.runs_dir.clone());
        let buffer = &mut self.buffer;
        buffer.encode_pending(table, &runs_dir)?;
        let path = out.path().to_path_buf();
        if buffer.runs.is_empty() {
            return buffer.sorted_batches(self.batch_rows, None, |b| out.write(&b), &path);
        }
        // The last rows join the final merge as a run of their own: compacting first would only
        // read them twice.
        buffer.spill(table, &runs_dir, self.chunk_rows)?;
        let runs: Vec<PathBuf> = buffer.runs.drain(..).map(|(p, _)| p).collect();
        merge_runs(&runs, self.batch_rows, false, |b| out.write(&b))?;
        remove_runs(&runs)
    }
}

fn remove_runs(runs: &[PathBuf]) -> Result<()> {
    runs.iter()
        .try_for_each(|run| std::fs::remove_file(run).map_err(|e| DatasetError::io(run, e)))
}

/// The schema of a table's run files: its columns and the key.
fn run_schema(table: Table) -> SchemaRef {
    let schema = table.schema();
    let mut fields: Vec<Arc<Field>> = schema.fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(KEY_COLUMN, DataType::Binary, false)));
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

fn with_key_column(
    schema: &SchemaRef,
    batch: RecordBatch,
    keys: ArrayRef,
) -> std::result::Result<RecordBatch, ArrowError> {
    let mut columns = batch.columns().to_vec();
    columns.push(keys);
    RecordBatch::try_new(schema.clone(), columns)
}

/// The next run file of a table.
fn run_path(runs_dir: &Path, table: Table, buffer: &mut TableBuffer) -> PathBuf {
    buffer.created += 1;
    runs_dir.join(format!("{}-{}.arrow", table.name(), buffer.created))
}

/// A sorted run being written as Arrow IPC.
struct RunWriter {
    path: PathBuf,
    schema: SchemaRef,
    writer: FileWriter<BufWriter<File>>,
}

impl RunWriter {
    fn create(table: Table, path: &Path) -> Result<Self> {
        let schema = run_schema(table);
        let file = File::create(path).map_err(|e| DatasetError::io(path, e))?;
        let writer = FileWriter::try_new(BufWriter::with_capacity(1 << 18, file), &schema)
            .map_err(|e| DatasetError::arrow(path, e))?;
        Ok(RunWriter {
            path: path.to_path_buf(),
            schema,
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

/// Reads one sorted run batch by batch.
struct RunCursor {
    path: PathBuf,
    reader: FileReader<BufReader<File>>,
    batch: RecordBatch,
    keys: BinaryArray,
    pos: usize,
    /// Where the merge keeps `batch` among the batches its pending output draws from.
    slot: usize,
}

impl RunCursor {
    /// The run at `path` positioned on its first row; `None` when it holds none.
    fn open(path: &Path) -> Result<Option<Self>> {
        let file = File::open(path).map_err(|e| DatasetError::io(path, e))?;
        let reader = FileReader::try_new(BufReader::new(file), None)
            .map_err(|e| DatasetError::arrow(path, e))?;
        let mut cursor = RunCursor {
            path: path.to_path_buf(),
            reader,
            batch: RecordBatch::new_empty(Arc::new(Schema::empty())),
            keys: BinaryArray::from_iter_values(std::iter::empty::<&[u8]>()),
            pos: 0,
            slot: 0,
        };
        Ok(cursor.next_batch()?.then_some(cursor))
    }

    /// Loads the next batch that has rows; false at the end of the run.
    fn next_batch(&mut self) -> Result<bool> {
        for batch in self.reader.by_ref() {
            let batch = batch.map_err(|e| DatasetError::arrow(&self.path, e))?;
            if batch.num_rows() == 0 {
                continue;
            }
            let keys = batch
                .column(batch.num_columns() - 1)
                .as_binary_opt::<i32>()
                .ok_or_else(|| DatasetError::invalid(&self.path, "a run without its key column"))?
                .clone();
            self.batch = batch;
            self.keys = keys;
            self.pos = 0;
            return Ok(true);
        }
        Ok(false)
    }

    fn key(&self) -> &[u8] {
        self.keys.value(self.pos)
    }
}

/// Merges sorted runs into batches of `batch_rows` (with the key column when `keep_keys`, for a
/// run of the next tier). Ties go to the earlier run, so the merge is stable. It holds the current
/// batch of each run and those the pending output still draws from.
fn merge_runs(
    runs: &[PathBuf],
    batch_rows: usize,
    keep_keys: bool,
    mut out: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    let mut cursors = Vec::new();
    for path in runs {
        cursors.extend(RunCursor::open(path)?);
    }
    let mut slots: Vec<RecordBatch> = Vec::new();
    let mut heap = BinaryHeap::new();
    for (i, c) in cursors.iter_mut().enumerate() {
        c.slot = slots.len();
        slots.push(c.batch.clone());
        heap.push(Reverse((c.key().to_vec(), i)));
    }
    let mut picks: Vec<(usize, usize)> = Vec::with_capacity(batch_rows);
    let emit = |slots: &[RecordBatch], picks: &[(usize, usize)]| -> Result<RecordBatch> {
        let refs: Vec<&RecordBatch> = slots.iter().collect();
        let arrow = |e| DatasetError::arrow(&runs[0], e);
        let batch = interleave_record_batch(&refs, picks).map_err(arrow)?;
        if keep_keys {
            return Ok(batch);
        }
        let columns: Vec<usize> = (0..batch.num_columns() - 1).collect();
        batch.project(&columns).map_err(arrow)
    };
    while let Some(Reverse((mut key, run))) = heap.pop() {
        let cursor = &mut cursors[run];
        picks.push((cursor.slot, cursor.pos));
        cursor.pos += 1;
        let mut live = true;
        if cursor.pos == cursor.batch.num_rows() {
            live = cursor.next_batch()?;
            if live {
                cursor.slot = slots.len();
                slots.push(cursor.batch.clone());
            }
        }
        if live {
            key.clear();
            key.extend_from_slice(cursor.key());
            heap.push(Reverse((key, run)));
        }
        if picks.len() >= batch_rows.max(1) {
            out(emit(&slots, &picks)?)?;
            picks.clear();
            // Only the runs' current batches are drawn from from here on.
            slots.clear();
            for c in &mut cursors {
                c.slot = slots.len();
                slots.push(c.batch.clone());
            }
        }
    }
    if !picks.is_empty() {
        out(emit(&slots, &picks)?)?;
    }
    Ok(())
}
