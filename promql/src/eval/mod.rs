//! PromQL evaluation over promql-parser ASTs.
//!
//! A range query is evaluated as one instant evaluation per step, sharing the series selection
//! of every selector (resolved once per query). Semantics follow Prometheus 3: left-open range
//! windows `(t - range, t]`, a left-open lookback window for instant selectors, staleness markers,
//! Prometheus' extrapolation for `rate`/`increase`/`delta`, and Kahan summation where Prometheus
//! uses it.

mod aggregate;
mod binary;
mod functions;

pub(crate) use functions::almost_equal;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use promql_parser::parser::{AtModifier, Expr, Offset, VectorSelector};

use crate::labels::Labels;
use crate::limits::Cancel;
use crate::storage::{
    LabelMatcher, SampleBuf, SeriesId, Storage, is_histogram_placeholder, is_stale,
};
use crate::value::{Sample, Series, Value};

/// Why a query failed. `Parse` maps to the API's `bad_data`, the others to `execution`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    #[error("{0}")]
    Parse(String),
    #[error("{0}")]
    Execution(String),
    /// A PromQL feature this engine does not implement; the message names it.
    #[error("unsupported by faultline's PromQL engine: {0}")]
    Unsupported(String),
    /// The query ran past its deadline.
    #[error("query timed out in {0}")]
    Timeout(&'static str),
    /// The query would decode more samples than the engine allows.
    #[error("query processing would load too many samples into memory in query execution")]
    TooManySamples,
    /// The query would evaluate more instants (range steps times subquery steps) than allowed.
    #[error(
        "query would evaluate {steps} instants (range steps times subquery steps), more than the limit of {max}; use a coarser step or a shorter range"
    )]
    TooManySteps { steps: u64, max: u64 },
    /// Whoever asked has gone (the client disconnected or the server is stopping).
    #[error("query cancelled")]
    Cancelled,
}

pub type Result<T> = std::result::Result<T, EvalError>;

fn exec<T>(msg: impl Into<String>) -> Result<T> {
    Err(EvalError::Execution(msg.into()))
}

fn unsupported<T>(what: impl Into<String>) -> Result<T> {
    Err(EvalError::Unsupported(what.into()))
}

/// Default lookback for instant selectors (Prometheus' `--query.lookback-delta`).
pub const DEFAULT_LOOKBACK_MS: i64 = 5 * 60 * 1000;
/// Step of a subquery written without one (Prometheus' default evaluation interval).
pub const DEFAULT_SUBQUERY_STEP_MS: i64 = 60 * 1000;

/// Parses a PromQL expression within the default length and nesting limits.
pub fn parse(query: &str) -> Result<Expr> {
    Engine::default().parse(query)
}

/// Evaluation options.
#[derive(Clone, Copy, Debug)]
pub struct Engine {
    pub lookback_ms: i64,
    pub subquery_step_ms: i64,
    /// Longest a query may run (Prometheus' `--query.timeout`, 2 minutes).
    pub timeout: std::time::Duration,
    /// Most samples a query may decode or compute in subqueries (Prometheus'
    /// `--query.max-samples`, 50 million).
    pub max_samples: usize,
    /// Most instants a query may evaluate: a range query's steps times the steps of the
    /// subqueries inside it (`x[1d:1ms]` is 86 million), estimated before evaluating.
    pub max_steps: u64,
    /// Longest query text (bytes) and deepest nesting the parser is handed (see
    /// [`crate::limits::check_shape`]).
    pub max_query_length: usize,
    pub max_depth: usize,
}

impl Default for Engine {
    fn default() -> Self {
        Engine {
            lookback_ms: DEFAULT_LOOKBACK_MS,
            subquery_step_ms: DEFAULT_SUBQUERY_STEP_MS,
            timeout: std::time::Duration::from_secs(120),
            max_samples: 50_000_000,
            max_steps: DEFAULT_MAX_STEPS,
            max_query_length: crate::limits::DEFAULT_MAX_QUERY_LENGTH,
            max_depth: crate::limits::DEFAULT_MAX_DEPTH,
        }
    }
}

/// Default of [`Engine::max_steps`]: an 11,000-step range query over a 1,000-step subquery.
pub const DEFAULT_MAX_STEPS: u64 = 11_000_000;

impl Engine {
    /// Parses a PromQL expression, refusing text longer or nested deeper than this engine's
    /// limits before the (recursive) parser sees it.
    pub fn parse(&self, query: &str) -> Result<Expr> {
        crate::limits::check_shape(query, self.max_query_length, self.max_depth)
            .map_err(|e| EvalError::Parse(e.to_string()))?;
        // promql-parser can panic on some malformed input; user input must never take us down.
        match std::panic::catch_unwind(|| promql_parser::parser::parse(query)) {
            Ok(r) => r.map_err(EvalError::Parse),
            Err(_) => Err(EvalError::Parse(format!("cannot parse query {query:?}"))),
        }
    }

    /// Evaluates `expr` at one instant (ms since the epoch).
    pub fn instant(&self, st: &dyn Storage, expr: &Expr, t: i64) -> Result<Value> {
        self.instant_cancellable(st, expr, t, &Cancel::new())
    }

    /// [`Engine::instant`] that stops, with [`EvalError::Cancelled`], once `cancel` is set.
    pub fn instant_cancellable(
        &self,
        st: &dyn Storage,
        expr: &Expr,
        t: i64,
        cancel: &Cancel,
    ) -> Result<Value> {
        self.check_steps(expr, 1)?;
        let ctx = Ctx::new(self, st, expr, t, t, 0, cancel);
        let v = ctx.eval(expr, t)?;
        if let Value::Vector(ref vec) = v {
            check_unique(vec)?;
        }
        Ok(v)
    }

    /// Evaluates `expr` at `start, start+step, … ≤ end` and returns a matrix sorted by labels.
    pub fn range(
        &self,
        st: &dyn Storage,
        expr: &Expr,
        start: i64,
        end: i64,
        step: i64,
    ) -> Result<Vec<Series>> {
        self.range_cancellable(st, expr, start, end, step, &Cancel::new())
    }

    /// [`Engine::range`] that stops, with [`EvalError::Cancelled`], once `cancel` is set.
    pub fn range_cancellable(
        &self,
        st: &dyn Storage,
        expr: &Expr,
        start: i64,
        end: i64,
        step: i64,
        cancel: &Cancel,
    ) -> Result<Vec<Series>> {
        match expr.value_type() {
            promql_parser::parser::value::ValueType::Vector
            | promql_parser::parser::value::ValueType::Scalar => {}
            other => {
                return Err(EvalError::Parse(format!(
                    "invalid expression type \"{}\" for range query, must be Scalar or instant Vector",
                    type_label(other)
                )));
            }
        }
        if step <= 0 {
            return Err(EvalError::Parse(
                "zero or negative query resolution step widths are not accepted. Try a positive integer".into(),
            ));
        }
        let steps = (end.saturating_sub(start) / step).saturating_add(1);
        self.check_steps(expr, steps as u64)?;
        let ctx = Ctx::new(self, st, expr, start, end, step, cancel);
        let mut out: Vec<Series> = Vec::new();
        let mut index: HashMap<Labels, usize> = HashMap::default();
        let mut t = start;
        while t <= end {
            ctx.check_deadline()?;
            match ctx.eval(expr, t)? {
                Value::Scalar(v) => {
                    ctx.count_points(1)?;
                    push_point(&mut out, &mut index, Labels::empty(), t, v)?
                }
                Value::Vector(vec) => {
                    ctx.count_points(vec.len())?;
                    for s in vec {
                        push_point(&mut out, &mut index, s.labels, t, s.v)?;
                    }
                }
                other => return exec(format!("unexpected {} in range query", other.type_name())),
            }
            // The last representable instant ends the query rather than overflowing.
            match t.checked_add(step) {
                Some(next) => t = next,
                None => break,
            }
        }
        out.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(out)
    }

    /// Refuses, before any work, a query whose instants (`outer` steps times its subqueries'
    /// steps) exceed [`Engine::max_steps`].
    fn check_steps(&self, expr: &Expr, outer: u64) -> Result<()> {
        let steps = outer.saturating_mul(subquery_steps(expr, self));
        if steps > self.max_steps {
            return Err(EvalError::TooManySteps {
                steps,
                max: self.max_steps,
            });
        }
        Ok(())
    }
}

/// How many instants evaluating `e` once takes: 1, times each subquery's steps along its
/// deepest chain (walked iteratively: the parsed tree's depth is bounded, but no recursion is
/// needed to count).
fn subquery_steps(e: &Expr, engine: &Engine) -> u64 {
    let mut worst = 1u64;
    let mut stack: Vec<(&Expr, u64)> = vec![(e, 1)];
    while let Some((e, n)) = stack.pop() {
        worst = worst.max(n);
        match e {
            Expr::Subquery(sq) => {
                let step = match &sq.step {
                    Some(d) if !d.is_zero() => duration_ms(d),
                    _ => engine.subquery_step_ms,
                }
                .max(1);
                let k = (duration_ms(&sq.range) / step).saturating_add(1) as u64;
                stack.push((&sq.expr, n.saturating_mul(k)));
            }
            Expr::Paren(p) => stack.push((&p.expr, n)),
            Expr::Unary(u) => stack.push((&u.expr, n)),
            Expr::Binary(b) => {
                stack.push((&b.lhs, n));
                stack.push((&b.rhs, n));
            }
            Expr::Aggregate(a) => {
                stack.push((&a.expr, n));
                if let Some(p) = &a.param {
                    stack.push((p, n));
                }
            }
            Expr::Call(c) => stack.extend(c.args.args.iter().map(|a| (&**a, n))),
            Expr::MatrixSelector(_)
            | Expr::VectorSelector(_)
            | Expr::NumberLiteral(_)
            | Expr::StringLiteral(_)
            | Expr::Extension(_) => {}
        }
    }
    worst
}

fn type_label(t: promql_parser::parser::value::ValueType) -> &'static str {
    use promql_parser::parser::value::ValueType;
    match t {
        ValueType::Matrix => "range vector",
        ValueType::Vector => "instant vector",
        ValueType::Scalar => "scalar",
        ValueType::String => "string",
    }
}

fn push_point(
    out: &mut Vec<Series>,
    index: &mut HashMap<Labels, usize>,
    labels: Labels,
    t: i64,
    v: f64,
) -> Result<()> {
    let i = match index.get(&labels) {
        Some(&i) => i,
        None => {
            out.push(Series {
                labels: labels.clone(),
                points: Vec::new(),
            });
            index.insert(labels, out.len() - 1);
            out.len() - 1
        }
    };
    let pts = &mut out[i].points;
    if pts.last().is_some_and(|p| p.0 == t) {
        return exec("vector cannot contain metrics with the same labelset");
    }
    pts.push((t, v));
    Ok(())
}

pub(crate) fn check_unique(v: &[Sample]) -> Result<()> {
    if v.len() < 2 {
        return Ok(());
    }
    let mut seen = HashSet::with_capacity_and_hasher(v.len(), Default::default());
    for s in v {
        if !seen.insert(&s.labels) {
            return exec("vector cannot contain metrics with the same labelset");
        }
    }
    Ok(())
}

/// Milliseconds of a parsed duration, saturating (`[100000000y]` parses).
pub(crate) fn duration_ms(d: &Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn offset_ms(o: &Option<Offset>) -> i64 {
    match o {
        None => 0,
        Some(Offset::Pos(d)) => duration_ms(d),
        Some(Offset::Neg(d)) => duration_ms(d).saturating_neg(),
    }
}

fn system_time_ms(t: &SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// How far before and after its evaluation time an expression reads samples (ms), or `None`
/// when an `@` modifier pins it to an absolute time.
fn reach(e: &Expr, engine: &Engine) -> Option<(i64, i64)> {
    let sel = |at: &Option<AtModifier>, off: &Option<Offset>, range: i64| {
        if at.is_some() {
            return None;
        }
        let o = offset_ms(off);
        Some((range.saturating_add(o).max(0), o.saturating_neg().max(0)))
    };
    let max2 =
        |a: Option<(i64, i64)>, b: Option<(i64, i64)>| Some((a?.0.max(b?.0), a?.1.max(b?.1)));
    match e {
        Expr::VectorSelector(vs) => sel(&vs.at, &vs.offset, engine.lookback_ms),
        Expr::MatrixSelector(ms) => sel(&ms.vs.at, &ms.vs.offset, duration_ms(&ms.range)),
        Expr::Subquery(sq) => {
            let outer = sel(&sq.at, &sq.offset, duration_ms(&sq.range))?;
            let inner = reach(&sq.expr, engine)?;
            Some((
                outer.0.saturating_add(inner.0),
                outer.1.saturating_add(inner.1),
            ))
        }
        Expr::Paren(p) => reach(&p.expr, engine),
        Expr::Unary(u) => reach(&u.expr, engine),
        Expr::Binary(b) => max2(reach(&b.lhs, engine), reach(&b.rhs, engine)),
        Expr::Aggregate(a) => {
            let r = reach(&a.expr, engine);
            match &a.param {
                Some(p) => max2(r, reach(p, engine)),
                None => r,
            }
        }
        Expr::Call(c) => c
            .args
            .args
            .iter()
            .try_fold((0, 0), |acc, a| max2(Some(acc), reach(a, engine))),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => Some((0, 0)),
    }
}

/// Per-query state: the store, the query's start/end (for `@ start()`/`@ end()`), the series
/// each selector resolved to, and the samples decoded for the query's time span.
pub(crate) struct Ctx<'a> {
    engine: &'a Engine,
    st: &'a dyn Storage,
    pub(crate) start: i64,
    pub(crate) end: i64,
    /// Step of a range query; 0 for an instant query.
    pub(crate) step: i64,
    /// Samples any step of this query can read lie in `[mint, maxt]`.
    mint: i64,
    maxt: i64,
    selections: RefCell<HashMap<usize, Rc<Vec<SeriesId>>>>,
    decoded: RefCell<HashMap<SeriesId, Rc<SampleBuf>>>,
    decoded_samples: std::cell::Cell<usize>,
    deadline: std::time::Instant,
    cancel: &'a Cancel,
    /// Regexes built at run time (label_replace), compiled once per query, not once per step.
    regexes: RefCell<HashMap<String, regex::Regex>>,
}

impl<'a> Ctx<'a> {
    fn new(
        engine: &'a Engine,
        st: &'a dyn Storage,
        expr: &Expr,
        start: i64,
        end: i64,
        step: i64,
        cancel: &'a Cancel,
    ) -> Self {
        // Subquery steps are aligned to absolute multiples, so allow one extra step of slack.
        let (mint, maxt) = match reach(expr, engine) {
            Some((back, fwd)) => (
                start
                    .saturating_sub(back)
                    .saturating_sub(engine.subquery_step_ms),
                end.saturating_add(fwd),
            ),
            None => (i64::MIN, i64::MAX),
        };
        Ctx {
            engine,
            st,
            start,
            end,
            step,
            mint,
            maxt,
            selections: RefCell::new(HashMap::default()),
            decoded: RefCell::new(HashMap::default()),
            decoded_samples: std::cell::Cell::new(0),
            deadline: std::time::Instant::now() + engine.timeout,
            cancel,
            regexes: RefCell::new(HashMap::default()),
        }
    }

    /// The fully anchored regex for `pattern`, compiled once per query.
    pub(crate) fn anchored_regex(
        &self,
        pattern: &str,
    ) -> std::result::Result<regex::Regex, regex::Error> {
        if let Some(r) = self.regexes.borrow().get(pattern) {
            return Ok(r.clone());
        }
        let r = regex::Regex::new(&format!("^(?s:{pattern})$"))?;
        self.regexes
            .borrow_mut()
            .insert(pattern.to_string(), r.clone());
        Ok(r)
    }

    fn select(&self, vs: &VectorSelector) -> Rc<Vec<SeriesId>> {
        let key = vs as *const VectorSelector as usize;
        if let Some(ids) = self.selections.borrow().get(&key) {
            return ids.clone();
        }
        let mut matchers: Vec<LabelMatcher> = vs
            .matchers
            .matchers
            .iter()
            .map(LabelMatcher::from_parsed)
            .collect();
        if let Some(name) = &vs.name
            && !matchers
                .iter()
                .any(|m| m.name == crate::labels::METRIC_NAME)
        {
            matchers.push(LabelMatcher::equal(crate::labels::METRIC_NAME, name));
        }
        let ids = if vs.matchers.or_matchers.is_empty() {
            self.st.select(&matchers)
        } else {
            // `{a="1" or b="2"}`: the union of each alternative (each also bound by the name).
            let mut all: Vec<SeriesId> = Vec::new();
            for alt in &vs.matchers.or_matchers {
                let mut ms: Vec<LabelMatcher> = alt.iter().map(LabelMatcher::from_parsed).collect();
                ms.extend(matchers.iter().cloned());
                all.extend(self.st.select(&ms));
            }
            all.sort_unstable_by(|&a, &b| self.st.series_labels(a).cmp(self.st.series_labels(b)));
            all.dedup();
            all
        };
        let ids = Rc::new(ids);
        self.selections.borrow_mut().insert(key, ids.clone());
        ids
    }

    /// The samples of `id` this query may read, decoded once per query.
    fn samples(&self, id: SeriesId) -> Result<Rc<SampleBuf>> {
        if let Some(b) = self.decoded.borrow().get(&id) {
            return Ok(b.clone());
        }
        let mut buf = SampleBuf::default();
        self.st.read_samples(id, self.mint, self.maxt, &mut buf);
        self.count_points(buf.ts.len())?;
        let buf = Rc::new(buf);
        self.decoded.borrow_mut().insert(id, buf.clone());
        Ok(buf)
    }

    /// Charges `n` samples (decoded, or computed by a step of a range query or subquery)
    /// against the query's budget.
    pub(crate) fn count_points(&self, n: usize) -> Result<()> {
        let total = self.decoded_samples.get().saturating_add(n);
        if total > self.engine.max_samples {
            return Err(EvalError::TooManySamples);
        }
        self.decoded_samples.set(total);
        Ok(())
    }

    /// Stops the query once its deadline has passed or it was cancelled; called at every step
    /// of a range query or subquery and for every series a function walks.
    pub(crate) fn check_deadline(&self) -> Result<()> {
        if self.cancel.is_cancelled() {
            return Err(EvalError::Cancelled);
        }
        if std::time::Instant::now() > self.deadline {
            return Err(EvalError::Timeout("expression evaluation"));
        }
        Ok(())
    }

    /// The reference time of a selector evaluated at `t`: `@` replaces `t`, then offset applies.
    fn ref_time(&self, at: &Option<AtModifier>, offset: &Option<Offset>, t: i64) -> i64 {
        let base = match at {
            None => t,
            Some(AtModifier::Start) => self.start,
            Some(AtModifier::End) => self.end,
            Some(AtModifier::At(st)) => system_time_ms(st),
        };
        base.saturating_sub(offset_ms(offset))
    }

    pub(crate) fn eval(&self, e: &Expr, t: i64) -> Result<Value> {
        match e {
            Expr::NumberLiteral(n) => Ok(Value::Scalar(n.val)),
            Expr::StringLiteral(s) => Ok(Value::String(s.val.clone())),
            Expr::Paren(p) => self.eval(&p.expr, t),
            Expr::Unary(u) => match self.eval(&u.expr, t)? {
                Value::Scalar(v) => Ok(Value::Scalar(-v)),
                Value::Vector(vec) => {
                    let out: Vec<Sample> = vec
                        .into_iter()
                        .map(|s| Sample {
                            labels: s.labels.without_name(),
                            v: -s.v,
                        })
                        .collect();
                    check_unique(&out)?;
                    Ok(Value::Vector(out))
                }
                other => exec(format!("unary minus on {}", other.type_name())),
            },
            Expr::VectorSelector(vs) => Ok(Value::Vector(self.instant_selector(vs, t)?)),
            Expr::MatrixSelector(_) | Expr::Subquery(_) => {
                Ok(Value::Matrix(self.eval_range(e, t)?))
            }
            Expr::Call(c) => functions::call(self, c, t),
            Expr::Aggregate(a) => aggregate::aggregate(self, a, t),
            Expr::Binary(b) => binary::binary(self, b, t),
            Expr::Extension(_) => unsupported("extension expressions"),
        }
    }

    pub(crate) fn eval_vector(&self, e: &Expr, t: i64) -> Result<Vec<Sample>> {
        match self.eval(e, t)? {
            Value::Vector(v) => Ok(v),
            other => exec(format!(
                "expected instant vector, got {}",
                other.type_name()
            )),
        }
    }

    pub(crate) fn eval_scalar(&self, e: &Expr, t: i64) -> Result<f64> {
        match self.eval(e, t)? {
            Value::Scalar(v) => Ok(v),
            other => exec(format!("expected scalar, got {}", other.type_name())),
        }
    }

    fn instant_selector(&self, vs: &VectorSelector, t: i64) -> Result<Vec<Sample>> {
        let ids = self.select(vs);
        let rt = self.ref_time(&vs.at, &vs.offset, t);
        let lookback = self.engine.lookback_ms;
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids.iter() {
            let buf = self.samples(id)?;
            let s = buf.samples();
            let i = s.after(rt);
            if i == 0 {
                continue;
            }
            let (ts, v) = (s.ts[i - 1], s.vals[i - 1]);
            if ts <= rt.saturating_sub(lookback) || is_stale(v) {
                continue;
            }
            if is_histogram_placeholder(v) {
                return unsupported("native histogram samples");
            }
            out.push(Sample {
                labels: self.st.series_labels(id).clone(),
                v,
            });
        }
        Ok(out)
    }

    /// Timestamps of the samples an instant selector returns (for `timestamp()`).
    pub(crate) fn instant_selector_timestamps(
        &self,
        vs: &VectorSelector,
        t: i64,
    ) -> Result<Vec<(Labels, i64)>> {
        let ids = self.select(vs);
        let rt = self.ref_time(&vs.at, &vs.offset, t);
        let mut out = Vec::new();
        for &id in ids.iter() {
            let buf = self.samples(id)?;
            let s = buf.samples();
            let i = s.after(rt);
            if i == 0
                || s.ts[i - 1] <= rt.saturating_sub(self.engine.lookback_ms)
                || is_stale(s.vals[i - 1])
            {
                continue;
            }
            out.push((self.st.series_labels(id).clone(), s.ts[i - 1]));
        }
        Ok(out)
    }

    /// Evaluates a range-vector expression (matrix selector or subquery, maybe parenthesised) at
    /// `t`. Also returns the window `(start, end]` it covers, which extrapolating functions need.
    pub(crate) fn eval_range_window(&self, e: &Expr, t: i64) -> Result<(Vec<Series>, i64, i64)> {
        match e {
            Expr::Paren(p) => self.eval_range_window(&p.expr, t),
            Expr::MatrixSelector(ms) => {
                let vs = &ms.vs;
                let ids = self.select(vs);
                let rt = self.ref_time(&vs.at, &vs.offset, t);
                let range = duration_ms(&ms.range);
                let lo = rt.saturating_sub(range);
                let mut out = Vec::with_capacity(ids.len());
                for &id in ids.iter() {
                    let buf = self.samples(id)?;
                    let s = buf.samples();
                    let a = s.after(lo);
                    let b = s.after(rt);
                    if a >= b {
                        continue;
                    }
                    if s.vals[a..b].iter().any(|v| is_histogram_placeholder(*v)) {
                        return unsupported("native histogram samples");
                    }
                    let points: Vec<(i64, f64)> = s.ts[a..b]
                        .iter()
                        .zip(&s.vals[a..b])
                        .filter(|(_, v)| !is_stale(**v))
                        .map(|(t, v)| (*t, *v))
                        .collect();
                    if points.is_empty() {
                        continue;
                    }
                    out.push(Series {
                        labels: self.st.series_labels(id).clone(),
                        points,
                    });
                }
                Ok((out, lo, rt))
            }
            Expr::Subquery(sq) => {
                let rt = self.ref_time(&sq.at, &sq.offset, t);
                let range = duration_ms(&sq.range);
                let step = match &sq.step {
                    Some(d) if !d.is_zero() => duration_ms(d),
                    _ => self.engine.subquery_step_ms,
                }
                .max(1);
                let lo = rt.saturating_sub(range);
                // First step-aligned time strictly after the window start.
                let mut first = Some(step * (lo / step));
                if first.is_some_and(|f| f <= lo) {
                    first = first.and_then(|f| f.checked_add(step));
                }
                let mut out: Vec<Series> = Vec::new();
                let mut index: HashMap<Labels, usize> = HashMap::default();
                let mut next = first;
                while let Some(ts) = next.filter(|ts| *ts <= rt) {
                    self.check_deadline()?;
                    next = ts.checked_add(step);
                    match self.eval(&sq.expr, ts)? {
                        Value::Scalar(v) => {
                            self.count_points(1)?;
                            push_point(&mut out, &mut index, Labels::empty(), ts, v)?
                        }
                        Value::Vector(vec) => {
                            self.count_points(vec.len())?;
                            for s in vec {
                                push_point(&mut out, &mut index, s.labels, ts, s.v)?;
                            }
                        }
                        other => {
                            return exec(format!(
                                "subquery over {} is not allowed",
                                other.type_name()
                            ));
                        }
                    }
                }
                Ok((out, lo, rt))
            }
            other => exec(format!(
                "expected range vector, got {}",
                type_label(other.value_type())
            )),
        }
    }

    pub(crate) fn eval_range(&self, e: &Expr, t: i64) -> Result<Vec<Series>> {
        Ok(self.eval_range_window(e, t)?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::StorageBuilder;

    fn store() -> crate::storage::MemStorage {
        let mut b = StorageBuilder::new();
        for k in 0..100 {
            b.add_sample("m", [("a", "1")], k * 15_000, k as f64);
        }
        b.build()
    }

    #[test]
    fn deadline_and_sample_limit_stop_queries() {
        let st = store();
        let e = parse("rate(m[5m])").unwrap();
        let quick = Engine {
            timeout: std::time::Duration::ZERO,
            ..Engine::default()
        };
        assert_eq!(
            quick.range(&st, &e, 0, 1_000_000, 15_000).unwrap_err(),
            EvalError::Timeout("expression evaluation")
        );
        let small = Engine {
            max_samples: 10,
            ..Engine::default()
        };
        assert_eq!(
            small.instant(&st, &e, 1_000_000).unwrap_err(),
            EvalError::TooManySamples
        );
        assert!(Engine::default().instant(&st, &e, 1_000_000).is_ok());
    }

    #[test]
    fn reach_bounds_decoding_but_at_does_not() {
        let eng = Engine::default();
        let r = |q: &str| reach(&parse(q).unwrap(), &eng);
        assert_eq!(r("m"), Some((DEFAULT_LOOKBACK_MS, 0)));
        assert_eq!(r("rate(m[10m] offset 1m)"), Some((660_000, 0)));
        assert_eq!(r("max_over_time(rate(m[1m])[10m:1m])"), Some((660_000, 0)));
        assert_eq!(r("m offset -1m"), Some((240_000, 60_000)));
        assert_eq!(r("m @ 100"), None);
    }
}
