//! Export of a table to JSON Lines or CSV, for people without Parquet tools.
//!
//! JSON Lines keeps maps as JSON objects and timestamps as RFC 3339 strings. CSV has no nested
//! values, so each map cell becomes a JSON object in one text cell.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use schemas::tables::Table;

use crate::error::{DatasetError, Result};
use crate::reader::Dataset;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    JsonLines,
    Csv,
}

/// Writes every row of `table` to `out`; returns the number of rows written.
pub fn export(dataset: &Dataset, table: Table, format: Format, out: impl Write) -> Result<u64> {
    let path = dataset.path(table)?;
    let arrow = |e| DatasetError::arrow(&path, e);
    let mut rows = 0u64;
    match format {
        Format::JsonLines => {
            let mut writer = arrow::json::LineDelimitedWriter::new(out);
            for batch in dataset.batches(table, 8192)? {
                let batch = batch.map_err(arrow)?;
                rows += batch.num_rows() as u64;
                writer.write(&batch).map_err(arrow)?;
            }
            writer.finish().map_err(arrow)?;
        }
        Format::Csv => {
            let mut writer = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(out);
            for batch in dataset.batches(table, 8192)? {
                let batch = maps_as_json(&batch.map_err(arrow)?).map_err(arrow)?;
                rows += batch.num_rows() as u64;
                writer.write(&batch).map_err(arrow)?;
            }
        }
    }
    Ok(rows)
}

/// Replaces each `Map<Utf8, Utf8>` column by a Utf8 column of JSON objects.
fn maps_as_json(batch: &RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if let DataType::Map(..) = field.data_type() {
            let map = column.as_map();
            let keys = map.keys().as_string::<i32>();
            let values = map.values().as_string::<i32>();
            let mut out = StringBuilder::new();
            for i in 0..map.len() {
                let offsets = map.value_offsets();
                let obj: serde_json::Map<String, serde_json::Value> = (offsets[i] as usize
                    ..offsets[i + 1] as usize)
                    .map(|j| {
                        let v = if values.is_null(j) {
                            serde_json::Value::Null
                        } else {
                            values.value(j).into()
                        };
                        (keys.value(j).to_string(), v)
                    })
                    .collect();
                out.append_value(serde_json::Value::Object(obj).to_string());
            }
            fields.push(Field::new(field.name(), DataType::Utf8, false));
            columns.push(Arc::new(out.finish()));
        } else {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// Exports one table into `path`, written beside it under a hidden name and renamed into place once
/// complete: a failed or killed export leaves no partial file where a reader would take it for
/// complete. Returns the rows written.
pub fn to_file(ds: &Dataset, table: Table, fmt: Format, path: &Path) -> Result<u64> {
    let name = path
        .file_name()
        .ok_or_else(|| DatasetError::invalid(path, "not a file name"))?;
    let tmp = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    let file = std::fs::File::create(&tmp).map_err(|e| DatasetError::io(&tmp, e))?;
    let mut writer = std::io::BufWriter::new(file);
    let result = export(ds, table, fmt, &mut writer).and_then(|rows| {
        writer
            .flush()
            .map(|()| rows)
            .map_err(|e| DatasetError::io(&tmp, e))
    });
    match result {
        Ok(rows) => {
            std::fs::rename(&tmp, path).map_err(|e| DatasetError::io(path, e))?;
            Ok(rows)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Exports several tables into `out_dir`, one file each (`TABLE.ext`). They are written in a
/// hidden sibling directory first: a new `out_dir` appears whole (one rename); into an existing one
/// each file is moved once every file is complete. A failed or killed export leaves no partial set.
/// Returns each file written with its rows.
pub fn to_dir(
    ds: &Dataset,
    tables: &[Table],
    fmt: Format,
    ext: &str,
    out_dir: &Path,
) -> Result<Vec<(PathBuf, u64)>> {
    let name = out_dir
        .file_name()
        .ok_or_else(|| DatasetError::invalid(out_dir, "not a directory name"))?
        .to_string_lossy()
        .into_owned();
    let parent = match out_dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
    let staging = parent.join(format!(".{name}.partial-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir(&staging).map_err(|e| DatasetError::io(&staging, e))?;
    let written = write_all(ds, tables, fmt, ext, &staging).and_then(|written| {
        if out_dir.exists() {
            for (file, _) in &written {
                std::fs::rename(staging.join(file), out_dir.join(file))
                    .map_err(|e| DatasetError::io(out_dir.join(file), e))?;
            }
            Ok(written)
        } else {
            std::fs::rename(&staging, out_dir)
                .map(|()| written)
                .map_err(|e| DatasetError::io(out_dir, e))
        }
    });
    // Whatever is left of the staging directory (all of it when anything failed) goes.
    let _ = std::fs::remove_dir_all(&staging);
    Ok(written?
        .into_iter()
        .map(|(file, rows)| (out_dir.join(file), rows))
        .collect())
}

fn write_all(
    ds: &Dataset,
    tables: &[Table],
    fmt: Format,
    ext: &str,
    dir: &Path,
) -> Result<Vec<(String, u64)>> {
    tables
        .iter()
        .map(|table| {
            let file = format!("{}.{ext}", table.name());
            to_file(ds, *table, fmt, &dir.join(&file)).map(|rows| (file, rows))
        })
        .collect()
}
