//! ITBench's result files, so dashboards built for ITBench-Evaluations keep working:
//! `evaluation_results.json` (raw results, per-incident and overall statistics, config) and, on
//! request, one `judge_output.json` per trial under `trials/<agent>/<Scenario-N>/<trial>/` (the
//! layout of ITBench's leaderboard runs).

use std::collections::BTreeMap;
use std::path::Path;

use schemas::verdict::{JudgedItem, VerdictStatus};
use serde_json::{Value, json};

use crate::aggregate::{mean, stderr};
use crate::itbench::Evaluation;
use crate::layout::Item;
use crate::store::{write_json, write_json_with};

/// Metric keys aggregated in `statistics` (ITBench's list, plus @1..@5 which ITBench leaves out).
fn aggregated_keys() -> Vec<String> {
    let mut keys = Vec::new();
    for base in [
        "root_cause_entity",
        "root_cause_entity_k",
        "root_cause_proximity_no_fp",
        "root_cause_proximity_with_fp",
    ] {
        for m in ["precision", "recall", "f1"] {
            keys.push(format!("{base}_{m}"));
        }
    }
    for k in 1..=5 {
        for m in ["precision", "recall", "f1"] {
            keys.push(format!("root_cause_entity_k@{k}_{m}"));
        }
    }
    for k in [
        "root_cause_reasoning",
        "propagation_chain",
        "fault_localization_component_identification",
        "root_cause_reasoning_partial",
    ] {
        keys.push(k.to_string());
    }
    keys
}

fn scenario_name(problem_id: &str) -> String {
    if problem_id.chars().all(|c| c.is_ascii_digit()) {
        format!("Scenario-{problem_id}")
    } else {
        problem_id.to_string()
    }
}

/// Writes `evaluation_results.json`, and with `trial_files` the per-trial `judge_output.json` files.
pub fn write(
    out_dir: &Path,
    evaluated: &[(&Item, &Evaluation, &JudgedItem)],
    judge_model: Option<&str>,
    trial_files: bool,
) -> anyhow::Result<()> {
    let mut raw = Vec::new();
    let mut files: Vec<(std::path::PathBuf, Value)> = Vec::with_capacity(evaluated.len());
    let mut per_incident: BTreeMap<&str, Vec<&BTreeMap<String, f64>>> = BTreeMap::new();
    let mut bad_runs = 0usize;
    for (i, (item, eval, judged)) in evaluated.iter().enumerate() {
        let r = &item.item;
        let has_reasoning = judged.metrics.contains_key("root_cause_reasoning");
        let reasoning = has_reasoning.then(|| eval.reasoning(&judged.answers));
        let scores = eval.scores_json(reasoning.as_ref());
        if trial_files {
            let judge_output = json!({
                "metadata": {
                    "scenario_name": scenario_name(&r.problem_id),
                    "run": r.trial.parse::<u64>().map(Value::from).unwrap_or_else(|_| json!(r.trial)),
                    "agent": r.agent,
                    "judge_model": judge_model,
                    "judge_provider": judge_model.map(|_| "openai-compatible"),
                },
                "eval_result": {"scores": scores.clone(), "justification": "deterministic metrics computed by faultline judge; reasoning metrics from checklist answers"},
                "flat_scores": judged.metrics,
            });
            let scenario = scenario_name(&r.problem_id);
            // Every part comes from data (a run.json, a CSV, a directory name): each must stay
            // one directory level inside OUT/trials.
            for (what, part) in [
                ("agent", &r.agent),
                ("scenario", &scenario),
                ("trial", &r.trial),
            ] {
                schemas::paths::check_plain_name(part)
                    .map_err(|why| anyhow::anyhow!("{}: {what}: `{part}` {why}", r.source))?;
            }
            let path = out_dir
                .join("trials")
                .join(&r.agent)
                .join(scenario)
                .join(&r.trial)
                .join("judge_output.json");
            files.push((path, judge_output));
        }
        match judged.status {
            VerdictStatus::JudgeError => raw.push(json!({
                "scenario_index": i, "incident_id": r.problem_id, "trial_id": r.trial,
                "error": judged.error,
            })),
            status => {
                if status == VerdictStatus::AgentError {
                    bad_runs += 1;
                }
                let mut entry =
                    json!({"scenario_index": i, "incident_id": r.problem_id, "trial_id": r.trial});
                // Moved in, not copied through `json!`.
                entry["scores"] = scores;
                if let Some(e) = &judged.error {
                    entry["agent_error"] = json!(e);
                }
                raw.push(entry);
                per_incident
                    .entry(r.problem_id.as_str())
                    .or_default()
                    .push(&judged.metrics);
            }
        }
    }
    // Per-trial copies of what evaluation_results.json holds durably: written without a flush
    // each, on a few threads, since creating hundreds of small files is the slow part here.
    let threads = 8.min(files.len().max(1));
    let chunk = files.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .try_for_each(|(path, v)| write_json_with(path, v, false))
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("a writer thread panicked"))
    })?;

    let keys = aggregated_keys();
    let mut stats_per_incident = serde_json::Map::new();
    let mut incident_means: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut incident_pass: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (incident, trials) in &per_incident {
        let mut m = serde_json::Map::new();
        for k in &keys {
            let values: Vec<f64> = trials.iter().filter_map(|t| t.get(k).copied()).collect();
            let Some(mu) = mean(&values) else { continue };
            let pass =
                values.iter().filter(|v| **v >= 1.0 - 1e-12).count() as f64 / values.len() as f64;
            m.insert(
                k.clone(),
                json!({"mean": mu, "stderr": stderr(&values), "n": values.len(), "pass@1": pass}),
            );
            incident_means.entry(k.as_str()).or_default().push(mu);
            incident_pass.entry(k.as_str()).or_default().push(pass);
        }
        stats_per_incident.insert(incident.to_string(), Value::Object(m));
    }
    let mut overall = serde_json::Map::new();
    for (k, means) in &incident_means {
        overall.insert(
            k.to_string(),
            json!({"mean": mean(means), "stderr": stderr(means), "n_incidents": means.len(), "pass@1": mean(&incident_pass[k])}),
        );
    }
    overall.insert("total_bad_runs".into(), json!(bad_runs));
    let results = json!({
        "raw_results": raw,
        "statistics": {"per_incident": stats_per_incident, "overall": overall},
        "config": {"domain": "sre", "eval_criteria": ["ROOT_CAUSE_ENTITY", "ROOT_CAUSE_REASONING", "PROPAGATION_CHAIN", "FAULT_LOCALIZATION", "ROOT_CAUSE_REASONING_PARTIAL", "ROOT_CAUSE_PROXIMITY", "ROOT_CAUSE_PROXIMITY_FP"], "k": 3, "judge_model": judge_model},
    });
    write_json(&out_dir.join("evaluation_results.json"), &results)
}
