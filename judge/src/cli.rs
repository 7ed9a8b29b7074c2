//! The `judge` command line: `run`, `report`, `agree`. Thin over the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use schemas::verdict::JudgeResults;

use crate::agree::{self, RaterKey};
use crate::board::{self, Source};
use crate::layout::{self, Scan};
use crate::llm::{DEFAULT_BASE_URL, DEFAULT_MODEL, Llm, LlmConfig, StructuredMode};
use crate::prices::PriceTable;
use crate::report;
use crate::rubric;
use crate::runner::{self, RunConfig};
use crate::store::{Cache, write_atomic, write_json};
use crate::truth;

#[derive(Debug, Parser)]
#[command(
    name = "judge",
    version,
    about = "Judge AI SRE agents' diagnoses against ground truth"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Judge agent outputs: checklist LLM judge plus ITBench's metrics computed in code.
    #[command(
        after_help = "Example: judge run --ground-truth itbench/ground_truths.json --outputs react=itbench/agent_outputs --out runs/react --model gpt-4o-mini\n\
Exit codes: 0 every item judged; 1 some items are judge errors (re-run to retry them) or bad input; 2 usage."
    )]
    Run(Box<RunArgs>),
    /// Build the board (Diag/Mitig/E2E %, TTD, TTM, tokens, pass@k per agent and noise) and the
    /// leaderboard (JSON and a static HTML page with plots) from judge runs or session run.json trees.
    #[command(
        after_help = "Example: judge report runs/react runs/baseline --out board/\n\
         Example: judge report runs/board --out board/   (a tree of session run.json files: their in-session diagnosis records are used)"
    )]
    Report(ReportArgs),
    /// Agreement between judges, samples or people: Cohen's and Fleiss' kappa, raw agreement, Gwet's AC1.
    #[command(
        after_help = "Example: judge agree runs/gpt4o/verdicts.jsonl runs/llama/verdicts.jsonl labels/human.csv --by model"
    )]
    Agree(AgreeArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Ground truths: a file (faultline or ITBench v1, YAML or JSON, one or a list) or a directory.
    #[arg(long, short = 'g')]
    pub ground_truth: PathBuf,
    /// Agent outputs: `[AGENT=]PATH`, repeatable. PATH is an ITBench outputs tree, a tree of
    /// faultline `run.json` files, a SREGym results CSV, or one output file (with --problem).
    #[arg(long, short = 'o', required = true)]
    pub outputs: Vec<String>,
    /// Problem id of a single output file.
    #[arg(long)]
    pub problem: Option<String>,
    /// Directory for verdicts.jsonl, results.json and ITBench's evaluation_results.json.
    #[arg(long, value_parser = schemas::paths::output_dir)]
    pub out: PathBuf,
    /// Rubric YAML (default: the built-in faultline rubric).
    #[arg(long)]
    pub rubric: Option<PathBuf>,
    /// Compute only the deterministic metrics; make no LLM call.
    #[arg(long)]
    pub no_llm: bool,
    #[arg(long, env = "JUDGE_BASE_URL", default_value = DEFAULT_BASE_URL)]
    pub base_url: String,
    #[arg(
        long,
        env = "JUDGE_API_KEY",
        default_value = "dummy",
        hide_env_values = true
    )]
    pub api_key: String,
    #[arg(long, env = "JUDGE_MODEL", default_value = DEFAULT_MODEL)]
    pub model: String,
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Sample i is asked with seed + i.
    #[arg(long)]
    pub seed: Option<i64>,
    #[arg(long)]
    pub max_tokens: Option<u32>,
    #[arg(long, value_enum, default_value = "auto")]
    pub structured_output: StructuredMode,
    /// Samples per item; answers are combined by per-question majority vote.
    #[arg(long, default_value_t = 1)]
    pub samples: u32,
    /// Judge calls in flight at once.
    #[arg(long, short = 'j', default_value_t = 8)]
    pub concurrency: usize,
    /// Requests per second over the whole run (token bucket); 0 = unlimited.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    #[arg(long, default_value_t = 4)]
    pub burst: u32,
    /// Seconds per HTTP attempt.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
    /// HTTP attempts per call (429, 5xx, timeouts and connection errors are retried).
    #[arg(long, default_value_t = 8)]
    pub max_attempts: u32,
    /// Backoff base and cap in milliseconds (exponential, full jitter; Retry-After honoured).
    #[arg(long, default_value_t = 500)]
    pub backoff_base_ms: u64,
    #[arg(long, default_value_t = 60_000)]
    pub backoff_cap_ms: u64,
    /// Exchanges per sample when answers are invalid (each with one repair request).
    #[arg(long, default_value_t = 3)]
    pub exchanges: u32,
    /// Verdict cache directory (content-addressed; shared between runs).
    #[arg(long, env = "JUDGE_CACHE_DIR")]
    pub cache: Option<PathBuf>,
    #[arg(long)]
    pub no_cache: bool,
    /// Price table YAML (model: {input, output} dollars per million tokens).
    #[arg(long)]
    pub prices: Option<PathBuf>,
    /// k for pass^k (default: fewest trials of any problem).
    #[arg(long)]
    pub pass_k: Option<usize>,
    /// Also write ITBench's per-trial judge_output.json files (under OUT/trials/).
    #[arg(long)]
    pub judge_outputs: bool,
    /// Print the run summary as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Judge run directories (or their results.json), or trees of session run.json files.
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Directory for board.json, leaderboard.json (judge runs only) and index.html.
    #[arg(long, value_parser = schemas::paths::output_dir)]
    pub out: PathBuf,
    /// Score to rank by (default: composite, or root_cause_entity_f1 without an LLM judge).
    #[arg(long)]
    pub metric: Option<String>,
    /// k for the board's pass@k (default: fewest trials of any agent, problem and noise setting).
    #[arg(long)]
    pub k: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AgreeArgs {
    /// Verdict logs (verdicts.jsonl), run results (results.json), or labels (CSV: item,question,answer[,rater]; or JSON).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// What distinguishes raters in verdict files.
    #[arg(long, value_enum, default_value = "model")]
    pub by: RaterKey,
    #[arg(long)]
    pub json: bool,
}

fn default_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("faultline")
        .join("judge")
}

pub async fn run(args: Box<RunArgs>) -> anyhow::Result<ExitCode> {
    let rubric = rubric::load_or_default(args.rubric.as_deref())?;
    let truths = truth::load(&args.ground_truth)?;
    let mut scan = Scan::default();
    for spec in &args.outputs {
        let (agent, path) = match spec.split_once('=') {
            Some((a, p)) if !a.is_empty() && !a.contains('/') => (a.to_string(), PathBuf::from(p)),
            _ => ("agent".to_string(), PathBuf::from(spec)),
        };
        if !path.exists() {
            bail!("--outputs {spec}: {} does not exist", path.display());
        }
        layout::scan(&path, &agent, args.problem.as_deref(), &truths, &mut scan)?;
    }
    for w in &scan.without_truth {
        tracing::warn!("no ground truth for {w}; skipped");
    }
    if scan.items.is_empty() {
        bail!(
            "no agent output matches a ground truth (read {} ground truths)",
            truths.len()
        );
    }
    let llm = if args.no_llm {
        None
    } else {
        Some(Arc::new(Llm::new(LlmConfig {
            base_url: args.base_url.clone(),
            api_key: args.api_key.clone(),
            model: args.model.clone(),
            temperature: args.temperature,
            seed: args.seed,
            max_tokens: args.max_tokens,
            structured: args.structured_output,
            timeout: Duration::from_secs_f64(args.timeout.max(0.001)),
            max_attempts: args.max_attempts,
            backoff_base: Duration::from_millis(args.backoff_base_ms),
            backoff_cap: Duration::from_millis(args.backoff_cap_ms),
            rate: (args.rate > 0.0).then_some(args.rate),
            burst: args.burst,
        })?))
    };
    let prices = match &args.prices {
        Some(p) => PriceTable::load(p)?,
        None => PriceTable::built_in(),
    };
    let cache =
        (!args.no_cache).then(|| Cache::new(args.cache.clone().unwrap_or_else(default_cache_dir)));
    let n_items = scan.items.len();
    // Outputs that could not be read are scored 0 as agent errors; the summary says how many,
    // so a directory of garbage does not read as a clean run.
    let unreadable = scan.items.iter().filter(|i| i.output.is_err()).count();
    if let Some(first) = scan.items.iter().find_map(|i| i.output.as_ref().err()) {
        tracing::warn!("{unreadable} agent output(s) unreadable, scored 0 (first: {first})");
    }
    let (results, rep) = runner::run(
        scan.items,
        RunConfig {
            rubric,
            llm,
            samples: args.samples,
            concurrency: args.concurrency,
            cache,
            out_dir: args.out.clone(),
            prices,
            exchanges: args.exchanges,
            pass_k: args.pass_k,
            progress: !args.json,
            trial_outputs: args.judge_outputs,
        },
    )
    .await?;
    if args.json {
        let summary = serde_json::json!({
            "items": n_items, "verdicts": rep.verdicts, "judged": rep.judged, "from_cache": rep.from_cache,
            "resumed": rep.resumed, "requests": rep.requests, "judge_errors": rep.judge_errors,
            "unreadable_outputs": unreadable,
            "judging_seconds": rep.judging.as_secs_f64(),
            "out": args.out, "usage": results.usage,
        });
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "{n_items} items, {} verdicts: {} judged ({} requests), {} from cache, {} resumed, {} judge errors, {unreadable} unreadable outputs (scored 0)",
            rep.verdicts, rep.judged, rep.requests, rep.from_cache, rep.resumed, rep.judge_errors
        );
        for (agent, s) in &results.stats {
            for name in ["composite", "root_cause_entity_f1"] {
                if let Some(st) = s.macro_overall.get(name) {
                    println!(
                        "  {agent}: {name} {} (pass@1 {}) over {} problems",
                        st.mean.map_or("–".into(), |m| format!("{m:.3}")),
                        st.pass_at_1.map_or("–".into(), |m| format!("{m:.3}")),
                        st.n
                    );
                }
            }
        }
        println!("wrote {}", args.out.display());
    }
    Ok(if rep.judge_errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let sources = args
        .runs
        .iter()
        .map(|p| board::load_source(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let board = board::build(&board::runs(&sources)?, args.k)?;
    let results: Vec<JudgeResults> = sources
        .into_iter()
        .filter_map(|s| match s {
            Source::Results(_, r) => Some(*r),
            Source::Sessions(..) => None,
        })
        .collect();
    // The leaderboard ranks judge runs by a score; session records carry no such scores.
    let lb = if results.is_empty() {
        None
    } else {
        let metric = args
            .metric
            .clone()
            .unwrap_or_else(|| report::default_metric(&results));
        Some(report::leaderboard(&results, &metric)?)
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let board_path = args.out.join("board.json");
    write_json(&board_path, &board)?;
    let mut written = vec![board_path];
    if let Some(lb) = &lb {
        let path = args.out.join("leaderboard.json");
        write_json(&path, lb)?;
        written.push(path);
    }
    let html_path = args.out.join("index.html");
    write_atomic(
        &html_path,
        report::page(lb.as_ref(), Some(&board)).as_bytes(),
    )
    .with_context(|| format!("cannot write {}", html_path.display()))?;
    written.push(html_path);
    if args.json {
        let both = serde_json::json!({"board": board, "leaderboard": lb});
        println!("{}", serde_json::to_string_pretty(&both)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", board::text(&board));
    if let Some(lb) = &lb {
        println!();
        for r in &lb.rows {
            println!(
                "{:>3}. {:<30} {} {}",
                r.rank,
                r.agent,
                lb.metric,
                r.score.map_or("–".into(), |s| format!("{s:.3}"))
            );
        }
    }
    let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    println!("wrote {}", names.join(", "));
    Ok(ExitCode::SUCCESS)
}

pub fn agree(args: AgreeArgs) -> anyhow::Result<ExitCode> {
    let mut ratings = agree::Ratings::new();
    for f in &args.files {
        agree::load(f, args.by, &mut ratings)?;
    }
    let rep = agree::report(&ratings);
    if rep.raters.len() < 2 {
        bail!(
            "agreement needs at least two raters; found {:?} (try --by sample or --by file)",
            rep.raters
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("raters: {}", rep.raters.join(", "));
    println!(
        "{:<14} {:>6} {:>8} {:>8} {:>8} {:>8}  band",
        "question", "units", "raw", "cohen", "fleiss", "ac1"
    );
    let f = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.3}"));
    for (q, a) in rep
        .per_question
        .iter()
        .map(|(q, a)| (q.as_str(), a))
        .chain([("pooled", &rep.pooled)])
    {
        println!(
            "{:<14} {:>6} {:>8} {:>8} {:>8} {:>8}  {}",
            q,
            a.units,
            f(a.raw),
            f(a.cohen_kappa),
            f(a.fleiss_kappa),
            f(a.gwet_ac1),
            a.band.unwrap_or("–")
        );
    }
    Ok(ExitCode::SUCCESS)
}
