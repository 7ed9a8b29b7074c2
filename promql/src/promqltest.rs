//! Runner for Prometheus' promqltest scripts (`load` / `clear` / `eval` with expected results).
//!
//! Each eval block is reported as passed, failed (wrong answer, or an error where a result was
//! expected) or unsupported (the block needs something this engine deliberately lacks: native
//! histograms, annotation messages, syntax promql-parser 0.9 cannot parse, or an
//! [`EvalError::Unsupported`] from the engine).

use std::collections::HashMap;
use std::fmt;

use promql_parser::parser::Expr;
use serde::Serialize;

use crate::eval::{Engine, EvalError};
use crate::labels::{Labels, METRIC_NAME};
use crate::storage::{HISTOGRAM_PLACEHOLDER_BITS, MemStorage, StorageBuilder, stale_nan};
use crate::value::Value;

/// The verdict on one eval block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
    Unsupported,
}

/// One eval block's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub line: usize,
    pub query: String,
    pub status: Status,
    /// Why it failed or is unsupported; empty when passed.
    pub reason: String,
}

/// Counts for a file or a whole run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Score {
    pub passed: usize,
    pub failed: usize,
    pub unsupported: usize,
}

impl Score {
    pub fn total(&self) -> usize {
        self.passed + self.failed + self.unsupported
    }

    pub fn add(&mut self, o: &Score) {
        self.passed += o.passed;
        self.failed += o.failed;
        self.unsupported += o.unsupported;
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} unsupported (of {})",
            self.passed,
            self.failed,
            self.unsupported,
            self.total()
        )
    }
}

/// A script's results.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FileReport {
    pub score: Score,
    pub outcomes: Vec<Outcome>,
}

/// A malformed script line.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct ScriptError {
    pub line: usize,
    pub msg: String,
}

fn script_err<T>(line: usize, msg: impl Into<String>) -> Result<T, ScriptError> {
    Err(ScriptError {
        line,
        msg: msg.into(),
    })
}

/// A point of a series description: a value, a gap (`_`), or a native histogram we cannot hold.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Point {
    Value(f64),
    Gap,
    Histogram,
}

/// Parses a time (`50m`, `1h30m`, `10s53ms`) or plain seconds (`0`, `1.5`) into ms: the grammar
/// of the HTTP API's duration parameters.
fn parse_time(s: &str) -> Option<i64> {
    crate::api::parse_duration(s)
}

fn parse_number(s: &str) -> Option<f64> {
    match s {
        "Inf" | "+Inf" | "inf" | "+inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        "NaN" | "nan" => Some(f64::NAN),
        _ => s.parse::<f64>().ok().or_else(|| {
            let (neg, body) = match s.strip_prefix('-') {
                Some(b) => (true, b),
                None => (false, s),
            };
            let hex = body
                .strip_prefix("0x")
                .or_else(|| body.strip_prefix("0X"))?;
            let v = i64::from_str_radix(hex, 16).ok()? as f64;
            Some(if neg { -v } else { v })
        }),
    }
}

/// Expands a promtool series description (`1+2x3 _ stale _x2 5x2 {{…}}`).
fn parse_points(desc: &str) -> Option<Vec<Point>> {
    let mut out = Vec::new();
    let mut rest = desc.trim();
    while !rest.is_empty() {
        if rest.starts_with("{{") {
            // Native histogram literal (`{{…}}`, `{{…}}xN`, `{{…}}+{{…}}xN`): we only count points.
            let mut end = rest.find("}}")? + 2;
            if rest[end..].starts_with("+{{") || rest[end..].starts_with("-{{") {
                end += rest[end..].find("}}")? + 2;
            }
            let suffix: &str = rest[end..].split(char::is_whitespace).next().unwrap_or("");
            let n = match suffix.strip_prefix('x') {
                Some(x) => x.parse::<usize>().ok()? + 1,
                None => 1,
            };
            out.extend(std::iter::repeat_n(Point::Histogram, n));
            rest = rest[end + suffix.len()..].trim_start();
            continue;
        }
        let tok_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let tok = &rest[..tok_len];
        rest = rest[tok_len..].trim_start();
        if tok == "_" {
            out.push(Point::Gap);
        } else if let Some(n) = tok.strip_prefix("_x") {
            out.extend(std::iter::repeat_n(Point::Gap, n.parse().ok()?));
        } else if tok == "stale" {
            out.push(Point::Value(stale_nan()));
        } else if let Some((base, times)) = tok.rsplit_once('x') {
            let n: usize = times.parse().ok()?;
            // `a+bxn`, `a-bxn` or `axn`; the sign split must skip a leading sign and exponents.
            let (start, step) = split_increment(base)?;
            for i in 0..=n {
                out.push(Point::Value(start + step * i as f64));
            }
        } else {
            out.push(Point::Value(parse_number(tok)?));
        }
    }
    Some(out)
}

fn split_increment(s: &str) -> Option<(f64, f64)> {
    let bytes = s.as_bytes();
    for i in 1..bytes.len() {
        let c = bytes[i];
        if (c == b'+' || c == b'-') && !matches!(bytes[i - 1], b'e' | b'E') {
            let a = parse_number(&s[..i])?;
            let b = parse_number(&s[i + 1..])?;
            return Some((a, if c == b'-' { -b } else { b }));
        }
    }
    Some((parse_number(s)?, 0.0))
}

/// Splits `metric{a="b c"} 1 2` into the series part and the values part.
fn split_series(line: &str) -> (&str, &str) {
    let mut depth = 0i32;
    let mut in_str: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if let Some(q) = in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                in_str = None;
            }
            continue;
        }
        match c {
            '"' | '\'' | '`' => in_str = Some(c),
            '{' => depth += 1,
            '}' => depth -= 1,
            c if c.is_whitespace() && depth == 0 => return (&line[..i], line[i..].trim()),
            _ => {}
        }
    }
    (line, "")
}

/// Parses a series selector with only equality matchers into its label set.
fn parse_series_labels(s: &str) -> Option<Labels> {
    if s.trim() == "{}" {
        return Some(Labels::empty());
    }
    let expr = promql_parser::parser::parse(s).ok()?;
    let Expr::VectorSelector(vs) = expr else {
        return None;
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    if let Some(n) = vs.name {
        pairs.push((METRIC_NAME.into(), n));
    }
    for m in vs.matchers.matchers {
        if !matches!(m.op, promql_parser::label::MatchOp::Equal) {
            return None;
        }
        if m.name == METRIC_NAME && pairs.iter().any(|p| p.0 == METRIC_NAME) {
            continue;
        }
        pairs.push((m.name, m.value));
    }
    Some(Labels::new(pairs))
}

#[derive(Debug, Default)]
struct Expect {
    fail: Option<Option<(bool, String)>>,
    ordered: bool,
    annotations: Vec<String>,
    string: Option<String>,
    range_vector: Option<(i64, i64, i64)>,
    scalar: Option<f64>,
    series: Vec<(Labels, Vec<Point>)>,
    unparsable: Option<String>,
}

enum Mode {
    Instant(i64),
    Range(i64, i64, i64),
}

/// Runs one script and reports every eval block; a malformed `load` line is an error.
pub fn run_script(text: &str) -> Result<FileReport, ScriptError> {
    let lines: Vec<&str> = text.lines().collect();
    let engine = Engine::default();
    let mut data: HashMap<Labels, Vec<(i64, f64)>> = HashMap::new();
    let mut histogram_names: Vec<String> = Vec::new();
    let mut store: Option<MemStorage> = None;
    let mut report = FileReport::default();
    let mut i = 0;
    while i < lines.len() {
        let line_no = i + 1;
        let line = lines[i].trim();
        i += 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (cmd, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        match cmd {
            "clear" => {
                data.clear();
                histogram_names.clear();
                store = None;
            }
            "load" | "load_with_nhcb" => {
                let Some(interval) = parse_time(rest.trim()) else {
                    return script_err(line_no, format!("bad load interval {rest:?}"));
                };
                while i < lines.len() && !lines[i].trim().is_empty() {
                    let l = lines[i].trim();
                    i += 1;
                    if l.starts_with('#') {
                        continue;
                    }
                    let (series, values) = split_series(l);
                    let Some(labels) = parse_series_labels(series) else {
                        return script_err(i, format!("bad series {series:?}"));
                    };
                    let Some(points) = parse_points(values) else {
                        return script_err(i, format!("bad values {values:?}"));
                    };
                    if cmd == "load_with_nhcb" {
                        histogram_names.push(labels.metric_name().to_string());
                    }
                    let e = data.entry(labels).or_default();
                    for (k, p) in points.into_iter().enumerate() {
                        let t = k as i64 * interval;
                        match p {
                            Point::Value(v) => e.push((t, v)),
                            Point::Histogram => {
                                e.push((t, f64::from_bits(HISTOGRAM_PLACEHOLDER_BITS)))
                            }
                            Point::Gap => {}
                        }
                    }
                }
                store = None;
            }
            "eval" | "eval_fail" | "eval_ordered" | "eval_warn" | "eval_info" => {
                let mut block = Vec::new();
                while i < lines.len() && !lines[i].trim().is_empty() {
                    let l = lines[i].trim();
                    let first = l.split_whitespace().next().unwrap_or("");
                    if matches!(first, "load" | "clear") || first.starts_with("eval") {
                        break;
                    }
                    i += 1;
                    if !l.starts_with('#') {
                        block.push(l);
                    }
                }
                let st = store.get_or_insert_with(|| {
                    let mut b = StorageBuilder::new();
                    for (labels, pts) in &data {
                        let h = b.series_for_labels(labels.clone());
                        for &(t, v) in pts {
                            b.push(h, t, v);
                        }
                    }
                    b.build()
                });
                let outcome = run_eval(&engine, st, cmd, rest, &block, &histogram_names, line_no);
                match outcome.status {
                    Status::Passed => report.score.passed += 1,
                    Status::Failed => report.score.failed += 1,
                    Status::Unsupported => report.score.unsupported += 1,
                }
                report.outcomes.push(outcome);
            }
            other => return script_err(line_no, format!("unknown command {other:?}")),
        }
    }
    Ok(report)
}

fn parse_expect_block(block: &[&str], mode: &Mode, cmd: &str) -> Expect {
    let mut ex = Expect {
        ordered: cmd == "eval_ordered",
        ..Default::default()
    };
    if cmd == "eval_fail" {
        ex.fail = Some(None);
    }
    if cmd == "eval_warn" || cmd == "eval_info" {
        ex.annotations.push(cmd.to_string());
    }
    for l in block {
        if let Some(e) = l.strip_prefix("expect ") {
            let e = e.trim();
            let (kind, rest) = e.split_once(char::is_whitespace).unwrap_or((e, ""));
            match kind {
                "fail" => {
                    let rest = rest.trim();
                    ex.fail = Some(if let Some(m) = rest.strip_prefix("msg:") {
                        Some((false, m.trim().to_string()))
                    } else {
                        rest.strip_prefix("regex:")
                            .map(|r| (true, r.trim().to_string()))
                    });
                }
                "ordered" => ex.ordered = true,
                "warn" | "info" => ex.annotations.push(e.to_string()),
                "no_warn" | "no_info" => {}
                "string" => {
                    let s = rest.trim();
                    ex.string = Some(
                        promql_parser::util::unquote_string(s).unwrap_or_else(|_| s.to_string()),
                    );
                }
                "range" => {
                    // expect range vector from <t> to <t> step <d>
                    let w: Vec<&str> = rest.split_whitespace().collect();
                    match (
                        w.get(2).and_then(|s| parse_time(s)),
                        w.get(4).and_then(|s| parse_time(s)),
                        w.get(6).and_then(|s| parse_time(s)),
                    ) {
                        (Some(a), Some(b), Some(c)) if w.first() == Some(&"vector") => {
                            ex.range_vector = Some((a, b, c))
                        }
                        _ => ex.unparsable = Some(format!("expect line {l:?}")),
                    }
                }
                _ => ex.unparsable = Some(format!("expect line {l:?}")),
            }
            continue;
        }
        if let Some(v) = parse_number(l) {
            ex.scalar = Some(v);
            continue;
        }
        let (series, values) = split_series(l);
        match (parse_series_labels(series), parse_points(values)) {
            (Some(labels), Some(points)) => {
                if let Mode::Instant(_) = mode
                    && ex.range_vector.is_none()
                    && points.len() != 1
                {
                    ex.unparsable = Some(format!("instant expectation with several values: {l:?}"));
                }
                ex.series.push((labels, points));
            }
            _ => ex.unparsable = Some(format!("expected-result line {l:?}")),
        }
    }
    ex
}

fn run_eval(
    engine: &Engine,
    st: &MemStorage,
    cmd: &str,
    rest: &str,
    block: &[&str],
    histogram_names: &[String],
    line: usize,
) -> Outcome {
    let mut outcome = Outcome {
        line,
        query: String::new(),
        status: Status::Passed,
        reason: String::new(),
    };
    let words: Vec<&str> = rest.split_whitespace().collect();
    let (mode, query) = match words.as_slice() {
        ["instant", "at", t, ..] => {
            let q = rest.splitn(4, char::is_whitespace).nth(3).unwrap_or("");
            (parse_time(t).map(Mode::Instant), q)
        }
        ["range", "from", a, "to", b, "step", s, ..] => {
            let q = rest.splitn(8, char::is_whitespace).nth(7).unwrap_or("");
            let m = match (parse_time(a), parse_time(b), parse_time(s)) {
                (Some(a), Some(b), Some(s)) => Some(Mode::Range(a, b, s)),
                _ => None,
            };
            (m, q)
        }
        _ => (None, rest),
    };
    outcome.query = query.trim().to_string();
    let Some(mode) = mode else {
        outcome.status = Status::Failed;
        outcome.reason = format!("cannot parse eval line {rest:?}");
        return outcome;
    };
    let ex = parse_expect_block(block, &mode, cmd);
    // Native histograms with custom buckets are derived from classic ones by `load_with_nhcb`.
    let uses_histograms = block.iter().any(|l| l.contains("{{"))
        || histogram_names.iter().any(|n| {
            regex::Regex::new(&format!(r"\b{}\b", regex::escape(n)))
                .is_ok_and(|r| r.is_match(&outcome.query))
        });
    let verdict = |status: Status, reason: String| (status, reason);
    let (status, reason) = if let Some(u) = &ex.unparsable {
        verdict(Status::Unsupported, format!("runner cannot read {u}"))
    } else if uses_histograms || ex.series.iter().any(|s| s.1.contains(&Point::Histogram)) {
        verdict(Status::Unsupported, "native histograms".into())
    } else {
        let result = evaluate(engine, st, &mode, &outcome.query);
        match (&ex.fail, result) {
            (Some(expect_msg), Err(e)) => match expect_msg {
                None => verdict(Status::Passed, String::new()),
                Some((is_re, m)) => {
                    let got = e.to_string();
                    let ok = if *is_re {
                        regex::Regex::new(m)
                            .map(|r| r.is_match(&got))
                            .unwrap_or(false)
                    } else {
                        got == *m
                    };
                    if ok {
                        verdict(Status::Passed, String::new())
                    } else {
                        verdict(
                            Status::Failed,
                            format!("failed with {got:?}, expected {m:?}"),
                        )
                    }
                }
            },
            (Some(_), Ok(_)) => {
                verdict(Status::Failed, "expected an error, query succeeded".into())
            }
            (None, Err(EvalError::Unsupported(m))) => verdict(Status::Unsupported, m),
            (None, Err(EvalError::Parse(m))) => verdict(Status::Unsupported, format!("parse: {m}")),
            (None, Err(e)) => verdict(Status::Failed, format!("unexpected error: {e}")),
            (None, Ok(v)) => match compare(&ex, &mode, v.clone())
                .and_then(|()| range_mode_agrees(engine, st, &mode, &outcome.query, &v))
            {
                Ok(()) if !ex.annotations.is_empty() => verdict(
                    Status::Unsupported,
                    format!(
                        "result matches, but annotations are not produced ({})",
                        ex.annotations.join("; ")
                    ),
                ),
                Ok(()) => verdict(Status::Passed, String::new()),
                Err(m) => verdict(Status::Failed, m),
            },
        }
    };
    outcome.status = status;
    outcome.reason = reason;
    outcome
}

/// Like Prometheus' runner: an instant query must give the same answer when run as a range
/// query whose only step is the same instant (queries reading the step itself excepted).
fn range_mode_agrees(
    engine: &Engine,
    st: &MemStorage,
    mode: &Mode,
    query: &str,
    v: &Value,
) -> Result<(), String> {
    let Mode::Instant(t) = *mode else {
        return Ok(());
    };
    if query.contains("step(") || query.contains("range(") {
        return Ok(());
    }
    let expected: Vec<(Labels, f64)> = match v {
        Value::Vector(vec) => vec.iter().map(|s| (s.labels.clone(), s.v)).collect(),
        Value::Scalar(x) => vec![(Labels::empty(), *x)],
        _ => return Ok(()),
    };
    let m = evaluate(engine, st, &Mode::Range(t, t, 60_000), query)
        .map_err(|e| format!("instant query succeeded but range mode failed: {e}"))?;
    let Value::Matrix(m) = m else {
        return Err("range mode returned no matrix".into());
    };
    let got: HashMap<&Labels, f64> = m
        .iter()
        .filter_map(|s| s.points.first().map(|p| (&s.labels, p.1)))
        .collect();
    let same = got.len() == expected.len()
        && expected
            .iter()
            .all(|(l, x)| got.get(l).is_some_and(|y| almost_equal(*x, *y)));
    if same {
        Ok(())
    } else {
        Err(format!("range mode differs from instant mode: {m:?}"))
    }
}

fn evaluate(
    engine: &Engine,
    st: &MemStorage,
    mode: &Mode,
    query: &str,
) -> Result<Value, EvalError> {
    let expr = crate::eval::parse(query)?;
    match *mode {
        Mode::Instant(t) => engine.instant(st, &expr, t),
        Mode::Range(a, b, s) => engine.range(st, &expr, a, b, s).map(Value::Matrix),
    }
}

fn almost_equal(a: f64, b: f64) -> bool {
    if a.is_nan() && b.is_nan() {
        return true;
    }
    crate::eval::almost_equal(a, b, 1e-6)
}

fn compare(ex: &Expect, mode: &Mode, v: Value) -> Result<(), String> {
    match v {
        Value::String(s) => match &ex.string {
            Some(e) if *e == s => Ok(()),
            e => Err(format!("got string {s:?}, expected {e:?}")),
        },
        Value::Scalar(x) => match ex.scalar {
            Some(e) if almost_equal(e, x) => Ok(()),
            e => Err(format!("got scalar {x}, expected {e:?}")),
        },
        Value::Vector(vec) => {
            if ex.scalar.is_some() {
                return Err("got a vector, expected a scalar".into());
            }
            let expected: HashMap<&Labels, (usize, f64)> = ex
                .series
                .iter()
                .enumerate()
                .filter_map(|(i, (l, p))| match p.first() {
                    Some(Point::Value(v)) => Some((l, (i, *v))),
                    _ => None,
                })
                .collect();
            if vec.len() != expected.len() {
                return Err(format!(
                    "got {} series, expected {}: {:?}",
                    vec.len(),
                    expected.len(),
                    vec
                ));
            }
            for (pos, s) in vec.iter().enumerate() {
                let Some(&(epos, ev)) = expected.get(&s.labels) else {
                    return Err(format!("unexpected series {} in result", s.labels));
                };
                if ex.ordered && epos != pos {
                    return Err(format!(
                        "series {} at position {pos}, expected {epos}",
                        s.labels
                    ));
                }
                if !almost_equal(ev, s.v) {
                    return Err(format!("{}: got {}, expected {ev}", s.labels, s.v));
                }
            }
            Ok(())
        }
        Value::Matrix(m) => {
            let (start, step) = match (mode, ex.range_vector) {
                (Mode::Range(a, _, s), _) => (*a, *s),
                (Mode::Instant(_), Some((a, _, s))) => (a, s),
                (Mode::Instant(_), None) => {
                    return Err("got a range vector without `expect range vector`".into());
                }
            };
            let expected: HashMap<&Labels, &Vec<Point>> =
                ex.series.iter().map(|(l, p)| (l, p)).collect();
            if m.len() != expected.len() {
                return Err(format!(
                    "got {} series, expected {}",
                    m.len(),
                    expected.len()
                ));
            }
            for s in &m {
                let Some(points) = expected.get(&s.labels) else {
                    return Err(format!("unexpected series {} in result", s.labels));
                };
                let want: Vec<(i64, f64)> = points
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| match p {
                        Point::Value(v) => Some((start + i as i64 * step, *v)),
                        _ => None,
                    })
                    .collect();
                let same = want.len() == s.points.len()
                    && want
                        .iter()
                        .zip(&s.points)
                        .all(|(a, b)| a.0 == b.0 && almost_equal(a.1, b.1));
                if !same {
                    return Err(format!(
                        "{}: got {:?}, expected {:?}",
                        s.labels, s.points, want
                    ));
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_series_descriptions() {
        let p = parse_points("1+2x2 _ stale _x2 3x1 -1-1x1 1e3").unwrap();
        let vals: Vec<String> = p
            .iter()
            .map(|p| match p {
                Point::Value(v) if crate::storage::is_stale(*v) => "stale".to_string(),
                Point::Value(v) => v.to_string(),
                Point::Gap => "_".into(),
                Point::Histogram => "h".into(),
            })
            .collect();
        assert_eq!(
            vals,
            [
                "1", "3", "5", "_", "stale", "_", "_", "3", "3", "-1", "-2", "1000"
            ]
        );
    }

    #[test]
    fn runs_a_small_script() {
        let script = "load 1m\n  m{a=\"x\"} 0+1x10\n\neval instant at 5m m\n  m{a=\"x\"} 5\n\neval instant at 5m m\n  m{a=\"x\"} 6\n\neval range from 0 to 2m step 1m m * 2\n  {a=\"x\"} 0 2 4\n\neval instant at 5m nosuchfn(m)\n  expect fail\n";
        let r = run_script(script).unwrap();
        assert_eq!(
            r.score,
            Score {
                passed: 3,
                failed: 1,
                unsupported: 0
            },
            "{:#?}",
            r.outcomes
        );
    }
}
