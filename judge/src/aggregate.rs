//! Statistics over judged items: per problem and overall (macro: problems weigh the same; micro:
//! trials weigh the same), with mean, standard error, pass@1 and pass^k, and for the macro row a
//! percentile-bootstrap 95% interval over problems. Agent errors count as 0; judge errors are counted and reported, never dropped
//! silently and never scored: a judge error counts for the scores the LLM gives (composite,
//! dimensions, reasoning metrics) while its deterministic metrics are aggregated like any other.
//!
//! Differences from ITBench's aggregator, on purpose: the standard error always uses the sample
//! standard deviation (ddof = 1; ITBench mixes ddof 0 per incident and 1 overall); errored trials are
//! counted instead of skipped; every score (including entity@1..@5) is aggregated and gets pass@1.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schemas::verdict::{AgentStats, JudgedItem, Stat, StatTable, VerdictStatus};

const BOOTSTRAP_RESAMPLES: usize = 1000;
const BOOTSTRAP_SEED: u64 = 0x5EED;

/// One trial: its scores by name, whether the agent's output was unreadable, and whether the judge
/// model failed on it (then only its deterministic metrics are there).
struct Trial {
    scores: BTreeMap<String, (f64, bool)>,
    agent_error: bool,
    judge_error: bool,
}

/// Scores of an item by name, each with whether it counts as a pass.
fn scores(item: &JudgedItem, threshold: f64) -> BTreeMap<String, (f64, bool)> {
    let mut m = BTreeMap::new();
    if let Some(c) = item.composite {
        m.insert("composite".into(), (c, c >= threshold - 1e-12));
    }
    for d in &item.dimensions {
        m.insert(d.id.clone(), (d.score, d.score >= 1.0));
    }
    for (k, v) in &item.metrics {
        m.insert(k.clone(), (*v, *v >= 1.0 - 1e-12));
    }
    m
}

pub fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Sample standard deviation / sqrt(n).
pub fn stderr(v: &[f64]) -> Option<f64> {
    if v.len() < 2 {
        return None;
    }
    let m = mean(v)?;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    Some((var / v.len() as f64).sqrt())
}

/// Percentile bootstrap of the mean, seeded so reports are reproducible.
pub fn bootstrap_ci(v: &[f64]) -> Option<[f64; 2]> {
    if v.is_empty() {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(BOOTSTRAP_SEED);
    let mut means: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            (0..v.len())
                .map(|_| v[rng.random_range(0..v.len())])
                .sum::<f64>()
                / v.len() as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * (means.len() - 1) as f64).round() as usize).min(means.len() - 1)];
    Some([at(0.025), at(0.975)])
}

fn choose(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (k - i) as f64)
}

/// pass^k: the chance that k trials drawn without replacement from n (c passing) all pass.
pub fn pass_hat_k(n: usize, c: usize, k: usize) -> Option<f64> {
    (k >= 1 && n >= k).then(|| choose(c, k) / choose(n, k))
}

/// pass@k: the chance that at least one of k trials drawn without replacement from n (c passing)
/// passes, 1 − C(n−c, k)/C(n, k); None when fewer than k trials.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> Option<f64> {
    (k >= 1 && n >= k && c <= n).then(|| 1.0 - choose(n - c, k) / choose(n, k))
}

fn stat(values: &[f64], passes: usize, agent_errors: usize, judge_errors: usize, k: usize) -> Stat {
    Stat {
        n: values.len(),
        agent_errors,
        judge_errors,
        mean: mean(values),
        stderr: stderr(values),
        ci95: None,
        pass_at_1: (!values.is_empty()).then(|| passes as f64 / values.len() as f64),
        pass_hat_k: pass_hat_k(values.len(), passes, k),
        k: Some(k),
    }
}

/// Aggregates one agent's items. `k` for pass^k defaults to the smallest number of scored trials
/// of any problem.
pub fn agent_stats(items: &[&JudgedItem], threshold: f64, k: Option<usize>) -> AgentStats {
    let mut by_problem: BTreeMap<&str, Vec<Trial>> = BTreeMap::new();
    for it in items {
        by_problem
            .entry(it.item.problem_id.as_str())
            .or_default()
            .push(Trial {
                scores: scores(it, threshold),
                agent_error: it.status == VerdictStatus::AgentError,
                judge_error: it.status == VerdictStatus::JudgeError,
            });
    }
    let names: std::collections::BTreeSet<String> = by_problem
        .values()
        .flatten()
        .flat_map(|t| t.scores.keys().cloned())
        .collect();
    let k = k.unwrap_or_else(|| {
        by_problem
            .values()
            .map(|ts| ts.iter().filter(|t| !t.judge_error).count())
            .filter(|n| *n > 0)
            .min()
            .unwrap_or(1)
    });

    let mut per_problem: BTreeMap<String, StatTable> = BTreeMap::new();
    let mut macro_overall = StatTable::new();
    let mut micro_overall = StatTable::new();
    for name in &names {
        let mut problem_means = Vec::new();
        let mut problem_pass_hat = Vec::new();
        let mut problem_pass_rate = Vec::new();
        let (mut all, mut all_pass, mut all_agent_err, mut all_judge_err) = (Vec::new(), 0, 0, 0);
        for (pid, trials) in &by_problem {
            let mut values = Vec::new();
            let (mut passes, mut agent_errors, mut judge_errors) = (0, 0, 0);
            for t in trials {
                match t.scores.get(name) {
                    Some(&(v, p)) => {
                        values.push(v);
                        passes += usize::from(p);
                        agent_errors += usize::from(t.agent_error);
                    }
                    // The judge model gave no answer this score needs.
                    None if t.judge_error => judge_errors += 1,
                    // An agent error has no score of its own: it is 0 and fails.
                    None if t.agent_error => {
                        values.push(0.0);
                        agent_errors += 1;
                    }
                    None => {}
                }
            }
            // No interval per problem: a handful of trials gives no useful one, and resampling every
            // score of every problem would dominate re-judging time.
            let st = stat(&values, passes, agent_errors, judge_errors, k);
            if let Some(m) = st.mean {
                problem_means.push(m);
            }
            if let Some(p) = st.pass_hat_k {
                problem_pass_hat.push(p);
            }
            if let Some(p) = st.pass_at_1 {
                problem_pass_rate.push(p);
            }
            all.extend_from_slice(&values);
            all_pass += passes;
            all_agent_err += agent_errors;
            all_judge_err += judge_errors;
            per_problem
                .entry(pid.to_string())
                .or_default()
                .insert(name.clone(), st);
        }
        macro_overall.insert(
            name.clone(),
            Stat {
                n: problem_means.len(),
                agent_errors: all_agent_err,
                judge_errors: all_judge_err,
                mean: mean(&problem_means),
                stderr: stderr(&problem_means),
                ci95: bootstrap_ci(&problem_means),
                pass_at_1: mean(&problem_pass_rate),
                pass_hat_k: mean(&problem_pass_hat),
                k: Some(k),
            },
        );
        // The interval is given for the macro row (problems resampled); resampling every pooled
        // trial for every score would dominate the time of a cached re-judge.
        let mut micro = stat(&all, all_pass, all_agent_err, all_judge_err, k);
        // pass^k is defined per problem; pooling trials of different problems would not mean it.
        micro.pass_hat_k = None;
        micro.k = None;
        micro_overall.insert(name.clone(), micro);
    }
    AgentStats {
        per_problem,
        macro_overall,
        micro_overall,
    }
}

/// Statistics for every agent of a run.
pub fn run_stats(
    items: &[JudgedItem],
    threshold: f64,
    k: Option<usize>,
) -> BTreeMap<String, AgentStats> {
    let mut by_agent: BTreeMap<&str, Vec<&JudgedItem>> = BTreeMap::new();
    for it in items {
        by_agent.entry(it.item.agent.as_str()).or_default().push(it);
    }
    by_agent
        .into_iter()
        .map(|(a, its)| (a.to_string(), agent_stats(&its, threshold, k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas() {
        let v = [1.0, 0.0, 1.0, 1.0];
        assert_eq!(mean(&v), Some(0.75));
        // sample sd = 0.5, / sqrt(4) = 0.25
        assert!((stderr(&v).unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(stderr(&[1.0]), None);
        // 3 of 4 pass: pass^2 = C(3,2)/C(4,2) = 3/6.
        assert_eq!(pass_hat_k(4, 3, 2), Some(0.5));
        assert_eq!(pass_hat_k(4, 3, 1), Some(0.75));
        assert_eq!(pass_hat_k(1, 1, 2), None);
        // 1 of 4 passes: pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6.
        assert_eq!(pass_at_k(4, 1, 2), Some(0.5));
        assert_eq!(pass_at_k(4, 0, 3), Some(0.0));
        assert_eq!(pass_at_k(3, 2, 2), Some(1.0));
        assert_eq!(pass_at_k(1, 1, 2), None);
        let ci = bootstrap_ci(&v).unwrap();
        assert!(ci[0] <= 0.75 && 0.75 <= ci[1] && ci[0] >= 0.0 && ci[1] <= 1.0);
        assert_eq!(bootstrap_ci(&[0.4, 0.4]), Some([0.4, 0.4]));
    }
}
