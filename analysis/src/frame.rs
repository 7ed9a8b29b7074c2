//! The polars side of the tools: label lookups in `Map<Utf8, Utf8>` columns (polars reads them as
//! lists of `{key, value}` structs), collecting a lazy frame, taking columns out of a frame, and
//! turning a frame into JSON records with times as the session serves them.

use std::collections::BTreeMap;

use polars::prelude::*;
use schemas::tables::Labels;
use schemas::time::Reading;
use serde_json::Value;

use crate::Result;
use crate::params::{Window, served};

/// The value of label `key` in the map column `column` (null when absent).
pub fn label(column: &str, key: &str) -> Expr {
    col(column)
        .list()
        .eval(
            element()
                .struct_()
                .field_by_name("value")
                .filter(element().struct_().field_by_name("key").eq(lit(key))),
        )
        .list()
        .first()
}

/// A timestamp column as Int64 nanoseconds since the epoch.
pub fn nanos(column: &str) -> Expr {
    col(column).cast(DataType::Int64)
}

pub fn collect(lf: LazyFrame) -> Result<DataFrame> {
    Ok(lf.collect()?)
}

/// The rows whose Int64 nanosecond column `column` is inside the window (all of them when it is
/// open; a row without a time is outside any bound).
pub fn within(df: &DataFrame, column: &str, window: &Window) -> Result<DataFrame> {
    if window.is_open() {
        return Ok(df.clone());
    }
    let times = df.column(column)?.cast(&DataType::Int64)?;
    let mask: BooleanChunked = times
        .i64()?
        .iter()
        .map(|t| Some(t.is_some_and(|t| window.contains(t))))
        .collect();
    Ok(df.filter(&mask)?)
}

/// A string column's values.
pub fn strings(df: &DataFrame, name: &str) -> Result<Vec<Option<String>>> {
    Ok(df
        .column(name)?
        .str()?
        .iter()
        .map(|v| v.map(str::to_string))
        .collect())
}

/// A string column's values, absent ones empty.
pub fn strings_or_empty(df: &DataFrame, name: &str) -> Result<Vec<String>> {
    Ok(strings(df, name)?
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect())
}

pub fn ints(df: &DataFrame, name: &str) -> Result<Vec<Option<i64>>> {
    let c = df.column(name)?.cast(&DataType::Int64)?;
    Ok(c.i64()?.iter().collect())
}

/// One row's entries of a map column: (key, value) pairs, borrowed from the frame.
pub type Entries<'a> = [(Option<&'a str>, Option<&'a str>)];

/// Walks the map column `name` row by row without building a map per row (polars reads a
/// `Map<Utf8, Utf8>` as a list of `{key, value}` structs, laid end to end in one array per
/// chunk): `f` gets each row's entries and whether they are the previous row's.
pub fn each_map(df: &DataFrame, name: &str, mut f: impl FnMut(&Entries<'_>, bool)) -> Result<()> {
    let list = df.column(name)?.list()?;
    let mut chunks = Vec::new();
    for chunk in list.downcast_iter() {
        let entries = Series::try_from((PlSmallStr::from(name), chunk.values().clone()))?;
        let entries = entries.struct_()?;
        let keys = entries.field_by_name("key")?.str()?.rechunk().into_owned();
        let values = entries
            .field_by_name("value")?
            .str()?
            .rechunk()
            .into_owned();
        chunks.push((chunk.offsets().as_slice(), keys, values));
    }
    let (mut this, mut before) = (Vec::new(), Vec::new());
    let mut first = true;
    for (offsets, keys, values) in &chunks {
        let arrays = keys
            .downcast_iter()
            .next()
            .zip(values.downcast_iter().next());
        for row in offsets.windows(2) {
            std::mem::swap(&mut this, &mut before);
            this.clear();
            if let Some((k, v)) = arrays {
                this.extend((row[0] as usize..row[1] as usize).map(|j| (k.get(j), v.get(j))));
            }
            f(&this, !first && this == before);
            first = false;
        }
    }
    Ok(())
}

/// The value of the first of `keys` the entries have (as `label` finds it).
pub fn entry<'a>(entries: &Entries<'a>, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|key| {
        entries
            .iter()
            .find(|(k, _)| *k == Some(*key))
            .and_then(|(_, v)| *v)
    })
}

/// The entries as a label set (an entry without a key is left out; one without a value is "").
pub fn label_set(entries: &Entries<'_>) -> Labels {
    entries
        .iter()
        .filter_map(|(k, v)| Some(((*k)?.to_string(), v.unwrap_or_default().to_string())))
        .collect()
}

/// A map column's values as sorted label sets.
pub fn labels(df: &DataFrame, name: &str) -> Result<Vec<Labels>> {
    let mut out = Vec::with_capacity(df.height());
    each_map(df, name, |entries, _| out.push(label_set(entries)))?;
    Ok(out)
}

/// A JSON value of one cell; `time_columns` hold recorded nanoseconds and are answered as
/// served RFC 3339 times.
fn cell(value: AnyValue<'_>, is_time: bool, reading: &Reading) -> Value {
    match value {
        AnyValue::Null => Value::Null,
        AnyValue::Boolean(b) => Value::Bool(b),
        AnyValue::String(s) => Value::String(s.to_string()),
        AnyValue::StringOwned(s) => Value::String(s.to_string()),
        AnyValue::Int64(n) if is_time => Value::String(served(reading, n)),
        AnyValue::Datetime(n, _, _) | AnyValue::DatetimeOwned(n, _, _) => {
            Value::String(served(reading, n))
        }
        AnyValue::Int8(n) => n.into(),
        AnyValue::Int16(n) => n.into(),
        AnyValue::Int32(n) => n.into(),
        AnyValue::Int64(n) => n.into(),
        AnyValue::UInt8(n) => n.into(),
        AnyValue::UInt16(n) => n.into(),
        AnyValue::UInt32(n) => n.into(),
        AnyValue::UInt64(n) => n.into(),
        AnyValue::Float32(f) => number(f64::from(f)),
        AnyValue::Float64(f) => number(f),
        AnyValue::List(series) => {
            Value::Array(series.iter().map(|v| cell(v, is_time, reading)).collect())
        }
        other => Value::String(other.to_string()),
    }
}

/// A float as JSON, rounded to 6 significant decimals for readability; NaN and infinities are
/// null (JSON has no such numbers).
pub fn number(f: f64) -> Value {
    if !f.is_finite() {
        return Value::Null;
    }
    let rounded = if f.abs() >= 1e-6 {
        let digits = 6 - (f.abs().log10().floor() as i32 + 1);
        let scale = 10f64.powi(digits.clamp(0, 12));
        (f * scale).round() / scale
    } else {
        f
    };
    serde_json::Number::from_f64(rounded).map_or(Value::Null, Value::Number)
}

/// The frame's rows as JSON objects, in column order; columns starting with `_` are internal
/// and left out.
pub fn records(df: &DataFrame, time_columns: &[&str], reading: &Reading) -> Vec<Value> {
    let columns: Vec<(&Column, bool)> = df
        .columns()
        .iter()
        .filter(|c| !c.name().starts_with('_'))
        .map(|c| (c, time_columns.contains(&c.name().as_str())))
        .collect();
    (0..df.height())
        .map(|i| {
            let mut row = serde_json::Map::new();
            for (c, is_time) in &columns {
                let v = c.get(i).map_or(Value::Null, |v| cell(v, *is_time, reading));
                row.insert(c.name().to_string(), v);
            }
            Value::Object(row)
        })
        .collect()
}

/// Labels as a JSON object.
pub fn labels_json(labels: &Labels) -> Value {
    Value::Object(
        labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// Counts as a JSON object, largest first in a stable order.
pub fn counts_json(counts: &BTreeMap<String, u64>) -> Value {
    let mut v: Vec<(&String, &u64)> = counts.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    Value::Object(
        v.into_iter()
            .map(|(k, n)| (k.clone(), Value::from(*n)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_readable_and_json_safe() {
        assert_eq!(number(1.0 / 3.0), serde_json::json!(0.333333));
        assert_eq!(number(123456.789), serde_json::json!(123457.0));
        assert_eq!(number(f64::NAN), Value::Null);
        assert_eq!(number(2.5e-9), serde_json::json!(2.5e-9));
    }
}
