//! One table's Parquet file: the write properties every faultline file shares (ZSTD set explicitly,
//! dictionary encoding, page statistics, format metadata) and a writer that encodes the columns of
//! each row group on several threads at once.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory,
    ArrowWriterOptions, compute_leaves,
};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use schemas::tables::columns::spans;
use schemas::tables::{META_SCHEMA_VERSION, META_SORT_KEY, META_TABLE, Table};

use crate::error::{DatasetError, Result};

/// How table files are encoded.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// ZSTD level (1 = fastest). Level 3 costs little more CPU than 1 and shrinks repetitive
    /// telemetry noticeably.
    pub zstd_level: i32,
    /// Rows per row group: small enough that replay can skip most of a file by its statistics.
    pub row_group_rows: usize,
    /// Threads that encode columns in parallel.
    pub threads: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            zstd_level: 3,
            row_group_rows: 256 * 1024,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// Writer properties for a table file.
pub fn properties(table: Table, opts: &WriteOptions) -> Result<WriterProperties, String> {
    let level = ZstdLevel::try_new(opts.zstd_level).map_err(|e| e.to_string())?;
    let kv = vec![
        KeyValue::new(META_TABLE.to_string(), table.name().to_string()),
        KeyValue::new(
            META_SCHEMA_VERSION.to_string(),
            schemas::DATASET_FORMAT_VERSION.to_string(),
        ),
        KeyValue::new(META_SORT_KEY.to_string(), table.sort_key().join(",")),
    ];
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_dictionary_enabled(true)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(opts.row_group_rows))
        .set_key_value_metadata(Some(kv))
        .set_created_by(format!("faultline datasets {}", env!("CARGO_PKG_VERSION")));
    if table == Table::Spans {
        // Trace lookups by id are the commonest selective read of the spans table.
        builder = builder.set_column_bloom_filter_enabled(ColumnPath::from(spans::TRACE_ID), true);
    }
    Ok(builder.build())
}

/// Writes record batches of one table into one Parquet file, a row group at a time.
pub struct TableFileWriter {
    path: PathBuf,
    table: Table,
    writer: SerializedFileWriter<BufWriter<File>>,
    factory: ArrowRowGroupWriterFactory,
    opts: WriteOptions,
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    row_groups: usize,
    rows: u64,
}

impl TableFileWriter {
    /// Creates (truncates) the file at `path`.
    pub fn create(path: &Path, table: Table, opts: WriteOptions) -> Result<Self> {
        let file = File::create(path).map_err(|e| DatasetError::io(path, e))?;
        let props = properties(table, &opts).map_err(|m| DatasetError::invalid(path, m))?;
        let writer = ArrowWriter::try_new_with_options(
            BufWriter::with_capacity(1 << 20, file),
            table.schema(),
            ArrowWriterOptions::new().with_properties(props),
        )
        .and_then(ArrowWriter::into_serialized_writer)
        .map_err(|e| DatasetError::parquet(path, e))?;
        let (writer, factory) = writer;
        Ok(TableFileWriter {
            path: path.to_path_buf(),
            table,
            writer,
            factory,
            opts,
            pending: Vec::new(),
            pending_rows: 0,
            row_groups: 0,
            rows: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a batch; full row groups are encoded and written as they fill, so memory stays at
    /// about one row group.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.schema().fields() != self.table.schema().fields() {
            return Err(DatasetError::invalid(
                &self.path,
                format!(
                    "batch schema does not match the {} table: got {:?}",
                    self.table,
                    batch.schema()
                ),
            ));
        }
        let mut offset = 0;
        while offset < batch.num_rows() {
            let take =
                (self.opts.row_group_rows - self.pending_rows).min(batch.num_rows() - offset);
            self.pending.push(batch.slice(offset, take));
            self.pending_rows += take;
            offset += take;
            if self.pending_rows == self.opts.row_group_rows {
                self.flush_row_group()?;
            }
        }
        Ok(())
    }

    fn flush_row_group(&mut self) -> Result<()> {
        if self.pending_rows == 0 {
            return Ok(());
        }
        let path = self.path.clone();
        let pq = |e| DatasetError::parquet(&path, e);
        let writers = self
            .factory
            .create_column_writers(self.row_groups)
            .map_err(pq)?;
        let schema = self.table.schema();
        let mut jobs: Vec<Job> = writers
            .into_iter()
            .map(|writer| Job {
                writer,
                leaves: Vec::new(),
                weight: 0,
            })
            .collect();
        for batch in self.pending.drain(..) {
            let mut leaf_index = 0;
            for (field, column) in schema.fields().iter().zip(batch.columns()) {
                let leaves = compute_leaves(field, column).map_err(pq)?;
                let weight = column.get_array_memory_size() / leaves.len().max(1);
                for leaf in leaves {
                    let job = &mut jobs[leaf_index];
                    job.leaves.push(leaf);
                    job.weight += weight;
                    leaf_index += 1;
                }
            }
        }
        let chunks = encode_in_parallel(jobs, self.opts.threads).map_err(pq)?;
        let mut row_group = self.writer.next_row_group().map_err(pq)?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group).map_err(pq)?;
        }
        row_group.close().map_err(pq)?;
        self.rows += self.pending_rows as u64;
        self.pending_rows = 0;
        self.row_groups += 1;
        Ok(())
    }

    /// Writes the last row group and the footer, and fsyncs the file. Returns the row count.
    pub fn finish(mut self) -> Result<u64> {
        self.flush_row_group()?;
        let path = self.path.clone();
        let buffered = self
            .writer
            .into_inner()
            .map_err(|e| DatasetError::parquet(&path, e))?;
        let file = buffered
            .into_inner()
            .map_err(|e| DatasetError::io(&path, e.into_error()))?;
        file.sync_all().map_err(|e| DatasetError::io(&path, e))?;
        Ok(self.rows)
    }
}

/// One leaf column of a row group waiting to be encoded.
struct Job {
    writer: ArrowColumnWriter,
    leaves: Vec<ArrowLeafColumn>,
    /// Approximate bytes to encode, to hand the largest columns out first.
    weight: usize,
}

/// Encodes every leaf column, `threads` at a time, largest first; returns the chunks in schema order.
fn encode_in_parallel(
    jobs: Vec<Job>,
    threads: usize,
) -> parquet::errors::Result<Vec<ArrowColumnChunk>> {
    let count = jobs.len();
    let mut queue: Vec<(usize, Job)> = jobs.into_iter().enumerate().collect();
    queue.sort_by_key(|(_, job)| job.weight);
    let queue = Mutex::new(queue);
    let done: Mutex<Vec<Option<ArrowColumnChunk>>> = Mutex::new((0..count).map(|_| None).collect());
    let encode_one = |mut job: Job| -> parquet::errors::Result<ArrowColumnChunk> {
        for leaf in &job.leaves {
            job.writer.write(leaf)?;
        }
        job.writer.close()
    };
    let worker = || -> parquet::errors::Result<()> {
        loop {
            let next = queue.lock().expect("queue lock").pop();
            let Some((index, job)) = next else {
                return Ok(());
            };
            let chunk = encode_one(job)?;
            done.lock().expect("results lock")[index] = Some(chunk);
        }
    };
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads.clamp(1, count.max(1)))
            .map(|_| scope.spawn(worker))
            .collect();
        let mut result = worker();
        for helper in helpers {
            let joined = helper.join().expect("encoder thread panicked");
            result = result.and(joined);
        }
        result
    })?;
    Ok(done
        .into_inner()
        .expect("results lock")
        .into_iter()
        .map(|chunk| chunk.expect("every column encoded"))
        .collect())
}
