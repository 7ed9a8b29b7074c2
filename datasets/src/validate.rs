//! `validate`: everything a reader of a dataset relies on, checked file by file.
//!
//! Checks, in order: the manifest (format, version, window); that the directory holds exactly the
//! listed files (anything else, a ground truth above all, must not sit where replay serves it); per
//! table: size, SHA-256, Parquet structure, column names and types, row count, sort order, times
//! inside the window; across tables: every log's pod is among the objects, every span's parent is in
//! its trace. The optional `audit` table is checked like the others when the manifest lists it, and
//! each of its events must be an `audit.k8s.io/v1` Event carrying the row's audit id.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::path::Path;

use arrow_schema::Schema;
use chrono::{DateTime, Utc};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use schemas::tables::{META_TABLE, Row, Table};
use serde::Serialize;

use crate::encode::{cmp_rows, decode};
use crate::reader::read_manifest;
use crate::{MANIFEST_FILE, sha256_file};

/// One problem found, located as precisely as possible.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub row: Option<u64>,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(c) = &self.column {
            write!(f, ", column {c}")?;
        }
        if let Some(r) = self.row {
            write!(f, ", row {r}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// The outcome of validating one dataset.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub dataset: String,
    pub tables_checked: usize,
    pub rows_checked: u64,
    pub findings: Vec<Finding>,
    /// Findings left out after the first few of the same kind in the same file.
    pub findings_omitted: u64,
}

impl Report {
    pub fn is_valid(&self) -> bool {
        self.findings.is_empty()
    }
}

/// At most this many findings of one kind per file are listed; the rest are counted.
const PER_KIND: usize = 10;

struct Collector {
    report: Report,
    counts: BTreeMap<(String, &'static str), usize>,
}

impl Collector {
    fn add(
        &mut self,
        kind: &'static str,
        file: &str,
        column: Option<&str>,
        row: Option<u64>,
        message: String,
    ) {
        let n = self.counts.entry((file.to_string(), kind)).or_default();
        *n += 1;
        if *n > PER_KIND {
            self.report.findings_omitted += 1;
            return;
        }
        self.report.findings.push(Finding {
            file: file.to_string(),
            column: column.map(str::to_string),
            row,
            message,
        });
    }
}

/// Validates the dataset directory `dir`. Never fails: every problem becomes a finding.
pub fn validate(dir: &Path) -> Report {
    let mut c = Collector {
        report: Report {
            dataset: dir.display().to_string(),
            ..Report::default()
        },
        counts: BTreeMap::new(),
    };
    let manifest = match read_manifest(dir) {
        Ok(m) => m,
        Err(e) => {
            c.add("manifest", MANIFEST_FILE, None, None, e.to_string());
            return c.report;
        }
    };
    let window = manifest.window;
    if window.start > window.end {
        c.add(
            "manifest",
            MANIFEST_FILE,
            Some("window"),
            None,
            format!("start {} is after end {}", window.start, window.end),
        );
    }
    if !window.contains(manifest.virtual_now) {
        c.add(
            "manifest",
            MANIFEST_FILE,
            Some("virtual_now"),
            None,
            format!(
                "{} is outside the window {} .. {}",
                manifest.virtual_now, window.start, window.end
            ),
        );
    }
    for table in Table::ALL {
        if !manifest.tables.contains_key(&table) {
            c.add(
                "manifest",
                MANIFEST_FILE,
                Some("tables"),
                None,
                format!("the `{table}` table is missing"),
            );
        }
    }
    check_directory_listing(dir, &manifest, &mut c);

    let (start_ns, end_ns) = (ns(window.start), ns(window.end));
    let mut refs = References::default();
    for (table, entry) in &manifest.tables {
        let path = dir.join(&entry.file);
        let file = entry.file.as_str();
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) => {
                c.add("file", file, None, None, format!("cannot be read: {e}"));
                continue;
            }
        };
        if meta.len() != entry.bytes {
            c.add(
                "file",
                file,
                None,
                None,
                format!("is {} bytes, the manifest says {}", meta.len(), entry.bytes),
            );
        }
        match sha256_file(&path) {
            Ok(sum) if sum != entry.sha256 => c.add(
                "file",
                file,
                None,
                None,
                format!(
                    "checksum mismatch: sha256 is {sum}, the manifest says {} (the file was \
                     changed or damaged)",
                    entry.sha256
                ),
            ),
            Ok(_) => {}
            Err(e) => c.add("file", file, None, None, e.to_string()),
        }
        c.report.tables_checked += 1;
        check_table(
            *table,
            &path,
            file,
            entry.rows,
            (start_ns, end_ns),
            &mut refs,
            &mut c,
        );
    }
    refs.check(&mut c);
    c.report
}

fn ns(t: DateTime<Utc>) -> i64 {
    t.timestamp_nanos_opt().unwrap_or(i64::MAX)
}

fn check_directory_listing(dir: &Path, manifest: &schemas::Manifest, c: &mut Collector) {
    let listed: HashSet<&str> = manifest
        .tables
        .values()
        .map(|e| e.file.as_str())
        .chain([MANIFEST_FILE])
        .collect();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !listed.contains(name.as_str()) {
            c.add(
                "listing",
                &name,
                None,
                None,
                "is not part of the dataset; only manifest.json and the tables it lists may be \
                 in the directory replay serves (keep ground truth and notes beside it)"
                    .to_string(),
            );
        }
    }
}

/// Facts gathered across tables for the referential checks.
#[derive(Default)]
struct References {
    pods: HashSet<(String, String)>,
    have_objects: bool,
    log_pods: BTreeMap<(String, String), u64>,
    spans: HashSet<(String, String)>,
    parents: Vec<(String, String, u64)>,
}

impl References {
    fn see(&mut self, row: &Row, index: u64) {
        match row {
            Row::Object(o) if o.kind == "Pod" => {
                self.pods
                    .insert((o.namespace.clone().unwrap_or_default(), o.name.clone()));
            }
            Row::Log(l) => {
                self.log_pods
                    .entry((l.namespace.clone(), l.pod.clone()))
                    .or_insert(index);
            }
            Row::Span(s) => {
                self.spans.insert((s.trace_id.clone(), s.span_id.clone()));
                if let Some(p) = &s.parent_span_id {
                    self.parents.push((s.trace_id.clone(), p.clone(), index));
                }
            }
            _ => {}
        }
    }

    fn check(&self, c: &mut Collector) {
        let logs = Table::Logs.file_name();
        if self.have_objects {
            for ((ns, pod), row) in &self.log_pods {
                if !self.pods.contains(&(ns.clone(), pod.clone())) {
                    c.add(
                        "reference",
                        &logs,
                        Some("pod"),
                        Some(*row),
                        format!("pod {ns}/{pod} is not among the objects"),
                    );
                }
            }
        }
        let spans = Table::Spans.file_name();
        for (trace, parent, row) in &self.parents {
            if !self.spans.contains(&(trace.clone(), parent.clone())) {
                c.add(
                    "reference",
                    &spans,
                    Some("parent_span_id"),
                    Some(*row),
                    format!("parent span {parent} is not in trace {trace}"),
                );
            }
        }
    }
}

fn check_table(
    table: Table,
    path: &Path,
    file: &str,
    expected_rows: u64,
    (start_ns, end_ns): (i64, i64),
    refs: &mut References,
    c: &mut Collector,
) {
    let reader = File::open(path)
        .map_err(|e| e.to_string())
        .and_then(|f| ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| e.to_string()));
    let builder = match reader {
        Ok(b) => b,
        Err(e) => {
            c.add(
                "parquet",
                file,
                None,
                None,
                format!("not a readable Parquet file: {e}"),
            );
            return;
        }
    };
    let kv_table = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == META_TABLE))
        .and_then(|k| k.value.clone());
    if kv_table.as_deref() != Some(table.name()) {
        c.add(
            "schema",
            file,
            None,
            None,
            format!(
                "key-value metadata {META_TABLE} is {:?}, expected {:?}",
                kv_table,
                table.name()
            ),
        );
    }
    if !schema_matches(table, builder.schema(), file, c) {
        return;
    }
    let file_rows = builder.metadata().file_metadata().num_rows() as u64;
    if file_rows != expected_rows {
        c.add(
            "rows",
            file,
            None,
            None,
            format!("holds {file_rows} rows, the manifest says {expected_rows}"),
        );
    }
    let reader = match builder.with_batch_size(64 * 1024).build() {
        Ok(r) => r,
        Err(e) => {
            c.add("parquet", file, None, None, e.to_string());
            return;
        }
    };
    if table == Table::Objects {
        refs.have_objects = true;
    }
    let time_column = table.time_column();
    let mut previous: Option<Row> = None;
    let mut index: u64 = 0;
    for batch in reader {
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                c.add(
                    "parquet",
                    file,
                    None,
                    Some(index),
                    format!("cannot be decoded: {e}"),
                );
                return;
            }
        };
        let rows = match decode(table, &batch) {
            Ok(r) => r,
            Err(e) => {
                c.add("parquet", file, None, Some(index), e.to_string());
                return;
            }
        };
        for row in rows {
            if let Some(prev) = &previous
                && cmp_rows(prev, &row).is_gt()
            {
                c.add(
                    "order",
                    file,
                    None,
                    Some(index),
                    format!(
                        "out of order: rows must be sorted by ({})",
                        table.sort_key().join(", ")
                    ),
                );
            }
            if let Some(t) = row.time_ns() {
                // An event may have happened before the capture began and still be listed.
                let too_early = t < start_ns && table != Table::Events;
                if too_early || t > end_ns {
                    c.add(
                        "window",
                        file,
                        time_column,
                        Some(index),
                        format!(
                            "time {} is outside the manifest window",
                            DateTime::<Utc>::from_timestamp_nanos(t)
                        ),
                    );
                }
            }
            if let Row::Audit(a) = &row
                && let Err(message) = check_audit_event(a)
            {
                c.add("audit", file, Some("event"), Some(index), message);
            }
            refs.see(&row, index);
            previous = Some(row);
            index += 1;
        }
    }
    c.report.rows_checked += index;
}

/// An audit row's `event` must be the audit event it was promoted from.
fn check_audit_event(a: &schemas::tables::AuditRow) -> Result<(), String> {
    let event: serde_json::Value =
        serde_json::from_str(&a.event).map_err(|e| format!("is not JSON: {e}"))?;
    let field = |name: &str| event.get(name).and_then(|v| v.as_str()).unwrap_or("");
    if field("apiVersion") != "audit.k8s.io/v1" || field("kind") != "Event" {
        return Err("expected an audit.k8s.io/v1 Event".to_string());
    }
    if field("auditID") != a.audit_id {
        return Err(format!(
            "auditID is {:?}, the row's audit_id is {:?}",
            field("auditID"),
            a.audit_id
        ));
    }
    Ok(())
}

/// Compares names, types and nullability column by column (metadata aside).
fn schema_matches(table: Table, found: &Schema, file: &str, c: &mut Collector) -> bool {
    let expected = table.schema();
    let mut ok = true;
    for field in expected.fields() {
        match found.field_with_name(field.name()) {
            Err(_) => {
                c.add(
                    "schema",
                    file,
                    Some(field.name()),
                    None,
                    "column is missing".into(),
                );
                ok = false;
            }
            Ok(f) if f.data_type() != field.data_type() => {
                c.add(
                    "schema",
                    file,
                    Some(field.name()),
                    None,
                    format!("type is {}, expected {}", f.data_type(), field.data_type()),
                );
                ok = false;
            }
            Ok(_) => {}
        }
    }
    for field in found.fields() {
        if expected.field_with_name(field.name()).is_err() {
            c.add(
                "schema",
                file,
                Some(field.name()),
                None,
                "column is not part of the table".into(),
            );
        }
    }
    ok
}
