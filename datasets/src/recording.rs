//! `Recording`: the rows of a running system kept as they come, readable while it runs.
//!
//! A live session's APIs read in-memory stores, but analysis wants tables. The recording keeps
//! each table as a growing list of Parquet segment files in a directory it owns: rows wait in
//! memory until [`Recording::flush`] (or until a table has [`SEGMENT_ROWS`] waiting, so memory
//! stays bounded when nobody reads) and are then written, unsorted, as one more segment. A
//! reader flushes and scans every segment of a table as one. Every table starts with an empty
//! segment, so a table nothing was recorded into still reads, as empty.
//!
//! Segments are written under a hidden name and renamed into place, so a reader listing them
//! never sees half a file. The directory is the recording's: it is removed when the recording
//! is dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use schemas::tables::{Row, Table};

use crate::encode::encode;
use crate::error::{DatasetError, Result};
use crate::table_file::{TableFileWriter, WriteOptions};

/// Rows a table holds in memory before they are written as a segment without being asked.
pub const SEGMENT_ROWS: usize = 200_000;

/// Segments a table may have before they are merged into one (many small files make every scan
/// slower; a session that asks often would otherwise make many).
pub const MAX_SEGMENTS: usize = 16;

#[derive(Default)]
struct State {
    pending: BTreeMap<Table, Vec<Row>>,
    segments: BTreeMap<Table, Vec<PathBuf>>,
    /// The number of each table's newest segment (a write or a merge): it changes exactly when
    /// the table's rows do.
    newest: BTreeMap<Table, usize>,
    written: usize,
    closed: bool,
}

/// A recording in a directory of its own; see the module documentation.
pub struct Recording {
    dir: PathBuf,
    state: Mutex<State>,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Recording {
    /// Starts a recording in `dir`, which must not exist yet (it is created, and removed when
    /// the recording is dropped).
    pub fn create(dir: &Path) -> Result<Recording> {
        std::fs::create_dir(dir).map_err(|e| DatasetError::io(dir, e))?;
        let recording = Recording {
            dir: dir.to_path_buf(),
            state: Mutex::new(State::default()),
        };
        {
            let mut state = recording.lock();
            for table in Table::ALL {
                recording.write_segment(&mut state, table, &[])?;
            }
        }
        Ok(recording)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records rows (audit rows are evaluator data and are not kept).
    pub fn push(&self, rows: &[Row]) -> Result<()> {
        let mut state = self.lock();
        if state.closed {
            return Ok(());
        }
        for row in rows {
            let table = row.table();
            if table.is_optional() {
                continue;
            }
            state.pending.entry(table).or_default().push(row.clone());
        }
        let full: Vec<Table> = state
            .pending
            .iter()
            .filter(|(_, rows)| rows.len() >= SEGMENT_ROWS)
            .map(|(t, _)| *t)
            .collect();
        for table in full {
            self.flush_table(&mut state, table)?;
        }
        Ok(())
    }

    /// Writes every waiting row, so that the segments hold everything recorded so far.
    pub fn flush(&self) -> Result<()> {
        let mut state = self.lock();
        let tables: Vec<Table> = state.pending.keys().copied().collect();
        for table in tables {
            self.flush_table(&mut state, table)?;
        }
        Ok(())
    }

    /// The segment files of a table, oldest first (at least one).
    pub fn segments(&self, table: Table) -> Vec<PathBuf> {
        self.lock()
            .segments
            .get(&table)
            .cloned()
            .unwrap_or_default()
    }

    /// A number that changes whenever the rows of `table` do (waiting rows of the table are
    /// written first), so that what was derived from the table can be kept until it changes.
    pub fn version(&self, table: Table) -> Result<u64> {
        let mut state = self.lock();
        self.flush_table(&mut state, table)?;
        Ok(state.newest.get(&table).map_or(0, |n| *n as u64 + 1))
    }

    /// Removes the recording's files now (a reader still holding the recording then finds it
    /// closed). Dropping the recording does the same.
    pub fn close(&self) {
        let mut state = self.lock();
        state.pending.clear();
        state.segments.clear();
        state.closed = true;
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    #[cfg(feature = "polars")]
    /// Every row recorded so far of a table, as one polars LazyFrame over its segments (waiting
    /// rows are written first). Run `collect()` off async threads (polars blocks).
    pub fn lazy(&self, table: Table) -> Result<polars::prelude::LazyFrame> {
        use polars::prelude::{LazyFrame, PlRefPath, ScanArgsParquet};
        self.flush()?;
        let polars_err = |e: polars::error::PolarsError| DatasetError::Polars {
            path: self.dir.clone(),
            message: e.to_string(),
        };
        let paths = self
            .segments(table)
            .iter()
            .map(|p| PlRefPath::try_from_path(p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(polars_err)?;
        LazyFrame::scan_parquet_files(paths.into_iter().collect(), ScanArgsParquet::default())
            .map_err(polars_err)
    }

    fn flush_table(&self, state: &mut State, table: Table) -> Result<()> {
        let rows = state.pending.remove(&table).unwrap_or_default();
        if rows.is_empty() {
            return Ok(());
        }
        self.write_segment(state, table, &rows)?;
        if state
            .segments
            .get(&table)
            .is_some_and(|s| s.len() > MAX_SEGMENTS)
        {
            self.merge(state, table)?;
        }
        Ok(())
    }

    /// Rewrites a table's segments as one.
    fn merge(&self, state: &mut State, table: Table) -> Result<()> {
        let old = state.segments.remove(&table).unwrap_or_default();
        let n = state.written;
        state.written += 1;
        let name = format!("{}-{n:06}.parquet", table.name());
        let (path, tmp) = (self.dir.join(&name), self.dir.join(format!(".{name}.tmp")));
        let mut file = TableFileWriter::create(&tmp, table, segment_options())?;
        for segment in &old {
            let f = std::fs::File::open(segment).map_err(|e| DatasetError::io(segment, e))?;
            let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
                .and_then(|b| b.build())
                .map_err(|e| DatasetError::parquet(segment, e))?;
            for batch in reader {
                let batch = batch.map_err(|e| DatasetError::arrow(segment, e))?;
                file.write(
                    &crate::encode::with_table_schema(table, &batch)
                        .map_err(|e| DatasetError::arrow(segment, e))?,
                )?;
            }
        }
        file.finish()?;
        std::fs::rename(&tmp, &path).map_err(|e| DatasetError::io(&path, e))?;
        for segment in &old {
            let _ = std::fs::remove_file(segment);
        }
        state.segments.insert(table, vec![path]);
        state.newest.insert(table, n);
        Ok(())
    }

    fn write_segment(&self, state: &mut State, table: Table, rows: &[Row]) -> Result<()> {
        if state.closed {
            return Err(DatasetError::invalid(
                &self.dir,
                "the recording is closed (its session ended)",
            ));
        }
        let n = state.written;
        state.written += 1;
        let name = format!("{}-{n:06}.parquet", table.name());
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let mut file = TableFileWriter::create(&tmp, table, segment_options())?;
        let batch = encode(table, rows).map_err(|e| DatasetError::arrow(&tmp, e))?;
        file.write(&batch)?;
        file.finish()?;
        std::fs::rename(&tmp, &path).map_err(|e| DatasetError::io(&path, e))?;
        state.segments.entry(table).or_default().push(path);
        state.newest.insert(table, n);
        Ok(())
    }
}

/// Segments are written fast: the cheapest compression, on the writer's own thread.
fn segment_options() -> WriteOptions {
    WriteOptions {
        zstd_level: 1,
        threads: 1,
        ..WriteOptions::default()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::tables::LogRow;

    fn log(i: i64) -> Row {
        Row::Log(LogRow {
            time_ns: i,
            namespace: "ns".into(),
            pod: "p".into(),
            container: "c".into(),
            restart: 0,
            stream: "stdout".into(),
            line: format!("line {i}"),
        })
    }

    /// Rows in Parquet files, from their footers.
    fn rows_in(paths: &[PathBuf]) -> i64 {
        paths
            .iter()
            .map(|p| {
                let file = std::fs::File::open(p).unwrap();
                parquet::file::reader::FileReader::metadata(
                    &parquet::file::serialized_reader::SerializedFileReader::new(file).unwrap(),
                )
                .file_metadata()
                .num_rows()
            })
            .sum()
    }

    #[test]
    fn rows_reach_segments_when_flushed_and_the_directory_goes_with_the_recording() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("rec");
        let rec = Recording::create(&dir).unwrap();
        for table in Table::ALL {
            assert_eq!(rec.segments(table).len(), 1, "{table}: the empty segment");
        }
        rec.push(&[log(2), log(1)]).unwrap();
        assert_eq!(
            rec.segments(Table::Logs).len(),
            1,
            "nothing written before a flush"
        );
        rec.flush().unwrap();
        let segments = rec.segments(Table::Logs);
        assert_eq!(segments.len(), 2);
        assert_eq!(rows_in(&segments), 2);
        rec.flush().unwrap();
        assert_eq!(
            rec.segments(Table::Logs).len(),
            2,
            "an empty flush adds nothing"
        );
        drop(rec);
        assert!(!dir.exists());
        // Many flushes: the segments are merged, every row kept.
        let rec = Recording::create(&dir).unwrap();
        for i in 0..40 {
            rec.push(&[log(i)]).unwrap();
            rec.flush().unwrap();
        }
        let segments = rec.segments(Table::Logs);
        assert!(segments.len() <= MAX_SEGMENTS, "{}", segments.len());
        assert_eq!(rows_in(&segments), 40);
        rec.close();
        assert!(!dir.exists());
        rec.push(&[log(3)]).unwrap();
        assert!(rec.flush().is_ok(), "nothing waits once closed");
    }

    #[test]
    fn a_table_s_version_changes_exactly_when_its_rows_do() {
        let tmp = tempfile::tempdir().unwrap();
        let rec = Recording::create(&tmp.path().join("rec")).unwrap();
        let (logs, events) = (
            rec.version(Table::Logs).unwrap(),
            rec.version(Table::Events).unwrap(),
        );
        assert_eq!(rec.version(Table::Logs).unwrap(), logs, "nothing recorded");
        rec.push(&[log(1)]).unwrap();
        let after = rec.version(Table::Logs).unwrap();
        assert_ne!(after, logs, "a waiting row counts (it is written first)");
        assert_eq!(
            rec.version(Table::Events).unwrap(),
            events,
            "another table's rows"
        );
        let mut seen = std::collections::BTreeSet::from([logs, after]);
        for i in 0..40 {
            rec.push(&[log(i)]).unwrap();
            let v = rec.version(Table::Logs).unwrap();
            assert!(
                seen.insert(v),
                "push {i}: version {v} seen before (merges included)"
            );
        }
    }
}
