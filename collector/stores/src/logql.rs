//! LogQL evaluation over the log store: streams labeled as a Kubernetes log agent labels them,
//! the pipeline (line filters, parsers, label filters, formatting) run line by line, log queries
//! merged across streams newest- or oldest-first up to the limit, and metric queries evaluated
//! step by step over left-open windows.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::logs::{ContainerKey, LineRange, LogCatalog, LogStore, StreamInfo};
use logql::{
    AggOp, CmpOp, CmpValue, Grouping, LabelExpr, LabelFormat, LogExpr, Matcher, MetricExpr,
    PathPart, PatternPart, RangeFn, Stage, TemplatePart, bytes_unit,
};
use schemas::time::duration;

pub type Labels = BTreeMap<String, String>;

const ERROR_LABEL: &str = "__error__";
const ERROR_DETAILS_LABEL: &str = "__error_details__";

/// One log stream: the lines of one container's stdout or stderr.
pub struct Stream {
    pub labels: Labels,
    info: StreamInfo,
}

impl Stream {
    /// Whether the stream has a line in `[from, to]`.
    pub fn has_lines_in(&self, src: &LogStore, from: i64, to: i64) -> anyhow::Result<bool> {
        let (first, last) = (self.info.first_ns, self.info.last_ns);
        if to < first || last < from || from > to {
            return Ok(false);
        }
        if from <= first || last <= to {
            return Ok(true);
        }
        let mut range = LineRange::stream(&self.info.stream, from, to);
        range.last = Some(1);
        Ok(!src.lines(&self.info.key, &range)?.is_empty())
    }
}

pub struct StreamIndex {
    pub streams: Vec<Stream>,
}

impl StreamIndex {
    /// Streams labeled `namespace`, `pod`, `container`, `stream`, `job` (namespace/container) and
    /// `service_name` (the pod's app name when `app_of` knows it, else the container).
    pub fn build(catalog: &LogCatalog, app_of: impl Fn(&str, &str) -> Option<String>) -> Self {
        let mut streams: Vec<Stream> = catalog
            .streams
            .iter()
            .map(|info| {
                let (ns, pod, container) = &info.key;
                let service = app_of(ns, pod).unwrap_or_else(|| container.clone());
                let labels: Labels = [
                    ("namespace", ns.clone()),
                    ("pod", pod.clone()),
                    ("container", container.clone()),
                    ("stream", info.stream.clone()),
                    ("job", format!("{ns}/{container}")),
                    ("service_name", service),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
                Stream {
                    labels,
                    info: info.clone(),
                }
            })
            .collect();
        streams.sort_by(|a, b| a.labels.cmp(&b.labels));
        StreamIndex { streams }
    }

    pub fn select<'a>(&'a self, matchers: &'a [Matcher]) -> impl Iterator<Item = &'a Stream> + 'a {
        self.streams.iter().filter(move |s| {
            matchers
                .iter()
                .all(|m| m.matches(s.labels.get(&m.name).map_or("", String::as_str)))
        })
    }
}

/// Why a query has no answer: the query itself (a 400), or reading the logs (a 500).
#[derive(Debug)]
pub enum Failure {
    Query(String),
    Source(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Source(e)
    }
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Query(e)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Query(m) => f.write_str(m),
            Failure::Source(e) => write!(f, "reading logs: {e:#}"),
        }
    }
}

/// Lines and bytes a query looked at, for the `stats` of a response.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub lines: u64,
    pub bytes: u64,
}

/// What the pipeline made of one line.
struct Out<'a> {
    labels: Cow<'a, Labels>,
    line: Cow<'a, str>,
}

fn sanitize(key: &str) -> String {
    let mut s: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// Adds a parsed label; a name that collides with a stream label gets `_extracted`, as in Loki.
fn put(labels: &mut Labels, base: &Labels, key: &str, value: String) {
    let mut key = sanitize(key);
    if key.is_empty() {
        return;
    }
    if base.contains_key(&key) {
        key.push_str("_extracted");
    }
    labels.insert(key, value);
}

fn set_error(labels: &mut Labels, err: &str, details: String) {
    if !labels.contains_key(ERROR_LABEL) {
        labels.insert(ERROR_LABEL.into(), err.into());
        labels.insert(ERROR_DETAILS_LABEL.into(), details);
    }
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => None,
        Value::Array(_) | Value::Object(_) => None,
    }
}

fn flatten_json(
    prefix: &str,
    obj: &serde_json::Map<String, Value>,
    out: &mut Vec<(String, String)>,
) {
    for (k, v) in obj {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}_{k}")
        };
        match v {
            Value::Object(inner) => flatten_json(&key, inner, out),
            other => {
                if let Some(text) = scalar_text(other) {
                    out.push((key, text));
                }
            }
        }
    }
}

fn json_stage(params: &[(String, Vec<PathPart>)], line: &str, labels: &mut Labels, base: &Labels) {
    let v: Value = match serde_json::from_str(line) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            set_error(
                labels,
                "JSONParserErr",
                "the line is not a JSON object".into(),
            );
            return;
        }
        Err(e) => {
            set_error(labels, "JSONParserErr", e.to_string());
            return;
        }
    };
    if params.is_empty() {
        let mut pairs = Vec::new();
        if let Value::Object(obj) = &v {
            flatten_json("", obj, &mut pairs);
        }
        for (k, val) in pairs {
            put(labels, base, &k, val);
        }
        return;
    }
    for (label, path) in params {
        let mut cur = Some(&v);
        for part in path {
            cur = match (part, cur) {
                (PathPart::Field(f), Some(Value::Object(o))) => o.get(f),
                (PathPart::Index(i), Some(Value::Array(a))) => a.get(*i),
                _ => None,
            };
        }
        let text = match cur {
            Some(v @ (Value::Object(_) | Value::Array(_))) => v.to_string(),
            Some(v) => scalar_text(v).unwrap_or_default(),
            None => String::new(),
        };
        put(labels, base, label, text);
    }
}

/// logfmt pairs of a line; `Err` names the first malformed spot (reported only with --strict).
fn logfmt_pairs(line: &str) -> (Vec<(String, Option<String>)>, Option<String>) {
    let mut pairs = Vec::new();
    let mut err = None;
    let mut chars = line.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut key_end = start;
        let mut bad = false;
        while let Some(&(i, c)) = chars.peek() {
            if c.is_whitespace() || c == '=' {
                break;
            }
            if c == '"' {
                bad = true;
            }
            key_end = i + c.len_utf8();
            chars.next();
        }
        let key = &line[start..key_end];
        if key.is_empty() || bad {
            err.get_or_insert_with(|| {
                format!(
                    "logfmt syntax error at pos {}: unexpected '\"' or '='",
                    start + 1
                )
            });
            // Skip the rest of this token.
            while let Some(&(_, c)) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
            }
            continue;
        }
        if chars.peek().map(|&(_, c)| c) != Some('=') {
            pairs.push((key.to_string(), None));
            continue;
        }
        chars.next();
        let value = if chars.peek().map(|&(_, c)| c) == Some('"') {
            chars.next();
            let mut v = String::new();
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                match c {
                    '"' => {
                        closed = true;
                        break;
                    }
                    '\\' => match chars.next().map(|(_, e)| e) {
                        Some('n') => v.push('\n'),
                        Some('t') => v.push('\t'),
                        Some(e) => v.push(e),
                        None => {}
                    },
                    c => v.push(c),
                }
            }
            if !closed {
                err.get_or_insert_with(|| "logfmt syntax error: unterminated quoted value".into());
            }
            v
        } else {
            let mut v = String::new();
            while let Some(&(_, c)) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                v.push(c);
                chars.next();
            }
            v
        };
        pairs.push((key.to_string(), Some(value)));
    }
    (pairs, err)
}

fn logfmt_stage(
    strict: bool,
    keep_empty: bool,
    params: &[(String, String)],
    line: &str,
    labels: &mut Labels,
    base: &Labels,
) {
    let (pairs, err) = logfmt_pairs(line);
    if strict && let Some(e) = err {
        set_error(labels, "LogfmtParserErr", e);
        return;
    }
    if params.is_empty() {
        for (k, v) in pairs {
            match v {
                Some(v) if !v.is_empty() || keep_empty => put(labels, base, &k, v),
                None if keep_empty => put(labels, base, &k, String::new()),
                _ => {}
            }
        }
    } else {
        for (label, key) in params {
            if let Some((_, v)) = pairs.iter().rev().find(|(k, _)| k == key) {
                put(labels, base, label, v.clone().unwrap_or_default());
            }
        }
    }
}

fn parse_bytes(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let n: f64 = v[..split].parse().ok()?;
    let unit = v[split..].trim();
    let scale = if unit.is_empty() {
        1
    } else {
        bytes_unit(unit)?
    };
    Some((n * scale as f64) as u64)
}

fn compare<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Neq => a != b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Re | CmpOp::Nre => false,
    }
}

/// A label filter, with Loki's rules: string matchers see a missing label as empty; conversions
/// skip lines without the label and keep lines whose value does not convert, flagged with
/// `__error__="LabelFilterErr"`.
fn label_filter(e: &LabelExpr, labels: &mut Cow<'_, Labels>) -> bool {
    match e {
        LabelExpr::And(all) => all.iter().all(|e| label_filter(e, labels)),
        LabelExpr::Or(any) => any.iter().any(|e| label_filter(e, labels)),
        LabelExpr::Cmp { name, op, value } => {
            if let CmpValue::Str(m) = value {
                return m.matches(labels.get(name).map_or("", String::as_str));
            }
            let Some(v) = labels.get(name).cloned() else {
                return false;
            };
            let result = match value {
                CmpValue::Number(n) => v.trim().parse::<f64>().ok().map(|x| compare(*op, x, *n)),
                CmpValue::Duration(d) => duration::parse_go(&v).ok().map(|x| compare(*op, x, *d)),
                CmpValue::Bytes(b) => parse_bytes(&v).map(|x| compare(*op, x, *b)),
                CmpValue::Str(_) => None,
            };
            result.unwrap_or_else(|| {
                set_error(
                    labels.to_mut(),
                    "LabelFilterErr",
                    format!("cannot convert {name}=\"{v}\""),
                );
                true
            })
        }
    }
}

/// A template with the labels filled in (a missing label renders empty).
fn render(parts: &[TemplatePart], labels: &Labels) -> String {
    let mut s = String::new();
    for p in parts {
        match p {
            TemplatePart::Text(t) => s.push_str(t),
            TemplatePart::Label(l) => {
                if let Some(v) = labels.get(l) {
                    s.push_str(v);
                }
            }
        }
    }
    s
}

/// Captures of a `pattern` expression, or `None` when a literal is missing from the line.
fn match_pattern(parts: &[PatternPart], line: &str) -> Option<Vec<(String, String)>> {
    let mut rest = line;
    let mut open: Option<&Option<String>> = None;
    let mut found = Vec::new();
    for p in parts {
        match p {
            PatternPart::Literal(lit) => {
                let at = rest.find(lit.as_str())?;
                if let Some(Some(name)) = open.take() {
                    found.push((name.clone(), rest[..at].to_string()));
                }
                rest = &rest[at + lit.len()..];
            }
            PatternPart::Capture(name) => open = Some(name),
        }
    }
    if let Some(Some(name)) = open {
        found.push((name.clone(), rest.to_string()));
    }
    Some(found)
}

/// Runs a pipeline over one line; `None` when a filter drops it.
fn run_pipeline<'a>(stages: &[Stage], base: &'a Labels, line: &'a str) -> Option<Out<'a>> {
    let mut out = Out {
        labels: Cow::Borrowed(base),
        line: Cow::Borrowed(line),
    };
    for stage in stages {
        match stage {
            Stage::Line(f) => {
                if !f.keeps(&out.line) {
                    return None;
                }
            }
            Stage::Json(params) => {
                if !out.labels.contains_key(ERROR_LABEL) {
                    let text = out.line.clone();
                    json_stage(params, &text, out.labels.to_mut(), base);
                }
            }
            Stage::Logfmt {
                strict,
                keep_empty,
                params,
            } => {
                if !out.labels.contains_key(ERROR_LABEL) {
                    let text = out.line.clone();
                    logfmt_stage(
                        *strict,
                        *keep_empty,
                        params,
                        &text,
                        out.labels.to_mut(),
                        base,
                    );
                }
            }
            Stage::Filter(e) => {
                if !label_filter(e, &mut out.labels) {
                    return None;
                }
            }
            Stage::LineFormat(parts) => {
                out.line = Cow::Owned(render(parts, &out.labels));
            }
            Stage::Drop(names) => {
                let l = out.labels.to_mut();
                for n in names {
                    l.remove(n);
                }
            }
            Stage::Regexp(re) => {
                if let Some(caps) = re.captures(&out.line) {
                    let found: Vec<(String, String)> = re
                        .capture_names()
                        .flatten()
                        .filter_map(|n| Some((n.to_string(), caps.name(n)?.as_str().to_string())))
                        .collect();
                    let l = out.labels.to_mut();
                    for (k, v) in found {
                        put(l, base, &k, v);
                    }
                }
            }
            Stage::Pattern(parts) => {
                if let Some(found) = match_pattern(parts, &out.line) {
                    let l = out.labels.to_mut();
                    for (k, v) in found {
                        put(l, base, &k, v);
                    }
                }
            }
            Stage::LabelFormat(formats) => {
                for (dst, f) in formats {
                    let value = match f {
                        LabelFormat::Rename(src) => {
                            let v = out.labels.to_mut().remove(src);
                            v.unwrap_or_default()
                        }
                        LabelFormat::Template(parts) => render(parts, &out.labels),
                    };
                    out.labels.to_mut().insert(dst.clone(), value);
                }
            }
            Stage::Keep(names) => {
                out.labels.to_mut().retain(|k, _| names.contains(k));
            }
        }
    }
    Some(out)
}

/// Streams of a log query's answer: labels and (recorded time, line) entries, in query order.
pub type Streams = Vec<(Labels, Vec<(i64, String)>)>;

/// Queries read their window a slice at a time, in the query's direction: the first slice is a
/// minute, each next one four times wider up to an hour, so a query that stops early (at its
/// limit) reads little of a long window, and none holds more than an hour of lines.
const FIRST_SLICE_NS: i64 = 60_000_000_000;
const MAX_SLICE_NS: i64 = 3_600_000_000_000;

/// The slices of `[lo, hi]` (both ends included), forward or backward.
fn slices(lo: i64, hi: i64, backward: bool) -> impl Iterator<Item = (i64, i64)> {
    let mut left = (lo <= hi).then_some((lo, hi));
    let mut width = FIRST_SLICE_NS;
    std::iter::from_fn(move || {
        let (lo, hi) = left?;
        let w = width.saturating_sub(1);
        width = width.saturating_mul(4).min(MAX_SLICE_NS);
        let slice = if backward {
            (hi.saturating_sub(w).max(lo), hi)
        } else {
            (lo, lo.saturating_add(w).min(hi))
        };
        left = if backward {
            (slice.0 > lo).then(|| (lo, slice.0 - 1))
        } else {
            (slice.1 < hi).then(|| (slice.1 + 1, hi))
        };
        Some(slice)
    })
}

/// The lines of each stream with times in `[from, to]`, by time (stored order among equals),
/// read together for all the streams' containers.
fn stream_lines(
    streams: &[&Stream],
    src: &LogStore,
    from: i64,
    to: i64,
) -> anyhow::Result<Vec<Vec<(i64, String)>>> {
    let live = |s: &Stream| s.info.first_ns <= to && from <= s.info.last_ns;
    let mut keys: Vec<ContainerKey> = streams
        .iter()
        .filter(|s| live(s))
        .map(|s| s.info.key.clone())
        .collect();
    keys.sort();
    keys.dedup();
    let mut per_container = src.lines_of(&keys, from, to)?;
    let mut out = Vec::with_capacity(streams.len());
    for s in streams {
        let Ok(k) = keys.binary_search(&s.info.key) else {
            out.push(Vec::new());
            continue;
        };
        let mut lines: Vec<(i64, String)> = per_container[k]
            .iter_mut()
            .filter(|l| l.stream == s.info.stream)
            .map(|l| (l.time_ns, std::mem::take(&mut l.text)))
            .collect();
        lines.sort_by_key(|l| l.0);
        out.push(lines);
    }
    Ok(out)
}

/// Streams of a log query: entries with recorded times in `[start, end)`, at most `limit` of
/// them overall, the newest (backward) or oldest (forward) first; among equal times, streams in
/// index order.
pub fn log_query(
    index: &StreamIndex,
    src: &LogStore,
    expr: &LogExpr,
    start: i64,
    end: i64,
    limit: usize,
    backward: bool,
) -> anyhow::Result<(Streams, Stats)> {
    let mut stats = Stats::default();
    let streams: Vec<&Stream> = index
        .select(&expr.selector)
        .filter(|s| s.info.first_ns < end && start <= s.info.last_ns)
        .collect();
    let mut out: BTreeMap<Labels, Vec<(i64, String)>> = BTreeMap::new();
    let mut taken = 0;
    for (from, to) in slices(start, end.saturating_sub(1), backward) {
        if taken >= limit {
            break;
        }
        // (time, stream, position in the stream, line) in the order the answer takes them.
        let mut entries: Vec<(i64, usize, usize, String)> = Vec::new();
        for (i, lines) in stream_lines(&streams, src, from, to)?
            .into_iter()
            .enumerate()
        {
            entries.extend(
                lines
                    .into_iter()
                    .enumerate()
                    .map(|(pos, (t, line))| (t, i, pos, line)),
            );
        }
        if backward {
            entries.sort_by_key(|e| (Reverse(e.0), e.1, Reverse(e.2)));
        } else {
            entries.sort_by_key(|e| (e.0, e.1, e.2));
        }
        for (t, i, _, text) in entries {
            if taken >= limit {
                break;
            }
            stats.lines += 1;
            stats.bytes += text.len() as u64;
            if let Some(o) = run_pipeline(&expr.stages, &streams[i].labels, &text) {
                out.entry(o.labels.into_owned())
                    .or_default()
                    .push((t, o.line.into_owned()));
                taken += 1;
            }
        }
    }
    Ok((out.into_iter().collect(), stats))
}

/// Every line of the streams `selector` picks with a recorded time in `[from, to]`, handed to
/// `each` with its stream slice by slice, oldest first (a long window is never held whole).
pub fn for_each_line<'a>(
    index: &'a StreamIndex,
    src: &LogStore,
    selector: &'a [Matcher],
    from: i64,
    to: i64,
    mut each: impl FnMut(&'a Stream, i64, &str),
) -> anyhow::Result<()> {
    let streams: Vec<&'a Stream> = index
        .select(selector)
        .filter(|s| s.info.first_ns <= to && from <= s.info.last_ns)
        .collect();
    for (lo, hi) in slices(from, to, false) {
        for (i, lines) in stream_lines(&streams, src, lo, hi)?.into_iter().enumerate() {
            for (t, line) in lines {
                each(streams[i], t, &line);
            }
        }
    }
    Ok(())
}

/// One series of a metric query: a value at some of the steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Labels,
    /// (step index, value)
    pub points: Vec<(usize, f64)>,
}

/// Evaluates a metric query at each of `steps` (recorded ns); lines after `now` are not there.
pub fn metric_query(
    index: &StreamIndex,
    src: &LogStore,
    expr: &MetricExpr,
    steps: &[i64],
    now: i64,
) -> Result<(Vec<Series>, Stats), Failure> {
    let mut stats = Stats::default();
    let mut series = eval(index, src, expr, steps, now, &mut stats)?;
    series.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok((series, stats))
}

fn eval(
    index: &StreamIndex,
    src: &LogStore,
    expr: &MetricExpr,
    steps: &[i64],
    now: i64,
    stats: &mut Stats,
) -> Result<Vec<Series>, Failure> {
    match expr {
        MetricExpr::Range {
            func,
            log,
            range_ns,
            offset_ns,
        } => range_agg(
            index, src, *func, log, *range_ns, *offset_ns, steps, now, stats,
        ),
        MetricExpr::Agg {
            op,
            grouping,
            param,
            inner,
        } => {
            let inner = eval(index, src, inner, steps, now, stats)?;
            Ok(vector_agg(
                *op,
                grouping.as_ref(),
                *param,
                inner,
                steps.len(),
            ))
        }
        MetricExpr::Scalar(_) => Err(Failure::Query("a number is not a vector".into())),
        MetricExpr::Binary {
            op,
            keep_bool,
            lhs,
            rhs,
        } => {
            // The parser lets through only a vector with a constant on one side.
            let (vector, constant, vector_left) = if rhs.is_constant() {
                (lhs, rhs, true)
            } else {
                (rhs, lhs, false)
            };
            let k = constant_value(constant);
            let mut out = Vec::new();
            for mut s in eval(index, src, vector, steps, now, stats)? {
                s.points.retain_mut(|(_, v)| {
                    let (a, b) = if vector_left { (*v, k) } else { (k, *v) };
                    let r = op.apply(a, b);
                    if !op.is_comparison() || *keep_bool {
                        *v = r;
                        true
                    } else {
                        r == 1.0
                    }
                });
                if !s.points.is_empty() {
                    out.push(s);
                }
            }
            Ok(out)
        }
    }
}

/// The value of a constant expression.
fn constant_value(e: &MetricExpr) -> f64 {
    match e {
        MetricExpr::Scalar(v) => *v,
        MetricExpr::Binary { op, lhs, rhs, .. } => {
            op.apply(constant_value(lhs), constant_value(rhs))
        }
        _ => f64::NAN,
    }
}

#[allow(clippy::too_many_arguments)]
fn range_agg(
    index: &StreamIndex,
    src: &LogStore,
    func: RangeFn,
    log: &LogExpr,
    range_ns: i64,
    offset_ns: i64,
    steps: &[i64],
    now: i64,
    stats: &mut Stats,
) -> Result<Vec<Series>, Failure> {
    let (Some(first), Some(last)) = (steps.first(), steps.last()) else {
        return Ok(Vec::new());
    };
    let from = first.saturating_sub(offset_ns).saturating_sub(range_ns);
    let to = last.saturating_sub(offset_ns).min(now);
    // (time, bytes) of every line that passed, per output label set.
    let mut samples: BTreeMap<Labels, Vec<(i64, u64)>> = BTreeMap::new();
    let streams: Vec<&Stream> = index.select(&log.selector).collect();
    // The first pipeline error of the first stream that has one (streams in index order).
    let mut failed: Option<(usize, String)> = None;
    for (lo, hi) in slices(from.saturating_add(1), to, false) {
        for (i, lines) in stream_lines(&streams, src, lo, hi)?.into_iter().enumerate() {
            if failed.as_ref().is_some_and(|f| f.0 <= i) {
                break;
            }
            let s = streams[i];
            for (t, text) in lines {
                stats.lines += 1;
                stats.bytes += text.len() as u64;
                let Some(out) = run_pipeline(&log.stages, &s.labels, &text) else {
                    continue;
                };
                if let Some(err) = out.labels.get(ERROR_LABEL).cloned() {
                    let mut labels = out.labels.into_owned();
                    labels.remove(ERROR_DETAILS_LABEL);
                    failed = Some((
                        i,
                        format!(
                            "pipeline error: '{err}' for series: '{}'.\nUse a label filter to intentionally skip this error. (e.g | __error__!=\"{err}\").\nTo skip all potential errors you can match empty errors.(e.g __error__=\"\")\nThe label filter can also be specified after unwrap. (e.g | unwrap latency | __error__=\"\" )",
                            label_string(&labels)
                        ),
                    ));
                    break;
                }
                samples
                    .entry(out.labels.into_owned())
                    .or_default()
                    .push((t, out.line.len() as u64));
            }
        }
    }
    if let Some((_, msg)) = failed {
        return Err(Failure::Query(msg));
    }
    let range_s = range_ns as f64 / 1e9;
    let mut out = Vec::with_capacity(samples.len());
    for (labels, mut pts) in samples {
        pts.sort_unstable();
        let mut prefix = Vec::with_capacity(pts.len() + 1);
        prefix.push(0u64);
        for (_, b) in &pts {
            prefix.push(prefix.last().copied().unwrap_or(0) + b);
        }
        let mut points = Vec::new();
        for (i, &t) in steps.iter().enumerate() {
            let end = t.saturating_sub(offset_ns).min(now);
            let start = t.saturating_sub(offset_ns).saturating_sub(range_ns);
            let lo = pts.partition_point(|p| p.0 <= start);
            let hi = pts.partition_point(|p| p.0 <= end);
            if hi <= lo {
                continue;
            }
            let count = (hi - lo) as f64;
            let bytes = (prefix[hi] - prefix[lo]) as f64;
            let v = match func {
                RangeFn::CountOverTime => count,
                RangeFn::Rate => count / range_s,
                RangeFn::BytesOverTime => bytes,
                RangeFn::BytesRate => bytes / range_s,
            };
            points.push((i, v));
        }
        if !points.is_empty() {
            out.push(Series { labels, points });
        }
    }
    Ok(out)
}

fn group_key(labels: &Labels, grouping: Option<&Grouping>) -> Labels {
    match grouping {
        None => Labels::new(),
        Some(Grouping::By(names)) => labels
            .iter()
            .filter(|(k, _)| names.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        Some(Grouping::Without(names)) => labels
            .iter()
            .filter(|(k, _)| !names.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

fn vector_agg(
    op: AggOp,
    grouping: Option<&Grouping>,
    param: Option<usize>,
    inner: Vec<Series>,
    n_steps: usize,
) -> Vec<Series> {
    // Values per step: (series index, value).
    let mut at_step: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n_steps];
    for (si, s) in inner.iter().enumerate() {
        for &(i, v) in &s.points {
            at_step[i].push((si, v));
        }
    }
    let keys: Vec<Labels> = inner
        .iter()
        .map(|s| group_key(&s.labels, grouping))
        .collect();
    let mut out: BTreeMap<Labels, Vec<(usize, f64)>> = BTreeMap::new();
    for (step, values) in at_step.into_iter().enumerate() {
        let mut groups: BTreeMap<&Labels, Vec<(usize, f64)>> = BTreeMap::new();
        for (si, v) in values {
            groups.entry(&keys[si]).or_default().push((si, v));
        }
        for (key, mut members) in groups {
            match op {
                AggOp::Topk | AggOp::Bottomk => {
                    let k = param.unwrap_or(1);
                    members.sort_by(|a, b| {
                        let ord = a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal);
                        if op == AggOp::Topk {
                            ord.reverse()
                        } else {
                            ord
                        }
                    });
                    for (si, v) in members.into_iter().take(k) {
                        out.entry(inner[si].labels.clone())
                            .or_default()
                            .push((step, v));
                    }
                }
                _ => {
                    let vals = members.iter().map(|m| m.1);
                    let n = members.len() as f64;
                    let v = match op {
                        AggOp::Sum => vals.sum(),
                        AggOp::Avg => vals.sum::<f64>() / n,
                        AggOp::Min => vals.fold(f64::INFINITY, f64::min),
                        AggOp::Max => vals.fold(f64::NEG_INFINITY, f64::max),
                        _ => n,
                    };
                    out.entry(key.clone()).or_default().push((step, v));
                }
            }
        }
    }
    out.into_iter()
        .map(|(labels, points)| Series { labels, points })
        .collect()
}

/// `{a="b", c="d"}`, as Loki prints label sets.
pub fn label_string(l: &Labels) -> String {
    let inner: Vec<String> = l
        .iter()
        .map(|(k, v)| format!("{k}={}", serde_json::to_string(v).unwrap_or_default()))
        .collect();
    format!("{{{}}}", inner.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::MemLogs;
    use logql::{Expr, parse};
    use schemas::tables::LogRow;

    const S: i64 = 1_000_000_000;

    fn store() -> MemLogs {
        let row = |pod: &str, t: i64, stream: &str, line: &str| LogRow {
            time_ns: t * S,
            namespace: "shop".into(),
            pod: pod.into(),
            container: "app".into(),
            restart: 0,
            stream: stream.into(),
            line: line.into(),
        };
        MemLogs::new([
            row(
                "a",
                1,
                "stdout",
                r#"{"level":"info","status":200,"took":"15ms","req":{"path":"/cart"}}"#,
            ),
            row(
                "a",
                2,
                "stdout",
                r#"{"level":"error","status":503,"took":"300ms","req":{"path":"/cart"}}"#,
            ),
            row("a", 3, "stderr", "not json at all"),
            row(
                "b",
                2,
                "stdout",
                "level=error msg=\"upstream timeout\" status=504 pod=b",
            ),
            row("b", 4, "stdout", "level=info msg=ok status=200"),
        ])
    }

    fn log(q: &str) -> LogExpr {
        match parse(q).unwrap() {
            Expr::Log(l) => l,
            Expr::Metric(_) => panic!(),
        }
    }

    fn metric(q: &str) -> MetricExpr {
        match parse(q).unwrap() {
            Expr::Metric(m) => m,
            Expr::Log(_) => panic!(),
        }
    }

    fn lines(r: &[(Labels, Vec<(i64, String)>)]) -> Vec<String> {
        let mut all: Vec<(i64, String)> = r.iter().flat_map(|(_, v)| v.clone()).collect();
        all.sort();
        all.into_iter().map(|(_, l)| l).collect()
    }

    #[test]
    fn streams_carry_agent_labels() {
        let mem = store();
        let st: &LogStore = &mem;
        let idx = StreamIndex::build(&st.catalog().unwrap(), |_, pod| {
            (pod == "a").then(|| "cart".to_string())
        });
        assert_eq!(idx.streams.len(), 3, "pod a has stdout and stderr streams");
        let a = &idx.streams[0].labels;
        assert_eq!(a["job"], "shop/app");
        assert_eq!(a["service_name"], "cart");
        let b = idx.streams.iter().find(|s| s.labels["pod"] == "b").unwrap();
        assert_eq!(
            b.labels["service_name"], "app",
            "falls back to the container"
        );
    }

    #[test]
    fn filters_parse_and_limit() {
        let mem = store();
        let st: &LogStore = &mem;
        let idx = StreamIndex::build(&st.catalog().unwrap(), |_, _| None);
        let run = |q: &str, limit, backward| {
            log_query(&idx, st, &log(q), 0, 10 * S, limit, backward)
                .unwrap()
                .0
        };
        assert_eq!(
            lines(&run(r#"{namespace="shop"} |= "error""#, 100, true)).len(),
            2
        );
        let r = run(r#"{namespace="shop"} | json | status >= 500"#, 100, true);
        // The stderr line fails to parse: kept, flagged, and it has no status label.
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].0["level"], "error");
        assert_eq!(r[0].0["req_path"], "/cart");
        let r = run(r#"{namespace="shop"} | json | __error__ != """#, 100, true);
        assert_eq!(
            lines(&r).len(),
            3,
            "the stderr line and pod b's logfmt lines are not JSON"
        );
        assert!(r.iter().all(|(l, _)| l["__error__"] == "JSONParserErr"));
        let r = run(
            r#"{pod="b"} | logfmt | status > 500 | line_format "{{.msg}} ({{.pod_extracted}})""#,
            100,
            true,
        );
        assert_eq!(lines(&r), ["upstream timeout (b)"]);
        let r = run(r#"{namespace="shop"} | json | took > 100ms"#, 100, true);
        assert_eq!(r.len(), 1);
        // Limit keeps the newest (backward) or the oldest (forward) lines across streams.
        let newest = run(r#"{namespace="shop"}"#, 2, true);
        assert_eq!(
            lines(&newest),
            ["not json at all", "level=info msg=ok status=200"]
        );
        let oldest = run(r#"{namespace="shop"}"#, 1, false);
        assert_eq!(oldest[0].1[0].0, S);
    }

    #[test]
    fn extraction_stages_add_labels() {
        let mem = store();
        let st: &LogStore = &mem;
        let idx = StreamIndex::build(&st.catalog().unwrap(), |_, _| None);
        let run = |q: &str| {
            lines(
                &log_query(&idx, st, &log(q), 0, 10 * S, 100, true)
                    .unwrap()
                    .0,
            )
        };
        assert_eq!(
            run(
                r#"{pod="b"} | pattern "level=<level> msg=<_> status=<status>" | label_format sev=level | line_format "{{.sev}} {{.level}}""#
            ),
            ["error ", "info "],
            "label_format moves the label"
        );
        assert_eq!(
            run(r#"{pod="b"} | regexp "status=(?P<code>\\d+)" | code >= 500"#).len(),
            1
        );
        assert_eq!(
            run(
                r#"{pod="b"} | logfmt | label_format route="{{.status}}:{{.msg}}" | line_format "{{.route}}""#
            ),
            ["504:upstream timeout", "200:ok"]
        );
    }

    #[test]
    fn metric_queries_count_over_left_open_windows() {
        let mem = store();
        let st: &LogStore = &mem;
        let idx = StreamIndex::build(&st.catalog().unwrap(), |_, _| None);
        let steps = [2 * S, 4 * S];
        let (r, _) = metric_query(
            &idx,
            st,
            &metric(r#"sum by (pod) (count_over_time({namespace="shop"} |= "error" [2s]))"#),
            &steps,
            10 * S,
        )
        .unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0].labels,
            Labels::from([("pod".to_string(), "a".to_string())])
        );
        assert_eq!(
            r[0].points,
            [(0, 1.0)],
            "the error at t=2 leaves the (2s,4s] window"
        );
        let (r, _) =
            metric_query(&idx, st, &metric(r#"rate({pod="a"}[2s])"#), &steps, 10 * S).unwrap();
        let stdout = r.iter().find(|s| s.labels["stream"] == "stdout").unwrap();
        assert_eq!(stdout.points, [(0, 1.0)]);
        let (r, _) = metric_query(
            &idx,
            st,
            &metric(r#"topk(1, count_over_time({namespace="shop"}[10s]))"#),
            &[10 * S],
            10 * S,
        )
        .unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].points, [(0, 2.0)]);
        let q = |q: &str, t| metric_query(&idx, st, &metric(q), &[t], t).unwrap().0;
        let r = q(
            r#"sum by (pod) (count_over_time({namespace="shop"}[10s])) > 2"#,
            10 * S,
        );
        assert_eq!(r.len(), 1, "pod b has only 2 lines: {r:?}");
        assert_eq!(
            r[0].points,
            [(0, 3.0)],
            "a comparison filters and keeps the value"
        );
        let r = q(
            r#"sum by (pod) (count_over_time({namespace="shop"}[10s])) > bool 2"#,
            10 * S,
        );
        let values: Vec<f64> = r.iter().map(|s| s.points[0].1).collect();
        assert_eq!(values, [1.0, 0.0]);
        let r = q(r#"60 * sum(rate({pod="b"}[10s])) / 2"#, 10 * S);
        assert_eq!(r[0].points, [(0, 6.0)]);
        let err = metric_query(
            &idx,
            st,
            &metric(r#"count_over_time({namespace="shop"} | json [10s])"#),
            &[10 * S],
            10 * S,
        )
        .unwrap_err();
        let err = err.to_string();
        assert!(err.starts_with("pipeline error: 'JSONParserErr'"), "{err}");
        let (r, _) = metric_query(
            &idx,
            st,
            &metric(r#"sum(bytes_over_time({pod="b"}[10s]))"#),
            &[3 * S],
            3 * S,
        )
        .unwrap();
        assert_eq!(r[0].points, [(0, 51.0)], "lines after now are not counted");
    }
}
