//! The board of agent sessions, the paper's table: per agent and per noise setting, the share of
//! runs whose diagnosis passed (Diag %), whose mitigation succeeded (Mitig %) and both (E2E %),
//! time to diagnose and to mitigate (mean and median), the agent's tokens, and pass@k over the
//! trials of each problem.
//!
//! Runs come from judge run results (`results.json`: the diagnosis as re-judged, the session's
//! measurements carried in each item's `run`) or straight from trees of session `run.json` files
//! (the diagnosis as judged inside the session). Each run's diagnosis pass is taken, in order, from
//! the checklist judge, the deterministic rule (`pass_rule`), or the session's record, and the board
//! counts which, so a reader sees what stands behind Diag %.
//!
//! Rates are over the runs where the outcome is known: a run without a mitigation record (replay)
//! is not in Mitig %, a diagnosis the rule could not decide is not in Diag %. E2E is known when both
//! are, or when either failed. pass@k is the unbiased estimator 1 − C(n−c, k)/C(n, k) per (agent,
//! problem, noise) with n known trials of which c passed, averaged over the problems with at least
//! k known trials.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use schemas::run_result::{AgentSandbox, RunResult};
use schemas::verdict::{JudgeResults, JudgedItem, RunFacts, VerdictStatus};
use serde::Serialize;

use crate::aggregate::{mean, pass_at_k};
use crate::layout::find_run_files;
use crate::report::load_results;
use crate::runner::RESULTS_FILE;

/// What `judge report` was given, read.
pub enum Source {
    /// A judge run (its `results.json`).
    Results(PathBuf, Box<JudgeResults>),
    /// Session runs (`run.json` files), with their paths.
    Sessions(PathBuf, Vec<(PathBuf, RunResult)>),
}

/// Reads a judge run directory or `results.json`, a `run.json`, or a tree of `run.json` files.
pub fn load_source(path: &Path) -> anyhow::Result<Source> {
    let is_run_file = |p: &Path| p.file_name().is_some_and(|n| n == "run.json");
    if path.is_file() && is_run_file(path) {
        return Ok(Source::Sessions(
            path.to_path_buf(),
            vec![(path.to_path_buf(), read_run(path)?)],
        ));
    }
    if path.is_file() || path.join(RESULTS_FILE).is_file() {
        return Ok(Source::Results(
            path.to_path_buf(),
            Box::new(load_results(path)?),
        ));
    }
    if !path.is_dir() {
        bail!("{}: no such file or directory", path.display());
    }
    let mut files = Vec::new();
    find_run_files(path, &mut files)?;
    if files.is_empty() {
        bail!(
            "{}: neither a judge run directory (with {RESULTS_FILE}) nor a tree of run.json files",
            path.display()
        );
    }
    let runs = files
        .into_iter()
        .map(|f| read_run(&f).map(|r| (f, r)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Source::Sessions(path.to_path_buf(), runs))
}

fn read_run(path: &Path) -> anyhow::Result<RunResult> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: not a faultline run result", path.display()))
}

/// What decided a run's diagnosis pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// The checklist LLM judge of a `judge run`.
    Checklist,
    /// The deterministic rule of a `judge run` (no judge model, or it failed on this run).
    Rule,
    /// The session's own diagnosis record (`run.json`).
    Session,
    /// Nothing could decide.
    Undecided,
}

/// One run, as the board sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoardRun {
    pub agent: String,
    pub problem_id: String,
    pub trial: String,
    pub noise: Option<bool>,
    pub diagnosis: Option<bool>,
    pub decided_by: DecidedBy,
    pub mitigation: Option<bool>,
    pub ttd_secs: Option<f64>,
    pub ttm_secs: Option<f64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Where the agent ran, when its record says.
    pub agent_sandbox: Option<AgentSandbox>,
    /// Where it was read from.
    pub source: String,
}

impl BoardRun {
    /// Both stages passed; known when both are known or either failed.
    pub fn e2e(&self) -> Option<bool> {
        match (self.diagnosis, self.mitigation) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        }
    }

    fn with_facts(mut self, facts: Option<&RunFacts>) -> Self {
        if let Some(f) = facts {
            self.noise = f.noise;
            self.mitigation = f.mitigation.as_ref().map(|m| m.success);
            self.ttd_secs = f.ttd_secs;
            self.ttm_secs = f.ttm_secs;
            self.input_tokens = f.agent_usage.as_ref().map(|u| u.input_tokens);
            self.output_tokens = f.agent_usage.as_ref().map(|u| u.output_tokens);
            self.agent_sandbox = f.agent_sandbox;
        }
        self
    }

    fn bare(agent: &str, problem_id: &str, trial: &str, source: String) -> Self {
        Self {
            agent: agent.to_string(),
            problem_id: problem_id.to_string(),
            trial: trial.to_string(),
            noise: None,
            diagnosis: None,
            decided_by: DecidedBy::Undecided,
            mitigation: None,
            ttd_secs: None,
            ttm_secs: None,
            input_tokens: None,
            output_tokens: None,
            agent_sandbox: None,
            source,
        }
    }

    /// A judged item: the checklist's pass when it answered, else the rule's.
    pub fn from_item(it: &JudgedItem, source: &Path) -> Self {
        let r = &it.item;
        let mut run = Self::bare(
            &r.agent,
            &r.problem_id,
            &r.trial,
            source.display().to_string(),
        );
        (run.diagnosis, run.decided_by) = match (it.status, it.pass, it.rule_pass) {
            (VerdictStatus::Scored | VerdictStatus::AgentError, Some(p), _) => {
                (Some(p), DecidedBy::Checklist)
            }
            (_, _, Some(p)) => (Some(p), DecidedBy::Rule),
            _ => (None, DecidedBy::Undecided),
        };
        run.with_facts(it.run.as_ref())
    }

    /// A session's run: its own diagnosis record; a run that submitted nothing failed.
    pub fn from_session(r: &RunResult, source: &Path) -> Self {
        let mut run = Self::bare(
            &r.agent,
            &r.problem_id,
            &r.trial,
            source.display().to_string(),
        );
        let pass = match &r.diagnosis {
            Some(d) if !d.submitted => Some(false),
            Some(d) => d.pass,
            None if r.output.is_none() => Some(false),
            None => None,
        };
        run.diagnosis = pass;
        run.decided_by = if pass.is_some() {
            DecidedBy::Session
        } else {
            DecidedBy::Undecided
        };
        run.with_facts(Some(&RunFacts::of(r)))
    }
}

/// A share of runs that passed, over the runs whose outcome is known.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Rate {
    pub passed: usize,
    pub known: usize,
    pub rate: Option<f64>,
}

impl Rate {
    fn of(outcomes: impl Iterator<Item = Option<bool>>) -> Self {
        let known: Vec<bool> = outcomes.flatten().collect();
        let passed = known.iter().filter(|p| **p).count();
        Self {
            passed,
            known: known.len(),
            rate: (!known.is_empty()).then(|| passed as f64 / known.len() as f64),
        }
    }
}

/// Mean and median of a duration over the runs that have it.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Times {
    pub n: usize,
    pub mean: Option<f64>,
    pub median: Option<f64>,
}

impl Times {
    fn of(values: impl Iterator<Item = Option<f64>>) -> Self {
        let mut v: Vec<f64> = values.flatten().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        Self {
            n: v.len(),
            mean: mean(&v),
            median: median(&v),
        }
    }
}

/// Median of sorted values (the mean of the middle two for an even count).
pub fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    let mid = sorted.get(n / 2).copied()?;
    if n % 2 == 1 {
        Some(mid)
    } else {
        sorted.get(n / 2 - 1).map(|lo| (lo + mid) / 2.0)
    }
}

/// The agent's own tokens, over the runs that report them.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Tokens {
    pub runs: usize,
    pub input_total: u64,
    pub output_total: u64,
    pub input_mean: Option<f64>,
    pub output_mean: Option<f64>,
}

/// pass@k of each outcome, averaged over problems.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PassAtK {
    pub k: usize,
    pub diagnosis: Option<f64>,
    pub mitigation: Option<f64>,
    pub e2e: Option<f64>,
    /// Problems with at least k known E2E outcomes (those the E2E value averages over).
    pub problems: usize,
}

/// One line of the board: an agent with noise on, off, or not recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoardRow {
    pub agent: String,
    pub noise: Option<bool>,
    pub runs: usize,
    pub problems: usize,
    pub diagnosis: Rate,
    pub mitigation: Rate,
    pub e2e: Rate,
    pub ttd: Times,
    pub ttm: Times,
    pub tokens: Tokens,
    pub pass_at_k: PassAtK,
    /// How many runs' diagnosis each source decided.
    pub decided_by: BTreeMap<DecidedBy, usize>,
    /// Runs whose agent ran without the sandbox (`--no-sandbox`): it could have read the answers.
    pub unsandboxed: usize,
}

/// The whole board (`board.json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Board {
    /// Runs per source of their diagnosis pass, over the whole board.
    pub decided_by: BTreeMap<DecidedBy, usize>,
    /// Runs whose agent ran without the sandbox, over the whole board.
    pub unsandboxed: usize,
    pub rows: Vec<BoardRow>,
}

/// Every run of the sources, refusing a run (agent, problem, trial) given twice.
pub fn runs(sources: &[Source]) -> anyhow::Result<Vec<BoardRun>> {
    let mut out: Vec<BoardRun> = Vec::new();
    for s in sources {
        match s {
            Source::Results(path, r) => {
                out.extend(r.items.iter().map(|it| BoardRun::from_item(it, path)));
            }
            Source::Sessions(_, runs) => {
                out.extend(runs.iter().map(|(p, r)| BoardRun::from_session(r, p)));
            }
        }
    }
    let mut seen: BTreeMap<(&str, &str, &str), &str> = BTreeMap::new();
    for r in &out {
        let key = (r.agent.as_str(), r.problem_id.as_str(), r.trial.as_str());
        if let Some(first) = seen.insert(key, r.source.as_str()) {
            bail!(
                "run {}/{}/{} is given twice ({} and {}); give each source once",
                r.agent,
                r.problem_id,
                r.trial,
                first,
                r.source
            );
        }
    }
    Ok(out)
}

/// pass@k of one outcome over the problems of a row (see the module doc).
fn mean_pass_at_k(
    by_problem: &BTreeMap<&str, Vec<&BoardRun>>,
    outcome: impl Fn(&BoardRun) -> Option<bool>,
    k: usize,
) -> (Option<f64>, usize) {
    let per_problem: Vec<f64> = by_problem
        .values()
        .filter_map(|runs| {
            let known: Vec<bool> = runs.iter().filter_map(|r| outcome(r)).collect();
            let c = known.iter().filter(|p| **p).count();
            pass_at_k(known.len(), c, k)
        })
        .collect();
    (mean(&per_problem), per_problem.len())
}

fn row(agent: &str, noise: Option<bool>, runs: &[&BoardRun], k: usize) -> BoardRow {
    let mut by_problem: BTreeMap<&str, Vec<&BoardRun>> = BTreeMap::new();
    for r in runs {
        by_problem.entry(r.problem_id.as_str()).or_default().push(r);
    }
    let with_usage: Vec<(u64, u64)> = runs
        .iter()
        .filter_map(|r| Some((r.input_tokens?, r.output_tokens?)))
        .collect();
    let input: Vec<f64> = with_usage.iter().map(|(i, _)| *i as f64).collect();
    let output: Vec<f64> = with_usage.iter().map(|(_, o)| *o as f64).collect();
    let (diagnosis, _) = mean_pass_at_k(&by_problem, |r| r.diagnosis, k);
    let (mitigation, _) = mean_pass_at_k(&by_problem, |r| r.mitigation, k);
    let (e2e, problems) = mean_pass_at_k(&by_problem, BoardRun::e2e, k);
    let mut decided_by = BTreeMap::new();
    for r in runs {
        *decided_by.entry(r.decided_by).or_insert(0) += 1;
    }
    BoardRow {
        agent: agent.to_string(),
        noise,
        runs: runs.len(),
        problems: by_problem.len(),
        diagnosis: Rate::of(runs.iter().map(|r| r.diagnosis)),
        mitigation: Rate::of(runs.iter().map(|r| r.mitigation)),
        e2e: Rate::of(runs.iter().map(|r| r.e2e())),
        ttd: Times::of(runs.iter().map(|r| r.ttd_secs)),
        ttm: Times::of(runs.iter().map(|r| r.ttm_secs)),
        tokens: Tokens {
            runs: with_usage.len(),
            input_total: with_usage.iter().map(|(i, _)| i).sum(),
            output_total: with_usage.iter().map(|(_, o)| o).sum(),
            input_mean: mean(&input),
            output_mean: mean(&output),
        },
        pass_at_k: PassAtK {
            k,
            diagnosis,
            mitigation,
            e2e,
            problems,
        },
        decided_by,
        unsandboxed: unsandboxed(runs.iter().copied()),
    }
}

fn unsandboxed<'a>(runs: impl Iterator<Item = &'a BoardRun>) -> usize {
    runs.filter(|r| r.agent_sandbox == Some(AgentSandbox::None))
        .count()
}

/// The board of `runs`, one row per (agent, noise). `k` for pass@k defaults to the fewest trials
/// of any (agent, problem, noise).
pub fn build(runs: &[BoardRun], k: Option<usize>) -> anyhow::Result<Board> {
    if runs.is_empty() {
        bail!("no runs to put on the board");
    }
    if k == Some(0) {
        bail!("--k: expected at least 1");
    }
    let mut groups: BTreeMap<(&str, Option<bool>), Vec<&BoardRun>> = BTreeMap::new();
    let mut trials: BTreeMap<(&str, &str, Option<bool>), usize> = BTreeMap::new();
    for r in runs {
        groups
            .entry((r.agent.as_str(), r.noise))
            .or_default()
            .push(r);
        *trials
            .entry((r.agent.as_str(), r.problem_id.as_str(), r.noise))
            .or_insert(0) += 1;
    }
    let k = k.unwrap_or_else(|| trials.values().copied().min().unwrap_or(1).max(1));
    let rows = groups
        .iter()
        .map(|((agent, noise), rs)| row(agent, *noise, rs, k))
        .collect();
    let mut decided_by = BTreeMap::new();
    for r in runs {
        *decided_by.entry(r.decided_by).or_insert(0) += 1;
    }
    Ok(Board {
        decided_by,
        unsandboxed: unsandboxed(runs.iter()),
        rows,
    })
}

/// One sentence on what decided the diagnoses of the board.
pub fn provenance(board: &Board) -> String {
    let names = |d: &DecidedBy| match d {
        DecidedBy::Checklist => "the checklist judge of judge run",
        DecidedBy::Rule => "the deterministic rule (root causes named) of judge run",
        DecidedBy::Session => "the sessions' in-loop judge records (run.json)",
        DecidedBy::Undecided => "nothing (undecided, left out of Diag %)",
    };
    let parts: Vec<String> = board
        .decided_by
        .iter()
        .map(|(d, n)| format!("{n} by {}", names(d)))
        .collect();
    format!("diagnosis pass: {}", parts.join("; "))
}

/// The board's warning when some agents ran without the sandbox: their scores may come from
/// reading the answers, not from doing the work.
pub fn sandbox_warning(board: &Board) -> Option<String> {
    if board.unsandboxed == 0 {
        return None;
    }
    let agents: BTreeSet<&str> = board
        .rows
        .iter()
        .filter(|r| r.unsandboxed > 0)
        .map(|r| r.agent.as_str())
        .collect();
    let agents: Vec<&str> = agents.into_iter().collect();
    Some(format!(
        "warning: {} runs ({}) had no agent sandbox (--no-sandbox): those agents could read the \
         answers, so their scores are not comparable with sandboxed runs'",
        board.unsandboxed,
        agents.join(", ")
    ))
}

fn pct(r: &Rate) -> String {
    r.rate
        .map_or_else(|| "–".into(), |v| format!("{:.1}", v * 100.0))
}

fn secs(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.1}"))
}

fn noise_label(n: Option<bool>) -> &'static str {
    match n {
        Some(true) => "on",
        Some(false) => "off",
        None => "–",
    }
}

/// The board as plain text lines, for the terminal.
pub fn text(board: &Board) -> String {
    let mut s = format!(
        "{:<24} {:>5} {:>5} {:>7} {:>7} {:>7} {:>15} {:>15} {:>17} {:>21}\n",
        "agent",
        "noise",
        "runs",
        "diag%",
        "mitig%",
        "e2e%",
        "ttd mean/med",
        "ttm mean/med",
        "tokens in/out",
        "pass@k diag/e2e"
    );
    for r in &board.rows {
        let _ = writeln!(
            s,
            "{:<24} {:>5} {:>5} {:>7} {:>7} {:>7} {:>15} {:>15} {:>17} {:>21}",
            r.agent,
            noise_label(r.noise),
            r.runs,
            pct(&r.diagnosis),
            pct(&r.mitigation),
            pct(&r.e2e),
            format!("{}/{}", secs(r.ttd.mean), secs(r.ttd.median)),
            format!("{}/{}", secs(r.ttm.mean), secs(r.ttm.median)),
            format!(
                "{}/{}",
                r.tokens
                    .input_mean
                    .map_or("–".into(), |v| format!("{v:.0}")),
                r.tokens
                    .output_mean
                    .map_or("–".into(), |v| format!("{v:.0}"))
            ),
            format!(
                "{}/{} (k={})",
                r.pass_at_k
                    .diagnosis
                    .map_or("–".into(), |v| format!("{v:.3}")),
                r.pass_at_k.e2e.map_or("–".into(), |v| format!("{v:.3}")),
                r.pass_at_k.k
            ),
        );
    }
    s.push_str(&provenance(board));
    if let Some(w) = sandbox_warning(board) {
        s.push('\n');
        s.push_str(&w);
    }
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The board as an HTML section (a heading, the table and where the diagnoses come from).
pub fn html_section(board: &Board) -> String {
    let mut t = String::from(
        "<h2>Board: diagnosis, mitigation and time per agent</h2><table><thead><tr><th>agent</th><th>noise</th><th>runs</th><th>problems</th><th>Diag %</th><th>Mitig %</th><th>E2E %</th><th>TTD mean / median (s)</th><th>TTM mean / median (s)</th><th>tokens in / out (mean)</th><th>pass@k diag</th><th>pass@k mitig</th><th>pass@k E2E</th></tr></thead><tbody>",
    );
    let p = |v: Option<f64>| v.map_or_else(|| "–".into(), |x| format!("{x:.3}"));
    let whole = |v: Option<f64>| v.map_or_else(|| "–".into(), |x| format!("{x:.0}"));
    let of = |r: &Rate| format!("{} <small>({}/{})</small>", pct(r), r.passed, r.known);
    for r in &board.rows {
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td><td>{} / {}</td><td>{} / {}</td><td>{}</td><td>{}</td><td>{} (k={})</td></tr>",
            esc(&r.agent),
            noise_label(r.noise),
            r.runs,
            r.problems,
            of(&r.diagnosis),
            of(&r.mitigation),
            of(&r.e2e),
            secs(r.ttd.mean),
            secs(r.ttd.median),
            secs(r.ttm.mean),
            secs(r.ttm.median),
            whole(r.tokens.input_mean),
            whole(r.tokens.output_mean),
            p(r.pass_at_k.diagnosis),
            p(r.pass_at_k.mitigation),
            p(r.pass_at_k.e2e),
            r.pass_at_k.k,
        );
    }
    t.push_str("</tbody></table>");
    let _ = write!(t, r#"<p class="meta">{}</p>"#, esc(&provenance(board)));
    if let Some(w) = sandbox_warning(board) {
        let _ = write!(t, r#"<p class="warning">{}</p>"#, esc(&w));
    }
    let agents: BTreeSet<&str> = board.rows.iter().map(|r| r.agent.as_str()).collect();
    let _ = write!(
        t,
        r#"<p class="meta">{} agents; rates are over runs whose outcome is known</p>"#,
        agents.len()
    );
    t
}
