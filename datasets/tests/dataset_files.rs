//! The dataset writer, reader and validator, end to end on real files.

use std::path::Path;

use chrono::{DateTime, Utc};
use datasets::encode::cmp_rows;
use datasets::synth::{START_NS, metric_samples, mixed_rows};
use datasets::{Dataset, DatasetInfo, DatasetWriter, WriterConfig, validate};
use schemas::TimeWindow;
use schemas::tables::{Row, Table};

fn info() -> DatasetInfo {
    let start = DateTime::<Utc>::from_timestamp_nanos(START_NS);
    let end = start + chrono::Duration::hours(2);
    DatasetInfo {
        environment: "sim".into(),
        application: Some("hotel-reservation".into()),
        namespaces: vec!["hotel-reservation".into()],
        window: TimeWindow { start, end },
        virtual_now: end,
    }
}

/// Rows in a scrambled but deterministic order, so the writer has to sort.
fn scrambled(mut rows: Vec<Row>) -> Vec<Row> {
    let n = rows.len();
    for i in 0..n {
        rows.swap(i, (i * 7_919 + 13) % n);
    }
    rows
}

fn write(dir: &Path, rows: Vec<Row>, config: WriterConfig) -> schemas::Manifest {
    let mut w = DatasetWriter::with_config(dir, config).unwrap();
    w.extend(rows).unwrap();
    w.finish(info()).unwrap()
}

#[test]
fn every_table_reads_back_sorted_and_equal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let rows = mixed_rows(50);
    write(&dir, scrambled(rows.clone()), WriterConfig::default());

    let ds = Dataset::open(&dir).unwrap();
    for table in Table::ALL {
        let mut expected: Vec<Row> = rows
            .iter()
            .filter(|r| r.table() == table)
            .cloned()
            .collect();
        expected.sort_by(cmp_rows);
        let got = ds.read_rows(table).unwrap();
        assert_eq!(got.len(), expected.len(), "{table}");
        assert_eq!(got, expected, "{table}");
        assert_eq!(ds.entry(table).unwrap().rows, expected.len() as u64);
    }
    let report = validate(&dir);
    assert!(report.is_valid(), "{:?}", report.findings);
    assert_eq!(report.rows_checked, rows.len() as u64);
}

#[test]
fn spilled_runs_merge_into_the_same_bytes_as_an_in_memory_sort() {
    let tmp = tempfile::tempdir().unwrap();
    // 400 scrapes of 40 series: 100 minutes, inside the two-hour window.
    let rows: Vec<Row> = metric_samples(16_000, 40).map(Row::Metric).collect();
    // 11 spilled runs merged three at a time: three tiers of runs before the final merge.
    let small = WriterConfig {
        spill_rows: 1_500,
        batch_rows: 1_000,
        merge_fan_in: 3,
        ..WriterConfig::default()
    };
    let big = WriterConfig {
        batch_rows: 1_000,
        ..WriterConfig::default()
    };
    let a = write(&tmp.path().join("a"), rows.clone(), small);
    let b = write(&tmp.path().join("b"), rows, big);
    assert_eq!(a.tables, b.tables);
    assert_eq!(a.dataset_id, b.dataset_id);
    assert!(!tmp.path().join("a/.runs").exists());
    let report = validate(&tmp.path().join("a"));
    assert!(report.is_valid(), "{:?}", report.findings);
}

#[test]
fn different_data_gets_a_different_id() {
    let tmp = tempfile::tempdir().unwrap();
    let a = write(
        &tmp.path().join("a"),
        mixed_rows(5),
        WriterConfig::default(),
    );
    let b = write(
        &tmp.path().join("b"),
        mixed_rows(6),
        WriterConfig::default(),
    );
    assert_ne!(a.dataset_id, b.dataset_id);
}

#[test]
fn a_flipped_byte_is_reported_with_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    write(&dir, mixed_rows(20), WriterConfig::default());
    let path = dir.join("logs.parquet");
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();

    let report = validate(&dir);
    assert!(!report.is_valid());
    let checksum = report
        .findings
        .iter()
        .find(|f| f.message.contains("checksum"))
        .expect("a checksum finding");
    assert_eq!(checksum.file, "logs.parquet");
    assert!(report.findings.iter().all(|f| f.file == "logs.parquet"));
}

#[test]
fn files_beside_the_tables_are_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    write(&dir, mixed_rows(3), WriterConfig::default());
    std::fs::write(dir.join("ground_truth.json"), "{}").unwrap();
    let report = validate(&dir);
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    assert_eq!(report.findings[0].file, "ground_truth.json");
}

#[test]
fn manifest_problems_name_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    write(&dir, mixed_rows(3), WriterConfig::default());
    let path = dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["schema_version"] = 7.into();
    std::fs::write(&path, manifest.to_string()).unwrap();
    let err = Dataset::open(&dir).unwrap_err().to_string();
    assert!(
        err.contains("manifest.json") && err.contains("schema_version"),
        "{err}"
    );

    manifest.as_object_mut().unwrap().remove("window");
    manifest["schema_version"] = 1.into();
    std::fs::write(&path, manifest.to_string()).unwrap();
    let err = Dataset::open(&dir).unwrap_err().to_string();
    assert!(err.contains("window") && err.contains("line 1"), "{err}");
}

#[test]
fn rows_outside_the_window_and_orphan_spans_are_found() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let mut rows = mixed_rows(4);
    if let Some(Row::Log(log)) = rows.iter_mut().find(|r| matches!(r, Row::Log(_))) {
        log.time_ns = START_NS - 1;
    }
    if let Some(Row::Span(span)) = rows
        .iter_mut()
        .find(|r| matches!(r, Row::Span(s) if s.parent_span_id.is_some()))
    {
        span.parent_span_id = Some("ffffffffffffffff".into());
    }
    write(&dir, rows, WriterConfig::default());
    let report = validate(&dir);
    let window = report
        .findings
        .iter()
        .find(|f| f.message.contains("outside the manifest window"))
        .expect("window finding");
    assert_eq!(
        (window.file.as_str(), window.column.as_deref(), window.row),
        ("logs.parquet", Some("time"), Some(0))
    );
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.file == "spans.parquet" && f.message.contains("ffffffffffffffff"))
    );
}

#[test]
fn an_unfinished_writer_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    {
        let mut w = DatasetWriter::create(&dir).unwrap();
        w.extend(mixed_rows(3)).unwrap();
    }
    assert!(!dir.exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn an_existing_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let err = DatasetWriter::create(tmp.path()).err().unwrap().to_string();
    assert!(err.contains("already exists"), "{err}");
}

#[cfg(feature = "polars")]
#[test]
fn polars_reads_every_table_with_the_documented_types() {
    use polars::prelude::*;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    write(&dir, mixed_rows(10), WriterConfig::default());
    let ds = Dataset::open(&dir).unwrap();
    let metrics = ds.lazy(Table::Metrics).unwrap().collect().unwrap();
    assert_eq!(
        metrics.height() as u64,
        ds.entry(Table::Metrics).unwrap().rows
    );
    assert_eq!(
        metrics.column("time").unwrap().dtype(),
        &DataType::Datetime(TimeUnit::Nanoseconds, Some(TimeZone::UTC))
    );
    assert_eq!(metrics.column("value").unwrap().dtype(), &DataType::Float64);
    assert!(matches!(
        metrics.column("labels").unwrap().dtype(),
        DataType::List(_)
    ));
    // A typical analysis: samples per metric name.
    let per_metric = ds
        .lazy(Table::Metrics)
        .unwrap()
        .group_by([col("metric")])
        .agg([len().alias("n")])
        .collect()
        .unwrap();
    assert_eq!(per_metric.height(), 3);
    for table in Table::ALL {
        let df = ds.lazy(table).unwrap().collect().unwrap();
        assert_eq!(df.height() as u64, ds.entry(table).unwrap().rows, "{table}");
    }
}

/// One audit row, `i` seconds into the window, its event carrying its id.
fn audit_row(i: i64, audit_id: &str) -> schemas::tables::AuditRow {
    schemas::tables::AuditRow {
        time_ns: START_NS + i * 1_000_000_000,
        audit_id: audit_id.into(),
        api: "kubernetes".into(),
        verb: "patch".into(),
        request_uri: "/api/v1/namespaces/x/services/geo".into(),
        user_agent: Some("kubectl/v1.32.4".into()),
        source_ip: Some("127.0.0.1".into()),
        api_group: Some(String::new()),
        api_version: Some("v1".into()),
        resource: Some("services".into()),
        namespace: Some("x".into()),
        name: Some("geo".into()),
        subresource: None,
        code: 200,
        latency_ns: 1_234_567,
        event: serde_json::json!({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "auditID": audit_id
        })
        .to_string(),
    }
}

#[test]
fn the_audit_table_is_written_only_when_there_is_one() {
    let tmp = tempfile::tempdir().unwrap();
    // A dataset without requests has no audit table, and is valid.
    let plain = tmp.path().join("plain");
    let manifest = write(&plain, mixed_rows(5), WriterConfig::default());
    assert!(!manifest.tables.contains_key(&Table::Audit));
    assert!(!plain.join("audit.parquet").exists());
    assert!(validate(&plain).is_valid());
    // Asked for, it is written even empty: recorded, and nothing was requested.
    let empty = tmp.path().join("empty");
    let mut w = DatasetWriter::create(&empty).unwrap();
    w.extend(mixed_rows(5)).unwrap();
    w.include(Table::Audit);
    let manifest = w.finish(info()).unwrap();
    assert_eq!(manifest.tables[&Table::Audit].rows, 0);
    assert!(validate(&empty).is_valid());
    // Rows come back sorted by time, then audit id.
    let full = tmp.path().join("full");
    let audit = [
        audit_row(3, "00000000-0000-4000-8000-000000000003"),
        audit_row(1, "00000000-0000-4000-8000-000000000002"),
        audit_row(1, "00000000-0000-4000-8000-000000000001"),
    ];
    let mut rows = mixed_rows(5);
    rows.extend(audit.map(Row::Audit));
    write(&full, scrambled(rows), WriterConfig::default());
    let back = Dataset::open(&full)
        .unwrap()
        .read_rows(Table::Audit)
        .unwrap();
    let ids: Vec<String> = back
        .into_iter()
        .map(|r| match r {
            Row::Audit(a) => a.audit_id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        ids,
        [
            "00000000-0000-4000-8000-000000000001",
            "00000000-0000-4000-8000-000000000002",
            "00000000-0000-4000-8000-000000000003"
        ]
    );
    let report = validate(&full);
    assert!(report.is_valid(), "{:?}", report.findings);
}

#[test]
fn an_audit_event_that_disagrees_with_its_row_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let mut bad = audit_row(2, "id-2");
    bad.event = bad.event.replace("id-2", "id-9");
    let mut not_json = audit_row(3, "id-3");
    not_json.event = "{".into();
    let mut rows = mixed_rows(5);
    rows.extend([audit_row(1, "id-1"), bad, not_json].map(Row::Audit));
    write(&dir, rows, WriterConfig::default());
    let report = validate(&dir);
    let audit: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.file == "audit.parquet")
        .collect();
    assert_eq!(audit.len(), 2, "{:?}", report.findings);
    assert!(audit[0].message.contains("id-9") && audit[0].row == Some(1));
    assert!(audit[1].message.contains("not JSON") && audit[1].row == Some(2));
}

/// A memory budget far below the data: tables spill by size, the largest first, runs merge in
/// tiers, and the files hold the same bytes as when everything fits in memory.
#[test]
fn a_small_memory_budget_spills_to_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rows: Vec<Row> = metric_samples(20_000, 50).map(Row::Metric).collect();
    rows.extend(mixed_rows(400));
    let rows = scrambled(rows);
    let tight = WriterConfig {
        memory_bytes: 256 * 1024,
        merge_fan_in: 3,
        batch_rows: 1_000,
        ..WriterConfig::default()
    };
    let roomy = WriterConfig {
        batch_rows: 1_000,
        ..WriterConfig::default()
    };
    let a = write(&tmp.path().join("a"), rows.clone(), tight);
    let b = write(&tmp.path().join("b"), rows, roomy);
    assert_eq!(a.tables, b.tables);
    assert_eq!(a.dataset_id, b.dataset_id);
    let report = validate(&tmp.path().join("a"));
    assert!(report.is_valid(), "{:?}", report.findings);
}

/// When the sorting thread cannot write its runs, the writer says where, and leaves nothing.
#[test]
fn a_failing_spill_is_reported_with_its_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let config = WriterConfig {
        memory_bytes: 64 * 1024,
        ..WriterConfig::default()
    };
    let mut w = DatasetWriter::with_config(&dir, config).unwrap();
    let partial = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains(".ds.partial-"))
        .expect("the writer's hidden directory");
    std::fs::remove_dir_all(partial.join(".runs")).unwrap();
    let pushed = w.extend(metric_samples(50_000, 50).map(Row::Metric));
    let err = match pushed {
        Err(e) => e,
        Ok(()) => w.finish(info()).unwrap_err(),
    };
    assert!(err.to_string().contains(".runs"), "{err}");
    assert!(!dir.exists());
}
