//! Judging one diagnosis inside a running session: the agent's submitted output and the problem's
//! ground truth go in, the session's [`DiagnosisRecord`] (for its `run.json`) comes out.
//!
//! It is `judge run` on a single item (the same runner, so the same prompt, cache keys, verdict
//! log and metrics): the verdict log, `results.json` and ITBench's `evaluation_results.json` go
//! into [`InLoop::log_dir`]. What the record says:
//! - `metrics`: the deterministic ITBench metrics, always, also when the judge model failed;
//! - `pass`: the checklist LLM's pass when a judge model is configured and answered; otherwise
//!   the deterministic rule's (`pass_rule`), which is None when it cannot decide;
//! - `judge_error`: why the judge model gave no verdict (then `pass` is the rule's).
//!
//! Nothing here fails the session: every error becomes `judge_error` with the deterministic part
//! still filled in.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use schemas::AgentOutput;
use schemas::run_result::DiagnosisRecord;
use schemas::verdict::{ItemRef, JudgedItem, VerdictStatus};

use crate::entities::GtIndex;
use crate::itbench::Evaluation;
use crate::layout::Item;
use crate::llm::{
    DEFAULT_BASE_URL, DEFAULT_MODEL, ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, Llm, LlmConfig,
    StructuredMode,
};
use crate::pass_rule;
use crate::prices::PriceTable;
use crate::rubric::Rubric;
use crate::runner::{self, RunConfig};
use crate::store::Cache;
use crate::truth::{self, LoadedTruth};

/// Environment variable naming the verdict cache directory (as for `judge run`).
pub const ENV_CACHE_DIR: &str = "JUDGE_CACHE_DIR";

/// How a session judges its diagnosis.
pub struct InLoop {
    pub rubric: Rubric,
    /// None: deterministic metrics and the pass rule only.
    pub llm: Option<Arc<Llm>>,
    /// Content-addressed verdict cache shared with `judge run`; None: no cache.
    pub cache_dir: Option<PathBuf>,
    /// Where the verdict log and the result files of this judgement are kept.
    pub log_dir: PathBuf,
    /// Names the item in the verdict log: `<agent>/<problem>/<trial>`.
    pub agent: String,
    pub trial: String,
    pub prices: PriceTable,
    /// Exchanges (each with one repair) tried when the judge's answers are invalid.
    pub exchanges: u32,
}

impl InLoop {
    /// The built-in rubric, no judge model, no cache.
    pub fn new(log_dir: impl Into<PathBuf>, agent: &str, trial: &str) -> Self {
        Self {
            rubric: Rubric::default_rubric(),
            llm: None,
            cache_dir: None,
            log_dir: log_dir.into(),
            agent: agent.to_string(),
            trial: trial.to_string(),
            prices: PriceTable::built_in(),
            exchanges: 3,
        }
    }

    /// As [`InLoop::new`], with the judge model of [`llm_from_env`] and the cache of
    /// `JUDGE_CACHE_DIR`.
    pub fn from_env(log_dir: impl Into<PathBuf>, agent: &str, trial: &str) -> anyhow::Result<Self> {
        let mut cfg = Self::new(log_dir, agent, trial);
        if let Some(llm) = llm_from_env()? {
            cfg.llm = Some(Arc::new(Llm::new(llm)?));
        }
        cfg.cache_dir = std::env::var_os(ENV_CACHE_DIR)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        Ok(cfg)
    }
}

/// The judge model configured in the environment, or None when none of `JUDGE_BASE_URL`,
/// `JUDGE_MODEL`, `JUDGE_API_KEY` is set (deterministic judging only). Unset ones take `judge
/// run`'s defaults. Retries are bounded tighter than `judge run`'s so that an unreachable judge
/// costs a session about four timeouts, not minutes of backoff.
pub fn llm_from_env() -> anyhow::Result<Option<LlmConfig>> {
    llm_from_vars(|name| std::env::var(name).ok())
}

/// [`llm_from_env`] over any variable lookup (empty values count as unset).
pub fn llm_from_vars(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Option<LlmConfig>> {
    let var = |name: &str| {
        get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let (base_url, model, api_key) = (var(ENV_BASE_URL), var(ENV_MODEL), var(ENV_API_KEY));
    if base_url.is_none() && model.is_none() && api_key.is_none() {
        return Ok(None);
    }
    let base_url = base_url.unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        bail!("{ENV_BASE_URL}: expected an http:// or https:// URL, got `{base_url}`");
    }
    Ok(Some(LlmConfig {
        base_url,
        api_key: api_key.unwrap_or_else(|| "dummy".to_string()),
        model: model.unwrap_or_else(|| DEFAULT_MODEL.to_string()),
        temperature: 0.0,
        seed: None,
        max_tokens: None,
        structured: StructuredMode::Auto,
        timeout: Duration::from_secs(60),
        max_attempts: 4,
        backoff_base: Duration::from_millis(500),
        backoff_cap: Duration::from_secs(10),
        rate: None,
        burst: 4,
    }))
}

/// The ground truth of `problem_id` from a file or directory (`truth::load`'s formats). A file
/// holding one ground truth is that problem's whatever id it carries (a session's own
/// `ground_truth.json`).
pub fn load_truth(path: &Path, problem_id: &str) -> anyhow::Result<LoadedTruth> {
    let mut all = truth::load(path)?;
    if let Some(t) = all.remove(problem_id) {
        return Ok(Arc::unwrap_or_clone(t));
    }
    if all.len() == 1
        && let Some((_, t)) = all.pop_first()
    {
        return Ok(LoadedTruth {
            problem_id: problem_id.to_string(),
            ..Arc::unwrap_or_clone(t)
        });
    }
    bail!(
        "{}: no ground truth for problem `{problem_id}` among {} (ids: {})",
        path.display(),
        all.len(),
        all.keys().cloned().collect::<Vec<_>>().join(", ")
    )
}

/// Judges a finished session's diagnosis again, as `judge run` reads the run (the text copied
/// from its task left out, its own ground truth): how a verifier given a judge model re-judges a
/// run made with deterministic judging. `None` when the run has no submitted diagnosis.
pub async fn rejudge(run_dir: &Path, cfg: &InLoop) -> anyhow::Result<Option<DiagnosisRecord>> {
    use anyhow::Context;
    let path = run_dir.join("run.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let run: schemas::run_result::RunResult = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a faultline run result", path.display()))?;
    let submitted = run.diagnosis.as_ref().is_some_and(|d| d.submitted);
    let (Some(output), true) = (&run.output, submitted) else {
        return Ok(None);
    };
    let output = crate::layout::without_task(output.clone(), &path, &run);
    let rel = run
        .ground_truth
        .as_deref()
        .with_context(|| format!("{}: no ground truth beside the run", path.display()))?;
    if let Err(why) = schemas::paths::check_plain_name(rel) {
        bail!("{}: ground_truth: `{rel}` {why}", path.display());
    }
    let truth = load_truth(&run_dir.join(rel), &run.problem_id)?;
    let mut record = judge_diagnosis(&output, &truth, cfg).await;
    record.submitted = true;
    Ok(Some(record))
}

/// Judges `output` against `truth` (see the module doc for what the record holds). Runs on the
/// caller's Tokio runtime (the runner spawns its tasks there).
pub async fn judge_diagnosis(
    output: &AgentOutput,
    truth: &LoadedTruth,
    cfg: &InLoop,
) -> DiagnosisRecord {
    let item = Item {
        item: ItemRef {
            id: format!("{}/{}/{}", cfg.agent, truth.problem_id, cfg.trial),
            problem_id: truth.problem_id.clone(),
            agent: cfg.agent.clone(),
            trial: cfg.trial.clone(),
            source: "session".to_string(),
        },
        output: Ok(output.clone()),
        truth: Arc::new(truth.clone()),
        run: None,
    };
    let run = RunConfig {
        rubric: cfg.rubric.clone(),
        llm: cfg.llm.clone(),
        samples: 1,
        concurrency: 1,
        cache: cfg.cache_dir.as_ref().map(Cache::new),
        out_dir: cfg.log_dir.clone(),
        prices: cfg.prices.clone(),
        exchanges: cfg.exchanges,
        pass_k: None,
        progress: false,
        trial_outputs: false,
    };
    match runner::run(vec![item], run).await {
        Ok((results, _)) => match results.items.into_iter().next() {
            Some(judged) => record(judged),
            None => without_judge(output, truth, "the judge returned no verdict".to_string()),
        },
        Err(e) => without_judge(output, truth, format!("the judge could not run: {e:#}")),
    }
}

/// The record of a session whose agent submitted no diagnosis: not submitted, and failed.
pub fn not_submitted() -> DiagnosisRecord {
    DiagnosisRecord {
        submitted: false,
        pass: Some(false),
        ..DiagnosisRecord::default()
    }
}

fn record(judged: JudgedItem) -> DiagnosisRecord {
    let judge_error = (judged.status == VerdictStatus::JudgeError).then(|| {
        judged
            .error
            .clone()
            .unwrap_or_else(|| "the judge model gave no verdict".to_string())
    });
    // The checklist decides when it answered; otherwise the rule stands in.
    let pass = match (judged.status, judged.pass) {
        (VerdictStatus::Scored, Some(p)) => Some(p),
        _ => judged.rule_pass,
    };
    DiagnosisRecord {
        submitted: true,
        pass,
        composite: judged.composite,
        metrics: judged.metrics,
        judge_error,
    }
}

/// The deterministic part computed here, for when the runner itself failed (an unwritable log
/// directory, say).
fn without_judge(output: &AgentOutput, truth: &LoadedTruth, why: String) -> DiagnosisRecord {
    let gt = &truth.truth;
    let idx = GtIndex::new(gt);
    let structured = !output.entities.is_empty() || !output.propagations.is_empty();
    let metrics = if structured {
        Evaluation::with_index(gt, &idx, output)
            .flat(None)
            .into_iter()
            .collect()
    } else {
        Default::default()
    };
    DiagnosisRecord {
        submitted: true,
        pass: pass_rule::rule_pass(gt, &idx, output),
        composite: None,
        metrics,
        judge_error: Some(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn the_judge_model_is_configured_only_by_its_variables() {
        assert!(llm_from_vars(vars(&[])).unwrap().is_none());
        assert!(
            llm_from_vars(vars(&[(ENV_MODEL, " "), (ENV_API_KEY, "")]))
                .unwrap()
                .is_none(),
            "empty values are unset"
        );
        let c = llm_from_vars(vars(&[(ENV_BASE_URL, "http://127.0.0.1:9/v1")]))
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.base_url.as_str(), c.model.as_str()),
            ("http://127.0.0.1:9/v1", DEFAULT_MODEL)
        );
        let c = llm_from_vars(vars(&[(ENV_MODEL, "m"), (ENV_API_KEY, "k")]))
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.base_url.as_str(), c.model.as_str(), c.api_key.as_str()),
            (DEFAULT_BASE_URL, "m", "k")
        );
        let e = llm_from_vars(vars(&[(ENV_BASE_URL, "localhost:8000")])).unwrap_err();
        assert!(e.to_string().contains("JUDGE_BASE_URL"), "{e}");
    }
}
