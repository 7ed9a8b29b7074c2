//! Field ownership: server-side apply ([`apply`]) and the bookkeeping of every other write
//! ([`record_update`]). Both read the object's `metadata.managedFields` into entries (manager,
//! operation, apiVersion, subresource, time, field set), change the sets, and write them back.
//!
//! Apply merges the configuration into the live object (maps by field, list-maps by their key
//! fields, sets by value, everything else replaced), refuses with 409 when that changes a field
//! another manager owns (unless forced, which takes the field), and removes fields this manager
//! applied before, omits now and nobody else owns. An update gives its manager the fields it
//! changed and takes them from everyone else. Status is tracked apart from the main resource
//! (writes to `/status` own only `status`, `/scale` only `spec.replicas`), as the apiserver
//! resets status on main-resource writes.
//!
//! Not modelled: apply bodies in YAML (the caller decodes the body; kubectl sends JSON), the
//! apiVersion conversion of field sets between versions, and defaulting beyond a port's
//! `protocol`. New list-map items are appended after the live ones.

use serde_json::{Map, Value, json};

use super::fields::{self, Diff, Element, FieldSet, Mode, Path};
use super::schema::{Ctx, List};
use super::{check_identity, shape_error};
use crate::status::{Cause, Failure};

/// The longest field manager name the apiserver keeps (`FieldManagerMaxLength`).
const MANAGER_MAX_LEN: usize = 128;

/// One `managedFields` entry.
#[derive(Clone, Debug)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    /// How conflicts name a manager (`printManager`): Update managers with their apiVersion.
    fn label(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn to_json(&self) -> Value {
        let mut e = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.fields.to_json(),
        });
        if let (Some(sub), Some(obj)) = (&self.subresource, e.as_object_mut()) {
            obj.insert("subresource".into(), Value::String(sub.clone()));
        }
        e
    }
}

/// Reads entries leniently: whatever a client stored, a malformed entry is skipped rather than
/// failing later writes.
fn read_entries(managed: Option<&Value>) -> Vec<Entry> {
    let Some(Value::Array(list)) = managed else {
        return Vec::new();
    };
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
    list.iter()
        .filter_map(|e| {
            Some(Entry {
                manager: text(e, "manager")?,
                operation: text(e, "operation").unwrap_or_else(|| "Update".into()),
                api_version: text(e, "apiVersion").unwrap_or_default(),
                time: text(e, "time").unwrap_or_default(),
                subresource: text(e, "subresource").filter(|s| !s.is_empty()),
                fields: FieldSet::from_json(e.get("fieldsV1").unwrap_or(&Value::Null)),
            })
        })
        .collect()
}

/// Writes non-empty entries to `metadata.managedFields` (the key goes when none are left).
fn write_entries(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_json)
        .collect();
    let Some(obj) = obj.as_object_mut() else {
        return;
    };
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

fn managed_fields(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/managedFields")
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    out
}

/// Which paths a write to `subresource` may own.
fn in_scope(path: &[Element], subresource: Option<&str>) -> bool {
    let field = |i: usize, name: &str| matches!(path.get(i), Some(Element::Field(f)) if f == name);
    match subresource {
        None => !field(0, "status"),
        Some("status") => field(0, "status"),
        Some("scale") => field(0, "spec") && field(1, "replicas"),
        Some(_) => true,
    }
}

/// Server-side apply of `config` (the decoded `application/apply-patch+yaml` body) by field
/// manager `manager` onto `live` (or creating the object when `None`), at `time` (RFC 3339).
/// Returns the object to store with `metadata.managedFields` updated.
///
/// Errors: an empty manager → 422 (`PatchOptions.meta.k8s.io "" is invalid: fieldManager:
/// Required value: is required for apply patch`); a configuration that is not an object, lacks
/// `apiVersion`/`kind`, or carries `managedFields` → 400; a renamed object → 400; fields another
/// manager owns and this apply would change, without `force` → 409 `Conflict` with one
/// `FieldManagerConflict` cause per field.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    time: &str,
) -> Result<Value, Failure> {
    if manager.is_empty() {
        return Err(Failure::invalid(
            "PatchOptions",
            "meta.k8s.io",
            "",
            vec![Cause::new(
                "FieldValueRequired",
                "fieldManager",
                "Required value: is required for apply patch",
            )],
        ));
    }
    let cfg = applied_config(config)?;
    let kind = cfg
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let api_version = cfg
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ctx = Ctx::root(&kind);
    if let Some(live) = live {
        check_identity(live, &cfg)?;
    }
    let base = live.map_or_else(|| Value::Object(Map::new()), without_managed_fields);
    let mut entries = read_entries(live.and_then(managed_fields));

    let mut applied = FieldSet::default();
    fields::collect(
        &cfg,
        ctx,
        List::Atomic,
        &mut Vec::new(),
        &mut applied,
        Mode::Applied,
    );
    let applied = applied.filter(|p| in_scope(p, None));
    let mut merged = merge_applied(Some(&base), &cfg, ctx, List::Atomic);
    let changed = fields::diff(&base, &merged, ctx).changed;

    // Conflicts: what this apply changes that another manager owns.
    let mine = |e: &Entry| e.is(manager, "Apply", None);
    let conflicts: Vec<(usize, FieldSet)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| !mine(e))
        .map(|(i, e)| (i, e.fields.intersection(&changed)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    if !conflicts.is_empty() {
        if !force {
            return Err(conflict_failure(&entries, &conflicts));
        }
        for (i, taken) in &conflicts {
            if let Some(e) = entries.get_mut(*i) {
                e.fields = e.fields.difference(taken);
            }
        }
    }

    // Fields applied before and omitted now go, unless someone else owns them (or under them).
    let previous = entries
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut dropped: Vec<Path> = previous.difference(&applied).paths();
    dropped.sort_by_key(Vec::len);
    for path in dropped {
        if !entries
            .iter()
            .any(|e| !mine(e) && e.fields.owns_under(&path))
        {
            fields::remove(&mut merged, ctx, &path);
        }
    }

    let unchanged = live.is_some_and(|_| merged == base);
    match entries.iter_mut().find(|e| mine(e)) {
        Some(e) => {
            if !(unchanged && e.fields == applied && e.api_version == api_version) {
                e.time = time.to_string();
            }
            e.fields = applied;
            e.api_version = api_version;
        }
        None => entries.push(Entry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version,
            time: time.to_string(),
            subresource: None,
            fields: applied,
        }),
    }
    write_entries(&mut merged, &entries);
    Ok(merged)
}

/// The configuration as applied: an object with apiVersion and kind, without status (ignored on
/// the main resource) and without managedFields (which must not be sent).
fn applied_config(config: &Value) -> Result<Value, Failure> {
    let Value::Object(obj) = config else {
        return Err(Failure::bad_request(format!(
            "error decoding apply patch: expected a JSON or YAML object, got {config}"
        )));
    };
    for field in ["apiVersion", "kind"] {
        if obj
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(Failure::bad_request(format!(
                "error decoding apply patch: {field} must be set (got {config})"
            )));
        }
    }
    if managed_fields(config)
        .is_some_and(|m| !m.is_null() && m.as_array().is_none_or(|a| !a.is_empty()))
    {
        return Err(Failure::bad_request("metadata.managedFields must be nil"));
    }
    let mut cfg = config.clone();
    if let Some(obj) = cfg.as_object_mut() {
        obj.remove("status");
    }
    if let Some(meta) = cfg.get_mut("metadata") {
        match meta.as_object_mut() {
            Some(meta) => {
                meta.remove("managedFields");
            }
            None => return Err(shape_error(config, "metadata must be an object")),
        }
    }
    Ok(cfg)
}

/// Merges an applied value into the live one.
fn merge_applied(live: Option<&Value>, cfg: &Value, ctx: Ctx, list: List) -> Value {
    match (live, cfg) {
        (Some(Value::Object(l)), Value::Object(c)) if !ctx.atomic() => {
            let mut out = l.clone();
            for (k, cv) in c {
                if cv.is_null() {
                    out.remove(k);
                    continue;
                }
                let (cctx, clist) = ctx.field(k);
                let merged = merge_applied(l.get(k), cv, cctx, clist);
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Some(Value::Array(l)), Value::Array(c)) => match list {
            List::Atomic => without_nulls(cfg),
            List::Set => {
                let mut out = l.clone();
                out.extend(c.iter().filter(|v| !l.contains(v)).cloned());
                Value::Array(out)
            }
            List::Merge { map_keys, .. } => {
                let mut out = l.clone();
                for item in c {
                    let key = fields::item_key(item, map_keys);
                    let slot = key.as_ref().and_then(|k| {
                        out.iter_mut()
                            .find(|o| fields::item_key(o, map_keys).as_ref() == Some(k))
                    });
                    match slot {
                        Some(slot) => *slot = merge_applied(Some(slot), item, ctx, List::Atomic),
                        None => out.push(without_nulls(item)),
                    }
                }
                Value::Array(out)
            }
        },
        _ => without_nulls(cfg),
    }
}

fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// 409 as the apiserver words it (`NewConflictError`): one conflict inline, several grouped by
/// manager (sorted), each path on its own `- ` line.
fn conflict_failure(entries: &[Entry], conflicts: &[(usize, FieldSet)]) -> Failure {
    let mut by_manager: Vec<(String, Vec<String>)> = Vec::new();
    for (i, set) in conflicts {
        let label = entries.get(*i).map(Entry::label).unwrap_or_default();
        let paths: Vec<String> = set.paths().iter().map(|p| fields::display(p)).collect();
        match by_manager.iter_mut().find(|(l, _)| *l == label) {
            Some((_, ps)) => ps.extend(paths),
            None => by_manager.push((label, paths)),
        }
    }
    by_manager.sort();
    let causes: Vec<Cause> = by_manager
        .iter()
        .flat_map(|(label, paths)| {
            paths.iter().map(move |p| {
                Cause::new("FieldManagerConflict", p, format!("conflict with {label}"))
            })
        })
        .collect();
    let message = match (causes.as_slice(), by_manager.as_slice()) {
        ([one], [(label, _)]) => format!(
            "Apply failed with 1 conflict: conflict with {label}: {}",
            one.field
        ),
        _ => {
            let lines: Vec<String> = by_manager
                .iter()
                .flat_map(|(label, paths)| {
                    std::iter::once(format!("conflicts with {label}:"))
                        .chain(paths.iter().map(|p| format!("- {p}")))
                })
                .collect();
            format!(
                "Apply failed with {} conflicts: {}",
                causes.len(),
                lines.join("\n")
            )
        }
    };
    Failure {
        causes,
        ..Failure::new(409, "Conflict", message)
    }
}

/// Records a non-apply write (create, update, patch) by `manager` in `new`'s managedFields: the
/// fields that changed from `old` (`None` on create) become the manager's (operation `Update`,
/// `new`'s apiVersion, `subresource` such as `status` or `scale`), other managers lose them, and
/// entries left with no fields go. A write that changes nothing leaves the entries as they were.
/// If the write itself replaced `managedFields` (a client may), those entries are the ones kept.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    time: &str,
) {
    let kind = new
        .get("kind")
        .or_else(|| old.and_then(|o| o.get("kind")))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let api_version = new
        .get("apiVersion")
        .or_else(|| old.and_then(|o| o.get("apiVersion")))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ctx = Ctx::root(&kind);
    let sent = managed_fields(new).filter(|m| m.as_array().is_some_and(|a| !a.is_empty()));
    let stored = old.and_then(managed_fields);
    let mut entries = match sent {
        Some(m) if Some(m) != stored => read_entries(Some(m)),
        _ => read_entries(stored),
    };
    let before = old.map_or_else(|| zero_object(&kind), without_managed_fields);
    let after = without_managed_fields(new);
    let Diff { changed, removed } = fields::diff(&before, &after, ctx);
    let changed = changed.filter(|p| in_scope(p, subresource));
    let removed = removed
        .difference(&changed)
        .filter(|p| in_scope(p, subresource));

    if !changed.is_empty() || !removed.is_empty() {
        for e in entries.iter_mut() {
            e.fields = e.fields.difference(&changed).difference(&removed);
        }
        match entries
            .iter_mut()
            .find(|e| e.is(manager, "Update", subresource))
        {
            Some(e) => {
                e.fields.union(&changed);
                e.api_version = api_version;
                e.time = time.to_string();
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version,
                time: time.to_string(),
                subresource: subresource.map(str::to_string),
                fields: changed,
            }),
        }
    }
    write_entries(new, &entries);
}

/// The empty object of a kind as the apiserver's field manager sees it before a create: the
/// fields Go serialises even when empty exist already, so a create does not own them as nodes
/// (`f:spec` carries no `.`; `f:containers` neither, its items do). From the zero values of
/// `k8s.io/api` types (non-pointer structs and lists without `omitempty`).
fn zero_object(kind: &str) -> Value {
    let pod_spec = json!({"containers": null});
    let template = json!({"metadata": {}, "spec": pod_spec});
    match kind {
        "Pod" => json!({"metadata": {}, "spec": pod_spec, "status": {}}),
        "Deployment" => {
            json!({"metadata": {}, "spec": {"selector": null, "template": template, "strategy": {}}, "status": {}})
        }
        "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" | "ReplicationController" => {
            json!({"metadata": {}, "spec": {"template": template}, "status": {}})
        }
        "Service" | "Node" | "Namespace" | "CronJob" | "PersistentVolumeClaim" => {
            json!({"metadata": {}, "spec": {}, "status": {}})
        }
        _ => json!({"metadata": {}}),
    }
}

/// The field manager the apiserver records when a write names none: the User-Agent up to its
/// first `/`, printable characters only, at most 128 bytes (`prefixFromUserAgent` in the
/// apiserver's `handlers/create.go`). kubectl's `kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07`
/// gives `kubectl`, which is what `kubectl scale`, `cordon` and `rollout undo` writes are
/// recorded under.
pub fn default_manager(user_agent: &str) -> String {
    let prefix = user_agent.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > MANAGER_MAX_LEN {
            break;
        }
        out.push(c);
    }
    out
}
