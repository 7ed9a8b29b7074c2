//! Agreement between raters on yes/no checklist answers: raw agreement, Cohen's κ (two raters),
//! Fleiss' κ (any number) and Gwet's AC1 (robust to the prevalence paradox), per question and
//! pooled over all questions.
//!
//! Raters are judge models (verdicts from runs with different models), repeated samples of one
//! model, whole files, or people (labels in CSV or JSON).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, bail};
use schemas::verdict::{JudgeResults, Verdict, VerdictStatus, YesNo};
use serde::{Deserialize, Serialize};

/// (item id, question id) → rater → answered yes.
pub type Ratings = BTreeMap<(String, String), BTreeMap<String, bool>>;

/// What distinguishes raters in verdict files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RaterKey {
    /// The judge model recorded in each verdict.
    Model,
    /// The sample index (self-consistency of one judge).
    Sample,
    /// The file the verdict came from.
    File,
}

/// A human (or any) label.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Label {
    pub item: String,
    pub question: String,
    pub answer: String,
    #[serde(default)]
    pub rater: Option<String>,
}

fn yes(raw: &str, origin: &str) -> anyhow::Result<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "yes" | "y" | "true" | "1" => Ok(true),
        "no" | "n" | "false" | "0" => Ok(false),
        other => bail!("{origin}: answer `{other}` is not yes or no"),
    }
}

/// Adds the ratings found in a file: a verdict log (`.jsonl`), a run's `results.json`, or labels
/// (`.csv` with columns item, question, answer[, rater]; or a JSON list of such objects). Labels
/// without a rater column are rated by the file's name.
pub fn load(path: &Path, by: RaterKey, into: &mut Ratings) -> anyhow::Result<()> {
    let file_rater = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let shown = path.display().to_string();
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let add_verdict =
        |into: &mut Ratings, item: &str, rater: String, answers: &[schemas::verdict::Answer]| {
            for a in answers {
                into.entry((item.to_string(), a.id.clone()))
                    .or_default()
                    .insert(rater.clone(), a.answer == YesNo::Yes);
            }
        };
    if ext == "csv" {
        let mut r = csv::Reader::from_path(path).with_context(|| format!("cannot read {shown}"))?;
        for (i, row) in r.deserialize::<Label>().enumerate() {
            let origin = format!("{shown}: row {}", i + 2);
            let l = row.with_context(|| {
                format!("{origin}: expected columns item, question, answer[, rater]")
            })?;
            let rater = l.rater.clone().unwrap_or_else(|| file_rater.clone());
            into.entry((l.item, l.question))
                .or_default()
                .insert(rater, yes(&l.answer, &origin)?);
        }
        return Ok(());
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {shown}"))?;
    if ext == "jsonl" {
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: Verdict = serde_json::from_str(line)
                .with_context(|| format!("{shown}:{}: not a verdict", i + 1))?;
            if v.status != VerdictStatus::Scored {
                continue;
            }
            let rater = match by {
                RaterKey::Model => v
                    .judge
                    .as_ref()
                    .map_or_else(|| "none".into(), |j| j.model.clone()),
                RaterKey::Sample => format!("sample-{}", v.sample),
                RaterKey::File => file_rater.clone(),
            };
            add_verdict(into, &v.item.id, rater, &v.answers);
        }
        return Ok(());
    }
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{shown}: not valid JSON"))?;
    if value.get("items").is_some() {
        let r: JudgeResults = serde_json::from_value(value)
            .with_context(|| format!("{shown}: not a judge results file"))?;
        let rater = match by {
            RaterKey::Model => r
                .judge
                .as_ref()
                .map_or_else(|| file_rater.clone(), |j| j.model.clone()),
            _ => file_rater.clone(),
        };
        for it in r.items.iter().filter(|i| i.status == VerdictStatus::Scored) {
            add_verdict(into, &it.item.id, rater.clone(), &it.answers);
        }
        return Ok(());
    }
    let labels: Vec<Label> = serde_json::from_value(value).with_context(|| {
        format!("{shown}: expected a list of {{item, question, answer, rater?}}")
    })?;
    for (i, l) in labels.into_iter().enumerate() {
        let origin = format!("{shown}[{i}]");
        let rater = l.rater.clone().unwrap_or_else(|| file_rater.clone());
        into.entry((l.item, l.question))
            .or_default()
            .insert(rater, yes(&l.answer, &origin)?);
    }
    Ok(())
}

/// Agreement figures over a set of units (items × questions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// Units rated by at least two raters.
    pub units: usize,
    pub raters: usize,
    /// Share of agreeing rater pairs, averaged over units.
    pub raw: Option<f64>,
    /// Only with exactly two raters.
    pub cohen_kappa: Option<f64>,
    /// Over the units every rater rated.
    pub fleiss_kappa: Option<f64>,
    pub gwet_ac1: Option<f64>,
    /// Landis & Koch's band for Fleiss' κ (Cohen's when Fleiss' is undefined).
    pub band: Option<&'static str>,
}

pub fn band(k: f64) -> &'static str {
    match k {
        k if k < 0.0 => "poor",
        k if k <= 0.20 => "slight",
        k if k <= 0.40 => "fair",
        k if k <= 0.60 => "moderate",
        k if k <= 0.80 => "substantial",
        _ => "almost perfect",
    }
}

fn ratio(num: f64, den: f64) -> Option<f64> {
    (den.abs() > 1e-12).then(|| num / den)
}

/// Computes every statistic over the given units.
pub fn agreement<'a>(units: impl IntoIterator<Item = &'a BTreeMap<String, bool>>) -> Agreement {
    let units: Vec<&BTreeMap<String, bool>> = units.into_iter().filter(|u| u.len() >= 2).collect();
    let raters: BTreeSet<&String> = units.iter().flat_map(|u| u.keys()).collect();
    let m = raters.len();

    // Raw agreement: agreeing pairs / pairs, per unit.
    let raw_each: Vec<f64> = units
        .iter()
        .map(|u| {
            let n = u.len() as f64;
            let y = u.values().filter(|v| **v).count() as f64;
            (y * (y - 1.0) + (n - y) * (n - y - 1.0)) / (n * (n - 1.0))
        })
        .collect();
    let raw = (!raw_each.is_empty()).then(|| raw_each.iter().sum::<f64>() / raw_each.len() as f64);

    // Cohen: two raters, units rated by both.
    let cohen_kappa = (m == 2)
        .then(|| {
            let (a, b) = {
                let mut it = raters.iter();
                (
                    *it.next().expect("two raters"),
                    *it.next().expect("two raters"),
                )
            };
            let pairs: Vec<(bool, bool)> = units
                .iter()
                .filter_map(|u| Some((*u.get(a)?, *u.get(b)?)))
                .collect();
            let n = pairs.len() as f64;
            if n == 0.0 {
                return None;
            }
            let po = pairs.iter().filter(|(x, y)| x == y).count() as f64 / n;
            let pa = pairs.iter().filter(|(x, _)| *x).count() as f64 / n;
            let pb = pairs.iter().filter(|(_, y)| *y).count() as f64 / n;
            let pe = pa * pb + (1.0 - pa) * (1.0 - pb);
            ratio(po - pe, 1.0 - pe)
        })
        .flatten();

    // Fleiss and Gwet: complete units (every rater rated).
    let complete: Vec<&&BTreeMap<String, bool>> = units.iter().filter(|u| u.len() == m).collect();
    let (fleiss_kappa, gwet_ac1) = if complete.is_empty() || m < 2 {
        (None, None)
    } else {
        let mf = m as f64;
        let n = complete.len() as f64;
        let mut p_bar = 0.0;
        let mut yes_total = 0.0;
        for u in &complete {
            let y = u.values().filter(|v| **v).count() as f64;
            let no = mf - y;
            p_bar += (y * y + no * no - mf) / (mf * (mf - 1.0));
            yes_total += y;
        }
        p_bar /= n;
        let p_yes = yes_total / (n * mf);
        let pe_fleiss = p_yes * p_yes + (1.0 - p_yes) * (1.0 - p_yes);
        // Gwet: chance agreement = Σ_k π_k (1 − π_k) / (q − 1), q = 2 categories.
        let pe_gwet = 2.0 * p_yes * (1.0 - p_yes);
        (
            ratio(p_bar - pe_fleiss, 1.0 - pe_fleiss),
            ratio(p_bar - pe_gwet, 1.0 - pe_gwet),
        )
    };
    Agreement {
        units: units.len(),
        raters: m,
        raw,
        cohen_kappa,
        fleiss_kappa,
        gwet_ac1,
        band: fleiss_kappa.or(cohen_kappa).map(band),
    }
}

/// Per question id, and pooled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgreementReport {
    pub raters: Vec<String>,
    pub per_question: BTreeMap<String, Agreement>,
    pub pooled: Agreement,
}

pub fn report(ratings: &Ratings) -> AgreementReport {
    let raters: BTreeSet<String> = ratings.values().flat_map(|u| u.keys().cloned()).collect();
    let mut by_q: BTreeMap<&str, Vec<&BTreeMap<String, bool>>> = BTreeMap::new();
    for ((_, q), u) in ratings {
        by_q.entry(q.as_str()).or_default().push(u);
    }
    AgreementReport {
        raters: raters.into_iter().collect(),
        per_question: by_q
            .into_iter()
            .map(|(q, units)| (q.to_string(), agreement(units)))
            .collect(),
        pooled: agreement(ratings.values()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(rows: &[&[bool]]) -> Vec<BTreeMap<String, bool>> {
        rows.iter()
            .map(|r| {
                r.iter()
                    .enumerate()
                    .map(|(i, v)| (format!("r{i}"), *v))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn cohen_and_gwet_on_a_textbook_table() {
        // 50 items: both yes 20, r0 yes/r1 no 5, r0 no/r1 yes 10, both no 15.
        let mut rows: Vec<&[bool]> = Vec::new();
        rows.extend(std::iter::repeat_n(&[true, true][..], 20));
        rows.extend(std::iter::repeat_n(&[true, false][..], 5));
        rows.extend(std::iter::repeat_n(&[false, true][..], 10));
        rows.extend(std::iter::repeat_n(&[false, false][..], 15));
        let u = units(&rows);
        let a = agreement(&u);
        assert_eq!(a.units, 50);
        assert!((a.raw.unwrap() - 0.7).abs() < 1e-12);
        // p_o = .7, p_e = .5·.6 + .5·.4 = .5 → κ = .4
        assert!((a.cohen_kappa.unwrap() - 0.4).abs() < 1e-12);
        // π_yes = 55/100, p_e = 2·.55·.45 = .495 → AC1 = .205/.505
        assert!((a.gwet_ac1.unwrap() - 0.205 / 0.505).abs() < 1e-12);
        // Fleiss for two raters: p_yes pooled = .55, P̄e = .55² + .45² = .505 → (.7 − .505)/.495
        assert!((a.fleiss_kappa.unwrap() - 0.195 / 0.495).abs() < 1e-12);
        assert_eq!(a.band, Some("fair"));
    }

    #[test]
    fn fleiss_by_hand_and_the_prevalence_paradox() {
        // Three raters, four units.
        let u = units(&[
            &[true, true, true],
            &[true, true, false],
            &[false, false, false],
            &[true, false, false],
        ]);
        let a = agreement(&u);
        // P_i: 1, 1/3, 1, 1/3 → P̄ = 2/3; p_yes = 6/12 = .5 → P̄e = .5 → κ = (2/3 − .5)/.5 = 1/3
        assert!((a.fleiss_kappa.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(a.cohen_kappa, None);
        // 9 of 10 units all-yes, one split: high raw agreement, κ near 0 or below, AC1 high.
        let mut rows: Vec<&[bool]> = std::iter::repeat_n(&[true, true][..], 9).collect();
        rows.push(&[true, false]);
        let a = agreement(&units(&rows));
        assert!((a.raw.unwrap() - 0.9).abs() < 1e-12);
        assert!(a.cohen_kappa.unwrap() <= 0.0);
        assert!(a.gwet_ac1.unwrap() > 0.85);
    }
}
