//! One table's Parquet file: the write properties every faultline file shares (ZSTD set explicitly,
//! dictionary encoding, page statistics, format metadata) and a writer that encodes the columns of
//! each batch on several threads at once, straight into the open row group.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{
    ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory, ArrowWriterOptions,
    compute_leaves,
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

/// Writes record batches of one table into one Parquet file, a row group at a time. Each batch
/// is encoded into the open row group's column writers as it comes, so memory holds the encoded
/// pages of one row group, not its rows.
pub struct TableFileWriter {
    path: PathBuf,
    table: Table,
    writer: SerializedFileWriter<BufWriter<File>>,
    factory: ArrowRowGroupWriterFactory,
    opts: WriteOptions,
    /// The open row group's column writers, one per leaf column.
    columns: Option<Vec<ArrowColumnWriter>>,
    /// Rows in the open row group.
    open_rows: usize,
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
            columns: None,
            open_rows: 0,
            row_groups: 0,
            rows: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a batch; a row group is closed and written as it fills.
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
            let take = (self.opts.row_group_rows - self.open_rows).min(batch.num_rows() - offset);
            self.encode(&batch.slice(offset, take))?;
            offset += take;
            if self.open_rows == self.opts.row_group_rows {
                self.flush_row_group()?;
            }
        }
        Ok(())
    }

    /// Encodes a batch into the open row group, its columns on several threads.
    fn encode(&mut self, batch: &RecordBatch) -> Result<()> {
        let path = self.path.clone();
        let pq = |e| DatasetError::parquet(&path, e);
        let writers = match &mut self.columns {
            Some(writers) => writers,
            None => self.columns.insert(
                self.factory
                    .create_column_writers(self.row_groups)
                    .map_err(pq)?,
            ),
        };
        let mut jobs: Vec<Job> = Vec::with_capacity(writers.len());
        let mut writers = writers.iter_mut();
        for (field, column) in self.table.schema().fields().iter().zip(batch.columns()) {
            let leaves = compute_leaves(field, column).map_err(pq)?;
            let weight = column.get_array_memory_size() / leaves.len().max(1);
            for leaf in leaves {
                let writer = writers.next().expect("a writer per leaf column");
                jobs.push(Job {
                    writer,
                    leaf,
                    weight,
                });
            }
        }
        encode_in_parallel(jobs, self.opts.threads).map_err(pq)?;
        self.open_rows += batch.num_rows();
        Ok(())
    }

    fn flush_row_group(&mut self) -> Result<()> {
        let Some(writers) = self.columns.take() else {
            return Ok(());
        };
        let path = self.path.clone();
        let pq = |e| DatasetError::parquet(&path, e);
        let mut row_group = self.writer.next_row_group().map_err(pq)?;
        for writer in writers {
            writer
                .close()
                .map_err(pq)?
                .append_to_row_group(&mut row_group)
                .map_err(pq)?;
        }
        row_group.close().map_err(pq)?;
        self.rows += self.open_rows as u64;
        self.open_rows = 0;
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

/// One leaf column of a batch waiting to be encoded.
struct Job<'a> {
    writer: &'a mut ArrowColumnWriter,
    leaf: ArrowLeafColumn,
    /// Approximate bytes to encode, to hand the largest columns out first.
    weight: usize,
}

/// Encodes every leaf column, `threads` at a time, largest first.
fn encode_in_parallel(mut jobs: Vec<Job<'_>>, threads: usize) -> parquet::errors::Result<()> {
    jobs.sort_by_key(|job| job.weight);
    crate::parallel::work_off(
        jobs,
        threads,
        |job| job.writer.write(&job.leaf),
        || panic!("encoder thread panicked"),
    )
}
