//! Batch judging: every (item, sample) is judged at most once per configuration. A verdict already
//! in the run's log (a resumed run) or in the cache (any earlier run) is reused without a request;
//! the rest go to the judge model with bounded concurrency. Invalid answers are repaired once per
//! exchange and the exchange is retried a few times; what still fails is an error verdict, which
//! still carries the deterministic metrics (only the LLM part is missing, and redone next run).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use chrono::Utc;
use schemas::AgentOutput;
use schemas::verdict::{
    Answer, Confidence, JudgeParams, JudgeResults, JudgedItem, Usage, VERDICT_VERSION, Verdict,
    VerdictStatus, YesNo,
};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::entities::GtIndex;
use crate::itbench::Evaluation;
use crate::layout::Item;
use crate::llm::{CallError, Conversation, Llm, StructuredMode, counting_requests};
use crate::prices::PriceTable;
use crate::prompt::{Prompt, Template};
use crate::rubric::Rubric;
use crate::store::{Cache, LogSender, LogWriter, content_key, read_log, write_json};
use crate::{aggregate, pass_rule, report_itbench};

/// Name of the append-only verdict log inside a run's output directory.
pub const LOG_FILE: &str = "verdicts.jsonl";
/// Name of the run summary inside a run's output directory.
pub const RESULTS_FILE: &str = "results.json";

pub struct RunConfig {
    pub rubric: Rubric,
    /// None: deterministic metrics only, no LLM.
    pub llm: Option<Arc<Llm>>,
    pub samples: u32,
    pub concurrency: usize,
    pub cache: Option<Cache>,
    pub out_dir: PathBuf,
    pub prices: PriceTable,
    /// Exchanges (each with one repair) tried before an answer is given up as invalid.
    pub exchanges: u32,
    pub pass_k: Option<usize>,
    pub progress: bool,
    /// Also write ITBench's per-trial `judge_output.json` files.
    pub trial_outputs: bool,
}

/// What a run did, besides its results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunReport {
    pub verdicts: usize,
    pub from_cache: usize,
    pub resumed: usize,
    pub judged: usize,
    pub requests: u64,
    pub judge_errors: usize,
    /// Time spent producing verdicts (cache lookups and judge calls), without writing reports.
    pub judging: std::time::Duration,
}

/// Does the item have structure ITBench's metrics can be computed on?
fn structured(item: &Item) -> bool {
    match &item.output {
        Ok(o) => {
            !o.entities.is_empty() || !o.propagations.is_empty() || o.diagnosis.trim().is_empty()
        }
        // An unreadable structured answer scores 0 on every metric.
        Err(_) => true,
    }
}

struct Prepared {
    item: Item,
    evaluation: Option<Evaluation>,
    prompt: Option<Prompt>,
    /// Hash of what is judged: ground truth, submission and prompt.
    content: String,
    /// The deterministic pass rule's answer (`pass_rule`).
    rule_pass: Option<bool>,
}

/// What every item of one problem shares, built once per run.
struct Problem {
    /// The ground truth with its filters compiled.
    index: GtIndex,
    hash: String,
    /// None without a judge model.
    template: Option<Template>,
}

impl Problem {
    fn new(item: &Item, rubric: &Rubric, with_llm: bool) -> Self {
        let gt = &item.truth.truth;
        Self {
            index: GtIndex::new(gt),
            hash: content_key(gt),
            template: with_llm.then(|| Template::new(gt, &rubric.checklist(&item.item.problem_id))),
        }
    }
}

fn prepare(item: Item, problem: &Problem) -> Prepared {
    let empty = AgentOutput::default();
    let output = item.output.as_ref().unwrap_or(&empty);
    let evaluation = structured(&item)
        .then(|| Evaluation::with_index(&item.truth.truth, &problem.index, output));
    let prompt = problem
        .template
        .as_ref()
        .filter(|_| item.output.is_ok() && !output.is_empty())
        .map(|t| {
            let extra = evaluation
                .as_ref()
                .map(|e| e.questions.as_slice())
                .unwrap_or(&[]);
            t.prompt(output, extra)
        });
    let content = content_key(&json!({
        "ground_truth": problem.hash,
        "submission": item.output.as_ref().map_err(|e| e.as_str()),
        "prompt_hash": prompt.as_ref().map(Prompt::hash),
    }));
    // An unreadable output named nothing: it fails like an empty one.
    let rule_pass = match &item.output {
        Ok(o) => pass_rule::rule_pass(&item.truth.truth, &problem.index, o),
        Err(_) => Some(false),
    };
    Prepared {
        item,
        evaluation,
        prompt,
        content,
        rule_pass,
    }
}

fn params(llm: &Llm) -> JudgeParams {
    JudgeParams {
        model: llm.config.model.clone(),
        base_url: llm.config.base_url.clone(),
        temperature: llm.config.temperature,
        seed: llm.config.seed,
        max_tokens: llm.config.max_tokens,
        structured_output: llm.config.structured != StructuredMode::Off,
    }
}

fn cache_key(p: &Prepared, rubric: &Rubric, llm: Option<&Llm>, sample: u32) -> String {
    let judge = llm.map(|l| {
        json!({
            "model": l.config.model, "base_url": l.config.base_url, "temperature": l.config.temperature,
            "seed": l.config.seed, "max_tokens": l.config.max_tokens,
            "structured": format!("{:?}", l.config.structured),
        })
    });
    content_key(&json!({
        "verdict_version": VERDICT_VERSION,
        "rubric": [rubric.id, rubric.version],
        "judge": judge,
        "content": p.content,
        "sample": sample,
    }))
}

/// Answers for an output with nothing to judge: every question is a no, with that reason.
fn empty_answers(rubric: &Rubric, problem: &str, why: &str) -> Vec<Answer> {
    rubric
        .checklist(problem)
        .question_ids()
        .map(|id| Answer {
            id: id.to_string(),
            answer: YesNo::No,
            confidence: Confidence::High,
            evidence: why.to_string(),
        })
        .collect()
}

struct Ctx {
    rubric: Rubric,
    llm: Option<Arc<Llm>>,
    prices: PriceTable,
    exchanges: u32,
}

fn base_verdict(p: &Prepared, ctx: &Ctx, sample: u32, key: String) -> Verdict {
    Verdict {
        schema_version: VERDICT_VERSION,
        item: p.item.item.clone(),
        sample,
        status: VerdictStatus::Scored,
        error: None,
        rubric_id: ctx.rubric.id.clone(),
        rubric_version: ctx.rubric.version.clone(),
        judge: ctx.llm.as_deref().map(params),
        prompt_hash: p.prompt.as_ref().map(Prompt::hash).unwrap_or_default(),
        cache_key: key,
        answers: Vec::new(),
        dimensions: Vec::new(),
        composite: None,
        pass: None,
        metrics: BTreeMap::new(),
        raw_response: None,
        usage: Usage::default(),
        latency_ms: 0,
        requests: 0,
        cached: false,
        judged_at: Utc::now(),
    }
}

/// Fills scores from answers (rubric composite and, for structured outputs, ITBench metrics).
fn fill_scores(v: &mut Verdict, p: &Prepared, rubric: &Rubric) {
    if !v.answers.is_empty() {
        let checklist = rubric.checklist(&p.item.item.problem_id);
        let (dims, composite, pass) = checklist.score(&v.answers, rubric.threshold);
        v.dimensions = dims;
        v.composite = Some(composite);
        v.pass = Some(pass);
    }
    if let Some(e) = &p.evaluation {
        let reasoning =
            (!v.answers.is_empty() || e.questions.is_empty()).then(|| e.reasoning(&v.answers));
        let with_reasoning = if v.judge.is_some() {
            reasoning.as_ref()
        } else {
            None
        };
        v.metrics = e.flat(with_reasoning).into_iter().collect();
    }
}

async fn judge_sample(p: &Prepared, ctx: &Ctx, sample: u32, key: String) -> Verdict {
    let mut v = base_verdict(p, ctx, sample, key);
    if let Err(e) = &p.item.output {
        v.status = VerdictStatus::AgentError;
        v.error = Some(e.clone());
        if ctx.llm.is_some() {
            v.answers = empty_answers(
                &ctx.rubric,
                &p.item.item.problem_id,
                "the agent output could not be read",
            );
        }
        fill_scores(&mut v, p, &ctx.rubric);
        return v;
    }
    let (Some(llm), Some(prompt)) = (ctx.llm.as_deref(), &p.prompt) else {
        if ctx.llm.is_some() {
            // An empty diagnosis: nothing to credit, no call needed.
            v.answers = empty_answers(
                &ctx.rubric,
                &p.item.item.problem_id,
                "the diagnosis is empty",
            );
        }
        fill_scores(&mut v, p, &ctx.rubric);
        return v;
    };
    let started = Instant::now();
    let seed = llm.config.seed.map(|s| s + i64::from(sample));
    let schema = prompt.answer_schema();
    let (outcome, requests) = counting_requests(async {
        let mut last_error = String::new();
        let mut last_raw = None;
        let mut usage = (0u64, 0u64);
        for _ in 0..ctx.exchanges.max(1) {
            let mut conv = Conversation {
                system: prompt.system.clone(),
                user: prompt.user.clone(),
                follow_ups: Vec::new(),
            };
            // The first answer, then one repair.
            for round in 0..2 {
                let c = match llm.complete(&conv, &schema, seed).await {
                    Ok(c) => c,
                    Err(e @ CallError::Api(_)) => return (Err(e.to_string()), last_raw, usage),
                    Err(e @ CallError::Exhausted { .. }) => {
                        return (Err(e.to_string()), last_raw, usage);
                    }
                };
                usage.0 += c.prompt_tokens;
                usage.1 += c.completion_tokens;
                match prompt.parse_answer(&c.text, c.structured) {
                    Ok(answers) => return (Ok(answers), Some(c.text), usage),
                    Err(problem) => {
                        tracing::debug!(item = %p.item.item.id, round, %problem, "invalid answer");
                        last_error = format!("invalid answer: {problem}");
                        conv.follow_ups
                            .push((c.text.clone(), prompt.repair_request(&problem)));
                        last_raw = Some(c.text);
                    }
                }
            }
        }
        (Err(last_error), last_raw, usage)
    })
    .await;
    let (answers, raw, (pt, ct)) = outcome;
    v.requests = requests;
    v.latency_ms = started.elapsed().as_millis() as u64;
    v.raw_response = raw;
    v.usage = Usage {
        prompt_tokens: pt,
        completion_tokens: ct,
        cost_usd: ctx.prices.cost(&llm.config.model, pt, ct),
    };
    if let Some(j) = &mut v.judge {
        j.structured_output = llm.structured_now();
        j.seed = seed;
    }
    match answers {
        Ok(a) => {
            v.answers = a;
            fill_scores(&mut v, p, &ctx.rubric);
        }
        Err(e) => {
            v.status = VerdictStatus::JudgeError;
            v.error = Some(e);
            // The metrics computed in code do not depend on the judge model: they stand. The
            // reasoning metrics need its answers and are left out.
            if let Some(ev) = &p.evaluation {
                v.metrics = ev.flat(None).into_iter().collect();
            }
        }
    }
    v
}

/// Majority vote over an item's scored samples (a tie is No), then scoring of the majority.
fn combine(p: &Prepared, verdicts: &[&Verdict], requested: u32, rubric: &Rubric) -> JudgedItem {
    let scored: Vec<&&Verdict> = verdicts
        .iter()
        .filter(|v| v.status != VerdictStatus::JudgeError)
        .collect();
    let mut usage = Usage::default();
    for v in verdicts.iter().filter(|v| !v.cached) {
        usage.prompt_tokens += v.usage.prompt_tokens;
        usage.completion_tokens += v.usage.completion_tokens;
        usage.cost_usd = match (usage.cost_usd, v.usage.cost_usd) {
            (a, None) => a,
            (a, Some(b)) => Some(a.unwrap_or(0.0) + b),
        };
    }
    let status = if p.item.output.is_err() {
        VerdictStatus::AgentError
    } else if scored.is_empty() {
        VerdictStatus::JudgeError
    } else {
        VerdictStatus::Scored
    };
    let mut item = JudgedItem {
        item: p.item.item.clone(),
        status,
        error: verdicts.iter().find_map(|v| v.error.clone()),
        samples_scored: scored.len() as u32,
        samples_requested: requested,
        answers: Vec::new(),
        dimensions: Vec::new(),
        composite: None,
        pass: None,
        metrics: BTreeMap::new(),
        rule_pass: p.rule_pass,
        run: p.item.run.clone(),
        usage,
    };
    let Some(first) = scored.first() else {
        // Every sample is a judge error: the deterministic metrics (the same in each) stand.
        if let Some(v) = verdicts.first() {
            item.metrics = v.metrics.clone();
        }
        return item;
    };
    if scored.len() == 1 {
        item.answers = first.answers.clone();
        item.dimensions = first.dimensions.clone();
        item.composite = first.composite;
        item.pass = first.pass;
        item.metrics = first.metrics.clone();
        return item;
    }
    let mut majority = Vec::new();
    for a in &first.answers {
        let yes = scored
            .iter()
            .filter(|v| {
                v.answers
                    .iter()
                    .any(|b| b.id == a.id && b.answer == YesNo::Yes)
            })
            .count();
        let answer = if 2 * yes > scored.len() {
            YesNo::Yes
        } else {
            YesNo::No
        };
        let source = scored
            .iter()
            .flat_map(|v| v.answers.iter())
            .find(|b| b.id == a.id && b.answer == answer)
            .unwrap_or(a);
        majority.push(Answer {
            answer,
            ..source.clone()
        });
    }
    let mut v = (**first).clone();
    v.answers = majority;
    fill_scores(&mut v, p, rubric);
    item.answers = v.answers;
    item.dimensions = v.dimensions;
    item.composite = v.composite;
    item.pass = v.pass;
    item.metrics = v.metrics;
    item
}

/// Where a verdict that needed no request came from.
enum Source {
    /// This run's own log (a resumed run).
    Log,
    Cache,
}

/// What a run's tasks hand back: an item prepared with the verdicts found for it and the samples
/// still to judge, or one judged sample.
enum Done {
    Looked {
        index: usize,
        p: Arc<Prepared>,
        found: Vec<(Verdict, Source)>,
        missing: Vec<(u32, String)>,
    },
    Judged(Box<Verdict>),
}

/// Items being prepared and looked up at any moment.
const LOOK_AHEAD: usize = 32;

/// What an item's look-up task needs.
struct Lookup {
    ctx: Arc<Ctx>,
    cache: Option<Cache>,
    /// This run's log as it was when the run started.
    previous: HashMap<(String, u32), Verdict>,
    log: LogSender,
    samples: u32,
}

impl Lookup {
    /// Prepares an item and finds its samples in the log or the cache.
    fn run(&self, index: usize, item: Item, problem: &Problem) -> anyhow::Result<Done> {
        let p = Arc::new(prepare(item, problem));
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for sample in 0..self.samples {
            let key = cache_key(&p, &self.ctx.rubric, self.ctx.llm.as_deref(), sample);
            let id = (p.item.item.id.clone(), sample);
            if let Some(v) = self
                .previous
                .get(&id)
                .filter(|v| v.cache_key == key && v.status != VerdictStatus::JudgeError)
            {
                found.push((v.clone(), Source::Log));
            } else if let Some(mut v) = self.cache.as_ref().and_then(|c| c.get(&key)) {
                v.item = p.item.item.clone();
                v.cached = true;
                v.requests = 0;
                self.log.append(&v)?;
                found.push((v, Source::Cache));
            } else {
                missing.push((sample, key));
            }
        }
        Ok(Done::Looked {
            index,
            p,
            found,
            missing,
        })
    }
}

/// Judges all items and writes `verdicts.jsonl`, `results.json` and ITBench's
/// `evaluation_results.json` (plus per-trial `judge_output.json`) into the output directory.
pub async fn run(items: Vec<Item>, cfg: RunConfig) -> anyhow::Result<(JudgeResults, RunReport)> {
    let started_at = Utc::now();
    std::fs::create_dir_all(&cfg.out_dir)
        .with_context(|| format!("cannot create {}", cfg.out_dir.display()))?;
    let log_path = cfg.out_dir.join(LOG_FILE);
    let previous = read_log(&log_path)?;
    let log = LogWriter::open(&log_path)?;
    let with_llm = cfg.llm.is_some();
    let ctx = Arc::new(Ctx {
        rubric: cfg.rubric.clone(),
        llm: cfg.llm.clone(),
        prices: cfg.prices.clone(),
        exchanges: cfg.exchanges,
    });
    let samples = if with_llm { cfg.samples.max(1) } else { 1 };
    let total = items.len() as u64 * u64::from(samples);
    let bar = if cfg.progress {
        indicatif::ProgressBar::new(total)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} judging [{bar:40}] {pos}/{len} {per_sec} eta {eta} {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );

    let t0 = Instant::now();
    let semaphore = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
    let mut report = RunReport::default();
    let mut done: HashMap<(String, u32), Verdict> = HashMap::new();
    let mut tasks: tokio::task::JoinSet<anyhow::Result<Done>> = tokio::task::JoinSet::new();
    // Per problem: the compiled ground truth, its hash and the prompt template, shared by all its
    // trials.
    let mut problems: HashMap<String, Arc<Problem>> = HashMap::new();
    let mut prepared: Vec<Option<Arc<Prepared>>> = vec![None; items.len()];
    let lookup = Arc::new(Lookup {
        ctx: ctx.clone(),
        cache: cfg.cache.clone(),
        previous,
        log: log.sender(),
        samples,
    });
    // One task per item prepares it and looks its samples up in the log and the cache, so that
    // work spreads over the runtime's threads and overlaps the judge calls already in flight; the
    // samples still to judge come back here and get a task each. Only a few items are looked up
    // ahead, so the first judge calls are not queued behind the preparation of every item.
    let mut pending = items.into_iter().enumerate();
    let mut look_up_next = |tasks: &mut tokio::task::JoinSet<anyhow::Result<Done>>| {
        if let Some((index, item)) = pending.next() {
            let problem = problems
                .entry(item.item.problem_id.clone())
                .or_insert_with(|| Arc::new(Problem::new(&item, &cfg.rubric, with_llm)))
                .clone();
            let lookup = lookup.clone();
            tasks.spawn(async move { lookup.run(index, item, &problem) });
        }
    };
    for _ in 0..LOOK_AHEAD {
        look_up_next(&mut tasks);
    }
    while let Some(joined) = tasks.join_next().await {
        match joined.context("a judging task panicked")?? {
            Done::Looked {
                index,
                p,
                found,
                missing,
            } => {
                for (v, source) in found {
                    match source {
                        Source::Log => report.resumed += 1,
                        Source::Cache => report.from_cache += 1,
                    }
                    done.insert((v.item.id.clone(), v.sample), v);
                    bar.inc(1);
                }
                for (sample, key) in missing {
                    let (p, ctx, sem, cache, log) = (
                        p.clone(),
                        ctx.clone(),
                        semaphore.clone(),
                        cfg.cache.clone(),
                        log.sender(),
                    );
                    tasks.spawn(async move {
                        let v = {
                            let _permit = sem.acquire_owned().await.expect("semaphore open");
                            judge_sample(&p, &ctx, sample, key).await
                        };
                        // Errors are never cached, so the next run tries them again.
                        if let (Some(c), VerdictStatus::Scored | VerdictStatus::AgentError) =
                            (&cache, v.status)
                        {
                            c.put(&v)?;
                        }
                        log.append(&v)?;
                        Ok(Done::Judged(Box::new(v)))
                    });
                }
                prepared[index] = Some(p);
                look_up_next(&mut tasks);
            }
            Done::Judged(v) => {
                report.judged += 1;
                report.requests += u64::from(v.requests);
                if v.status == VerdictStatus::JudgeError {
                    report.judge_errors += 1;
                    bar.set_message(format!("{} judge errors", report.judge_errors));
                }
                done.insert((v.item.id.clone(), v.sample), *v);
                bar.inc(1);
            }
        }
    }
    // The log closes once every sender is gone.
    drop(lookup);
    log.close().await?;
    report.judging = t0.elapsed();
    bar.finish_and_clear();
    report.verdicts = done.len();

    tracing::debug!(elapsed = ?t0.elapsed(), "verdicts ready");
    let prepared: Vec<Arc<Prepared>> = prepared
        .into_iter()
        .map(|p| p.expect("every item task reported"))
        .collect();
    let items: Vec<JudgedItem> = prepared
        .iter()
        .map(|p| {
            let vs: Vec<&Verdict> = (0..samples)
                .filter_map(|s| done.get(&(p.item.item.id.clone(), s)))
                .collect();
            combine(p, &vs, samples, &cfg.rubric)
        })
        .collect();
    let mut usage = Usage::default();
    for it in &items {
        usage.prompt_tokens += it.usage.prompt_tokens;
        usage.completion_tokens += it.usage.completion_tokens;
        if let Some(c) = it.usage.cost_usd {
            usage.cost_usd = Some(usage.cost_usd.unwrap_or(0.0) + c);
        }
    }
    tracing::debug!(elapsed = ?t0.elapsed(), "items combined");
    let results = JudgeResults {
        schema_version: VERDICT_VERSION,
        rubric_id: cfg.rubric.id.clone(),
        rubric_version: cfg.rubric.version.clone(),
        pass_threshold: cfg.rubric.threshold,
        judge: cfg.llm.as_deref().map(params),
        samples_per_item: samples,
        stats: aggregate::run_stats(&items, cfg.rubric.threshold, cfg.pass_k),
        items,
        usage,
        started_at,
        finished_at: Utc::now(),
    };
    tracing::debug!(elapsed = ?t0.elapsed(), "statistics computed");
    let evaluated: Vec<(&Item, &Evaluation, &JudgedItem)> = prepared
        .iter()
        .zip(&results.items)
        .filter_map(|(p, j)| p.evaluation.as_ref().map(|e| (&p.item, e, j)))
        .collect();
    // The two result files are independent: written (and flushed) at the same time.
    std::thread::scope(|scope| {
        let summary = scope.spawn(|| write_json(&cfg.out_dir.join(RESULTS_FILE), &results));
        let itbench = if evaluated.is_empty() {
            Ok(())
        } else {
            report_itbench::write(
                &cfg.out_dir,
                &evaluated,
                cfg.llm.as_deref().map(|l| l.config.model.as_str()),
                cfg.trial_outputs,
            )
        };
        summary.join().expect("the results writer panicked")?;
        itbench
    })?;
    tracing::debug!(elapsed = ?t0.elapsed(), "result files written");
    Ok((results, report))
}
