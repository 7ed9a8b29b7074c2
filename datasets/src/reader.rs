//! Reading a dataset: the manifest, each table as Arrow batches, typed rows, or a polars LazyFrame.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
#[cfg(feature = "polars")]
use polars::prelude::{LazyFrame, PlRefPath, ScanArgsParquet};
use schemas::tables::{Row, Table};
use schemas::{DATASET_FORMAT_NAME, DATASET_FORMAT_VERSION, Manifest, TableEntry};

use crate::MANIFEST_FILE;
use crate::encode::decode;
use crate::error::{DatasetError, Result};
use crate::in_place::{Bound, chunk_bounds, leaf_index};

/// An opened dataset directory. Opening reads and checks the manifest only; [`crate::validate()`]
/// checks the files.
#[derive(Debug, Clone)]
pub struct Dataset {
    dir: PathBuf,
    manifest: Manifest,
}

impl Dataset {
    /// Opens a dataset: reads the manifest and checks that every table file it names lies in
    /// the directory. The files themselves are checked by [`Dataset::open_verified`] (or the
    /// whole dataset by [`crate::validate()`]).
    pub fn open(dir: &Path) -> Result<Self> {
        let manifest = read_manifest(dir)?;
        Ok(Dataset {
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    /// Opens a dataset to serve or read it whole: also checks every table file's size,
    /// SHA-256 and row count against the manifest (files hashed side by side), so a damaged or
    /// altered file is refused here rather than met by a reader later.
    pub fn open_verified(dir: &Path) -> Result<Self> {
        let ds = Dataset::open(dir)?;
        let entries: Vec<(Table, &TableEntry)> =
            ds.manifest.tables.iter().map(|(t, e)| (*t, e)).collect();
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
        let chunk = entries.len().div_ceil(workers).max(1);
        std::thread::scope(|scope| {
            let handles: Vec<_> = entries
                .chunks(chunk)
                .map(|part| {
                    let ds = &ds;
                    scope.spawn(move || {
                        part.iter()
                            .try_for_each(|(table, entry)| ds.verify_file(*table, entry))
                    })
                })
                .collect();
            handles
                .into_iter()
                .try_for_each(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        })?;
        Ok(ds)
    }

    /// One table file against its manifest entry: size, checksum, rows in the footer.
    fn verify_file(&self, table: Table, entry: &TableEntry) -> Result<()> {
        let path = self.path(table)?;
        let meta = std::fs::metadata(&path).map_err(|e| DatasetError::io(&path, e))?;
        if meta.len() != entry.bytes {
            return Err(DatasetError::invalid(
                &path,
                format!(
                    "is {} bytes, the manifest says {} (the file was changed or damaged;                      `collector dataset validate` tells more)",
                    meta.len(),
                    entry.bytes
                ),
            ));
        }
        let sum = crate::sha256_file(&path)?;
        if sum != entry.sha256 {
            return Err(DatasetError::invalid(
                &path,
                format!(
                    "checksum mismatch: sha256 is {sum}, the manifest says {} (the file was                      changed or damaged)",
                    entry.sha256
                ),
            ));
        }
        let file = File::open(&path).map_err(|e| DatasetError::io(&path, e))?;
        let rows = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| DatasetError::parquet(&path, e))?
            .metadata()
            .file_metadata()
            .num_rows();
        if u64::try_from(rows).ok() != Some(entry.rows) {
            return Err(DatasetError::invalid(
                &path,
                format!("holds {rows} rows, the manifest says {}", entry.rows),
            ));
        }
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn entry(&self, table: Table) -> Result<&TableEntry> {
        self.manifest.tables.get(&table).ok_or_else(|| {
            DatasetError::invalid(
                self.dir.join(MANIFEST_FILE),
                format!("tables: no `{table}` table"),
            )
        })
    }

    /// The path of a table's file; the manifest's name was checked to be a plain file name,
    /// and a symbolic link out of the directory is refused here.
    pub fn path(&self, table: Table) -> Result<PathBuf> {
        let path = self.dir.join(&self.entry(table)?.file);
        if let (Ok(real), Ok(dir)) = (path.canonicalize(), self.dir.canonicalize())
            && !real.starts_with(&dir)
        {
            return Err(DatasetError::invalid(
                &path,
                format!(
                    "leads out of the dataset directory (to {}); table files must lie inside it",
                    real.display()
                ),
            ));
        }
        Ok(path)
    }

    /// Streams a table as record batches of up to `batch_rows` rows.
    pub fn batches(&self, table: Table, batch_rows: usize) -> Result<ParquetRecordBatchReader> {
        let path = self.path(table)?;
        let file = File::open(&path).map_err(|e| DatasetError::io(&path, e))?;
        ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.with_batch_size(batch_rows).build())
            .map_err(|e| DatasetError::parquet(&path, e))
    }

    /// Reads a whole table as record batches.
    pub fn read_batches(&self, table: Table) -> Result<Vec<RecordBatch>> {
        let path = self.path(table)?;
        self.batches(table, 64 * 1024)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| DatasetError::arrow(&path, e))
    }

    /// Reads a whole table as typed rows, in file (sort) order.
    pub fn read_rows(&self, table: Table) -> Result<Vec<Row>> {
        let path = self.path(table)?;
        let mut rows = Vec::new();
        for batch in self.batches(table, 64 * 1024)? {
            let batch = batch.map_err(|e| DatasetError::arrow(&path, e))?;
            rows.extend(decode(table, &batch).map_err(|e| DatasetError::arrow(&path, e))?);
        }
        Ok(rows)
    }

    #[cfg(feature = "polars")]
    /// A polars LazyFrame over a table, for analysis. Run `collect()` off async threads (polars
    /// blocks).
    pub fn lazy(&self, table: Table) -> Result<LazyFrame> {
        let path = self.path(table)?;
        let polars_err = |e: polars::error::PolarsError| DatasetError::Polars {
            path: path.clone(),
            message: e.to_string(),
        };
        let pl_path = PlRefPath::try_from_path(&path).map_err(polars_err)?;
        LazyFrame::scan_parquet(pl_path, ScanArgsParquet::default()).map_err(polars_err)
    }

    /// Earliest and latest value of the table's time column (ns since the epoch), from the Parquet
    /// statistics alone.
    pub fn time_range(&self, table: Table) -> Result<Option<(i64, i64)>> {
        let Some(column) = table.time_column() else {
            return Ok(None);
        };
        let path = self.path(table)?;
        let file = File::open(&path).map_err(|e| DatasetError::io(&path, e))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| DatasetError::parquet(&path, e))?;
        let meta = builder.metadata();
        let index = leaf_index(meta.file_metadata().schema_descr(), column)
            .ok_or_else(|| DatasetError::invalid(&path, format!("no `{column}` column")))?;
        let mut range: Option<(i64, i64)> = None;
        // Unlike `TableFile::time_bounds`, row groups without statistics are passed over.
        for rg in meta.row_groups() {
            if let Some((Bound::I64(lo), Bound::I64(hi))) =
                chunk_bounds(rg.column(index).statistics())
            {
                range = Some(match range {
                    None => (lo, hi),
                    Some((a, b)) => (a.min(lo), b.max(hi)),
                });
            }
        }
        Ok(range)
    }
}

/// Reads and checks `manifest.json` of a dataset directory.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST_FILE);
    if !dir.is_dir() {
        return Err(DatasetError::invalid(dir, "is not a directory"));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => DatasetError::invalid(
            dir,
            "has no manifest.json: not a dataset (or an incomplete one)",
        ),
        _ => DatasetError::io(&path, e),
    })?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| {
        DatasetError::invalid(
            &path,
            format!("line {} column {}: {e}", e.line(), e.column()),
        )
    })?;
    if manifest.format != DATASET_FORMAT_NAME {
        return Err(DatasetError::invalid(
            &path,
            format!(
                "format: expected `{DATASET_FORMAT_NAME}`, found `{}`",
                manifest.format
            ),
        ));
    }
    for (table, entry) in &manifest.tables {
        schemas::paths::check_plain_name(&entry.file).map_err(|why| {
            DatasetError::invalid(
                &path,
                format!("tables.{table}.file: `{}` {why}", entry.file),
            )
        })?;
    }
    if manifest.schema_version != DATASET_FORMAT_VERSION {
        return Err(DatasetError::invalid(
            &path,
            format!(
                "schema_version: this faultline reads version {DATASET_FORMAT_VERSION}, the \
                 dataset is version {}",
                manifest.schema_version
            ),
        ));
    }
    Ok(manifest)
}
