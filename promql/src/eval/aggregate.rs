//! Aggregation operators (`sum by (…)`, `topk`, `count_values`, …).

use rustc_hash::FxHashMap as HashMap;

use promql_parser::parser::token::{
    T_AVG, T_BOTTOMK, T_COUNT, T_COUNT_VALUES, T_GROUP, T_LIMIT_RATIO, T_LIMITK, T_MAX, T_MIN,
    T_QUANTILE, T_STDDEV, T_STDVAR, T_SUM, T_TOPK,
};
use promql_parser::parser::{AggregateExpr, LabelModifier};

use super::functions::{kahan_inc, mean, quantile, variance};
use super::{Ctx, Result, exec, unsupported};
use crate::labels::{Labels, is_valid_label_name};
use crate::value::{Sample, Value, format_float};

fn group_key(labels: &Labels, modifier: &Option<LabelModifier>) -> Labels {
    match modifier {
        None => Labels::empty(),
        Some(LabelModifier::Include(ls)) => labels.keep(&ls.labels),
        Some(LabelModifier::Exclude(ls)) => labels.drop(&ls.labels, true),
    }
}

/// Groups samples by key, keeping groups in order of first appearance.
fn group(v: Vec<Sample>, modifier: &Option<LabelModifier>) -> Vec<(Labels, Vec<Sample>)> {
    let mut groups: Vec<(Labels, Vec<Sample>)> = Vec::new();
    let mut index: HashMap<Labels, usize> = HashMap::default();
    for s in v {
        let key = group_key(&s.labels, modifier);
        match index.get(&key) {
            Some(&i) => groups[i].1.push(s),
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key, vec![s]));
            }
        }
    }
    groups
}

/// Heap order of topk: NaN counts as the smallest value.
fn less_topk(a: f64, b: f64) -> bool {
    if a.is_nan() {
        return !b.is_nan();
    }
    a < b
}

/// Heap order of bottomk: NaN counts as the largest value.
fn less_bottomk(a: f64, b: f64) -> bool {
    if a.is_nan() {
        return !b.is_nan();
    }
    a > b
}

fn select_k(samples: Vec<Sample>, k: usize, less: fn(f64, f64) -> bool) -> Vec<Sample> {
    let mut kept: Vec<Sample> = Vec::with_capacity(k.min(samples.len()));
    for s in samples {
        if kept.len() < k {
            kept.push(s);
            continue;
        }
        // Replace the weakest kept element if the new one beats it.
        let mut weakest = 0;
        for (i, x) in kept.iter().enumerate() {
            if less(x.v, kept[weakest].v) {
                weakest = i;
            }
        }
        if less(kept[weakest].v, s.v) {
            kept[weakest] = s;
        }
    }
    // Best first, NaN last (a stable sort keeps input order among equals).
    kept.sort_by(|a, b| {
        if less(b.v, a.v) {
            std::cmp::Ordering::Less
        } else if less(a.v, b.v) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    kept
}

fn k_param(v: f64) -> Result<usize> {
    if v.is_nan() {
        return exec("Parameter value is NaN");
    }
    if v < 1.0 {
        return Ok(0);
    }
    Ok(if v >= usize::MAX as f64 {
        usize::MAX
    } else {
        v as usize
    })
}

pub(crate) fn aggregate(ctx: &Ctx, a: &AggregateExpr, t: i64) -> Result<Value> {
    let op = a.op.id();
    let param = a.param.as_deref();
    let modifier = &a.modifier;
    let mut out: Vec<Sample> = Vec::new();
    match op {
        T_TOPK | T_BOTTOMK | T_LIMITK => {
            let Some(p) = param else {
                return exec("topk/bottomk/limitk need a parameter");
            };
            let k = k_param(ctx.eval_scalar(p, t)?)?;
            let input = ctx.eval_vector(&a.expr, t)?;
            if k == 0 {
                return Ok(Value::Vector(out));
            }
            for (_, samples) in group(input, modifier) {
                if op == T_LIMITK {
                    out.extend(samples.into_iter().take(k));
                } else {
                    let less = if op == T_TOPK {
                        less_topk
                    } else {
                        less_bottomk
                    };
                    out.extend(select_k(samples, k, less));
                }
            }
        }
        T_LIMIT_RATIO => {
            if let Some(p) = param
                && ctx.eval_scalar(p, t)?.is_nan()
            {
                return exec("Ratio value is NaN");
            }
            return unsupported("aggregation limit_ratio");
        }
        T_COUNT_VALUES => {
            let Some(p) = param else {
                return exec("count_values needs a label name");
            };
            let label = match ctx.eval(p, t)? {
                Value::String(s) => s,
                other => {
                    return exec(format!(
                        "count_values expects a string, got {}",
                        other.type_name()
                    ));
                }
            };
            if !is_valid_label_name(&label) {
                return exec(format!("invalid label name {label:?}"));
            }
            let input = ctx.eval_vector(&a.expr, t)?;
            let mut counts: Vec<(Labels, f64)> = Vec::new();
            let mut index: HashMap<Labels, usize> = HashMap::default();
            for s in input {
                let mut key = group_key(&s.labels, modifier);
                key.set(&label, &format_float(s.v));
                match index.get(&key) {
                    Some(&i) => counts[i].1 += 1.0,
                    None => {
                        index.insert(key.clone(), counts.len());
                        counts.push((key, 1.0));
                    }
                }
            }
            out = counts
                .into_iter()
                .map(|(labels, v)| Sample { labels, v })
                .collect();
        }
        _ => {
            let q = match (op, param) {
                (T_QUANTILE, Some(p)) => ctx.eval_scalar(p, t)?,
                (T_QUANTILE, None) => return exec("quantile needs a parameter"),
                _ => 0.0,
            };
            let input = ctx.eval_vector(&a.expr, t)?;
            for (labels, samples) in group(input, modifier) {
                let vals = samples.iter().map(|s| s.v);
                let v = match op {
                    T_SUM => {
                        let (mut s, mut c) = (0.0, 0.0);
                        for x in vals {
                            (s, c) = kahan_inc(x, s, c);
                        }
                        if s.is_infinite() { s } else { s + c }
                    }
                    T_AVG => mean(vals),
                    T_COUNT => samples.len() as f64,
                    T_GROUP => 1.0,
                    T_MIN => vals.fold(f64::NAN, |m, x| if m > x || m.is_nan() { x } else { m }),
                    T_MAX => vals.fold(f64::NAN, |m, x| if m < x || m.is_nan() { x } else { m }),
                    T_STDDEV => variance(vals).sqrt(),
                    T_STDVAR => variance(vals),
                    T_QUANTILE => {
                        let mut v: Vec<f64> = vals.collect();
                        quantile(q, &mut v)
                    }
                    _ => return unsupported(format!("aggregation {}", a.op)),
                };
                out.push(Sample { labels, v });
            }
        }
    }
    Ok(Value::Vector(out))
}
