//! Finding the agent outputs to judge: ITBench's directory layout
//! (`<incident>/<trial>/[outputs/]agent_output.json`), faultline runs (`run.json` anywhere below a
//! root), SREGym result CSVs (`Diagnosis.submission` column), or a single output file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use schemas::AgentOutput;
use schemas::run_result::RunResult;
use schemas::verdict::{ItemRef, RunFacts};

use crate::submission;
use crate::truth::{self, LoadedTruth, canonical_scenario_id};

/// One agent output to judge, with the ground truth it is judged against.
#[derive(Debug, Clone)]
pub struct Item {
    pub item: ItemRef,
    /// The output, or why it could not be read (an agent error, scored 0).
    pub output: Result<AgentOutput, String>,
    pub truth: Arc<LoadedTruth>,
    /// What the session measured, for an item read from a faultline `run.json`.
    pub run: Option<RunFacts>,
}

/// What a scan found besides the items.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub items: Vec<Item>,
    /// Outputs whose problem has no ground truth (listed so the user sees them, never judged).
    pub without_truth: Vec<String>,
}

/// File names of an ITBench trial's output, in the loader's order.
const ITBENCH_FILES: [&str; 4] = [
    "outputs/agent_output.json",
    "outputs/agent_response.json",
    "agent_output.json",
    "agent_response.json",
];

/// Collects the items under `path` for `agent`. `problem` names the problem of a single output file.
pub fn scan(
    path: &Path,
    agent: &str,
    problem: Option<&str>,
    truths: &BTreeMap<String, Arc<LoadedTruth>>,
    scan: &mut Scan,
) -> anyhow::Result<()> {
    if path.is_dir() {
        let mut runs = Vec::new();
        find_run_files(path, &mut runs)?;
        if runs.is_empty() {
            scan_itbench(path, agent, truths, scan)
        } else {
            for run in runs {
                scan_run(&run, truths, scan)?;
            }
            Ok(())
        }
    } else if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
    {
        scan_sregym_csv(path, agent, truths, scan)
    } else if path.file_name().is_some_and(|n| n == "run.json") {
        scan_run(path, truths, scan)
    } else {
        let Some(problem) = problem else {
            bail!(
                "{}: a single output file needs --problem ID to know its ground truth",
                path.display()
            );
        };
        let problem_id = resolve_id(problem, truths);
        // One ground-truth file is keyed by its own name or id; with --problem it is the one
        // this output is judged against, whatever that key is.
        let only = match (truths.contains_key(&problem_id), truths.values().next()) {
            (false, Some(t)) if truths.len() == 1 => Some(rekeyed(t, &problem_id)),
            _ => None,
        };
        push(
            scan,
            only.as_ref().unwrap_or(truths),
            agent,
            &problem_id,
            "1",
            path,
            read_output(path),
        );
        Ok(())
    }
}

/// A ground truth under another problem id, alone in its map.
fn rekeyed(t: &LoadedTruth, problem_id: &str) -> BTreeMap<String, Arc<LoadedTruth>> {
    BTreeMap::from([(
        problem_id.to_string(),
        Arc::new(LoadedTruth {
            problem_id: problem_id.to_string(),
            ..t.clone()
        }),
    )])
}

/// Names that become directories of the judge's output (`trials/AGENT/SCENARIO/TRIAL/`) must stay
/// inside it, whatever a `run.json` or a result CSV says.
fn check_names(origin: &str, names: [(&str, &str); 3]) -> anyhow::Result<()> {
    for (field, value) in names {
        if let Err(why) = schemas::paths::check_plain_name(value) {
            bail!("{origin}: {field}: `{value}` {why}");
        }
    }
    Ok(())
}

/// Every `run.json` below `dir`, in path order. Symbolic links to directories are not followed
/// (a link to an ancestor would never end), and the walk keeps its own stack.
pub fn find_run_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut pending = vec![dir.to_path_buf()];
    let mut found = Vec::new();
    while let Some(d) = pending.pop() {
        for p in truth::sorted_entries(&d)? {
            let is_link = p
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink());
            if p.is_dir() && !is_link {
                pending.push(p);
            } else if p.file_name().is_some_and(|n| n == "run.json") {
                found.push(p);
            }
        }
    }
    found.sort();
    out.extend(found);
    Ok(())
}

/// A problem id as given by a user or a directory name, matched to the loaded ground truths: exact
/// first, then by ITBench canonical scenario id.
fn resolve_id(raw: &str, truths: &BTreeMap<String, Arc<LoadedTruth>>) -> String {
    if truths.contains_key(raw) {
        return raw.to_string();
    }
    canonical_scenario_id(raw)
}

fn read_output(path: &Path) -> Result<AgentOutput, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let json = !path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "txt" | "md"));
    submission::parse(&text, json).map_err(|e| format!("{}: {e}", path.display()))
}

fn push(
    scan: &mut Scan,
    truths: &BTreeMap<String, Arc<LoadedTruth>>,
    agent: &str,
    problem_id: &str,
    trial: &str,
    source: &Path,
    output: Result<AgentOutput, String>,
) {
    let id = format!("{agent}/{problem_id}/{trial}");
    match truths.get(problem_id) {
        Some(t) => scan.items.push(Item {
            item: ItemRef {
                id,
                problem_id: problem_id.to_string(),
                agent: agent.to_string(),
                trial: trial.to_string(),
                source: source.display().to_string(),
            },
            output,
            truth: t.clone(),
            run: None,
        }),
        None => scan
            .without_truth
            .push(format!("{id} ({})", source.display())),
    }
}

fn scan_itbench(
    root: &Path,
    agent: &str,
    truths: &BTreeMap<String, Arc<LoadedTruth>>,
    scan: &mut Scan,
) -> anyhow::Result<()> {
    for incident in truth::sorted_entries(root)?
        .into_iter()
        .filter(|p| p.is_dir())
    {
        let name = incident.file_name().unwrap_or_default().to_string_lossy();
        let problem_id = resolve_id(&name, truths);
        // Trials are the numeric subdirectories, in numeric order (ITBench's loader rule).
        let mut trials: Vec<(u64, PathBuf)> = truth::sorted_entries(&incident)?
            .into_iter()
            .filter(|p| p.is_dir())
            .filter_map(|p| {
                let n = p.file_name()?.to_str()?.parse::<u64>().ok()?;
                Some((n, p))
            })
            .collect();
        trials.sort();
        for (n, dir) in trials {
            let file = ITBENCH_FILES
                .iter()
                .map(|f| dir.join(f))
                .find(|p| p.is_file());
            let (source, output) = match file {
                Some(f) => {
                    let out = read_output(&f);
                    (f, out)
                }
                None => (
                    dir.clone(),
                    Err(format!("{}: no agent_output.json", dir.display())),
                ),
            };
            push(
                scan,
                truths,
                agent,
                &problem_id,
                &n.to_string(),
                &source,
                output,
            );
        }
    }
    Ok(())
}

/// A session's output as the session judged it: without the text copied from the agent's task
/// (`crate::copied`), the task read from the run's trajectory (its first step). A run without a
/// readable trajectory is judged as it is.
pub(crate) fn without_task(mut output: AgentOutput, path: &Path, run: &RunResult) -> AgentOutput {
    let task = run
        .files
        .get("trajectory")
        .filter(|rel| schemas::paths::check_plain_name(rel).is_ok())
        .and_then(|rel| std::fs::read(path.parent()?.join(rel)).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|t| t["steps"][0]["message"].as_str().map(str::to_string));
    if let Some(task) = task {
        output.diagnosis = crate::copied::without_task(&output.diagnosis, &task);
    }
    output
}

fn scan_run(
    path: &Path,
    truths: &BTreeMap<String, Arc<LoadedTruth>>,
    scan: &mut Scan,
) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let run: RunResult = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a faultline run result", path.display()))?;
    let output = match (&run.output, &run.error) {
        (Some(o), _) => Ok(without_task(o.clone(), path, &run)),
        (None, Some(e)) => Err(format!("run ended without output: {e}")),
        (None, None) => Err("run has no output".to_string()),
    };
    check_names(
        &path.display().to_string(),
        [
            ("agent", &run.agent),
            ("problem_id", &run.problem_id),
            ("trial", &run.trial),
        ],
    )?;
    let pushed = scan.items.len();
    if let Some(rel) = &run.ground_truth {
        // The run's ground truth lies beside its run.json, never elsewhere.
        if let Err(why) = schemas::paths::check_plain_name(rel) {
            bail!("{}: ground_truth: `{rel}` {why}", path.display());
        }
        let gt_path = path.parent().unwrap_or(Path::new(".")).join(rel);
        let loaded = truth::load(&gt_path)?;
        let mut own = BTreeMap::new();
        if let Some(t) = loaded.into_values().next() {
            own.insert(
                run.problem_id.clone(),
                Arc::new(LoadedTruth {
                    problem_id: run.problem_id.clone(),
                    ..Arc::unwrap_or_clone(t)
                }),
            );
        }
        push(
            scan,
            &own,
            &run.agent,
            &run.problem_id,
            &run.trial,
            path,
            output,
        );
    } else {
        push(
            scan,
            truths,
            &run.agent,
            &run.problem_id,
            &run.trial,
            path,
            output,
        );
    }
    if let Some(item) = scan.items.get_mut(pushed) {
        item.run = Some(RunFacts::of(&run));
    }
    Ok(())
}

fn scan_sregym_csv(
    path: &Path,
    agent: &str,
    truths: &BTreeMap<String, Arc<LoadedTruth>>,
    scan: &mut Scan,
) -> anyhow::Result<()> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let headers = reader.headers()?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let (Some(pid), Some(sub)) = (col("problem_id"), col("Diagnosis.submission")) else {
        bail!(
            "{}: expected SREGym result columns `problem_id` and `Diagnosis.submission`",
            path.display()
        );
    };
    let attempt = col("attempt");
    for (i, row) in reader.records().enumerate() {
        let row = row.with_context(|| format!("{}: row {}", path.display(), i + 2))?;
        let problem_id = resolve_id(row.get(pid).unwrap_or_default(), truths);
        let trial = attempt
            .and_then(|a| row.get(a))
            .filter(|s| !s.is_empty())
            .map_or_else(|| (i + 1).to_string(), str::to_string);
        let text = row.get(sub).unwrap_or_default();
        check_names(
            &format!("{}: row {}", path.display(), i + 2),
            [
                ("agent", agent),
                ("problem_id", &problem_id),
                ("attempt", &trial),
            ],
        )?;
        push(
            scan,
            truths,
            agent,
            &problem_id,
            &trial,
            path,
            Ok(AgentOutput::from_text(text.trim())),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_diagnosis_is_judged_without_what_it_copied_from_its_task() {
        let dir = tempfile::tempdir().unwrap();
        let task = "You are the on-call SRE for the application astronomy-shop: a valkey cart \
                    store, PostgreSQL and Kafka consumers behind an Envoy proxy.";
        let trajectory = serde_json::json!({"steps": [{"step_id": 1, "message": task}]});
        std::fs::write(dir.path().join("trajectory.json"), trajectory.to_string()).unwrap();
        let mut run: RunResult = serde_json::from_value(serde_json::json!({
            "schema_version": 2, "agent": "a", "problem_id": "p", "trial": "1", "mode": "live",
            "started_at": "2026-01-01T00:00:00Z",
            "files": {"trajectory": "trajectory.json"}
        }))
        .unwrap();
        let path = dir.path().join("run.json");
        let echo = AgentOutput {
            diagnosis: format!("FAULTLINE_PROMPT={task}"),
            ..Default::default()
        };
        let judged = without_task(echo.clone(), &path, &run);
        assert!(!judged.diagnosis.contains("cart"), "{}", judged.diagnosis);
        // Without its trajectory a run is judged as it stands.
        run.files.clear();
        assert_eq!(without_task(echo.clone(), &path, &run), echo);
    }
}
