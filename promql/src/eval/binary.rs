//! Binary operators with Prometheus' vector matching.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use promql_parser::parser::token::{
    T_ADD, T_ATAN2, T_DIV, T_EQLC, T_GTE, T_GTR, T_LAND, T_LOR, T_LSS, T_LTE, T_LUNLESS, T_MOD,
    T_MUL, T_NEQ, T_POW, T_SUB, TokenId,
};
use promql_parser::parser::{BinaryExpr, LabelModifier, VectorMatchCardinality};

use super::{Ctx, Result, check_unique, exec, unsupported};
use crate::labels::Labels;
use crate::value::{Sample, Value};

fn is_comparison(op: TokenId) -> bool {
    matches!(op, T_EQLC | T_NEQ | T_GTR | T_LSS | T_GTE | T_LTE)
}

fn arith(op: TokenId, l: f64, r: f64) -> Result<f64> {
    Ok(match op {
        T_ADD => l + r,
        T_SUB => l - r,
        T_MUL => l * r,
        T_DIV => l / r,
        T_MOD => l % r,
        T_POW => l.powf(r),
        T_ATAN2 => l.atan2(r),
        _ => return unsupported(format!("binary operator {op}")),
    })
}

fn compare(op: TokenId, l: f64, r: f64) -> bool {
    match op {
        T_EQLC => l == r,
        T_NEQ => l != r,
        T_GTR => l > r,
        T_LSS => l < r,
        T_GTE => l >= r,
        T_LTE => l <= r,
        _ => false,
    }
}

/// `(value, keep)` as Prometheus' `vectorElemBinop`: comparisons keep the left value.
fn elem(op: TokenId, l: f64, r: f64) -> Result<(f64, bool)> {
    if is_comparison(op) {
        Ok((l, compare(op, l, r)))
    } else {
        Ok((arith(op, l, r)?, true))
    }
}

pub(crate) fn binary(ctx: &Ctx, b: &BinaryExpr, t: i64) -> Result<Value> {
    let op = b.op.id();
    if let Some(m) = &b.modifier
        && (m.fill_values.lhs.is_some() || m.fill_values.rhs.is_some())
    {
        return unsupported("fill modifiers on binary operators");
    }
    let return_bool = b.return_bool();
    let lhs = ctx.eval(&b.lhs, t)?;
    let rhs = ctx.eval(&b.rhs, t)?;
    match (lhs, rhs) {
        (Value::Scalar(l), Value::Scalar(r)) => {
            if is_comparison(op) {
                Ok(Value::Scalar(if compare(op, l, r) { 1.0 } else { 0.0 }))
            } else {
                Ok(Value::Scalar(arith(op, l, r)?))
            }
        }
        (Value::Vector(v), Value::Scalar(s)) => vector_scalar(op, v, s, false, return_bool),
        (Value::Scalar(s), Value::Vector(v)) => vector_scalar(op, v, s, true, return_bool),
        (Value::Vector(l), Value::Vector(r)) => match op {
            T_LAND | T_LOR | T_LUNLESS => Ok(Value::Vector(set_op(op, b, l, r))),
            _ => vector_vector(op, b, l, r, return_bool),
        },
        (l, r) => exec(format!(
            "binary operator between {} and {} is not allowed",
            l.type_name(),
            r.type_name()
        )),
    }
}

fn vector_scalar(
    op: TokenId,
    v: Vec<Sample>,
    s: f64,
    swap: bool,
    return_bool: bool,
) -> Result<Value> {
    let drop_name = !is_comparison(op) || return_bool;
    let mut out = Vec::with_capacity(v.len());
    for mut smp in v {
        let (l, r) = if swap { (s, smp.v) } else { (smp.v, s) };
        let (mut value, mut keep) = elem(op, l, r)?;
        if is_comparison(op) && swap {
            value = r;
        }
        if return_bool {
            value = if keep { 1.0 } else { 0.0 };
            keep = true;
        }
        if keep {
            smp.v = value;
            if drop_name {
                smp.labels = smp.labels.without_name();
            }
            out.push(smp);
        }
    }
    check_unique(&out)?;
    Ok(Value::Vector(out))
}

/// The labels two sides are matched on.
fn signature(labels: &Labels, matching: &Option<LabelModifier>) -> Labels {
    match matching {
        Some(LabelModifier::Include(ls)) => labels.keep(&ls.labels),
        Some(LabelModifier::Exclude(ls)) => labels.drop(&ls.labels, true),
        None => labels.drop(&[], true),
    }
}

fn set_op(op: TokenId, b: &BinaryExpr, l: Vec<Sample>, r: Vec<Sample>) -> Vec<Sample> {
    let matching = b.modifier.as_ref().and_then(|m| m.matching.clone());
    match op {
        T_LAND => {
            let rs: HashSet<Labels> = r.iter().map(|s| signature(&s.labels, &matching)).collect();
            l.into_iter()
                .filter(|s| rs.contains(&signature(&s.labels, &matching)))
                .collect()
        }
        T_LUNLESS => {
            let rs: HashSet<Labels> = r.iter().map(|s| signature(&s.labels, &matching)).collect();
            l.into_iter()
                .filter(|s| !rs.contains(&signature(&s.labels, &matching)))
                .collect()
        }
        _ => {
            let ls: HashSet<Labels> = l.iter().map(|s| signature(&s.labels, &matching)).collect();
            let mut out = l;
            out.extend(
                r.into_iter()
                    .filter(|s| !ls.contains(&signature(&s.labels, &matching))),
            );
            out
        }
    }
}

fn vector_vector(
    op: TokenId,
    b: &BinaryExpr,
    lhs: Vec<Sample>,
    rhs: Vec<Sample>,
    return_bool: bool,
) -> Result<Value> {
    let (card, matching) = match &b.modifier {
        Some(m) => (m.card.clone(), m.matching.clone()),
        None => (VectorMatchCardinality::OneToOne, None),
    };
    let one_to_many = matches!(card, VectorMatchCardinality::OneToMany(_));
    let include: Vec<String> = match &card {
        VectorMatchCardinality::ManyToOne(ls) | VectorMatchCardinality::OneToMany(ls) => {
            ls.labels.clone()
        }
        _ => Vec::new(),
    };
    let is_on = matches!(matching, Some(LabelModifier::Include(_)));
    let matching_labels: Vec<String> = match &matching {
        Some(m) => m.labels().labels.clone(),
        None => Vec::new(),
    };
    // Iterate the "many" side, look up the "one" side.
    let (many, one) = if one_to_many { (rhs, lhs) } else { (lhs, rhs) };
    if many.is_empty() || one.is_empty() {
        return Ok(Value::Vector(Vec::new()));
    }
    let mut one_by_sig: HashMap<Labels, &Sample> =
        HashMap::with_capacity_and_hasher(one.len(), Default::default());
    for s in &one {
        let sig = signature(&s.labels, &matching);
        if let Some(dup) = one_by_sig.get(&sig) {
            let side = if one_to_many { "left" } else { "right" };
            return exec(format!(
                "found duplicate series for the match group {sig} on the {side} hand-side of the operation: [{}, {}];many-to-many matching not allowed: matching labels must be unique on one side",
                dup.labels, s.labels
            ));
        }
        one_by_sig.insert(sig, s);
    }
    let drop_name = !is_comparison(op) || return_bool;
    let mut matched_one_to_one: HashSet<Labels> = HashSet::default();
    let mut inserted: HashMap<Labels, HashSet<Labels>> = HashMap::default();
    let mut out = Vec::new();
    for ms in &many {
        let sig = signature(&ms.labels, &matching);
        let Some(os) = one_by_sig.get(&sig) else {
            continue;
        };
        let one_to_one = matches!(card, VectorMatchCardinality::OneToOne);
        if one_to_one && !matched_one_to_one.insert(sig.clone()) {
            return exec(
                "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)",
            );
        }
        let (fl, fr) = if one_to_many {
            (os.v, ms.v)
        } else {
            (ms.v, os.v)
        };
        let (mut value, keep) = elem(op, fl, fr)?;
        if return_bool {
            value = if keep { 1.0 } else { 0.0 };
        } else if !keep {
            continue;
        }
        // The result carries the "many" side's labels.
        let mut labels = ms.labels.clone();
        if drop_name {
            labels.remove(crate::labels::METRIC_NAME);
        }
        if one_to_one {
            labels = if is_on {
                labels.keep(&matching_labels)
            } else {
                labels.drop(&matching_labels, false)
            };
        }
        for name in &include {
            labels.set(name, os.labels.get(name));
        }
        if !one_to_one {
            let set = inserted.entry(sig).or_default();
            if !set.insert(labels.clone()) {
                return exec(
                    "multiple matches for labels: grouping labels must ensure unique results",
                );
            }
        }
        out.push(Sample { labels, v: value });
    }
    Ok(Value::Vector(out))
}
