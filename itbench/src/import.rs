//! `import`: an ITBench scenario directory to `OUT/dataset` (a faultline dataset),
//! `OUT/ground_truth.json` (beside it, as `collector snapshot` writes them) and
//! `OUT/import_report.json` (what was read, written and left out).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use datasets::{DatasetInfo, DatasetWriter};
use schemas::TimeWindow;
use schemas::tables::Row;

use crate::{
    Error, Report, Staged, alerts, events, logs, metrics, objects, spans, truth, write_json,
};

/// How to import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The problem id the ground truth is kept under (default: its `id`, else the scenario's
    /// number from the directory name, else the directory name).
    pub problem_id: Option<String>,
    /// The application the manifest names (default: `astronomy-shop` when the snapshot has the
    /// `otel-demo` namespace, ITBench's SRE application).
    pub application: Option<String>,
}

fn entries(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// `Scenario-2`, `scenario_12-fragments` → the scenario's number; other names as they are.
pub fn scenario_id(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lower = name.to_ascii_lowercase();
    for word in ["scenario", "incident"] {
        if let Some(at) = lower.find(word) {
            let digits: String = lower[at + word.len()..]
                .trim_start_matches(['-', '_', ' ', 'i'])
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if !digits.is_empty() {
                let trimmed = digits.trim_start_matches('0');
                return if trimmed.is_empty() {
                    "0".into()
                } else {
                    trimmed.to_string()
                };
            }
        }
    }
    name
}

/// Reads every file of the snapshot into rows; returns the ground truth file when there is one.
fn read_all(
    dir: &Path,
    rows: &mut Vec<Row>,
    report: &mut Report,
    progress: &mut dyn FnMut(&Path),
) -> Result<Option<PathBuf>, Error> {
    let mut seen = metrics::Seen::default();
    let mut truth_file = None;
    for path in entries(dir)? {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        progress(&path);
        if path.is_dir() {
            match name.as_str() {
                "alerts" => {
                    for f in entries(&path)?
                        .into_iter()
                        .filter(|f| f.extension().is_some_and(|e| e == "json"))
                    {
                        alerts::read(&f, rows, report)?;
                    }
                }
                "metrics" => {
                    for f in entries(&path)?
                        .into_iter()
                        .filter(|f| f.extension().is_some_and(|e| e == "tsv"))
                    {
                        progress(&f);
                        metrics::read(&f, rows, &mut seen, report)?;
                    }
                }
                _ => report.skip("directory not recognised", path.display()),
            }
            continue;
        }
        if truth::is_ground_truth(&name) {
            if truth_file.is_some() {
                report.skip(
                    "second ground truth file (the first is used)",
                    path.display(),
                );
            } else {
                truth_file = Some(path);
            }
        } else if name.ends_with(".tsv") {
            if name.contains("event") {
                events::read(&path, rows, report)?;
            } else if name.contains("object") {
                objects::read(&path, rows, report)?;
            } else if name.contains("trace") {
                spans::read(&path, rows, report)?;
            } else if name.contains("log") {
                logs::read(&path, rows, report)?;
            } else {
                report.skip("TSV file not recognised", path.display());
            }
        } else if name == "metric_metadata.json" {
            metrics::read_metadata(&path, rows, report)?;
        } else if name == "app.json" || name.contains("architecture") || name.contains("topology") {
            report.skip(
                "application architecture or topology file (calls come from the traces)",
                path.display(),
            );
        } else {
            report.skip("file not recognised", path.display());
        }
    }
    Ok(truth_file)
}

/// Log lines of pods the objects never show: a dataset's logs belong to pods it holds.
fn drop_orphan_logs(rows: &mut Vec<Row>, report: &mut Report) {
    let pods: HashSet<(String, String)> = rows
        .iter()
        .filter_map(|r| match r {
            Row::Object(o) if o.kind == "Pod" => {
                Some((o.namespace.clone().unwrap_or_default(), o.name.clone()))
            }
            _ => None,
        })
        .collect();
    if !rows.iter().any(|r| matches!(r, Row::Object(_))) {
        return;
    }
    rows.retain(|r| match r {
        Row::Log(l) if !pods.contains(&(l.namespace.clone(), l.pod.clone())) => {
            report.skip(
                "log line of a pod the objects never show (left out)",
                format!("{}/{}", l.namespace, l.pod),
            );
            false
        }
        _ => true,
    });
}

/// The manifest's description of the rows.
fn info(rows: &[Row], application: Option<String>) -> Option<DatasetInfo> {
    let (lo, hi) = rows
        .iter()
        .filter_map(Row::time_ns)
        .fold(None, |acc: Option<(i64, i64)>, t| {
            Some(acc.map_or((t, t), |(a, b)| (a.min(t), b.max(t))))
        })?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for r in rows {
        let ns = match r {
            Row::Object(o) => o.namespace.clone(),
            Row::Event(e) => Some(e.namespace.clone()),
            Row::Log(l) => Some(l.namespace.clone()),
            Row::Metric(m) => m.labels.get("namespace").cloned(),
            Row::Span(s) => s.resource_attributes.get("k8s.namespace.name").cloned(),
            Row::Alert(a) => a.labels.get("namespace").cloned(),
            _ => None,
        };
        if let Some(ns) = ns.filter(|n| !n.is_empty()) {
            *counts.entry(ns).or_default() += 1;
        }
    }
    let mut namespaces: Vec<(String, u64)> = counts.into_iter().collect();
    namespaces.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let namespaces: Vec<String> = namespaces.into_iter().map(|(n, _)| n).collect();
    let application = application.or_else(|| {
        namespaces
            .iter()
            .any(|n| n == "otel-demo")
            .then(|| "astronomy-shop".to_string())
    });
    let time = chrono::DateTime::from_timestamp_nanos;
    Some(DatasetInfo {
        environment: "import:itbench".into(),
        application,
        namespaces,
        window: TimeWindow {
            start: time(lo),
            end: time(hi),
        },
        virtual_now: time(hi),
    })
}

/// Imports the ITBench scenario in `dir` into `out`; `progress` hears of each file as it is read.
pub fn import(
    dir: &Path,
    out: &Path,
    opts: &ImportOptions,
    progress: &mut dyn FnMut(&Path),
) -> Result<Report, Error> {
    if !dir.is_dir() {
        return Err(Error::invalid(
            dir,
            "is not a directory (expected an ITBench scenario directory)",
        ));
    }
    let staged = Staged::new(out)?;
    let mut report = Report {
        source: dir.display().to_string(),
        destination: out.display().to_string(),
        ..Report::default()
    };
    let mut rows: Vec<Row> = Vec::new();
    let truth_file = read_all(dir, &mut rows, &mut report, progress)?;
    spans::orphans_to_roots(&mut rows, &mut report);
    drop_orphan_logs(&mut rows, &mut report);
    let Some(info) = info(&rows, opts.application.clone()) else {
        return Err(Error::invalid(
            dir,
            "no ITBench snapshot data found (alerts/*.json, metrics/*.tsv, k8s_events_raw.tsv, k8s_objects_raw.tsv, otel_traces_raw.tsv, otel_logs_raw.tsv)",
        ));
    };
    for r in &rows {
        *report.rows.entry(r.table().name().to_string()).or_default() += 1;
    }
    let mut writer = DatasetWriter::create(&staged.tmp.join("dataset"))?;
    writer.extend(rows)?;
    writer.finish(info)?;
    match truth_file {
        Some(path) => {
            let id = opts.problem_id.clone().unwrap_or_else(|| scenario_id(dir));
            let mut gt = truth::read(&path, &id)?;
            if let Some(forced) = &opts.problem_id {
                gt.extensions.insert(truth::PROBLEM_ID.into(), forced.clone().into());
            }
            report.ground_truth = gt.extensions.get(truth::PROBLEM_ID).and_then(|v| v.as_str()).map(str::to_string);
            report.file("ground truth");
            write_json(&staged.tmp.join("ground_truth.json"), &gt)?;
        }
        None => report.skip("no ground truth in the snapshot (the dataset replays and analyses, but cannot be judged)", dir.display()),
    }
    write_json(&staged.tmp.join("import_report.json"), &report)?;
    staged.commit()?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_numbers_come_from_directory_names() {
        assert_eq!(scenario_id(Path::new("/x/Scenario-2")), "2");
        assert_eq!(scenario_id(Path::new("Scenario-2-fragments")), "2");
        assert_eq!(scenario_id(Path::new("scenario_012")), "12");
        assert_eq!(scenario_id(Path::new("my-run")), "my-run");
    }
}
