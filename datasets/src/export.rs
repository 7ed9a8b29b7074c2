//! Export of a table to JSON Lines or CSV, for people without Parquet tools.
//!
//! JSON Lines keeps maps as JSON objects and timestamps as RFC 3339 strings. CSV has no nested
//! values, so each map cell becomes a JSON object in one text cell.

use std::io::Write;
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
