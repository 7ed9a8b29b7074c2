//! ITBench's TSV files as pandas writes them (`to_csv(sep="\t", index=False)`): a header row,
//! fields quoted when they hold a tab, a quote or a line break, quotes doubled inside, so a
//! field may span lines. A file cut in the middle of a record (as the fixtures are) reads as
//! far as it goes: the short last record is handed over marked incomplete.
//!
//! Also the timestamps those files hold: ClickHouse's `2025-12-15 17:24:44.327494932` (naive
//! UTC, any number of fractional digits).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDateTime, Utc};

use crate::Error;

/// One record, its fields looked up by column name.
pub struct Record<'a> {
    fields: &'a csv::StringRecord,
    columns: &'a HashMap<String, usize>,
    /// The line the record starts on (1 is the header).
    pub line: u64,
    /// False when the record has fewer fields than the header (a file cut short).
    pub complete: bool,
}

impl Record<'_> {
    /// The field of a column; `None` when the column is absent or the record stops before it.
    pub fn get(&self, column: &str) -> Option<&str> {
        self.columns.get(column).and_then(|i| self.fields.get(*i))
    }

    /// The field, empty when absent.
    pub fn text(&self, column: &str) -> &str {
        self.get(column).unwrap_or("")
    }
}

/// A TSV file being read.
pub struct Reader {
    path: PathBuf,
    reader: csv::Reader<BufReader<File>>,
    columns: HashMap<String, usize>,
    width: usize,
}

impl Reader {
    pub fn open(path: &Path) -> Result<Reader, Error> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(b'\t')
            .flexible(true)
            .has_headers(true)
            .from_reader(BufReader::with_capacity(1 << 20, file));
        let headers = reader
            .headers()
            .map_err(|e| Error::format(path, 1, format!("header: {e}")))?
            .clone();
        let columns: HashMap<String, usize> = headers
            .iter()
            .enumerate()
            .map(|(i, h)| (h.trim().to_string(), i))
            .collect();
        Ok(Reader {
            path: path.to_path_buf(),
            reader,
            width: headers.len(),
            columns,
        })
    }

    pub fn has(&self, column: &str) -> bool {
        self.columns.contains_key(column)
    }

    /// Calls `f` for every record in order. A record that is not valid UTF-8 or cannot be read
    /// is an error naming the line.
    pub fn for_each(
        mut self,
        mut f: impl FnMut(Record<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut fields = csv::StringRecord::new();
        loop {
            let line = self.reader.position().line();
            match self.reader.read_record(&mut fields) {
                Ok(false) => return Ok(()),
                Ok(true) => {
                    // A blank line between records reads as one empty field.
                    if fields.len() == 1 && fields.get(0).is_some_and(str::is_empty) {
                        continue;
                    }
                    f(Record {
                        fields: &fields,
                        columns: &self.columns,
                        line,
                        complete: fields.len() >= self.width,
                    })?;
                }
                Err(e) => return Err(Error::format(&self.path, line, e.to_string())),
            }
        }
    }
}

/// A TSV file being written, quoting fields as pandas does.
pub struct Writer {
    path: PathBuf,
    writer: csv::Writer<BufWriter<File>>,
    pub rows: u64,
}

impl Writer {
    pub fn create(path: &Path, header: &[&str]) -> Result<Writer, Error> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        let mut writer = csv::WriterBuilder::new()
            .delimiter(b'\t')
            .quote_style(csv::QuoteStyle::Necessary)
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(BufWriter::with_capacity(1 << 20, file));
        writer
            .write_record(header)
            .map_err(|e| Error::io(path, e.into()))?;
        Ok(Writer {
            path: path.to_path_buf(),
            writer,
            rows: 0,
        })
    }

    pub fn row<I, T>(&mut self, fields: I) -> Result<(), Error>
    where
        I: IntoIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        self.rows += 1;
        self.writer
            .write_record(fields)
            .map_err(|e| Error::io(&self.path, e.into()))
    }

    pub fn finish(self) -> Result<u64, Error> {
        let path = self.path;
        let mut inner = self
            .writer
            .into_inner()
            .map_err(|e| Error::io(&path, e.into_error()))?;
        inner.flush().map_err(|e| Error::io(&path, e))?;
        Ok(self.rows)
    }
}

/// Parses a snapshot timestamp: `2025-12-15 17:24:44[.fffffffff]` (UTC), RFC 3339, or a number
/// of nanoseconds since the epoch.
pub fn parse_time(text: &str) -> Option<i64> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    if t.len() >= 15 && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().ok();
    }
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return d.timestamp_nanos_opt();
    }
    [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
    .and_then(|n| n.and_utc().timestamp_nanos_opt())
}

/// ClickHouse's `DateTime64(9)` text: `2025-12-15 17:24:44.327494932`.
pub fn nanos_text(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns)
        .format("%Y-%m-%d %H:%M:%S%.9f")
        .to_string()
}

/// ClickHouse's `DateTime` text (whole seconds): `2025-12-15 17:24:44`.
pub fn seconds_text(ns: i64) -> String {
    DateTime::<Utc>::from_timestamp_nanos(ns)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// A metric timestamp: milliseconds as Prometheus keeps them (`2025-12-15 17:25:02.949`), or
/// every digit when the time is finer.
pub fn millis_text(ns: i64) -> String {
    let t = DateTime::<Utc>::from_timestamp_nanos(ns);
    if ns.rem_euclid(1_000_000) == 0 {
        t.format("%Y-%m-%d %H:%M:%S%.3f").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%S%.9f").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_times_read_and_write_exactly() {
        let ns = parse_time("2025-12-15 17:24:44.327494932").unwrap();
        assert_eq!(nanos_text(ns), "2025-12-15 17:24:44.327494932");
        let ms = parse_time("2025-12-15 17:25:02.949").unwrap();
        assert_eq!(millis_text(ms), "2025-12-15 17:25:02.949");
        assert_eq!(seconds_text(ns), "2025-12-15 17:24:44");
        assert_eq!(
            parse_time("2025-12-15T17:24:44Z"),
            parse_time("2025-12-15 17:24:44")
        );
        assert_eq!(parse_time(""), None);
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn quoted_fields_span_lines_and_a_cut_record_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.tsv");
        std::fs::write(&path, "a\tb\tc\n1\t\"x\ny\"\"z\"\t3\n4\t\"cut\n").unwrap();
        let mut seen = Vec::new();
        Reader::open(&path)
            .unwrap()
            .for_each(|r| {
                seen.push((
                    r.text("a").to_string(),
                    r.text("b").to_string(),
                    r.get("c").map(str::to_string),
                    r.complete,
                ));
                Ok(())
            })
            .unwrap();
        assert_eq!(
            seen[0],
            ("1".into(), "x\ny\"z".into(), Some("3".into()), true)
        );
        assert_eq!(seen[1].0, "4");
        assert!(!seen[1].3, "the cut record is incomplete");
        let out = dir.path().join("o.tsv");
        let mut w = Writer::create(&out, &["a", "b"]).unwrap();
        w.row(["1", "x\ty\n\"q\""]).unwrap();
        assert_eq!(w.finish().unwrap(), 1);
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "a\tb\n1\t\"x\ty\n\"\"q\"\"\"\n"
        );
    }
}
