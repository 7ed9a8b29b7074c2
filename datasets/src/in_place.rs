//! One table's Parquet file read in place, without loading it: the footer and page index are read
//! once when the file is opened; after that, row-group and page statistics (and bloom filters) say
//! which rows may matter, and only those rows are decoded.
//!
//! What flows through: statistics in ([`Pred`]s pruned into [`Unit`]s, or [`Page`]s with their
//! bounds for callers that read statistics themselves), row ranges out to the Parquet reader, and
//! decoded record batches back, whose columns the accessors at the end of this module borrow by
//! name. Dataset files are sorted by their key and written with page statistics, so the ranges are
//! narrow. Statistics only rule rows out: callers still check every row they get back.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type, TimestampNanosecondType};
use arrow_array::{Array, MapArray, PrimitiveArray, RecordBatch, StringArray};
use arrow_schema::{ArrowError, DataType, FieldRef, Schema};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder, RowFilter, RowSelection, RowSelector,
};
use parquet::bloom_filter::Sbbf;
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::statistics::Statistics;
use parquet::schema::types::SchemaDescriptor;
use schemas::tables::Table;

use crate::error::{DatasetError, Result};

/// Rows per decoded batch of [`TableFile::read`].
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

/// One end of a column's values in a row group or page, as its statistics give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound<'a> {
    Bytes(&'a [u8]),
    I32(i32),
    I64(i64),
}

/// Least and greatest value of a column chunk or page.
pub type Bounds<'a> = (Bound<'a>, Bound<'a>);

/// One page of a column: its rows (positions in the file) and its bounds (`None`: unknown, or a
/// page of nulls only). A column chunk without a page index is one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<'a> {
    pub rows: Range<u64>,
    pub bounds: Option<Bounds<'a>>,
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
    /// First row of each row group, and the total row count last.
    group_starts: Vec<u64>,
    /// Leaf of the table's time column, the column units are cut by.
    time_leaf: usize,
}

impl TableFile {
    /// Reads the footer and the page index of a file of `table` (which must have a time column).
    pub fn open(path: &Path, table: Table) -> Result<Self> {
        let file = File::open(path).map_err(|e| DatasetError::io(path, e))?;
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let meta = ArrowReaderMetadata::load(&file, options)
            .map_err(|e| DatasetError::parquet(path, e))?;
        let mut group_starts = vec![0u64];
        for rg in meta.metadata().row_groups() {
            let rows = rg.num_rows().max(0) as u64;
            group_starts.push(group_starts.last().copied().unwrap_or(0) + rows);
        }
        let time = table.time_column().ok_or_else(|| {
            DatasetError::invalid(path, format!("the {table} table has no time column"))
        })?;
        let time_leaf = leaf_index(meta.parquet_schema(), time)
            .ok_or_else(|| DatasetError::invalid(path, format!("no `{time}` column")))?;
        Ok(TableFile {
            path: path.to_path_buf(),
            meta,
            group_starts,
            time_leaf,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn num_rows(&self) -> u64 {
        self.group_starts.last().copied().unwrap_or(0)
    }

    pub fn num_row_groups(&self) -> usize {
        self.group_starts.len() - 1
    }

    fn row_group_rows(&self, rg: usize) -> usize {
        (self.group_starts[rg + 1] - self.group_starts[rg]) as usize
    }

    /// Least and greatest value of the time column, from the row groups' statistics.
    pub fn time_bounds(&self) -> (i64, i64) {
        let mut bounds: Option<(i64, i64)> = None;
        for rg in self.meta.metadata().row_groups() {
            match chunk_bounds(rg.column(self.time_leaf).statistics()) {
                Some((Bound::I64(lo), Bound::I64(hi))) => {
                    bounds = Some(bounds.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
                }
                _ => return (i64::MIN, i64::MAX),
            }
        }
        bounds.unwrap_or((0, 0))
    }

    /// The leaf (column chunk) index of a top-level primitive column.
    fn leaf(&self, name: &str) -> Result<usize> {
        leaf_index(self.meta.parquet_schema(), name)
            .ok_or_else(|| DatasetError::invalid(&self.path, format!("no `{name}` column")))
    }

    /// A projection of whole top-level columns.
    pub fn projection(&self, columns: &[&str]) -> Result<ProjectionMask> {
        let schema = self.meta.schema();
        let roots = columns
            .iter()
            .map(|c| {
                schema
                    .index_of(c)
                    .map_err(|_| DatasetError::invalid(&self.path, format!("no `{c}` column")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ProjectionMask::roots(self.meta.parquet_schema(), roots))
    }

    /// The units (page-sized row ranges, in file order) that every condition may match.
    pub fn prune(&self, preds: &[Pred<'_>]) -> Result<Vec<Unit>> {
        let leaves = preds
            .iter()
            .map(|p| self.leaf(p.column()))
            .collect::<Result<Vec<_>>>()?;
        let meta = self.meta.metadata();
        let mut units = Vec::new();
        for rg in 0..self.num_row_groups() {
            let (chunk, n) = (meta.row_group(rg), self.row_group_rows(rg));
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
                    .chunk_pages(rg, leaf)
                    .filter(|(_, b)| b.is_none_or(|(lo, hi)| p.may_match(lo, hi)))
                    .map(|(r, _)| r)
                    .collect();
                allowed = intersect(&allowed, &keep);
                if allowed.is_empty() {
                    break;
                }
            }
            if allowed.is_empty() {
                continue;
            }
            let rg_time = match chunk_bounds(chunk.column(self.time_leaf).statistics()) {
                Some((Bound::I64(lo), Bound::I64(hi))) => (lo, hi),
                _ => (i64::MIN, i64::MAX),
            };
            for (page, bounds) in self.chunk_pages(rg, self.time_leaf) {
                let time = match bounds {
                    Some((Bound::I64(lo), Bound::I64(hi))) => (lo, hi),
                    _ => rg_time,
                };
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

    /// The pages of `column` in the row groups that hold any of `rows` (whole pages, in file
    /// order), for callers that read page statistics themselves.
    pub fn pages(
        &self,
        column: &str,
        rows: Range<u64>,
    ) -> Result<impl Iterator<Item = Page<'_>> + '_> {
        let leaf = self.leaf(column)?;
        let first = self
            .group_starts
            .partition_point(|&s| s <= rows.start)
            .saturating_sub(1);
        let groups =
            (first..self.num_row_groups()).take_while(move |&rg| self.group_starts[rg] < rows.end);
        Ok(groups.flat_map(move |rg| {
            let start = self.group_starts[rg];
            self.chunk_pages(rg, leaf).map(move |(r, bounds)| Page {
                rows: start + r.start as u64..start + r.end as u64,
                bounds,
            })
        }))
    }

    /// The pages of a column chunk as row ranges within the row group, with their bounds. One
    /// range for the whole chunk without a page index.
    fn chunk_pages(
        &self,
        rg: usize,
        leaf: usize,
    ) -> impl Iterator<Item = (Range<usize>, Option<Bounds<'_>>)> + '_ {
        let n = self.row_group_rows(rg);
        let index = self.meta.metadata().page_index();
        let pages =
            index.and_then(|i| Some((i.offset_index(rg, leaf)?, i.column_index(rg, leaf)?)));
        let count = pages.map_or(1, |(offsets, _)| offsets.page_locations().len());
        (0..count).map(move |p| {
            let Some((offsets, columns)) = pages else {
                return (0..n, None);
            };
            let locations = offsets.page_locations();
            let start = locations[p].first_row_index.max(0) as usize;
            let end = locations
                .get(p + 1)
                .map_or(n, |next| next.first_row_index.max(0) as usize);
            (start..end, page_bounds(columns, p))
        })
    }

    /// The file opened anew for one reader: readers seek, and handles cloned from one another
    /// would share their position between threads.
    fn reopen(&self) -> Result<File> {
        File::open(&self.path).map_err(|e| DatasetError::io(&self.path, e))
    }

    /// A reader over the already-loaded metadata (no footer read per query).
    fn builder(&self) -> Result<ParquetRecordBatchReaderBuilder<File>> {
        Ok(ParquetRecordBatchReaderBuilder::new_with_metadata(
            self.reopen()?,
            self.meta.clone(),
        ))
    }

    /// A reader of `pieces` (row ranges within row groups, sorted by row group and start; a row
    /// in two pieces is read once). The selection runs over the concatenation of the row groups
    /// it touches, so each group's unselected rest is skipped before the next group's rows.
    fn reader(
        &self,
        pieces: &[(usize, Range<usize>)],
        projection: ProjectionMask,
        batch_rows: usize,
        filter: Option<RowFilter>,
    ) -> Result<ParquetRecordBatchReader> {
        let mut row_groups: Vec<usize> = Vec::new();
        let mut selectors = Vec::new();
        let mut pos = 0;
        for (rg, rows) in pieces {
            if row_groups.last() != Some(rg) {
                if let Some(&prev) = row_groups.last() {
                    skip_rest(&mut selectors, self.row_group_rows(prev), pos);
                }
                row_groups.push(*rg);
                pos = 0;
            }
            let start = rows.start.max(pos);
            if start > pos {
                selectors.push(RowSelector::skip(start - pos));
            }
            if rows.end > start {
                selectors.push(RowSelector::select(rows.end - start));
                pos = rows.end;
            }
        }
        if let Some(&last) = row_groups.last() {
            skip_rest(&mut selectors, self.row_group_rows(last), pos);
        }
        let mut builder = self
            .builder()?
            .with_row_groups(row_groups)
            .with_row_selection(RowSelection::from(selectors))
            .with_projection(projection)
            .with_batch_size(batch_rows);
        if let Some(filter) = filter {
            builder = builder.with_row_filter(filter);
        }
        builder
            .build()
            .map_err(|e| DatasetError::parquet(&self.path, e))
    }

    /// Reads `columns` of the rows of `units` (any order; each row once), in file order.
    pub fn read(&self, units: &[Unit], columns: &[&str]) -> Result<Vec<RecordBatch>> {
        self.read_filtered(units, columns, None)
    }

    /// As [`TableFile::read`], keeping only the rows a row filter passes (its columns are decoded
    /// first; the others only for the rows it keeps).
    pub fn read_filtered(
        &self,
        units: &[Unit],
        columns: &[&str],
        filter: Option<RowFilter>,
    ) -> Result<Vec<RecordBatch>> {
        if units.is_empty() {
            return Ok(Vec::new());
        }
        let mut pieces: Vec<(usize, Range<usize>)> = units
            .iter()
            .map(|u| (u.row_group, u.rows.clone()))
            .collect();
        pieces.sort_by_key(|(rg, rows)| (*rg, rows.start));
        self.reader(&pieces, self.projection(columns)?, BATCH_ROWS, filter)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| DatasetError::arrow(&self.path, e))
    }

    /// Reads `ranges` (sorted, disjoint rows of the file) with `projection`, in batches of up to
    /// `batch_rows` rows, calling `f` with each batch and the file row of each of its rows. Pages
    /// holding no selected row are not decoded.
    pub fn read_ranges<E: From<DatasetError>>(
        &self,
        ranges: &[Range<u64>],
        projection: &ProjectionMask,
        batch_rows: usize,
        mut f: impl FnMut(&[u64], &RecordBatch) -> Result<(), E>,
    ) -> Result<(), E> {
        // Split at row group ends.
        let mut pieces: Vec<(usize, Range<usize>)> = Vec::new();
        for r in ranges.iter().filter(|r| r.start < r.end) {
            let mut start = r.start;
            while start < r.end {
                let g = self.group_starts.partition_point(|&s| s <= start) - 1;
                let (base, end) = (self.group_starts[g], r.end.min(self.group_starts[g + 1]));
                pieces.push((g, (start - base) as usize..(end - base) as usize));
                start = end;
            }
        }
        if pieces.is_empty() {
            return Ok(());
        }
        let reader = self.reader(&pieces, projection.clone(), batch_rows, None)?;
        // The file rows of each batch, walked along the pieces as the batches arrive.
        let file_rows = |p: usize| {
            pieces.get(p).map(|(g, r)| {
                let base = self.group_starts[*g];
                base + r.start as u64..base + r.end as u64
            })
        };
        let (mut piece, mut next) = (0usize, file_rows(0).map_or(0, |r| r.start));
        let mut rows: Vec<u64> = Vec::with_capacity(batch_rows);
        let invalid = |m: &str| DatasetError::invalid(&self.path, m);
        for batch in reader {
            let batch = batch.map_err(|e| DatasetError::arrow(&self.path, e))?;
            rows.clear();
            while rows.len() < batch.num_rows() {
                let Some(r) = file_rows(piece) else {
                    return Err(invalid("the reader returned more rows than selected").into());
                };
                let take = (r.end - next).min((batch.num_rows() - rows.len()) as u64);
                rows.extend(next..next + take);
                next += take;
                if next == r.end {
                    piece += 1;
                    next = file_rows(piece).map_or(0, |r| r.start);
                }
            }
            f(&rows, &batch)?;
        }
        if piece != pieces.len() {
            return Err(invalid("the reader returned fewer rows than selected").into());
        }
        Ok(())
    }

    /// Every row of `columns`, batch by batch, without holding the table.
    pub fn scan<E: From<DatasetError>>(
        &self,
        columns: &[&str],
        f: impl FnMut(&RecordBatch) -> Result<(), E>,
    ) -> Result<(), E> {
        self.scan_batches(self.builder()?, columns, f)
    }

    /// As [`TableFile::scan`], with the `dictionary` columns (low-cardinality strings) read as
    /// dictionary arrays: keys into a few values, no string built per row.
    pub fn scan_dictionary<E: From<DatasetError>>(
        &self,
        columns: &[&str],
        dictionary: &[&str],
        f: impl FnMut(&RecordBatch) -> Result<(), E>,
    ) -> Result<(), E> {
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
        .map_err(|e| DatasetError::parquet(&self.path, e))?;
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(self.reopen()?, meta);
        self.scan_batches(builder, columns, f)
    }

    fn scan_batches<E: From<DatasetError>>(
        &self,
        builder: ParquetRecordBatchReaderBuilder<File>,
        columns: &[&str],
        mut f: impl FnMut(&RecordBatch) -> Result<(), E>,
    ) -> Result<(), E> {
        let reader = builder
            .with_projection(self.projection(columns)?)
            .with_batch_size(BATCH_ROWS * 8)
            .build()
            .map_err(|e| DatasetError::parquet(&self.path, e))?;
        for batch in reader {
            f(&batch.map_err(|e| DatasetError::arrow(&self.path, e))?)?;
        }
        Ok(())
    }

    /// The bloom filter of a column in a row group, if it has one.
    pub fn bloom_filter(&self, rg: usize, column: &str) -> Result<Option<Sbbf>> {
        let leaf = self.leaf(column)?;
        self.builder()?
            .get_row_group_column_bloom_filter(rg, leaf)
            .map_err(|e| DatasetError::parquet(&self.path, e))
    }

    /// Every row of the given row groups, as units.
    pub fn row_groups(&self, rgs: &[usize]) -> Vec<Unit> {
        rgs.iter()
            .map(|&rg| Unit {
                row_group: rg,
                rows: 0..self.row_group_rows(rg),
                time: (i64::MIN, i64::MAX),
            })
            .collect()
    }
}

/// Skips what is left of a row group of `size` rows after position `pos`.
fn skip_rest(selectors: &mut Vec<RowSelector>, size: usize, pos: usize) {
    if size > pos {
        selectors.push(RowSelector::skip(size - pos));
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

pub fn int32s<'a>(
    b: &'a RecordBatch,
    name: &str,
) -> Result<&'a PrimitiveArray<Int32Type>, ArrowError> {
    column(b, name, |c| c.as_primitive_opt::<Int32Type>())
}

pub fn float64s<'a>(
    b: &'a RecordBatch,
    name: &str,
) -> Result<&'a PrimitiveArray<Float64Type>, ArrowError> {
    column(b, name, |c| c.as_primitive_opt::<Float64Type>())
}

/// A map column (labels, attributes).
pub fn maps<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a MapArray, ArrowError> {
    column(b, name, |c| c.as_map_opt())
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

/// The leaf (column chunk) index of a top-level primitive column in a file's schema.
pub(crate) fn leaf_index(schema: &SchemaDescriptor, name: &str) -> Option<usize> {
    schema
        .columns()
        .iter()
        // Compared part by part: no string is built per column.
        .position(|c| c.path().parts() == [name])
}

/// Bounds from a column chunk's statistics.
pub(crate) fn chunk_bounds(stats: Option<&Statistics>) -> Option<Bounds<'_>> {
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
fn page_bounds(index: &ColumnIndexMetaData, p: usize) -> Option<Bounds<'_>> {
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
    use schemas::tables::columns::logs;
    use schemas::tables::{LogRow, Row};

    use super::*;
    use crate::{TableFileWriter, WriteOptions, encode::encode};

    /// A logs file of `n` rows whose times are their row numbers, in row groups of 16 rows.
    fn logs_file(dir: &Path, n: i64) -> TableFile {
        let path = dir.join("logs.parquet");
        let rows: Vec<Row> = (0..n)
            .map(|t| {
                Row::Log(LogRow {
                    time_ns: t,
                    namespace: "ns".into(),
                    pod: "pod".into(),
                    container: "c".into(),
                    restart: 0,
                    stream: "stdout".into(),
                    line: format!("line {t}"),
                })
            })
            .collect();
        let opts = WriteOptions {
            row_group_rows: 16,
            ..WriteOptions::default()
        };
        let mut w = TableFileWriter::create(&path, Table::Logs, opts).unwrap();
        w.write(&encode(Table::Logs, &rows).unwrap()).unwrap();
        w.finish().unwrap();
        TableFile::open(&path, Table::Logs).unwrap()
    }

    #[test]
    fn ranges_across_row_groups_come_back_with_their_file_rows() {
        let tmp = tempfile::tempdir().unwrap();
        let file = logs_file(tmp.path(), 100);
        assert_eq!((file.num_rows(), file.num_row_groups()), (100, 7));
        let projection = file.projection(&[logs::TIME]).unwrap();
        let mut seen: Vec<(u64, i64)> = Vec::new();
        let ranges = [5..20, 30..31, 47..49, 95..100];
        file.read_ranges(&ranges, &projection, 4, |rows, b| -> Result<()> {
            let times = times(b, logs::TIME).unwrap();
            seen.extend(rows.iter().zip(times.values()).map(|(&r, &t)| (r, t)));
            Ok(())
        })
        .unwrap();
        let want: Vec<(u64, i64)> = ranges
            .into_iter()
            .flatten()
            .map(|r| (r, r as i64))
            .collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn pages_cover_the_row_groups_asked_for() {
        let tmp = tempfile::tempdir().unwrap();
        let file = logs_file(tmp.path(), 100);
        let pages: Vec<Page<'_>> = file.pages(logs::TIME, 20..40).unwrap().collect();
        assert_eq!(pages.first().map(|p| p.rows.start), Some(16));
        assert_eq!(pages.last().map(|p| p.rows.end), Some(48));
        assert!(pages.windows(2).all(|w| w[0].rows.end == w[1].rows.start));
        let first = &pages[0];
        assert_eq!(first.bounds, Some((Bound::I64(16), Bound::I64(31))));
    }

    #[test]
    fn intersects_sorted_ranges() {
        let one = |r: Range<usize>| -> Vec<Range<usize>> { std::iter::once(r).collect() };
        assert_eq!(intersect(&[0..10, 20..30], &one(5..25)), [5..10, 20..25]);
        assert!(intersect(&one(0..10), &one(10..20)).is_empty());
        assert_eq!(intersect(&one(0..100), &[0..3, 50..60]), [0..3, 50..60]);
    }
}
