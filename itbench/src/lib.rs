//! ITBench snapshots to faultline datasets and back.
//!
//! An ITBench SRE scenario (ITBench-Lite) is a directory of files agents read with `cat` and
//! `grep`: `alerts/*.json` (a list of firing alerts per observation, or a Prometheus API
//! envelope), `k8s_events_raw.tsv` and `k8s_objects_raw.tsv` (OTel logs rows whose Body is a
//! Kubernetes watch event or object), `otel_traces_raw.tsv`, `otel_logs_raw.tsv`,
//! `metrics/pod_<pod>_raw.tsv` and `metrics/service_<svc>_raw.tsv`, and `ground_truth.yaml`.
//! [`import()`] maps them into a faultline dataset (served by replay through kubectl, PromQL,
//! Jaeger and Loki, analysed, judged with the ground truth beside it) and reports what it
//! could not map; [`export()`] writes a dataset back in the same layout, so ITBench's agents and
//! tools run on faultline datasets. What flows through each module is one kind of signal, both
//! ways: [`alerts`], [`events`], [`objects`], [`logs`], [`spans`], [`metrics`], [`truth`].
//!
//! Import then export then import keeps every row: each mapping is chosen so that what import
//! produces, export writes back in a form import reads to the same row.

pub mod alerts;
pub mod events;
mod export;
mod import;
pub mod logs;
pub mod metrics;
pub mod objects;
pub mod pydict;
pub mod spans;
pub mod truth;
pub mod tsv;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use export::{ExportOptions, export};
pub use import::{ImportOptions, import};

/// Why an import or export failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    Format {
        path: PathBuf,
        line: u64,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(transparent)]
    Dataset(#[from] datasets::DatasetError),
    #[error("analysing the dataset: {0}")]
    Analysis(#[from] analysis::Error),
}

impl Error {
    pub fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
    pub fn format(path: &Path, line: u64, message: impl Into<String>) -> Error {
        Error::Format {
            path: path.to_path_buf(),
            line,
            message: message.into(),
        }
    }
    pub fn invalid(path: &Path, message: impl Into<String>) -> Error {
        Error::Invalid {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// Something that could not be mapped (or was deliberately left out), how often, and where
/// the first one was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotMapped {
    pub what: String,
    pub count: u64,
    pub first: String,
}

/// What an import or export did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub source: String,
    pub destination: String,
    /// Files read (import) or written (export), by kind.
    pub files: BTreeMap<String, u64>,
    /// Rows per dataset table (import: written; export: read).
    pub rows: BTreeMap<String, u64>,
    pub not_mapped: Vec<NotMapped>,
    /// The problem id of the ground truth, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ground_truth: Option<String>,
}

impl Report {
    /// Counts one occurrence of something not mapped; `at` locates the first.
    pub fn skip(&mut self, what: &str, at: impl std::fmt::Display) {
        self.skip_n(what, 1, at);
    }

    pub fn skip_n(&mut self, what: &str, n: u64, at: impl std::fmt::Display) {
        if n == 0 {
            return;
        }
        match self.not_mapped.iter_mut().find(|m| m.what == what) {
            Some(m) => m.count += n,
            None => self.not_mapped.push(NotMapped {
                what: what.to_string(),
                count: n,
                first: at.to_string(),
            }),
        }
    }

    pub fn file(&mut self, kind: &str) {
        *self.files.entry(kind.to_string()).or_default() += 1;
    }
}

/// Where a record is, for reports and errors.
pub fn at(path: &Path, line: u64) -> String {
    format!("{}:{line}", path.display())
}

/// Moves a finished output directory into place, or removes it on failure: a reader never finds
/// half an import or export under the name asked for.
pub(crate) struct Staged {
    pub tmp: PathBuf,
    out: PathBuf,
    done: bool,
}

impl Staged {
    pub fn new(out: &Path) -> Result<Staged, Error> {
        if out.exists() {
            return Err(Error::invalid(
                out,
                "already exists; choose a new output directory",
            ));
        }
        let name = out
            .file_name()
            .ok_or_else(|| Error::invalid(out, "is not a directory name"))?
            .to_string_lossy()
            .into_owned();
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
        let tmp = parent.join(format!(".{name}.partial-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| Error::io(&tmp, e))?;
        Ok(Staged {
            tmp,
            out: out.to_path_buf(),
            done: false,
        })
    }

    pub fn commit(mut self) -> Result<(), Error> {
        std::fs::rename(&self.tmp, &self.out).map_err(|e| Error::io(&self.out, e))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Writes JSON, pretty, to a file.
pub(crate) fn write_json(path: &Path, value: &impl Serialize) -> Result<(), Error> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| Error::invalid(path, e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|e| Error::io(path, e))
}
