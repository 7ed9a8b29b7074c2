//! Files that strangers write, read through the functions the commands read them with: problem
//! specs and noise profiles (the catalog's parser and validation), ground truths (the judge's
//! loader, faultline's and ITBench's), agent outputs (parsed and scored) and dataset manifests
//! (opened, verified and validated).

use std::path::{Path, PathBuf};

use problems::{Catalog, SourceFile, SpecKind};

use super::{Target, text};

/// A scratch directory in memory where there is one: file targets write each input there.
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::Builder::new()
            .prefix("faultline-fuzz-")
            .tempdir_in(shm)
    } else {
        tempfile::Builder::new().prefix("faultline-fuzz-").tempdir()
    };
    dir.expect("a scratch directory")
}

pub struct ProblemSpec {
    /// The built-in applications and noise profiles, which a problem names.
    base: Catalog,
}

impl ProblemSpec {
    pub fn new() -> Self {
        let files = problems::catalog::builtin_files()
            .into_iter()
            .filter(|(k, _)| *k != SpecKind::Problem)
            .collect();
        ProblemSpec {
            base: Catalog::from_files(files).expect("the built-in catalog is valid"),
        }
    }
}

impl Target for ProblemSpec {
    fn name(&self) -> &'static str {
        "problem_spec"
    }

    fn dictionary(&self) -> &'static [&'static str] {
        &[
            "[[faults]]\n",
            "[[decoys]]\n",
            "[oracle]\n",
            "[[oracle.state]]\n",
            "[ground_truth]\n",
            "[[disturbances]]\n",
            "primitive = ",
            "\"service_target_port\"",
            "\"load_spike\"",
            "\"scale\"",
            "\"network_loss\"",
            "\"memory_limit\"",
            "\"env_remove\"",
            "\"node_cpu_stress\"",
            "service = \"geo\"",
            "target_port = ",
            "multiplier = ",
            "replicas = ",
            "percent = ",
            "every = ",
            "per_period = ",
            "length = ",
            "onset = ",
            "duration = ",
            "baseline = ",
            "\"0s\"",
            "\"10000h\"",
            "\"5m\"",
            "inf",
            "nan",
            "-250",
            "1e300",
            "0",
            "65536",
            "= \"x\"",
            "kind = \"request_drop\"",
            "kind = \"pod_kill\"",
            "\n",
            "=",
            "\"",
            "[",
            "]",
        ]
    }

    fn run(&self, input: &[u8]) {
        for kind in [SpecKind::Problem, SpecKind::Noise] {
            let file = SourceFile {
                path: "fuzz.toml".into(),
                text: text(input).into_owned(),
            };
            for d in self.base.check_file(kind, file) {
                // Every diagnostic renders (line, column and field point inside the text).
                let _ = d.to_string();
            }
        }
    }
}

pub struct GroundTruth {
    dir: tempfile::TempDir,
}

impl GroundTruth {
    pub fn new() -> Self {
        GroundTruth { dir: scratch() }
    }
}

/// JSON when it looks like JSON, YAML otherwise: the loader decides by extension.
fn truth_file(dir: &Path, input: &[u8]) -> PathBuf {
    let json = input
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| matches!(b, b'{' | b'['));
    dir.join(if json { "gt.json" } else { "gt.yaml" })
}

impl Target for GroundTruth {
    fn name(&self) -> &'static str {
        "ground_truth"
    }

    fn dictionary(&self) -> &'static [&'static str] {
        &[
            "\"schema_version\": 1",
            "\"schema_version\": 99",
            "\"components\": []",
            "\"root_cause\": true",
            "\"id\": \"geo\"",
            "\"kind\": \"Service\"",
            "\"faults\": [",
            "\"propagations\": [",
            "\"aliases\": [[",
            "\"source\": ",
            "\"target\": ",
            "groups:\n",
            "  - id: x\n",
            "    kind: Pod\n",
            "    root_cause: true\n",
            "    filter:\n      - geo-.*\n",
            "propagations:\n",
            "aliases:\n",
            "spec:\n",
            "apiVersion: itbench.io/v1\n",
            "&a ",
            "*a",
            "!!binary ",
            "{}",
            "[]",
            "null",
            ": ",
            "- ",
            "\n  ",
            "(?i)",
            ".*",
            "(a+)+$",
        ]
    }

    fn run(&self, input: &[u8]) {
        let path = truth_file(self.dir.path(), input);
        if std::fs::write(&path, input).is_ok() {
            let _ = judge::truth::load(&path);
            let _ = std::fs::remove_file(&path);
        }
    }
}

pub struct AgentOutput {
    /// Each truth with its index (its filters compiled once, as the judge does for a batch).
    truths: Vec<(schemas::GroundTruth, judge::entities::GtIndex)>,
}

impl AgentOutput {
    pub fn new() -> Self {
        let dir = scratch();
        // The ground-truth corpus's seeds, read as the judge reads them, are what outputs are
        // scored against.
        let mut truths = Vec::new();
        for (name, bytes) in crate::engine::load_corpus("ground_truth") {
            let path = dir.path().join(&name);
            if std::fs::write(&path, &bytes).is_ok()
                && let Ok(loaded) = judge::truth::load(&path)
            {
                truths.extend(loaded.into_values().map(|t| t.truth.clone()));
            }
        }
        assert!(
            !truths.is_empty(),
            "the ground_truth corpus holds valid seeds"
        );
        let truths = truths
            .into_iter()
            .map(|t| {
                let idx = judge::entities::GtIndex::new(&t);
                (t, idx)
            })
            .collect();
        AgentOutput { truths }
    }
}

impl Target for AgentOutput {
    fn name(&self) -> &'static str {
        "agent_output"
    }

    fn dictionary(&self) -> &'static [&'static str] {
        &[
            "{\"entities\": [",
            "\"name\": \"hotel/Service/geo\"",
            "\"contributing_factor\": true",
            "\"propagations\": [",
            "\"source\": ",
            "\"target\": ",
            "\"condition\": \"x\"",
            "\"diagnosis\": ",
            "\"root_cause\": ",
            "```json\n",
            "```\n",
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "null",
            "true",
            "\"\\u0000\"",
            "hotel/Pod/geo-1",
            "Deployment/geo",
            "otel-demo/ConfigMap/flagd-config",
        ]
    }

    fn run(&self, input: &[u8]) {
        let t = text(input);
        for json in [true, false] {
            if let Ok(out) = judge::submission::parse(&t, json) {
                for (gt, idx) in &self.truths {
                    let e = judge::itbench::Evaluation::with_index(gt, idx, &out);
                    let _ = e.flat(None);
                }
            }
        }
    }
}

pub struct Manifest {
    dir: tempfile::TempDir,
}

impl Manifest {
    pub fn new() -> Self {
        Manifest { dir: scratch() }
    }
}

impl Target for Manifest {
    fn name(&self) -> &'static str {
        "manifest"
    }

    fn dictionary(&self) -> &'static [&'static str] {
        &[
            "\"file\": \"../../../../etc/passwd\"",
            "\"file\": \"/etc/passwd\"",
            "\"file\": \"metrics.parquet\"",
            "\"file\": \"\"",
            "\"file\": \"a/b\"",
            "\"rows\": ",
            "\"bytes\": ",
            "\"sha256\": \"",
            "\"format\": \"faultline-dataset\"",
            "\"schema_version\": ",
            "\"window\": {",
            "\"start\": \"2026-01-01T00:00:00Z\"",
            "\"end\": \"9999-12-31T23:59:59Z\"",
            "\"virtual_now\": ",
            "\"tables\": {",
            "\"metrics\": {",
            "\"logs\": {",
            "18446744073709551615",
            "-1",
            "{",
            "}",
            ",",
            ":",
        ]
    }

    fn run(&self, input: &[u8]) {
        let dir = self.dir.path();
        if std::fs::write(dir.join("manifest.json"), input).is_ok() {
            let _ = datasets::Dataset::open_verified(dir);
            let _ = datasets::validate(dir);
        }
    }
}
