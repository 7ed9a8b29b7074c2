//! Strategic merge patch (`application/strategic-merge-patch+json`), as the apiserver applies it
//! to the stored object: maps merge recursively, `null` deletes a key, lists merge by their merge
//! key or are replaced whole (per [`super::schema`]), and the directives kubectl sends are honoured:
//! `$patch: replace|delete` (in a map, or as a list item), `$retainKeys`, `$setElementOrder/<list>`
//! and `$deleteFromPrimitiveList/<list>`.
//!
//! Order of merged list items follows apimachinery's rule: items named by the patch come in patch
//! (or `$setElementOrder`) order and items only on the server keep their place relative to them;
//! an item new to the list goes before the server's items unless `$setElementOrder` says otherwise
//! (kubectl always sends that directive when it adds to a list).
//!
//! Where the real merge puts directives into a value that did not exist before and leaves it to
//! the typed decode to drop them, this merges the value into an empty one instead, so the result is
//! what the typed object would hold: no directives, no `null`s.

use serde_json::{Map, Value};

use super::schema::{Ctx, List};
use super::{internal_error, shape_error};
use crate::status::Failure;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_PRIMITIVES: &str = "$deleteFromPrimitiveList/";

/// Applies a decoded strategic merge patch (a JSON object) to `current`.
pub(crate) fn apply(
    current: &Value,
    patch: &Map<String, Value>,
    kind: &str,
) -> Result<Value, Failure> {
    let Value::Object(original) = current else {
        return Err(internal_error("the stored object is not a JSON object"));
    };
    merge_map(original.clone(), patch, Ctx::root(kind))
}

/// Merges `patch` into `original` (mergeMap in apimachinery's strategicpatch).
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    ctx: Ctx,
) -> Result<Value, Failure> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                let mut rest = patch.clone();
                rest.remove(DIRECTIVE);
                merge_map(Map::new(), &rest, ctx)
            }
            // "delete" empties the map; its key stays, as in apimachinery.
            Some("delete") => Ok(Value::Object(Map::new())),
            _ => Err(unknown_directive(directive, patch)),
        };
    }
    if let Some(keys) = patch.get(RETAIN_KEYS) {
        retain_keys(&mut original, keys)?;
    }
    let mut handled: Vec<&str> = Vec::new();
    for (key, order) in patch {
        if let Some(list) = key.strip_prefix(SET_ORDER) {
            set_element_order(&mut original, patch, list, order, ctx)?;
            handled.push(list);
        }
    }
    for (key, value) in patch {
        if key == RETAIN_KEYS
            || key.starts_with(SET_ORDER)
            || key.starts_with(DELETE_PRIMITIVES)
            || handled.contains(&key.as_str())
        {
            continue;
        }
        let (child, list) = ctx.field(key);
        if value.is_null() {
            original.remove(key);
            continue;
        }
        let merged = match (original.remove(key), value) {
            (Some(Value::Object(o)), Value::Object(p)) => merge_map(o, p, child)?,
            (Some(Value::Array(o)), Value::Array(p)) => {
                Value::Array(merge_list(&o, p, list, child)?)
            }
            (_, p) => clean(p, list, child)?,
        };
        original.insert(key.clone(), merged);
    }
    // Deletions from scalar lists run after the merges so a value named in both goes away.
    for (key, values) in patch {
        if let Some(list) = key.strip_prefix(DELETE_PRIMITIVES) {
            delete_primitives(&mut original, list, values)?;
        }
    }
    Ok(Value::Object(original))
}

/// A patch value for a key the original lacks (or holds with another type): merged into nothing,
/// which drops `null`s and directives as the typed decode would.
fn clean(value: &Value, list: List, ctx: Ctx) -> Result<Value, Failure> {
    Ok(match value {
        Value::Object(p) => merge_map(Map::new(), p, ctx)?,
        Value::Array(p) => Value::Array(merge_list(&[], p, list, ctx)?),
        other => other.clone(),
    })
}

/// `$retainKeys: [..]`: keys of the original not listed are dropped before the merge.
fn retain_keys(original: &mut Map<String, Value>, keys: &Value) -> Result<(), Failure> {
    let bad = || Failure::bad_request("invalid patch format of retainKeys");
    let keys = keys.as_array().ok_or_else(bad)?;
    let keep: Vec<&str> = keys
        .iter()
        .map(|k| k.as_str().ok_or_else(bad))
        .collect::<Result<_, _>>()?;
    original.retain(|k, _| keep.contains(&k.as_str()));
    Ok(())
}

/// `$deleteFromPrimitiveList/<list>: [values]`: removes those scalars from the original list.
fn delete_primitives(
    original: &mut Map<String, Value>,
    list: &str,
    values: &Value,
) -> Result<(), Failure> {
    let values = values
        .as_array()
        .ok_or_else(|| Failure::bad_request("invalid patch format of primitive list"))?;
    if let Some(Value::Array(items)) = original.get_mut(list) {
        items.retain(|item| !values.contains(item));
    }
    Ok(())
}

/// Merges one list per its strategy (mergeSlice in apimachinery), then orders it.
fn merge_list(
    original: &[Value],
    patch: &[Value],
    list: List,
    item: Ctx,
) -> Result<Vec<Value>, Failure> {
    match list {
        List::Atomic => patch.iter().map(|v| clean(v, List::Atomic, item)).collect(),
        List::Set => {
            if let Some(bad) = patch.iter().find(|v| v.is_object() || v.is_array()) {
                return Err(shape_error(
                    bad,
                    "a list of scalars holds a structured item",
                ));
            }
            let mut merged: Vec<Value> = Vec::new();
            for v in original.iter().chain(patch) {
                if !merged.contains(v) {
                    merged.push(v.clone());
                }
            }
            Ok(order(merged, patch, original, &|v| Some(v.clone())))
        }
        List::Merge { key, .. } => merge_keyed(original, patch, key, item),
    }
}

/// A list of maps merged by `key`, with `$patch` items (delete one, replace all).
fn merge_keyed(
    original: &[Value],
    patch: &[Value],
    key: &str,
    item: Ctx,
) -> Result<Vec<Value>, Failure> {
    let mut base: Vec<Value> = original.to_vec();
    let mut items: Vec<&Map<String, Value>> = Vec::new();
    let mut replace = false;
    for v in patch {
        let Value::Object(m) = v else {
            return Err(shape_error(
                v,
                &format!("list items must be objects with the merge key {key:?}"),
            ));
        };
        match m.get(DIRECTIVE) {
            None => items.push(m),
            Some(d) => match d.as_str() {
                Some("delete") => {
                    let id = m.get(key).ok_or_else(|| missing_key(m, key))?;
                    base.retain(|o| o.get(key) != Some(id));
                }
                Some("replace") => replace = true,
                Some("merge") => {
                    return Err(internal_error(
                        "merging lists cannot yet be specified in the patch",
                    ));
                }
                _ => return Err(unknown_directive(d, m)),
            },
        }
    }
    if replace {
        base.clear();
    }
    let mut merged = base.clone();
    for m in &items {
        let id = m.get(key).ok_or_else(|| missing_key(m, key))?;
        match merged.iter_mut().find(|o| o.get(key) == Some(id)) {
            Some(slot) => {
                let old = match slot.take() {
                    Value::Object(o) => o,
                    _ => Map::new(),
                };
                *slot = merge_map(old, m, item)?;
            }
            None => merged.push(merge_map(Map::new(), m, item)?),
        }
    }
    let named: Vec<Value> = items.iter().map(|m| Value::Object((*m).clone())).collect();
    Ok(order(merged, &named, &base, &|v| v.get(key).cloned()))
}

/// `$setElementOrder/<list>`: merges that list now and orders it by the directive.
fn set_element_order(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    list: &str,
    order_value: &Value,
    ctx: Ctx,
) -> Result<(), Failure> {
    let order_list = order_value
        .as_array()
        .ok_or_else(|| Failure::bad_request("invalid patch format of setElementOrder list"))?;
    let (item, rule) = ctx.field(list);
    let ident = |v: &Value| identity(rule, v);
    let current = match original.get(list) {
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    let patch_list = match patch.get(list) {
        Some(Value::Array(items)) => Some(items.as_slice()),
        Some(Value::Null) | None => None,
        Some(other) => return Err(shape_error(other, &format!("{list} must be a list"))),
    };
    if let Some(p) = patch_list {
        check_order(p, order_list, &ident)?;
    }
    let merged = match patch_list {
        Some(p) => merge_list(&current, p, rule, item)?,
        None => current.clone(),
    };
    if merged.is_empty() && !original.contains_key(list) {
        return Ok(());
    }
    let ordered = order(merged, order_list, &current, &ident);
    original.insert(list.to_string(), Value::Array(ordered));
    Ok(())
}

/// What identifies an item of a list: its merge key, or the whole value.
fn identity(rule: List, item: &Value) -> Option<Value> {
    match rule {
        List::Merge { key, .. } => item.get(key).cloned(),
        _ => Some(item.clone()),
    }
}

/// The patch list's items (deletions aside) must appear in the `$setElementOrder` list, in the
/// same relative order (validatePatchWithSetOrderList).
fn check_order(
    patch: &[Value],
    order: &[Value],
    ident: &dyn Fn(&Value) -> Option<Value>,
) -> Result<(), Failure> {
    let wanted: Vec<Option<Value>> = patch
        .iter()
        .filter(|v| v.get(DIRECTIVE).is_none())
        .map(ident)
        .collect();
    let mut at = 0;
    for o in order {
        if let Some(w) = wanted.get(at)
            && *w == ident(o)
        {
            at += 1;
        }
    }
    if at < wanted.len() {
        return Err(internal_error(format!(
            "The order in patch list:\n{}\n doesn't match $setElementOrder list:\n{}\n",
            Value::Array(patch.to_vec()),
            Value::Array(order.to_vec())
        )));
    }
    Ok(())
}

/// Orders merged items: those named in `wanted` in that order, the others (server-only) kept in
/// their server order and slotted in where the server order puts them before a named item
/// (normalizeElementOrder + mergeSortedSlice).
fn order(
    merged: Vec<Value>,
    wanted: &[Value],
    server: &[Value],
    ident: &dyn Fn(&Value) -> Option<Value>,
) -> Vec<Value> {
    let wanted_ids: Vec<Option<Value>> = wanted.iter().map(ident).collect();
    let server_ids: Vec<Option<Value>> = server.iter().map(ident).collect();
    let index_in = |ids: &[Option<Value>], v: &Value| {
        let id = ident(v);
        ids.iter().position(|i| *i == id)
    };
    let (mut named, mut server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| index_in(&wanted_ids, v).is_some());
    named.sort_by_key(|v| index_in(&wanted_ids, v));
    server_only.sort_by_key(|v| index_in(&server_ids, v));
    let mut out = Vec::with_capacity(named.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = named.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
            (Some(l), Some(r)) => matches!(
                (index_in(&server_ids, l), index_in(&server_ids, r)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

fn unknown_directive(directive: &Value, map: &Map<String, Value>) -> Failure {
    internal_error(format!(
        "unknown patch type: {} in map: {}",
        directive
            .as_str()
            .map_or_else(|| directive.to_string(), str::to_string),
        Value::Object(map.clone())
    ))
}

fn missing_key(map: &Map<String, Value>, key: &str) -> Failure {
    internal_error(format!(
        "map: {} does not contain declared merge key: {key}",
        Value::Object(map.clone())
    ))
}
