//! One table's Parquet file read in place: its footer and page index are loaded once, and every
//! query reads only the row groups and pages whose statistics may hold matching rows (dataset
//! files are sorted by their key and written with page statistics, so the ranges are narrow).
//! Statistics only rule rows out: callers still check every row they get back.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, TimestampNanosecondType};
use arrow_array::{Array, PrimitiveArray, RecordBatch, StringArray};
use arrow_schema::{ArrowError, DataType, FieldRef, Schema};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowFilter,
    RowSelection, RowSelector,
};
use parquet::bloom_filter::Sbbf;
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::statistics::Statistics;

/// Rows per decoded batch.
const BATCH_ROWS: usize = 8192;

/// A condition on one column that row-group and page statistics can rule out.
#[derive(Debug, Clone, Copy)]
pub enum Pred<'a> {
    /// column = value (a string column)
    StrEq(&'a str, &'a str),
    /// column = value (an Int32 column)
    I32Eq(&'a str, i32),
    /// lo <= column <= hi (an Int64 or timestamp column)
    I64Between(&'a str, i64, i64),
}

impl Pred<'_> {
    fn column(&self) -> &str {
        match self {
            Pred::StrEq(c, _) | Pred::I32Eq(c, _) | Pred::I64Between(c, _, _) => c,
        }
    }

    /// Whether values between `min` and `max` (row group or page statistics) may satisfy it.
    fn may_match(&self, min: Bound<'_>, max: Bound<'_>) -> bool {
        match (self, min, max) {
            (Pred::StrEq(_, v), Bound::Bytes(lo), Bound::Bytes(hi)) => {
                lo <= v.as_bytes() && v.as_bytes() <= hi
            }
            (Pred::I32Eq(_, v), Bound::I32(lo), Bound::I32(hi)) => lo <= *v && *v <= hi,
            (Pred::I64Between(_, a, b), Bound::I64(lo), Bound::I64(hi)) => lo <= *b && *a <= hi,
            // Statistics of another type than expected say nothing.
            _ => true,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Bound<'a> {
    Bytes(&'a [u8]),
    I32(i32),
    I64(i64),
}

/// Rows of one row group that may hold matches, with bounds of the table's time column there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub row_group: usize,
    /// Row positions within the row group.
    pub rows: Range<usize>,
    /// Least and greatest time of these rows (the page's statistics; wider when unknown).
    pub time: (i64, i64),
}

/// An opened table file.
pub struct TableFile {
    path: PathBuf,
    meta: ArrowReaderMetadata,
    time_column: &'static str,
}

impl TableFile {
    /// Reads the footer and the page index; `time_column` is the column units are cut by.
    pub fn open(path: &Path, time_column: &'static str) -> anyhow::Result<Self> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let meta = ArrowReaderMetadata::load(&file, options)
            .with_context(|| format!("reading the Parquet footer of {}", path.display()))?;
        let table = TableFile {
            path: path.to_path_buf(),
            meta,
            time_column,
        };
        table.leaf(time_column)?;
        Ok(table)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn num_rows(&self) -> usize {
        self.row_group_rows().sum()
    }

    pub fn num_row_groups(&self) -> usize {
        self.meta.metadata().num_row_groups()
    }

    fn row_group_rows(&self) -> impl Iterator<Item = usize> + '_ {
        self.meta
            .metadata()
            .row_groups()
            .iter()
            .map(|rg| rg.num_rows().max(0) as usize)
    }

    /// Least and greatest value of the time column, from the row groups' statistics.
    pub fn time_bounds(&self) -> (i64, i64) {
        let Ok(leaf) = self.leaf(self.time_column) else {
            return (i64::MIN, i64::MAX);
        };
        let meta = self.meta.metadata();
        let mut bounds: Option<(i64, i64)> = None;
        for rg in meta.row_groups() {
            match chunk_bounds(rg.column(leaf).statistics()) {
                Some((Bound::I64(lo), Bound::I64(hi))) => {
                    bounds = Some(bounds.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
                }
                _ => return (i64::MIN, i64::MAX),
            }
        }
        bounds.unwrap_or((0, 0))
    }

    /// The leaf (column chunk) index of a top-level primitive column.
    fn leaf(&self, name: &str) -> anyhow::Result<usize> {
        self.meta
            .metadata()
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .position(|c| c.path().string() == name)
            .with_context(|| format!("{}: no `{name}` column", self.path.display()))
    }

    /// The root (top-level field) index of a column.
    fn root(&self, name: &str) -> anyhow::Result<usize> {
        self.meta
            .schema()
            .index_of(name)
            .with_context(|| format!("{}: no `{name}` column", self.path.display()))
    }

    /// A projection of whole top-level columns.
    pub fn projection(&self, columns: &[&str]) -> anyhow::Result<ProjectionMask> {
        let roots = columns
            .iter()
            .map(|c| self.root(c))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(ProjectionMask::roots(
            self.meta.metadata().file_metadata().schema_descr(),
            roots,
        ))
    }

    /// The units (page-sized row ranges, in file order) that every condition may match.
    pub fn prune(&self, preds: &[Pred<'_>]) -> anyhow::Result<Vec<Unit>> {
        let leaves = preds
            .iter()
            .map(|p| self.leaf(p.column()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let time_leaf = self.leaf(self.time_column)?;
        let meta = self.meta.metadata();
        let mut units = Vec::new();
        for (rg, n) in self.row_group_rows().enumerate() {
            let chunk = meta.row_group(rg);
            let excluded = preds.iter().zip(&leaves).any(|(p, &leaf)| {
                chunk_bounds(chunk.column(leaf).statistics())
                    .is_some_and(|(lo, hi)| !p.may_match(lo, hi))
            });
            if excluded || n == 0 {
                continue;
            }
            let mut allowed: Vec<Range<usize>> = std::iter::once(0..n).collect();
            for (p, &leaf) in preds.iter().zip(&leaves) {
                let keep: Vec<Range<usize>> = self
                    .pages(rg, leaf, n, |b| {
                        b.is_none_or(|(lo, hi)| p.may_match(lo, hi))
                    })
                    .into_iter()
                    .filter_map(|(r, keep)| keep.then_some(r))
                    .collect();
                allowed = intersect(&allowed, &keep);
                if allowed.is_empty() {
                    break;
                }
            }
            if allowed.is_empty() {
                continue;
            }
            let rg_time = match chunk_bounds(chunk.column(time_leaf).statistics()) {
                Some((Bound::I64(lo), Bound::I64(hi))) => (lo, hi),
                _ => (i64::MIN, i64::MAX),
            };
            let time_pages = self.pages(rg, time_leaf, n, |b| match b {
                Some((Bound::I64(lo), Bound::I64(hi))) => (lo, hi),
                _ => rg_time,
            });
            for (page, time) in time_pages {
                for rows in intersect(&allowed, std::slice::from_ref(&page)) {
                    units.push(Unit {
                        row_group: rg,
                        rows,
                        time,
                    });
                }
            }
        }
        Ok(units)
    }

    /// The pages of a column chunk as row ranges, each with what `f` makes of its bounds (`None`:
    /// unknown, or a page of nulls only). One range for the whole chunk without a page index.
    fn pages<T>(
        &self,
        rg: usize,
        leaf: usize,
        n: usize,
        f: impl Fn(Option<(Bound<'_>, Bound<'_>)>) -> T,
    ) -> Vec<(Range<usize>, T)> {
        let index = self.meta.metadata().page_index_for_row_group(rg);
        let (Some(offsets), Some(columns)) = (index.offset_index(leaf), index.column_index(leaf))
        else {
            return vec![(0..n, f(None))];
        };
        let locations = offsets.page_locations();
        locations
            .iter()
            .enumerate()
            .map(|(p, loc)| {
                let start = loc.first_row_index.max(0) as usize;
                let end = locations
                    .get(p + 1)
                    .map_or(n, |next| next.first_row_index.max(0) as usize);
                (start..end, f(page_bounds(columns, p)))
            })
            .collect()
    }

    /// The file opened anew for one reader: readers seek, and handles cloned from one another
    /// would share their position between threads.
    fn reopen(&self) -> anyhow::Result<File> {
        File::open(&self.path).with_context(|| format!("reopening {}", self.path.display()))
    }

    /// A reader over the already-loaded metadata (no footer read per query).
    fn builder(&self) -> anyhow::Result<ParquetRecordBatchReaderBuilder<File>> {
        Ok(ParquetRecordBatchReaderBuilder::new_with_metadata(
            self.reopen()?,
            self.meta.clone(),
        ))
    }

    /// Reads `columns` of the rows of `units` (any order; each row once), in file order.
    pub fn read(&self, units: &[Unit], columns: &[&str]) -> anyhow::Result<Vec<RecordBatch>> {
        self.read_filtered(units, columns, None)
    }

    /// As [`TableFile::read`], keeping only the rows a row filter passes (its columns are decoded
    /// first; the others only for the rows it keeps).
    pub fn read_filtered(
        &self,
        units: &[Unit],
        columns: &[&str],
        filter: Option<RowFilter>,
    ) -> anyhow::Result<Vec<RecordBatch>> {
        if units.is_empty() {
            return Ok(Vec::new());
        }
        let mut sorted: Vec<&Unit> = units.iter().collect();
        sorted.sort_by_key(|u| (u.row_group, u.rows.start));
        let mut row_groups: Vec<usize> = sorted.iter().map(|u| u.row_group).collect();
        row_groups.dedup();
        let sizes: Vec<usize> = self.row_group_rows().collect();
        let mut selectors = Vec::new();
        for &rg in &row_groups {
            let mut pos = 0;
            for u in sorted.iter().filter(|u| u.row_group == rg) {
                let start = u.rows.start.max(pos);
                if start > pos {
                    selectors.push(RowSelector::skip(start - pos));
                }
                if u.rows.end > start {
                    selectors.push(RowSelector::select(u.rows.end - start));
                    pos = u.rows.end;
                }
            }
            if sizes[rg] > pos {
                selectors.push(RowSelector::skip(sizes[rg] - pos));
            }
        }
        let mut builder = self
            .builder()?
            .with_row_groups(row_groups)
            .with_row_selection(RowSelection::from(selectors))
            .with_projection(self.projection(columns)?)
            .with_batch_size(BATCH_ROWS);
        if let Some(filter) = filter {
            builder = builder.with_row_filter(filter);
        }
        let reader = builder
            .build()
            .with_context(|| format!("reading {}", self.path.display()))?;
        reader
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("decoding {}", self.path.display()))
    }

    /// Every row of `columns`, batch by batch, without holding the table.
    pub fn scan(
        &self,
        columns: &[&str],
        f: impl FnMut(&RecordBatch) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.scan_batches(self.builder()?, columns, f)
    }

    /// As [`TableFile::scan`], with the `dictionary` columns (low-cardinality strings) read as
    /// dictionary arrays: keys into a few values, no string built per row.
    pub fn scan_dictionary(
        &self,
        columns: &[&str],
        dictionary: &[&str],
        f: impl FnMut(&RecordBatch) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let schema = self.meta.schema();
        let fields: Vec<FieldRef> = schema
            .fields()
            .iter()
            .map(|field| {
                if dictionary.contains(&field.name().as_str()) {
                    let dict = DataType::Dictionary(
                        Box::new(DataType::Int32),
                        Box::new(field.data_type().clone()),
                    );
                    Arc::new(field.as_ref().clone().with_data_type(dict))
                } else {
                    field.clone()
                }
            })
            .collect();
        let hint = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
        let meta = ArrowReaderMetadata::try_new(
            self.meta.metadata().clone(),
            ArrowReaderOptions::new().with_schema(hint),
        )
        .with_context(|| format!("reading {}", self.path.display()))?;
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(self.reopen()?, meta);
        self.scan_batches(builder, columns, f)
    }

    fn scan_batches(
        &self,
        builder: ParquetRecordBatchReaderBuilder<File>,
        columns: &[&str],
        mut f: impl FnMut(&RecordBatch) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let reader = builder
            .with_projection(self.projection(columns)?)
            .with_batch_size(BATCH_ROWS * 8)
            .build()
            .with_context(|| format!("reading {}", self.path.display()))?;
        for batch in reader {
            let batch = batch.with_context(|| format!("decoding {}", self.path.display()))?;
            f(&batch)?;
        }
        Ok(())
    }

    /// The bloom filter of a column in a row group, if it has one.
    pub fn bloom_filter(&self, rg: usize, column: &str) -> anyhow::Result<Option<Sbbf>> {
        let leaf = self.leaf(column)?;
        self.builder()?
            .get_row_group_column_bloom_filter(rg, leaf)
            .with_context(|| format!("reading a bloom filter of {}", self.path.display()))
    }

    /// Every row of the given row groups, as units.
    pub fn row_groups(&self, rgs: &[usize]) -> Vec<Unit> {
        let sizes: Vec<usize> = self.row_group_rows().collect();
        rgs.iter()
            .map(|&rg| Unit {
                row_group: rg,
                rows: 0..sizes[rg],
                time: (i64::MIN, i64::MAX),
            })
            .collect()
    }
}

/// A column of a decoded batch by name, as its Arrow array type.
fn column<'a, T: 'static>(
    b: &'a RecordBatch,
    name: &str,
    cast: impl FnOnce(&'a dyn Array) -> Option<&'a T>,
) -> Result<&'a T, ArrowError> {
    b.column_by_name(name)
        .and_then(|c| cast(c.as_ref()))
        .ok_or_else(|| ArrowError::SchemaError(format!("no `{name}` column of the expected type")))
}

pub fn strings<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a StringArray, ArrowError> {
    column(b, name, |c| c.as_string_opt::<i32>())
}

pub fn times<'a>(
    b: &'a RecordBatch,
    name: &str,
) -> Result<&'a PrimitiveArray<TimestampNanosecondType>, ArrowError> {
    column(b, name, |c| c.as_primitive_opt::<TimestampNanosecondType>())
}

pub fn int64s<'a>(
    b: &'a RecordBatch,
    name: &str,
) -> Result<&'a PrimitiveArray<Int64Type>, ArrowError> {
    column(b, name, |c| c.as_primitive_opt::<Int64Type>())
}

/// A string column read as a dictionary: (keys, values).
pub fn dictionary<'a>(
    b: &'a RecordBatch,
    name: &str,
) -> Result<(&'a [i32], &'a StringArray), ArrowError> {
    let d = column(b, name, |c| c.as_dictionary_opt::<Int32Type>())?;
    let values = d.values().as_string_opt::<i32>().ok_or_else(|| {
        ArrowError::SchemaError(format!("`{name}` is not a dictionary of strings"))
    })?;
    Ok((d.keys().values(), values))
}

/// The value a dictionary key stands for.
pub fn word<'a>(d: (&[i32], &'a StringArray), key: i32) -> &'a str {
    d.1.value(key as usize)
}

pub fn int32s<'a>(
    b: &'a RecordBatch,
    name: &str,
) -> Result<&'a PrimitiveArray<Int32Type>, ArrowError> {
    column(b, name, |c| c.as_primitive_opt::<Int32Type>())
}

/// Bounds from a column chunk's statistics.
fn chunk_bounds(stats: Option<&Statistics>) -> Option<(Bound<'_>, Bound<'_>)> {
    match stats? {
        Statistics::Int32(s) => Some((Bound::I32(*s.min_opt()?), Bound::I32(*s.max_opt()?))),
        Statistics::Int64(s) => Some((Bound::I64(*s.min_opt()?), Bound::I64(*s.max_opt()?))),
        Statistics::ByteArray(s) => Some((
            Bound::Bytes(s.min_bytes_opt()?),
            Bound::Bytes(s.max_bytes_opt()?),
        )),
        _ => None,
    }
}

/// Bounds of one page from the column index.
fn page_bounds(index: &ColumnIndexMetaData, p: usize) -> Option<(Bound<'_>, Bound<'_>)> {
    if index.is_null_page(p) {
        return None;
    }
    match index {
        ColumnIndexMetaData::INT32(i) => {
            Some((Bound::I32(*i.min_value(p)?), Bound::I32(*i.max_value(p)?)))
        }
        ColumnIndexMetaData::INT64(i) => {
            Some((Bound::I64(*i.min_value(p)?), Bound::I64(*i.max_value(p)?)))
        }
        ColumnIndexMetaData::BYTE_ARRAY(i) => {
            Some((Bound::Bytes(i.min_value(p)?), Bound::Bytes(i.max_value(p)?)))
        }
        _ => None,
    }
}

/// The intersection of two sorted lists of disjoint ranges.
fn intersect(a: &[Range<usize>], b: &[Range<usize>]) -> Vec<Range<usize>> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let lo = a[i].start.max(b[j].start);
        let hi = a[i].end.min(b[j].end);
        if lo < hi {
            out.push(lo..hi);
        }
        if a[i].end <= b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersects_sorted_ranges() {
        let one = |r: Range<usize>| -> Vec<Range<usize>> { std::iter::once(r).collect() };
        assert_eq!(intersect(&[0..10, 20..30], &one(5..25)), [5..10, 20..25]);
        assert!(intersect(&one(0..10), &one(10..20)).is_empty());
        assert_eq!(intersect(&one(0..100), &[0..3, 50..60]), [0..3, 50..60]);
    }
}
