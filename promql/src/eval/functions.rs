//! PromQL functions.

use chrono::{DateTime, Datelike, Timelike};
use promql_parser::parser::{Call, Expr};

use super::{Ctx, Result, check_unique, exec, unsupported};
use crate::labels::{Labels, METRIC_NAME, is_valid_label_name};
use crate::value::{Sample, Value};

/// Kahan–Neumaier summation step, as Prometheus' `kahanSumInc`.
pub(crate) fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if t.is_infinite() {
        0.0
    } else if sum.abs() >= inc.abs() {
        c + ((sum - t) + inc)
    } else {
        c + ((inc - t) + sum)
    };
    (t, c)
}

/// Go's `math.Max`: NaN wins, +0 > -0.
pub(crate) fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == 0.0 && b == 0.0 {
        if a.is_sign_negative() { b } else { a }
    } else if a > b {
        a
    } else {
        b
    }
}

/// Go's `math.Min`: NaN wins, -0 < +0.
pub(crate) fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == 0.0 && b == 0.0 {
        if a.is_sign_negative() { a } else { b }
    } else if a < b {
        a
    } else {
        b
    }
}

/// Prometheus' `quantile`: linear interpolation between the closest ranks; NaNs sort first.
pub(crate) fn quantile(q: f64, values: &mut [f64]) -> f64 {
    if values.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    values.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal),
    });
    let n = values.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    values[lower as usize] * (1.0 - weight) + values[upper as usize] * weight
}

/// Mean with Kahan summation, switching to an incremental mean if the sum would overflow
/// (Prometheus' `avg_over_time`).
pub(crate) fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let mut it = values;
    let Some(first) = it.next() else {
        return f64::NAN;
    };
    let (mut sum, mut count, mut m, mut c) = (first, 1.0f64, 0.0f64, 0.0f64);
    let mut incremental = false;
    for f in it {
        count += 1.0;
        if !incremental {
            let (ns, nc) = kahan_inc(f, sum, c);
            if !ns.is_infinite() {
                sum = ns;
                c = nc;
                continue;
            }
            incremental = true;
            m = sum / (count - 1.0);
            c /= count - 1.0;
        }
        let q = (count - 1.0) / count;
        (m, c) = kahan_inc(f / count, q * m, q * c);
    }
    if incremental {
        m + c
    } else {
        sum / count + c / count
    }
}

/// Population variance (Welford with Kahan compensation, as Prometheus).
pub(crate) fn variance(values: impl Iterator<Item = f64>) -> f64 {
    let (mut count, mut m, mut cm, mut aux, mut caux) = (0.0f64, 0.0, 0.0, 0.0, 0.0);
    for f in values {
        count += 1.0;
        let delta = f - (m + cm);
        (m, cm) = kahan_inc(delta / count, m, cm);
        (aux, caux) = kahan_inc(delta * (f - (m + cm)), aux, caux);
    }
    (aux + caux) / count
}

fn arg(c: &Call, i: usize) -> Result<&Expr> {
    match c.args.args.get(i) {
        Some(e) => Ok(e),
        None => exec(format!("function {} expects more arguments", c.func.name)),
    }
}

fn string_arg(ctx: &Ctx, c: &Call, i: usize, t: i64) -> Result<String> {
    match ctx.eval(arg(c, i)?, t)? {
        Value::String(s) => Ok(s),
        other => exec(format!(
            "function {} expects a string as argument {}, got {}",
            c.func.name,
            i + 1,
            other.type_name()
        )),
    }
}

/// Applies `f` to every element; the metric name is dropped.
fn map_values(ctx: &Ctx, c: &Call, t: i64, f: impl Fn(f64) -> f64) -> Result<Value> {
    let v = ctx.eval_vector(arg(c, 0)?, t)?;
    let out: Vec<Sample> = v
        .into_iter()
        .map(|s| Sample {
            labels: s.labels.without_name(),
            v: f(s.v),
        })
        .collect();
    check_unique(&out)?;
    Ok(Value::Vector(out))
}

/// Applies `f` to the points of every series of a range vector argument; `f` gets the points,
/// the window `(lo, hi]` and returns `None` to emit nothing for that series.
fn over_range(
    ctx: &Ctx,
    c: &Call,
    range_arg: usize,
    t: i64,
    keep_name: bool,
    f: impl Fn(&[(i64, f64)], i64, i64) -> Option<f64>,
) -> Result<Value> {
    let (series, lo, hi) = ctx.eval_range_window(arg(c, range_arg)?, t)?;
    let mut out = Vec::with_capacity(series.len());
    for s in series {
        if let Some(v) = f(&s.points, lo, hi) {
            let labels = if keep_name {
                s.labels
            } else {
                s.labels.without_name()
            };
            out.push(Sample { labels, v });
        }
    }
    check_unique(&out)?;
    Ok(Value::Vector(out))
}

/// `rate`, `increase` and `delta` with Prometheus' extrapolation to the window edges.
fn extrapolated_rate(
    pts: &[(i64, f64)],
    lo: i64,
    hi: i64,
    is_counter: bool,
    is_rate: bool,
) -> Option<f64> {
    if pts.len() < 2 {
        return None;
    }
    let (first, last) = (pts[0], pts[pts.len() - 1]);
    let mut result = last.1 - first.1;
    if is_counter {
        let mut prev = first.1;
        for p in &pts[1..] {
            if p.1 < prev {
                result += prev;
            }
            prev = p.1;
        }
    }
    let mut to_start = (first.0 - lo) as f64 / 1000.0;
    let mut to_end = (hi - last.0) as f64 / 1000.0;
    let sampled = (last.0 - first.0) as f64 / 1000.0;
    let avg_gap = sampled / (pts.len() - 1) as f64;
    let threshold = avg_gap * 1.1;
    if to_start >= threshold {
        to_start = avg_gap / 2.0;
    }
    if is_counter {
        // A counter cannot go below zero: don't extrapolate past the point where it would.
        let mut to_zero = to_start;
        if result > 0.0 && first.1 >= 0.0 {
            to_zero = sampled * (first.1 / result);
        }
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    if to_end >= threshold {
        to_end = avg_gap / 2.0;
    }
    let mut factor = (sampled + to_start + to_end) / sampled;
    if is_rate {
        factor /= (hi - lo) as f64 / 1000.0;
    }
    Some(result * factor)
}

fn instant_value(pts: &[(i64, f64)], is_rate: bool) -> Option<f64> {
    if pts.len() < 2 {
        return None;
    }
    let (prev, last) = (pts[pts.len() - 2], pts[pts.len() - 1]);
    let mut v = if is_rate && last.1 < prev.1 {
        last.1
    } else {
        last.1 - prev.1
    };
    let dt = last.0 - prev.0;
    if dt == 0 {
        return None;
    }
    if is_rate {
        v /= dt as f64 / 1000.0;
    }
    Some(v)
}

/// Least-squares fit of value over seconds since `intercept_t`: (slope, intercept).
fn linear_regression(pts: &[(i64, f64)], intercept_t: i64) -> (f64, f64) {
    let init = pts[0].1;
    let mut const_y = true;
    let (mut n, mut sx, mut cx, mut sy, mut cy, mut sxy, mut cxy, mut sx2, mut cx2) =
        (0.0f64, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for (i, &(t, v)) in pts.iter().enumerate() {
        if const_y && i > 0 && v != init {
            const_y = false;
        }
        n += 1.0;
        let x = t.saturating_sub(intercept_t) as f64 / 1e3;
        (sx, cx) = kahan_inc(x, sx, cx);
        (sy, cy) = kahan_inc(v, sy, cy);
        (sxy, cxy) = kahan_inc(x * v, sxy, cxy);
        (sx2, cx2) = kahan_inc(x * x, sx2, cx2);
    }
    if const_y {
        if init.is_infinite() {
            return (f64::NAN, f64::NAN);
        }
        return (0.0, init);
    }
    sx += cx;
    sy += cy;
    sxy += cxy;
    sx2 += cx2;
    let cov = sxy - sx * sy / n;
    let var = sx2 - sx * sx / n;
    let slope = cov / var;
    (slope, sy / n - slope * sx / n)
}

fn double_exponential_smoothing(pts: &[(i64, f64)], sf: f64, tf: f64) -> Option<f64> {
    if pts.len() < 2 {
        return None;
    }
    let (mut s0, mut s1) = (0.0, pts[0].1);
    let mut b = pts[1].1 - pts[0].1;
    for (i, p) in pts.iter().enumerate().skip(1) {
        let x = sf * p.1;
        if i > 1 {
            b = tf * (s1 - s0) + (1.0 - tf) * b;
        }
        let y = (1.0 - sf) * (s1 + b);
        s0 = s1;
        s1 = x + y;
    }
    Some(s1)
}

/// Labels `absent()` gives its output: the selector's equality matchers (a label constrained
/// twice is left out).
fn absent_labels(e: &Expr) -> Labels {
    let vs = match e {
        Expr::VectorSelector(vs) => vs,
        Expr::MatrixSelector(ms) => &ms.vs,
        Expr::Paren(p) => return absent_labels(&p.expr),
        _ => return Labels::empty(),
    };
    let ms = &vs.matchers.matchers;
    let mut l = Labels::empty();
    for m in ms {
        let constrained_once = ms.iter().filter(|x| x.name == m.name).count() == 1;
        if m.name != METRIC_NAME
            && constrained_once
            && matches!(m.op, promql_parser::label::MatchOp::Equal)
        {
            l.set(&m.name, &m.value);
        }
    }
    l
}

fn date_fn(ctx: &Ctx, c: &Call, t: i64, f: impl Fn(DateTime<chrono::Utc>) -> f64) -> Result<Value> {
    let apply = |secs: f64| -> f64 {
        if !secs.is_finite() {
            return f64::NAN;
        }
        match DateTime::from_timestamp(secs.floor() as i64, 0) {
            Some(d) => f(d),
            None => f64::NAN,
        }
    };
    if c.args.args.is_empty() {
        return Ok(Value::Vector(vec![Sample {
            labels: Labels::empty(),
            v: apply(t as f64 / 1000.0),
        }]));
    }
    map_values(ctx, c, t, apply)
}

fn days_in_month(d: DateTime<chrono::Utc>) -> f64 {
    let (y, m) = (d.year(), d.month());
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    let first = chrono::NaiveDate::from_ymd_opt(y, m, 1);
    let next = chrono::NaiveDate::from_ymd_opt(ny, nm, 1);
    match (first, next) {
        (Some(a), Some(b)) => (b - a).num_days() as f64,
        _ => f64::NAN,
    }
}

pub(crate) fn call(ctx: &Ctx, c: &Call, t: i64) -> Result<Value> {
    let name = c.func.name;
    match name {
        "abs" => map_values(ctx, c, t, f64::abs),
        "ceil" => map_values(ctx, c, t, f64::ceil),
        "floor" => map_values(ctx, c, t, f64::floor),
        "exp" => map_values(ctx, c, t, f64::exp),
        "sqrt" => map_values(ctx, c, t, f64::sqrt),
        "ln" => map_values(ctx, c, t, f64::ln),
        "log2" => map_values(ctx, c, t, f64::log2),
        "log10" => map_values(ctx, c, t, f64::log10),
        "sin" => map_values(ctx, c, t, f64::sin),
        "cos" => map_values(ctx, c, t, f64::cos),
        "tan" => map_values(ctx, c, t, f64::tan),
        "asin" => map_values(ctx, c, t, f64::asin),
        "acos" => map_values(ctx, c, t, f64::acos),
        "atan" => map_values(ctx, c, t, f64::atan),
        "sinh" => map_values(ctx, c, t, f64::sinh),
        "cosh" => map_values(ctx, c, t, f64::cosh),
        "tanh" => map_values(ctx, c, t, f64::tanh),
        "asinh" => map_values(ctx, c, t, f64::asinh),
        "acosh" => map_values(ctx, c, t, f64::acosh),
        "atanh" => map_values(ctx, c, t, f64::atanh),
        "deg" => map_values(ctx, c, t, |v| v * 180.0 / std::f64::consts::PI),
        "rad" => map_values(ctx, c, t, |v| v * std::f64::consts::PI / 180.0),
        "sgn" => map_values(ctx, c, t, |v| {
            if v < 0.0 {
                -1.0
            } else if v > 0.0 {
                1.0
            } else {
                v
            }
        }),
        "pi" => Ok(Value::Scalar(std::f64::consts::PI)),
        "start" => Ok(Value::Scalar(ctx.start as f64 / 1000.0)),
        "end" => Ok(Value::Scalar(ctx.end as f64 / 1000.0)),
        "range" => Ok(Value::Scalar((ctx.end - ctx.start) as f64 / 1000.0)),
        "step" => Ok(Value::Scalar(ctx.step as f64 / 1000.0)),
        "min_of" | "max_of" => {
            let a = ctx.eval_scalar(arg(c, 0)?, t)?;
            let b = ctx.eval_scalar(arg(c, 1)?, t)?;
            Ok(Value::Scalar(if name == "min_of" {
                go_min(a, b)
            } else {
                go_max(a, b)
            }))
        }
        "time" => Ok(Value::Scalar(t as f64 / 1000.0)),
        "round" => {
            let to = match c.args.args.get(1) {
                Some(e) => ctx.eval_scalar(e, t)?,
                None => 1.0,
            };
            let inv = 1.0 / to;
            map_values(ctx, c, t, |v| (v * inv + 0.5).floor() / inv)
        }
        "clamp" => {
            let lo = ctx.eval_scalar(arg(c, 1)?, t)?;
            let hi = ctx.eval_scalar(arg(c, 2)?, t)?;
            if hi < lo {
                return Ok(Value::Vector(Vec::new()));
            }
            map_values(ctx, c, t, |v| go_max(lo, go_min(hi, v)))
        }
        "clamp_min" => {
            let lo = ctx.eval_scalar(arg(c, 1)?, t)?;
            map_values(ctx, c, t, |v| go_max(lo, v))
        }
        "clamp_max" => {
            let hi = ctx.eval_scalar(arg(c, 1)?, t)?;
            map_values(ctx, c, t, |v| go_min(hi, v))
        }
        "vector" => {
            let v = ctx.eval_scalar(arg(c, 0)?, t)?;
            Ok(Value::Vector(vec![Sample {
                labels: Labels::empty(),
                v,
            }]))
        }
        "scalar" => {
            let v = ctx.eval_vector(arg(c, 0)?, t)?;
            Ok(Value::Scalar(if v.len() == 1 { v[0].v } else { f64::NAN }))
        }
        "timestamp" => {
            let mut inner = arg(c, 0)?;
            while let Expr::Paren(p) = inner {
                inner = &p.expr;
            }
            let out: Vec<Sample> = if let Expr::VectorSelector(vs) = inner {
                ctx.instant_selector_timestamps(vs, t)?
                    .into_iter()
                    .map(|(l, ts)| Sample {
                        labels: l.without_name(),
                        v: ts as f64 / 1000.0,
                    })
                    .collect()
            } else {
                ctx.eval_vector(inner, t)?
                    .into_iter()
                    .map(|s| Sample {
                        labels: s.labels.without_name(),
                        v: t as f64 / 1000.0,
                    })
                    .collect()
            };
            check_unique(&out)?;
            Ok(Value::Vector(out))
        }
        "sort" | "sort_desc" => {
            let mut v = ctx.eval_vector(arg(c, 0)?, t)?;
            let desc = name == "sort_desc";
            v.sort_by(|a, b| match (a.v.is_nan(), b.v.is_nan()) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                _ if desc => b.v.partial_cmp(&a.v).unwrap_or(std::cmp::Ordering::Equal),
                _ => a.v.partial_cmp(&b.v).unwrap_or(std::cmp::Ordering::Equal),
            });
            Ok(Value::Vector(v))
        }
        "sort_by_label" | "sort_by_label_desc" => {
            let mut v = ctx.eval_vector(arg(c, 0)?, t)?;
            let mut names = Vec::new();
            for i in 1..c.args.len() {
                names.push(string_arg(ctx, c, i, t)?);
            }
            let desc = name == "sort_by_label_desc";
            v.sort_by(|a, b| {
                let mut ord = std::cmp::Ordering::Equal;
                for n in &names {
                    ord = natural_cmp(a.labels.get(n), b.labels.get(n));
                    if ord.is_ne() {
                        break;
                    }
                }
                let ord = ord.then_with(|| a.labels.cmp(&b.labels));
                if desc { ord.reverse() } else { ord }
            });
            Ok(Value::Vector(v))
        }
        "label_replace" => label_replace(ctx, c, t),
        "label_join" => label_join(ctx, c, t),
        "absent" => {
            let v = ctx.eval_vector(arg(c, 0)?, t)?;
            if !v.is_empty() {
                return Ok(Value::Vector(Vec::new()));
            }
            Ok(Value::Vector(vec![Sample {
                labels: absent_labels(arg(c, 0)?),
                v: 1.0,
            }]))
        }
        "absent_over_time" => {
            let s = ctx.eval_range(arg(c, 0)?, t)?;
            if !s.is_empty() {
                return Ok(Value::Vector(Vec::new()));
            }
            Ok(Value::Vector(vec![Sample {
                labels: absent_labels(arg(c, 0)?),
                v: 1.0,
            }]))
        }
        "histogram_quantile" => {
            let q = ctx.eval_scalar(arg(c, 0)?, t)?;
            let v = ctx.eval_vector(arg(c, 1)?, t)?;
            histogram_quantile(q, v)
        }
        // These read native histograms only; float samples (all this store holds) yield nothing.
        "histogram_count" | "histogram_sum" | "histogram_avg" | "histogram_stddev"
        | "histogram_stdvar" => {
            ctx.eval_vector(arg(c, 0)?, t)?;
            Ok(Value::Vector(Vec::new()))
        }
        "histogram_fraction" => {
            ctx.eval_vector(arg(c, 2)?, t)?;
            Ok(Value::Vector(Vec::new()))
        }
        "day_of_month" => date_fn(ctx, c, t, |d| d.day() as f64),
        "day_of_week" => date_fn(ctx, c, t, |d| d.weekday().num_days_from_sunday() as f64),
        "day_of_year" => date_fn(ctx, c, t, |d| d.ordinal() as f64),
        "days_in_month" => date_fn(ctx, c, t, days_in_month),
        "hour" => date_fn(ctx, c, t, |d| d.hour() as f64),
        "minute" => date_fn(ctx, c, t, |d| d.minute() as f64),
        "month" => date_fn(ctx, c, t, |d| d.month() as f64),
        "year" => date_fn(ctx, c, t, |d| d.year() as f64),
        "rate" => over_range(ctx, c, 0, t, false, |p, lo, hi| {
            extrapolated_rate(p, lo, hi, true, true)
        }),
        "increase" => over_range(ctx, c, 0, t, false, |p, lo, hi| {
            extrapolated_rate(p, lo, hi, true, false)
        }),
        "delta" => over_range(ctx, c, 0, t, false, |p, lo, hi| {
            extrapolated_rate(p, lo, hi, false, false)
        }),
        "irate" => over_range(ctx, c, 0, t, false, |p, _, _| instant_value(p, true)),
        "idelta" => over_range(ctx, c, 0, t, false, |p, _, _| instant_value(p, false)),
        "deriv" => over_range(ctx, c, 0, t, false, |p, _, _| {
            (p.len() >= 2).then(|| linear_regression(p, p[0].0).0)
        }),
        "predict_linear" => {
            let secs = ctx.eval_scalar(arg(c, 1)?, t)?;
            over_range(ctx, c, 0, t, false, |p, _, _| {
                (p.len() >= 2).then(|| {
                    let (slope, intercept) = linear_regression(p, t);
                    slope * secs + intercept
                })
            })
        }
        "resets" => over_range(ctx, c, 0, t, false, |p, _, _| {
            Some(p.windows(2).filter(|w| w[1].1 < w[0].1).count() as f64)
        }),
        "changes" => over_range(ctx, c, 0, t, false, |p, _, _| {
            Some(
                p.windows(2)
                    .filter(|w| w[1].1 != w[0].1 && !(w[1].1.is_nan() && w[0].1.is_nan()))
                    .count() as f64,
            )
        }),
        "avg_over_time" => over_range(ctx, c, 0, t, false, |p, _, _| {
            Some(mean(p.iter().map(|x| x.1)))
        }),
        "sum_over_time" => over_range(ctx, c, 0, t, false, |p, _, _| {
            let (mut s, mut k) = (0.0, 0.0);
            for x in p {
                (s, k) = kahan_inc(x.1, s, k);
            }
            Some(if s.is_infinite() { s } else { s + k })
        }),
        "count_over_time" => over_range(ctx, c, 0, t, false, |p, _, _| Some(p.len() as f64)),
        "min_over_time" => over_range(ctx, c, 0, t, false, |p, _, _| {
            let mut m = p[0].1;
            for x in p {
                if x.1 < m || m.is_nan() {
                    m = x.1;
                }
            }
            Some(m)
        }),
        "max_over_time" => over_range(ctx, c, 0, t, false, |p, _, _| {
            let mut m = p[0].1;
            for x in p {
                if x.1 > m || m.is_nan() {
                    m = x.1;
                }
            }
            Some(m)
        }),
        "last_over_time" => over_range(ctx, c, 0, t, true, |p, _, _| p.last().map(|x| x.1)),
        "first_over_time" => over_range(ctx, c, 0, t, true, |p, _, _| p.first().map(|x| x.1)),
        "ts_of_last_over_time" => over_range(ctx, c, 0, t, false, |p, _, _| {
            p.last().map(|x| x.0 as f64 / 1000.0)
        }),
        "ts_of_first_over_time" => over_range(ctx, c, 0, t, false, |p, _, _| {
            p.first().map(|x| x.0 as f64 / 1000.0)
        }),
        "ts_of_max_over_time" | "ts_of_min_over_time" => {
            let want_max = name == "ts_of_max_over_time";
            over_range(ctx, c, 0, t, false, |p, _, _| {
                let mut best = p[0];
                for &x in p {
                    let better = if want_max {
                        x.1 >= best.1
                    } else {
                        x.1 <= best.1
                    };
                    if better || best.1.is_nan() {
                        best = x;
                    }
                }
                Some(best.0 as f64 / 1000.0)
            })
        }
        "present_over_time" => over_range(ctx, c, 0, t, false, |_, _, _| Some(1.0)),
        "stddev_over_time" => over_range(ctx, c, 0, t, false, |p, _, _| {
            Some(variance(p.iter().map(|x| x.1)).sqrt())
        }),
        "stdvar_over_time" => over_range(ctx, c, 0, t, false, |p, _, _| {
            Some(variance(p.iter().map(|x| x.1)))
        }),
        "mad_over_time" => over_range(ctx, c, 0, t, false, |p, _, _| {
            let mut vals: Vec<f64> = p.iter().map(|x| x.1).collect();
            if vals.iter().any(|v| v.is_nan()) {
                return Some(f64::NAN);
            }
            let med = quantile(0.5, &mut vals);
            let mut dev: Vec<f64> = vals.iter().map(|v| (v - med).abs()).collect();
            Some(quantile(0.5, &mut dev))
        }),
        "quantile_over_time" => {
            let q = ctx.eval_scalar(arg(c, 0)?, t)?;
            over_range(ctx, c, 1, t, false, |p, _, _| {
                let mut vals: Vec<f64> = p.iter().map(|x| x.1).collect();
                Some(quantile(q, &mut vals))
            })
        }
        "double_exponential_smoothing" | "holt_winters" => {
            let sf = ctx.eval_scalar(arg(c, 1)?, t)?;
            let tf = ctx.eval_scalar(arg(c, 2)?, t)?;
            if sf <= 0.0 || sf >= 1.0 {
                return exec(format!(
                    "invalid smoothing factor. Expected: 0 < sf < 1, got: {sf}"
                ));
            }
            if tf <= 0.0 || tf >= 1.0 {
                return exec(format!(
                    "invalid trend factor. Expected: 0 < tf < 1, got: {tf}"
                ));
            }
            over_range(ctx, c, 0, t, false, |p, _, _| {
                double_exponential_smoothing(p, sf, tf)
            })
        }
        other => unsupported(format!("function {other}()")),
    }
}

/// Natural order: runs of digits compare by number ("4m5" < "4m1000").
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < ab.len() && j < bb.len() {
        if ab[i].is_ascii_digit() && bb[j].is_ascii_digit() {
            let si = i;
            while i < ab.len() && ab[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < bb.len() && bb[j].is_ascii_digit() {
                j += 1;
            }
            let x = a[si..i].trim_start_matches('0');
            let y = b[sj..j].trim_start_matches('0');
            let ord = x.len().cmp(&y.len()).then_with(|| x.cmp(y));
            if ord != Ordering::Equal {
                return ord;
            }
        } else {
            if ab[i] != bb[j] {
                return ab[i].cmp(&bb[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (ab.len() - i).cmp(&(bb.len() - j))
}

fn label_replace(ctx: &Ctx, c: &Call, t: i64) -> Result<Value> {
    let dst = string_arg(ctx, c, 1, t)?;
    let repl = string_arg(ctx, c, 2, t)?;
    let src = string_arg(ctx, c, 3, t)?;
    let pattern = string_arg(ctx, c, 4, t)?;
    let re = ctx.anchored_regex(&pattern).or_else(|e| {
        exec(format!(
            "invalid regular expression in label_replace(): {pattern}: {e}"
        ))
    })?;
    if !is_valid_label_name(&dst) {
        return exec(format!(
            "invalid destination label name in label_replace(): {dst}"
        ));
    }
    let v = ctx.eval_vector(arg(c, 0)?, t)?;
    let mut out = Vec::with_capacity(v.len());
    for mut s in v {
        if let Some(caps) = re.captures(s.labels.get(&src)) {
            let mut res = String::new();
            caps.expand(&repl, &mut res);
            s.labels.set(&dst, &res);
        }
        out.push(s);
    }
    check_unique(&out)?;
    Ok(Value::Vector(out))
}

fn label_join(ctx: &Ctx, c: &Call, t: i64) -> Result<Value> {
    let dst = string_arg(ctx, c, 1, t)?;
    let sep = string_arg(ctx, c, 2, t)?;
    let mut srcs = Vec::new();
    for i in 3..c.args.len() {
        let s = string_arg(ctx, c, i, t)?;
        if !is_valid_label_name(&s) {
            return exec(format!("invalid source label name in label_join(): {s}"));
        }
        srcs.push(s);
    }
    if !is_valid_label_name(&dst) {
        return exec(format!(
            "invalid destination label name in label_join(): {dst}"
        ));
    }
    let v = ctx.eval_vector(arg(c, 0)?, t)?;
    let mut out = Vec::with_capacity(v.len());
    for mut s in v {
        let joined: Vec<&str> = srcs.iter().map(|n| s.labels.get(n)).collect();
        let joined = joined.join(&sep);
        s.labels.set(&dst, &joined);
        out.push(s);
    }
    check_unique(&out)?;
    Ok(Value::Vector(out))
}

/// Classic-bucket `histogram_quantile` (Prometheus' `BucketQuantile`).
fn histogram_quantile(q: f64, v: Vec<Sample>) -> Result<Value> {
    let mut groups: Vec<(Labels, Vec<(f64, f64)>)> = Vec::new();
    let mut index: rustc_hash::FxHashMap<Labels, usize> = Default::default();
    for s in v {
        let Ok(le) = s
            .labels
            .get("le")
            .parse::<f64>()
            .or_else(|_| parse_go_float(s.labels.get("le")))
        else {
            continue;
        };
        let key = s.labels.drop(&["le".to_string()], true);
        let i = *index.entry(key.clone()).or_insert_with(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push((le, s.v));
    }
    let out = groups
        .into_iter()
        .map(|(labels, mut buckets)| Sample {
            labels,
            v: bucket_quantile(q, &mut buckets),
        })
        .collect();
    Ok(Value::Vector(out))
}

/// Parses the float spellings Go accepts and Rust doesn't (`+Inf`, `Inf`, `-inf`...).
pub(crate) fn parse_go_float(s: &str) -> std::result::Result<f64, ()> {
    let l = s.trim().to_ascii_lowercase();
    match l.as_str() {
        "+inf" | "inf" | "+infinity" | "infinity" => Ok(f64::INFINITY),
        "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
        "nan" => Ok(f64::NAN),
        _ => l.parse::<f64>().map_err(|_| ()),
    }
}

fn bucket_quantile(q: f64, buckets: &mut [(f64, f64)]) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    buckets.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    if buckets.last().is_none_or(|b| b.0 != f64::INFINITY) {
        return f64::NAN;
    }
    // Merge buckets with the same upper bound.
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(buckets.len());
    for &(ub, c) in buckets.iter() {
        match merged.last_mut() {
            Some(last) if last.0 == ub => last.1 += c,
            _ => merged.push((ub, c)),
        }
    }
    // Force monotonic counts, ignoring tiny float noise.
    let mut prev = merged[0].1;
    for b in merged.iter_mut().skip(1) {
        let cur = b.1;
        if cur == prev {
            continue;
        }
        if almost_equal(prev, cur, 1e-12) || cur < prev {
            b.1 = prev;
            continue;
        }
        prev = cur;
    }
    if merged.len() < 2 {
        return f64::NAN;
    }
    let observations = merged[merged.len() - 1].1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let last = merged.len() - 1;
    let b = merged[..last].partition_point(|x| x.1 < rank);
    if b == last {
        return merged[last - 1].0;
    }
    if b == 0 && merged[0].0 <= 0.0 {
        return merged[0].0;
    }
    let mut start = 0.0;
    let end = merged[b].0;
    let mut count = merged[b].1;
    if b > 0 {
        start = merged[b - 1].0;
        count -= merged[b - 1].1;
        rank -= merged[b - 1].1;
    }
    start + (end - start) * (rank / count)
}

/// Prometheus' `almost.Equal`: equal, or relative difference within `eps`.
pub(crate) fn almost_equal(a: f64, b: f64, eps: f64) -> bool {
    const MIN_NORMAL: f64 = f64::MIN_POSITIVE;
    if a == b {
        return true;
    }
    let diff = (a - b).abs();
    if a == 0.0 || b == 0.0 || (a.abs() + b.abs()) < MIN_NORMAL {
        return diff < eps * MIN_NORMAL;
    }
    diff / (a.abs() + b.abs()) < eps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_extrapolates_to_window_edges() {
        // 4 samples 15s apart, counter +10 each, window (0, 60s]: last sample at 55s.
        let pts = [
            (10_000, 10.0),
            (25_000, 20.0),
            (40_000, 30.0),
            (55_000, 40.0),
        ];
        let r = extrapolated_rate(&pts, 0, 60_000, true, false).unwrap();
        // sampled 45s, to_start 10s (< 16.5 threshold) but zero point at 45*(10/30)=15s -> 10s,
        // to_end 5s: 30 * (45+10+5)/45 = 40.
        assert!((r - 40.0).abs() < 1e-9, "{r}");
        assert!(extrapolated_rate(&pts[..1], 0, 60_000, true, true).is_none());
    }

    #[test]
    fn counter_resets_add_previous_value() {
        let pts = [(0, 5.0), (10_000, 8.0), (20_000, 2.0), (30_000, 4.0)];
        let r = extrapolated_rate(&pts, 0, 30_000, true, false).unwrap();
        // raw increase 4-5 + 8 = 7 over 30s sampled; to_start 0, to_end 0.
        assert!((r - 7.0).abs() < 1e-9, "{r}");
    }

    #[test]
    fn bucket_quantile_interpolates() {
        let mut b = vec![(0.1, 10.0), (0.5, 20.0), (f64::INFINITY, 20.0)];
        assert!((bucket_quantile(0.5, &mut b) - 0.1).abs() < 1e-12);
        let mut b = vec![(0.1, 10.0), (0.5, 20.0), (f64::INFINITY, 20.0)];
        assert!((bucket_quantile(0.75, &mut b) - 0.3).abs() < 1e-12);
        let mut b = vec![(0.1, 10.0)];
        assert!(bucket_quantile(0.5, &mut b).is_nan());
    }

    #[test]
    fn quantile_and_go_minmax() {
        let mut v = vec![4.0, 1.0, 3.0, 2.0];
        assert_eq!(quantile(0.5, &mut v), 2.5);
        assert!(go_max(1.0, f64::NAN).is_nan());
        assert_eq!(go_min(1.0, 2.0), 1.0);
    }
}
