//! Leaderboards from judge runs: a JSON table and a self-contained HTML page with its plots drawn
//! as inline SVG (scores per agent with 95% intervals, per-dimension bars, a per-problem heatmap),
//! so the page opens anywhere without scripts or network. The board of sessions (`board`) goes on
//! the same page, above.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, bail};
use schemas::verdict::{AgentStats, JudgeResults, Stat, VerdictStatus};
use serde::Serialize;

use crate::board::Board;
use crate::runner::RESULTS_FILE;

/// Reads a run's `results.json` (given the file or the run directory).
pub fn load_results(path: &Path) -> anyhow::Result<JudgeResults> {
    let file = if path.is_dir() {
        path.join(RESULTS_FILE)
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: not a judge results file", file.display()))
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub rank: usize,
    pub agent: String,
    /// The score the board is ranked by.
    pub score: Option<f64>,
    pub ci95: Option<[f64; 2]>,
    pub stderr: Option<f64>,
    pub pass_at_1: Option<f64>,
    pub pass_hat_k: Option<f64>,
    pub k: Option<usize>,
    pub problems: usize,
    pub trials: usize,
    pub agent_errors: usize,
    pub judge_errors: usize,
    /// Macro means of every other score (dimensions, ITBench metrics).
    pub scores: BTreeMap<String, f64>,
    /// Per problem: mean of the ranking score.
    pub per_problem: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Leaderboard {
    pub metric: String,
    pub rubric: String,
    pub judges: Vec<String>,
    pub dimensions: Vec<(String, String)>,
    pub rows: Vec<Row>,
}

/// The ranking score: the rubric composite when the runs used an LLM, else entity F1.
pub fn default_metric(runs: &[JudgeResults]) -> String {
    let has_composite = runs
        .iter()
        .flat_map(|r| r.stats.values())
        .any(|s| s.macro_overall.contains_key("composite"));
    if has_composite {
        "composite".into()
    } else {
        "root_cause_entity_f1".into()
    }
}

pub fn leaderboard(runs: &[JudgeResults], metric: &str) -> anyhow::Result<Leaderboard> {
    let mut agents: BTreeMap<String, &AgentStats> = BTreeMap::new();
    for r in runs {
        for (a, s) in &r.stats {
            if agents.insert(a.clone(), s).is_some() {
                bail!(
                    "agent `{a}` appears in two runs; give each run's agent a distinct name (judge run --outputs NAME=PATH)"
                );
            }
        }
    }
    if agents.is_empty() {
        bail!("the runs contain no judged items");
    }
    let mut dimensions: Vec<(String, String)> = Vec::new();
    for it in runs.iter().flat_map(|r| r.items.iter()) {
        for d in &it.dimensions {
            if !dimensions.iter().any(|(id, _)| *id == d.id) {
                dimensions.push((d.id.clone(), d.name.clone()));
            }
        }
    }
    let empty = Stat::default();
    let mut rows: Vec<Row> = agents
        .into_iter()
        .map(|(agent, s)| {
            let st = s.macro_overall.get(metric).unwrap_or(&empty);
            let micro = s.micro_overall.get(metric).unwrap_or(&empty);
            // Counted over items, not over the ranking score: a judge error keeps its
            // deterministic metrics, and ranking by one of them would hide it.
            let judge_errors = runs
                .iter()
                .flat_map(|r| r.items.iter())
                .filter(|i| i.item.agent == agent && i.status == VerdictStatus::JudgeError)
                .count();
            Row {
                rank: 0,
                agent,
                score: st.mean,
                ci95: st.ci95,
                stderr: st.stderr,
                pass_at_1: st.pass_at_1,
                pass_hat_k: st.pass_hat_k,
                k: st.k,
                problems: st.n,
                trials: micro.n,
                agent_errors: micro.agent_errors,
                judge_errors,
                scores: s
                    .macro_overall
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.mean?)))
                    .collect(),
                per_problem: s
                    .per_problem
                    .iter()
                    .filter_map(|(p, t)| Some((p.clone(), t.get(metric)?.mean?)))
                    .collect(),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.score
            .unwrap_or(-1.0)
            .total_cmp(&a.score.unwrap_or(-1.0))
            .then(a.agent.cmp(&b.agent))
    });
    for (i, r) in rows.iter_mut().enumerate() {
        r.rank = i + 1;
    }
    let judges: BTreeSet<String> = runs
        .iter()
        .filter_map(|r| r.judge.as_ref().map(|j| j.model.clone()))
        .collect();
    let rubric: BTreeSet<String> = runs
        .iter()
        .map(|r| format!("{} {}", r.rubric_id, r.rubric_version))
        .collect();
    Ok(Leaderboard {
        metric: metric.to_string(),
        rubric: rubric.into_iter().collect::<Vec<_>>().join(", "),
        judges: judges.into_iter().collect(),
        dimensions,
        rows,
    })
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn fmt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |x| format!("{x:.3}"))
}

const PALETTE: [&str; 6] = [
    "#2563eb", "#16a34a", "#ea580c", "#9333ea", "#0891b2", "#dc2626",
];

/// Horizontal bars, one per agent, with the 95% interval as a whisker.
fn bars_svg(lb: &Leaderboard) -> String {
    let (w, row_h, left) = (720.0, 34.0, 200.0);
    let h = 40.0 + row_h * lb.rows.len() as f64;
    let scale = |v: f64| left + v.clamp(0.0, 1.0) * (w - left - 30.0);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="score per agent">"#
    );
    for t in 0..=4 {
        let x = scale(f64::from(t) / 4.0);
        let _ = write!(
            s,
            r##"<line x1="{x}" y1="20" x2="{x}" y2="{}" stroke="#ddd"/><text x="{x}" y="14" font-size="11" text-anchor="middle">{:.2}</text>"##,
            h - 10.0,
            f64::from(t) / 4.0
        );
    }
    for (i, r) in lb.rows.iter().enumerate() {
        let y = 26.0 + row_h * i as f64;
        let v = r.score.unwrap_or(0.0);
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" font-size="13" text-anchor="end">{}</text>"#,
            left - 8.0,
            y + 16.0,
            esc(&r.agent)
        );
        let _ = write!(
            s,
            r#"<rect x="{left}" y="{y}" width="{}" height="22" fill="{}"/>"#,
            scale(v) - left,
            PALETTE[i % PALETTE.len()]
        );
        if let Some([lo, hi]) = r.ci95 {
            let (a, b) = (scale(lo), scale(hi));
            let m = y + 11.0;
            let _ = write!(
                s,
                r##"<line x1="{a}" y1="{m}" x2="{b}" y2="{m}" stroke="#111" stroke-width="2"/><line x1="{a}" y1="{}" x2="{a}" y2="{}" stroke="#111"/><line x1="{b}" y1="{}" x2="{b}" y2="{}" stroke="#111"/>"##,
                m - 6.0,
                m + 6.0,
                m - 6.0,
                m + 6.0
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// Grouped vertical bars: each dimension, one bar per agent.
fn dimensions_svg(lb: &Leaderboard) -> String {
    let groups = lb.dimensions.len().max(1) as f64;
    let agents = lb.rows.len().max(1) as f64;
    let (w, h, top, bottom) = (720.0, 260.0, 20.0, 50.0);
    let gw = (w - 60.0) / groups;
    let bw = (gw - 20.0) / agents;
    let y = |v: f64| top + (1.0 - v.clamp(0.0, 1.0)) * (h - top - bottom);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="per-dimension scores">"#
    );
    for t in 0..=4 {
        let v = f64::from(t) / 4.0;
        let _ = write!(
            s,
            r##"<line x1="50" y1="{0}" x2="{w}" y2="{0}" stroke="#ddd"/><text x="44" y="{1}" font-size="11" text-anchor="end">{v:.2}</text>"##,
            y(v),
            y(v) + 4.0
        );
    }
    for (g, (id, name)) in lb.dimensions.iter().enumerate() {
        let x0 = 60.0 + gw * g as f64;
        for (i, r) in lb.rows.iter().enumerate() {
            let v = r.scores.get(id).copied().unwrap_or(0.0);
            let x = x0 + bw * i as f64;
            let _ = write!(
                s,
                r#"<rect x="{x}" y="{}" width="{}" height="{}" fill="{}"><title>{}: {v:.3}</title></rect>"#,
                y(v),
                (bw - 2.0).max(1.0),
                y(0.0) - y(v),
                PALETTE[i % PALETTE.len()],
                esc(&r.agent)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
            x0 + (gw - 20.0) / 2.0,
            h - bottom + 18.0,
            esc(name)
        );
    }
    s.push_str("</svg>");
    s
}

/// Agents × problems, colour from red (0) to green (1).
fn heatmap_svg(lb: &Leaderboard) -> String {
    let problems: BTreeSet<&String> = lb.rows.iter().flat_map(|r| r.per_problem.keys()).collect();
    let problems: Vec<&String> = problems.into_iter().collect();
    let (cell, left, top) = (34.0, 200.0, 70.0);
    let w = left + cell * problems.len() as f64 + 20.0;
    let h = top + cell * lb.rows.len() as f64 + 10.0;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="per-problem heatmap">"#
    );
    for (j, p) in problems.iter().enumerate() {
        let x = left + cell * j as f64 + cell / 2.0;
        let _ = write!(
            s,
            r#"<text x="{x}" y="{}" font-size="11" transform="rotate(-45 {x} {})">{}</text>"#,
            top - 6.0,
            top - 6.0,
            esc(p)
        );
    }
    for (i, r) in lb.rows.iter().enumerate() {
        let y = top + cell * i as f64;
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" font-size="13" text-anchor="end">{}</text>"#,
            left - 8.0,
            y + cell / 2.0 + 4.0,
            esc(&r.agent)
        );
        for (j, p) in problems.iter().enumerate() {
            let x = left + cell * j as f64;
            let (fill, label) = match r.per_problem.get(*p) {
                Some(v) => {
                    let v = v.clamp(0.0, 1.0);
                    let red = (220.0 * (1.0 - v) + 22.0 * v) as u8;
                    let green = (38.0 * (1.0 - v) + 163.0 * v) as u8;
                    let blue = (38.0 * (1.0 - v) + 74.0 * v) as u8;
                    (format!("rgb({red},{green},{blue})"), format!("{v:.2}"))
                }
                None => ("#eee".to_string(), "n/a".to_string()),
            };
            let _ = write!(
                s,
                r#"<rect x="{x}" y="{y}" width="{}" height="{}" fill="{fill}"><title>{} / {}: {label}</title></rect>"#,
                cell - 2.0,
                cell - 2.0,
                esc(&r.agent),
                esc(p)
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// The report page: the board of sessions when there is one, then the leaderboard of judge runs
/// when there are any.
pub fn page(lb: Option<&Leaderboard>, board: Option<&Board>) -> String {
    let board_html = board.map(crate::board::html_section).unwrap_or_default();
    match lb {
        Some(lb) => leaderboard_html(lb, &board_html),
        None => format!(
            r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>faultline board</title>
<style>{STYLE}</style>
</head><body>
<h1>faultline board</h1>
{board_html}
</body></html>
"#
        ),
    }
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#111;background:#fff}table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}td:nth-child(2),th:nth-child(2){text-align:left}h1{font-size:22px}h2{font-size:17px;margin-top:28px}.meta{color:#555}.warning{color:#a40000;font-weight:bold}";

pub fn html(lb: &Leaderboard) -> String {
    leaderboard_html(lb, "")
}

/// The leaderboard page with `extra` HTML after its table.
fn leaderboard_html(lb: &Leaderboard, extra: &str) -> String {
    let mut table = String::from(
        "<table><thead><tr><th>#</th><th>agent</th><th>score</th><th>95% CI</th><th>pass@1</th><th>pass^k</th><th>problems</th><th>trials</th><th>agent errors</th><th>judge errors</th></tr></thead><tbody>",
    );
    for r in &lb.rows {
        let ci = r
            .ci95
            .map_or_else(|| "–".into(), |[a, b]| format!("{a:.3} – {b:.3}"));
        let _ = write!(
            table,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{ci}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.rank,
            esc(&r.agent),
            fmt(r.score),
            fmt(r.pass_at_1),
            fmt(r.pass_hat_k),
            r.k.map_or_else(String::new, |k| format!(" (k={k})")),
            r.problems,
            r.trials,
            r.agent_errors,
            r.judge_errors
        );
    }
    table.push_str("</tbody></table>");
    let dims = if lb.dimensions.is_empty() {
        String::new()
    } else {
        format!("<h2>Per dimension</h2>{}", dimensions_svg(lb))
    };
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>faultline judge leaderboard</title>
<style>{STYLE}</style>
</head><body>
<h1>Leaderboard: {metric}</h1>
<p class="meta">rubric {rubric} · judge {judges}</p>
{table}
{extra}
<h2>Score per agent (bars: macro mean; whiskers: 95% bootstrap interval)</h2>
{bars}
{dims}
<h2>Per problem ({metric})</h2>
{heat}
</body></html>
"#,
        metric = esc(&lb.metric),
        rubric = esc(&lb.rubric),
        judges = esc(&if lb.judges.is_empty() {
            "none (deterministic metrics only)".to_string()
        } else {
            lb.judges.join(", ")
        }),
        bars = bars_svg(lb),
        heat = heatmap_svg(lb),
    )
}
