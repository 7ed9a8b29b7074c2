//! `export`: a faultline dataset to ITBench's scenario layout, so ITBench's agents and offline
//! tools run on it: `alerts/`, `k8s_events_raw.tsv`, `k8s_objects_raw.tsv`, `otel_logs_raw.tsv`,
//! `otel_traces_raw.tsv`, `metrics/`, plus `metric_metadata.json` (no ITBench file holds it) and
//! `app.json` (ITBench's architecture file, made from the calls the traces show). The ground truth
//! beside the dataset becomes `ground_truth.yaml` only when asked: ITBench keeps it where its
//! agents can read it.

use std::cell::RefCell;
use std::path::Path;

use datasets::Dataset;
use schemas::tables::{Row, Table};
use serde_json::json;

use crate::{
    Error, Report, Staged, alerts, events, logs, metrics, objects, spans, truth, write_json,
};

/// How to export.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Write the ground truth beside the dataset as `ground_truth.yaml` (agents given the export
    /// can read it).
    pub include_ground_truth: bool,
}

/// Every row of a table, a batch at a time. A batch that fails to decode ends the rows and is
/// kept in `failure`, which the caller checks once the file is written.
fn rows<'a, T: TryFrom<Row>>(
    ds: &'a Dataset,
    table: Table,
    failure: &'a RefCell<Option<Error>>,
) -> Result<impl Iterator<Item = T> + 'a, Error> {
    let path = ds.path(table)?;
    let mut batches = ds.batches(table, 64 * 1024)?;
    let mut pending: std::vec::IntoIter<Row> = Vec::new().into_iter();
    Ok(std::iter::from_fn(move || {
        loop {
            if let Some(r) = pending.next() {
                return Some(r);
            }
            let decoded = batches
                .next()?
                .map_err(|e| datasets::DatasetError::arrow(&path, e))
                .and_then(|b| {
                    datasets::encode::decode(table, &b)
                        .map_err(|e| datasets::DatasetError::arrow(&path, e))
                });
            match decoded {
                Ok(rows) => pending = rows.into_iter(),
                Err(e) => {
                    *failure.borrow_mut() = Some(e.into());
                    return None;
                }
            }
        }
    })
    .filter_map(|r| T::try_from(r).ok()))
}

/// The error a table's rows ended with, if any.
fn check(failure: &RefCell<Option<Error>>) -> Result<(), Error> {
    failure.borrow_mut().take().map_or(Ok(()), Err)
}

/// ITBench's architecture file from the calls between services in the traces.
fn architecture(dataset: &Path) -> Result<serde_json::Value, Error> {
    let source = analysis::Source::dataset(dataset)?;
    let calls = analysis::topology::calls(&source)?;
    let mut services: Vec<&String> = calls.keys().flat_map(|(a, b)| [a, b]).collect();
    services.sort();
    services.dedup();
    Ok(json!({
        "components": {
            "services": services.iter().map(|s| json!({"name": s})).collect::<Vec<_>>(),
            "infrastructure": [],
        },
        "dependencies": calls.iter().map(|((from, to), (protocol, _))| {
            json!({"source": from, "target": to, "protocol": protocol})
        }).collect::<Vec<_>>(),
    }))
}

/// Exports the dataset in `dataset` (the directory holding manifest.json) into `out`.
pub fn export(
    dataset: &Path,
    out: &Path,
    opts: &ExportOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, Error> {
    let ds = Dataset::open(dataset)?;
    let staged = Staged::new(out)?;
    let dir = staged.tmp.clone();
    let mut report = Report {
        source: dataset.display().to_string(),
        destination: out.display().to_string(),
        ..Report::default()
    };
    for (table, entry) in &ds.manifest().tables {
        report.rows.insert(table.name().to_string(), entry.rows);
    }
    let failure = RefCell::new(None);
    progress("alerts");
    let n = alerts::write(
        &dir.join("alerts"),
        rows(&ds, Table::Alerts, &failure)?.collect(),
    )?;
    check(&failure)?;
    report.files.insert("alerts".into(), n);
    progress("events");
    events::write(
        &dir.join("k8s_events_raw.tsv"),
        rows(&ds, Table::Events, &failure)?,
    )?;
    check(&failure)?;
    progress("objects");
    objects::write(
        &dir.join("k8s_objects_raw.tsv"),
        rows(&ds, Table::Objects, &failure)?,
    )?;
    check(&failure)?;
    progress("logs");
    logs::write(
        &dir.join("otel_logs_raw.tsv"),
        rows(&ds, Table::Logs, &failure)?,
    )?;
    check(&failure)?;
    progress("traces");
    spans::write(
        &dir.join("otel_traces_raw.tsv"),
        rows(&ds, Table::Spans, &failure)?,
    )?;
    check(&failure)?;
    for kind in ["events", "objects", "logs", "traces"] {
        report.file(kind);
    }
    progress("metrics");
    let (files, _) = metrics::write(&dir.join("metrics"), rows(&ds, Table::Metrics, &failure)?)?;
    check(&failure)?;
    report.files.insert("metrics".into(), files);
    let metas = rows(&ds, Table::MetricMetadata, &failure)?.collect();
    check(&failure)?;
    metrics::write_metadata(&dir.join("metric_metadata.json"), metas)?;
    report.file("metric metadata");
    progress("architecture");
    write_json(&dir.join("app.json"), &architecture(dataset)?)?;
    report.file("architecture");
    if let Some(entry) = ds.manifest().tables.get(&Table::Audit) {
        report.skip_n(
            "audit table (evaluator data: no ITBench file, never given to agents)",
            entry.rows,
            "audit.parquet",
        );
    }
    let beside = dataset
        .parent()
        .unwrap_or(Path::new("."))
        .join("ground_truth.json");
    if beside.is_file() {
        if opts.include_ground_truth {
            let gt = truth::read(&beside, "")?;
            let yaml = truth::to_itbench(&gt, &mut report)?;
            let path = dir.join("ground_truth.yaml");
            std::fs::write(&path, yaml).map_err(|e| Error::io(&path, e))?;
            report.ground_truth = gt
                .extensions
                .get(truth::PROBLEM_ID)
                .and_then(|v| v.as_str())
                .map(str::to_string);
            report.file("ground truth");
        } else {
            report.skip("ground truth beside the dataset (not written: --include-ground-truth writes it where agents can read it)", beside.display());
        }
    }
    staged.commit()?;
    Ok(report)
}
