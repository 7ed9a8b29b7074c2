//! `manifest.json`: what a dataset holds. Everything here is visible to an agent during replay, so it
//! carries nothing that reveals the injected fault (no problem id, seed, onset or capture report:
//! those live in [`crate::ground_truth::EvaluatorRecord`], outside the dataset directory).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::tables::Table;

/// The manifest of one dataset directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always `faultline-dataset`.
    pub format: String,
    /// Dataset format version ([`crate::DATASET_FORMAT_VERSION`]).
    pub schema_version: u32,
    /// Opaque identifier: a digest of the tables' checksums, so equal data gives an equal id.
    pub dataset_id: String,
    /// Where the data came from: `sim`, `kube`, or `import:<source>`.
    pub environment: String,
    /// The application that ran (e.g. `hotel-reservation`), when known.
    pub application: Option<String>,
    /// Namespaces whose objects and telemetry were captured.
    pub namespaces: Vec<String>,
    /// The captured time range.
    pub window: TimeWindow,
    /// The instant replay presents as "now".
    pub virtual_now: DateTime<Utc>,
    /// The program that wrote the dataset.
    pub generator: Generator,
    /// One entry per table present, keyed by table name.
    pub tables: BTreeMap<Table, TableEntry>,
}

/// A closed time range `[start, end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimeWindow {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl TimeWindow {
    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        self.start <= t && t <= self.end
    }
}

/// Name and version of the program that wrote a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Generator {
    pub name: String,
    pub version: String,
}

/// One table's file, size and checksum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TableEntry {
    /// File name relative to the dataset directory.
    pub file: String,
    pub rows: u64,
    pub bytes: u64,
    /// Lower-case hex SHA-256 of the file's bytes.
    pub sha256: String,
}
