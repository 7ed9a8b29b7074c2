//! Ground truths in, keyed by problem id: faultline's own documents and ITBench v1 (YAML or JSON,
//! wrapped under `spec:` or bare, one per file or a consolidated list such as `ground_truths.json`,
//! or a directory of scenario directories). Everything becomes a [`GroundTruth`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use anyhow::{Context, bail};
use regex::Regex;
use schemas::GroundTruth;
use schemas::itbench::ItbenchDocument;
use serde_json::Value;

/// One loaded ground truth.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedTruth {
    pub problem_id: String,
    pub truth: GroundTruth,
    /// Where it was read from (file, and index in a consolidated list).
    pub origin: String,
}

/// File names looked for inside a scenario directory, first hit wins (ITBench's loader order, then
/// faultline's).
const CANDIDATES: [&str; 7] = [
    "ground_truth.yaml",
    "ground_truth.yml",
    "ground_truth.json",
    "gt.yaml",
    "gt.json",
    "groundtruth_v1.yaml",
    "groundtruth.yaml",
];

static SCENARIO_ID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:scenario|incident)?[-_ ]?i?0*(\d+)$|^.*[-_]0*(\d+)$").expect("valid regex")
});

/// ITBench's scenario id canonicalisation: `Scenario-2`, `scenario_2`, `incident-2`, `scenario-i2`,
/// `2`, `…-2` all become `"2"`. Ids with no trailing number are kept as they are (trimmed).
pub fn canonical_scenario_id(raw: &str) -> String {
    let s = raw.trim();
    match SCENARIO_ID.captures(s) {
        Some(c) => {
            let digits = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
            if digits.is_empty() {
                "0".into()
            } else {
                digits.into()
            }
        }
        None => s.to_string(),
    }
}

/// Parses a YAML or JSON file into a JSON value, by extension (YAML is a superset of JSON, so an
/// unknown extension is read as YAML).
pub fn read_value(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if is_json {
        serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))
    } else {
        serde_norway::from_str(&text).with_context(|| format!("{}: not valid YAML", path.display()))
    }
}

/// Loads ground truths from a file or a directory.
/// Ground truths by problem id, shared (each is referenced by every output judged against it).
pub fn load(path: &Path) -> anyhow::Result<BTreeMap<String, Arc<LoadedTruth>>> {
    let mut out = BTreeMap::new();
    let mut inconsistent = Vec::new();
    if path.is_dir() {
        load_dir(path, &mut out, &mut inconsistent)?;
    } else {
        load_file(path, None, &mut out, &mut inconsistent)?;
    }
    if let Some(first) = inconsistent.first() {
        tracing::warn!(
            "{}: {} ITBench ground truths have inconsistent references and are read as ITBench reads them (first: {first}; RUST_LOG=judge=debug lists all)",
            path.display(),
            inconsistent.len()
        );
    }
    if out.is_empty() {
        bail!(
            "{}: no ground truth found (looked for ground_truths.json, */{{{}}}, and *.yaml|*.json)",
            path.display(),
            CANDIDATES.join(",")
        );
    }
    Ok(out.into_iter().map(|(k, v)| (k, Arc::new(v))).collect())
}

fn load_dir(
    dir: &Path,
    out: &mut BTreeMap<String, LoadedTruth>,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
    let consolidated = dir.join("ground_truths.json");
    if consolidated.is_file() {
        return load_file(&consolidated, None, out, notes);
    }
    for entry in sorted_entries(dir)? {
        if entry.is_dir() {
            let name = entry.file_name().map(|n| n.to_string_lossy().into_owned());
            if let Some(file) = CANDIDATES
                .iter()
                .map(|c| entry.join(c))
                .find(|p| p.is_file())
            {
                load_file(&file, name.as_deref(), out, notes)?;
            }
        } else if entry
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            load_file(&entry, None, out, notes)?;
        }
    }
    Ok(())
}

pub(crate) fn sorted_entries(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// `dir_name` is the scenario directory the file sits in, when it was found by directory scan: it
/// gives the id when the document has none (ITBench's loader does the same).
fn load_file(
    path: &Path,
    dir_name: Option<&str>,
    out: &mut BTreeMap<String, LoadedTruth>,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
    let value = read_value(path)?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fallback = dir_name.unwrap_or(&stem).to_string();
    match value {
        Value::Array(items) => {
            for (i, item) in items.into_iter().enumerate() {
                let origin = format!("{}[{i}]", path.display());
                if item.get("id").is_none() {
                    bail!("{origin}: a ground truth in a list needs an `id`");
                }
                insert(one(item, &fallback, &origin, notes)?, out)?;
            }
        }
        item => insert(
            one(item, &fallback, &path.display().to_string(), notes)?,
            out,
        )?,
    }
    Ok(())
}

fn insert(t: LoadedTruth, out: &mut BTreeMap<String, LoadedTruth>) -> anyhow::Result<()> {
    if let Some(prev) = out.get(&t.problem_id) {
        bail!(
            "problem id `{}` has two ground truths: {} and {}",
            t.problem_id,
            prev.origin,
            t.origin
        );
    }
    out.insert(t.problem_id.clone(), t);
    Ok(())
}

/// Reads one document of either family.
fn one(
    value: Value,
    fallback_id: &str,
    origin: &str,
    notes: &mut Vec<String>,
) -> anyhow::Result<LoadedTruth> {
    if !value.is_object() {
        bail!(
            "{origin}: expected a ground-truth object, found {}",
            kind_of(&value)
        );
    }
    let is_faultline = value.get("components").is_some() || value.get("schema_version").is_some();
    if is_faultline {
        let truth: GroundTruth = serde_json::from_value(value)
            .map_err(|e| anyhow::anyhow!("{origin}: not a faultline ground truth: {e}"))?;
        truth
            .check()
            .map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        let id = truth
            .extensions
            .get("problem_id")
            .and_then(Value::as_str)
            .unwrap_or(fallback_id)
            .trim()
            .to_string();
        return Ok(LoadedTruth {
            problem_id: id,
            truth,
            origin: origin.to_string(),
        });
    }
    let doc = ItbenchDocument::from_value(value)
        .map_err(|e| anyhow::anyhow!("{origin}: not an ITBench v1 ground truth: {e}"))?;
    // Every ITBench field has a default, so `{}` would parse as a truth with nothing to find.
    if doc.body.groups.is_empty() {
        bail!(
            "{origin}: neither a faultline ground truth (`schema_version`, `components`) nor an \
             ITBench one (`groups`, at least one of them `root_cause: true`)"
        );
    }
    let raw_id = match doc.body.extra.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => doc.name.clone().unwrap_or_else(|| fallback_id.to_string()),
    };
    let truth = GroundTruth::from(&doc.body);
    // Real ITBench files have dangling references (scenario 31 points a propagation at a group that
    // does not exist); ITBench's judge reads them anyway, so this one reports instead of refusing.
    if let Err(e) = truth.check() {
        tracing::debug!("{origin}: {e}");
        notes.push(format!("{origin}: {e}"));
    }
    Ok(LoadedTruth {
        problem_id: canonical_scenario_id(&raw_id),
        truth,
        origin: origin.to_string(),
    })
}

pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_ids_canonicalise_like_itbench() {
        for (raw, id) in [
            ("Scenario-2", "2"),
            ("scenario_2", "2"),
            ("incident-2", "2"),
            ("scenario-i12", "12"),
            ("Scenario-02", "2"),
            ("102", "102"),
            ("v0.2-abc-7", "7"),
            ("k8s-target-port-misconfig", "k8s-target-port-misconfig"),
        ] {
            assert_eq!(canonical_scenario_id(raw), id, "{raw}");
        }
    }
}
