//! Field sets, as `metadata.managedFields[].fieldsV1` holds them: a tree of path elements
//! (`f:<field>`, list-map items `k:{"name":"web"}`, set items `v:<json>`), where `.` marks a node
//! that is itself a member and a leaf member is `{}`. Values flow in as objects and come out as the
//! set of their fields ([`collect`]), the difference between two versions of an object
//! ([`diff`]), or a path removed from an object ([`remove`]).
//!
//! Membership follows structured-merge-diff as the apiserver's managedFields show it: an applied
//! configuration owns its leaves and list-map items (items carry `.`); an update owns what it
//! changed, and nodes it brought into existence carry `.` (`f:labels: {".": {}, "f:app": {}}`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::schema::{Ctx, List};

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Element {
    /// `f:<name>`: a field of a struct or a key of a map.
    Field(String),
    /// `k:<json object>`: a list-map item by its key fields (sorted by name, compact JSON).
    Key(String),
    /// `v:<json>`: an item of a set.
    Value(String),
    /// Anything else found in stored managedFields (`i:<index>`), kept as written.
    Other(String),
}

impl Element {
    fn encode(&self) -> String {
        match self {
            Element::Field(s) => format!("f:{s}"),
            Element::Key(s) => format!("k:{s}"),
            Element::Value(s) => format!("v:{s}"),
            Element::Other(s) => s.clone(),
        }
    }

    fn decode(s: &str) -> Element {
        if let Some(f) = s.strip_prefix("f:") {
            Element::Field(f.to_string())
        } else if let Some(k) = s.strip_prefix("k:") {
            Element::Key(k.to_string())
        } else if let Some(v) = s.strip_prefix("v:") {
            Element::Value(v.to_string())
        } else {
            Element::Other(s.to_string())
        }
    }

    /// As structured-merge-diff prints a path element: `.spec`, `[name="web"]`, `[="x"]`.
    fn display(&self) -> String {
        match self {
            Element::Field(s) => format!(".{s}"),
            Element::Key(json) => match serde_json::from_str::<Map<String, Value>>(json) {
                Ok(keys) => {
                    let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!("[{}]", parts.join(","))
                }
                Err(_) => format!("[{json}]"),
            },
            Element::Value(json) => format!("[={json}]"),
            Element::Other(s) => format!("[{s}]"),
        }
    }
}

pub(crate) type Path = Vec<Element>;

/// A path as conflicts name it: `.spec.template.spec.containers[name="web"].image`.
pub(crate) fn display(path: &[Element]) -> String {
    path.iter().map(Element::display).collect()
}

/// A set of paths, as a tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    member: bool,
    children: BTreeMap<Element, FieldSet>,
}

impl FieldSet {
    pub fn insert(&mut self, path: &[Element]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    fn node(&self, path: &[Element]) -> Option<&FieldSet> {
        match path.split_first() {
            None => Some(self),
            Some((first, rest)) => self.children.get(first)?.node(rest),
        }
    }

    pub fn contains(&self, path: &[Element]) -> bool {
        self.node(path).is_some_and(|n| n.member)
    }

    /// Whether the path, or anything under it, is a member.
    pub fn owns_under(&self, path: &[Element]) -> bool {
        self.node(path).is_some_and(|n| !n.is_empty())
    }

    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Every member path, parents before children.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.walk(&mut Vec::new(), &mut out);
        out
    }

    fn walk(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (e, child) in &self.children {
            prefix.push(e.clone());
            child.walk(prefix, out);
            prefix.pop();
        }
    }

    pub fn union(&mut self, other: &FieldSet) {
        for p in other.paths() {
            self.insert(&p);
        }
    }

    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        self.filter(|p| !other.contains(p))
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        self.filter(|p| other.contains(p))
    }

    /// The member paths for which `keep` holds.
    pub fn filter(&self, keep: impl Fn(&[Element]) -> bool) -> FieldSet {
        let mut out = FieldSet::default();
        for p in self.paths().iter().filter(|p| keep(p)) {
            out.insert(p);
        }
        out
    }

    /// Unmarks a node that has members below it (a node that turned out to exist before).
    fn unmark_branch(&mut self, path: &[Element]) {
        let mut node = Some(self);
        for e in path {
            node = node.and_then(|n| n.children.get_mut(e));
        }
        if let Some(n) = node
            && n.children.values().any(|c| !c.is_empty())
        {
            n.member = false;
        }
    }

    /// Reads a `fieldsV1` object; anything that is not an object contributes nothing.
    pub fn from_json(v: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        if let Value::Object(m) = v {
            for (k, child) in m {
                if k == "." {
                    set.member = true;
                    continue;
                }
                let mut node = FieldSet::from_json(child);
                if child.as_object().is_some_and(Map::is_empty) {
                    node.member = true;
                }
                if !node.is_empty() {
                    set.children.insert(Element::decode(k), node);
                }
            }
        }
        set
    }

    /// The `fieldsV1` object: `.` first, then elements in order.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        let has_children = self.children.values().any(|c| !c.is_empty());
        if self.member && has_children {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (e, child) in &self.children {
            if !child.is_empty() {
                m.insert(e.encode(), child.to_json());
            }
        }
        Value::Object(m)
    }
}

/// Top-level and metadata fields the field manager never tracks (fieldmanager `stripMeta`).
fn tracked(path: &[Element]) -> bool {
    const META: &[&str] = &[
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "selfLink",
    ];
    match path {
        [Element::Field(f)] => f != "apiVersion" && f != "kind",
        [Element::Field(m), Element::Field(f)] if m == "metadata" => !META.contains(&f.as_str()),
        _ => true,
    }
}

/// The key element of a list-map item: its key fields, sorted, as compact JSON. A missing
/// `protocol` is the default `TCP` (the apiserver defaults it before tracking fields); `None` when
/// the item is not an object or lacks the first key.
pub(crate) fn item_key(item: &Value, map_keys: &[&str]) -> Option<Element> {
    let obj = item.as_object()?;
    obj.get(*map_keys.first()?)?;
    let mut names: Vec<&str> = map_keys.to_vec();
    names.sort_unstable();
    let mut key = Map::new();
    for name in names {
        match obj.get(name) {
            Some(v) if !v.is_null() => {
                key.insert(name.into(), v.clone());
            }
            _ if name == "protocol" => {
                key.insert(name.into(), Value::String("TCP".into()));
            }
            _ => {}
        }
    }
    Some(Element::Key(Value::Object(key).to_string()))
}

/// Whether non-leaf nodes are members too: an applied configuration owns only leaves and list-map
/// items; an update owns the nodes it created.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Applied,
    Created,
}

/// Adds the fields of `v` (at `path`, in context `ctx`, with list behaviour `list`) to `set`.
pub(crate) fn collect(
    v: &Value,
    ctx: Ctx,
    list: List,
    path: &mut Path,
    set: &mut FieldSet,
    mode: Mode,
) {
    if !tracked(path) {
        return;
    }
    match v {
        Value::Null => {}
        Value::Object(m) if !m.is_empty() && !ctx.atomic() => {
            if mode == Mode::Created && !path.is_empty() {
                set.insert(path);
            }
            collect_fields(m, ctx, path, set, mode);
        }
        Value::Array(items) => match list {
            List::Atomic => set.insert(path),
            List::Set => {
                if mode == Mode::Created && !items.is_empty() {
                    set.insert(path);
                }
                for item in items {
                    path.push(Element::Value(item.to_string()));
                    set.insert(path);
                    path.pop();
                }
            }
            List::Merge { map_keys, .. } => {
                let keys: Option<Vec<Element>> =
                    items.iter().map(|i| item_key(i, map_keys)).collect();
                let Some(keys) = keys else {
                    // Items without their keys cannot be told apart: own the list whole.
                    set.insert(path);
                    return;
                };
                if mode == Mode::Created && !items.is_empty() {
                    set.insert(path);
                }
                for (item, key) in items.iter().zip(keys) {
                    path.push(key);
                    set.insert(path);
                    if let (Value::Object(m), false) = (item, ctx.atomic()) {
                        collect_fields(m, ctx, path, set, mode);
                    }
                    path.pop();
                }
            }
        },
        _ => set.insert(path),
    }
}

fn collect_fields(
    m: &Map<String, Value>,
    ctx: Ctx,
    path: &mut Path,
    set: &mut FieldSet,
    mode: Mode,
) {
    for (k, child) in m {
        let (cctx, clist) = ctx.field(k);
        path.push(Element::Field(k.clone()));
        collect(child, cctx, clist, path, set, mode);
        path.pop();
    }
}

/// What changed from `old` to `new`: `changed` gets modified and added members (nodes that came
/// into existence with `.`), `removed` the members that went away.
pub(crate) struct Diff {
    pub changed: FieldSet,
    pub removed: FieldSet,
}

pub(crate) fn diff(old: &Value, new: &Value, ctx: Ctx) -> Diff {
    let mut d = Diff {
        changed: FieldSet::default(),
        removed: FieldSet::default(),
    };
    diff_at(old, new, ctx, List::Atomic, &mut Vec::new(), &mut d);
    d
}

fn diff_at(old: &Value, new: &Value, ctx: Ctx, list: List, path: &mut Path, d: &mut Diff) {
    if !tracked(path) || old == new {
        return;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n)) if !ctx.atomic() => {
            if n.is_empty() && !path.is_empty() {
                d.changed.insert(path);
            }
            for (k, nv) in n {
                let (cctx, clist) = ctx.field(k);
                path.push(Element::Field(k.clone()));
                match o.get(k) {
                    Some(ov) if !ov.is_null() => diff_at(ov, nv, cctx, clist, path, d),
                    before => {
                        collect(nv, cctx, clist, path, &mut d.changed, Mode::Created);
                        // A field that was `null` existed: only what is under it is new.
                        if before.is_some() {
                            d.changed.unmark_branch(path);
                        }
                    }
                }
                path.pop();
            }
            for (k, ov) in o {
                if n.get(k).is_none_or(Value::is_null) {
                    let (cctx, clist) = ctx.field(k);
                    path.push(Element::Field(k.clone()));
                    collect(ov, cctx, clist, path, &mut d.removed, Mode::Created);
                    path.pop();
                }
            }
        }
        (Value::Array(o), Value::Array(n)) => diff_list(o, n, ctx, list, path, d),
        _ => {
            // What was under the old value went away; the path itself was changed, not removed.
            let mut gone = FieldSet::default();
            collect(old, ctx, list, path, &mut gone, Mode::Created);
            d.removed.union(&gone.filter(|p| p != path.as_slice()));
            collect(new, ctx, list, path, &mut d.changed, Mode::Created);
            d.changed.insert(path);
        }
    }
}

fn diff_list(o: &[Value], n: &[Value], ctx: Ctx, list: List, path: &mut Path, d: &mut Diff) {
    match list {
        List::Atomic => d.changed.insert(path),
        List::Set => {
            for v in n.iter().filter(|v| !o.contains(v)) {
                path.push(Element::Value(v.to_string()));
                d.changed.insert(path);
                path.pop();
            }
            for v in o.iter().filter(|v| !n.contains(v)) {
                path.push(Element::Value(v.to_string()));
                d.removed.insert(path);
                path.pop();
            }
        }
        List::Merge { map_keys, .. } => {
            let keyed = |items: &[Value]| -> Option<Vec<(Element, Value)>> {
                items
                    .iter()
                    .map(|i| item_key(i, map_keys).map(|k| (k, i.clone())))
                    .collect()
            };
            let (Some(ok), Some(nk)) = (keyed(o), keyed(n)) else {
                d.changed.insert(path);
                return;
            };
            for (key, nv) in &nk {
                path.push(key.clone());
                match ok.iter().find(|(k, _)| k == key) {
                    Some((_, ov)) if ctx.atomic() => {
                        if ov != nv {
                            d.changed.insert(path);
                        }
                    }
                    Some((_, ov)) => diff_at(ov, nv, ctx, List::Atomic, path, d),
                    None => {
                        d.changed.insert(path);
                        if let (Value::Object(m), false) = (nv, ctx.atomic()) {
                            collect_fields(m, ctx, path, &mut d.changed, Mode::Created);
                        }
                    }
                }
                path.pop();
            }
            for (key, ov) in &ok {
                if !nk.iter().any(|(k, _)| k == key) {
                    path.push(key.clone());
                    d.removed.insert(path);
                    if let (Value::Object(m), false) = (ov, ctx.atomic()) {
                        collect_fields(m, ctx, path, &mut d.removed, Mode::Created);
                    }
                    path.pop();
                }
            }
        }
    }
}

/// Removes the value at `path` from `v` (a field, a list-map item, a set item). Objects left empty
/// by the removal go too, as the typed object would omit them. Returns whether anything was found.
pub(crate) fn remove(v: &mut Value, ctx: Ctx, path: &[Element]) -> bool {
    remove_at(v, ctx, List::Atomic, path)
}

fn remove_at(v: &mut Value, ctx: Ctx, list: List, path: &[Element]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    match (first, v) {
        (Element::Field(name), Value::Object(m)) => {
            if rest.is_empty() {
                return m.remove(name).is_some();
            }
            let (cctx, clist) = ctx.field(name);
            let Some(child) = m.get_mut(name) else {
                return false;
            };
            let found = remove_at(child, cctx, clist, rest);
            if found && child.as_object().is_some_and(Map::is_empty) {
                m.remove(name);
            }
            found
        }
        (Element::Key(_), Value::Array(items)) => {
            let List::Merge { map_keys, .. } = list else {
                return false;
            };
            let Some(at) = items
                .iter()
                .position(|i| item_key(i, map_keys).as_ref() == Some(first))
            else {
                return false;
            };
            if rest.is_empty() {
                items.remove(at);
                return true;
            }
            items
                .get_mut(at)
                .is_some_and(|item| remove_at(item, ctx, List::Atomic, rest))
        }
        (Element::Value(json), Value::Array(items)) if rest.is_empty() => {
            let Ok(target) = serde_json::from_str::<Value>(json) else {
                return false;
            };
            let before = items.len();
            items.retain(|i| *i != target);
            items.len() != before
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(s: &str) -> Element {
        Element::Field(s.into())
    }

    #[test]
    fn fields_v1_round_trips_with_dots_and_keys() {
        let stored = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}}}},
            "f:status": {"f:podIPs": {"v:\"10.0.0.1\"": {}}}
        });
        let set = FieldSet::from_json(&stored);
        assert!(set.contains(&[f("metadata"), f("labels")]));
        assert!(set.contains(&[f("metadata"), f("labels"), f("app")]));
        assert!(!set.contains(&[f("metadata")]));
        let item = Element::Key("{\"name\":\"nginx\"}".into());
        assert!(set.contains(&[f("spec"), f("containers"), item.clone(), f("image")]));
        assert_eq!(set.to_json(), stored);
        assert_eq!(
            display(&[f("spec"), f("containers"), item, f("image")]),
            ".spec.containers[name=\"nginx\"].image"
        );
    }

    #[test]
    fn malformed_fields_v1_is_tolerated() {
        assert!(FieldSet::from_json(&json!("junk")).is_empty());
        let set = FieldSet::from_json(&json!({"f:a": 3, "i:0": {}}));
        assert_eq!(set.paths(), vec![vec![Element::Other("i:0".into())]]);
    }

    #[test]
    fn port_keys_default_the_protocol() {
        let k = item_key(
            &json!({"containerPort": 80, "name": "http"}),
            &["containerPort", "protocol"],
        );
        assert_eq!(
            k,
            Some(Element::Key(
                "{\"containerPort\":80,\"protocol\":\"TCP\"}".into()
            ))
        );
        assert_eq!(
            item_key(&json!({"name": "x"}), &["containerPort", "protocol"]),
            None
        );
    }

    #[test]
    fn diff_marks_created_nodes_and_removals() {
        let ctx = Ctx::root("Deployment");
        let old = json!({"metadata": {"name": "web"}, "spec": {"replicas": 2, "paused": true}});
        let new =
            json!({"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 3}});
        let d = diff(&old, &new, ctx);
        assert_eq!(
            d.changed.to_json(),
            json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:replicas": {}}})
        );
        assert_eq!(d.removed.to_json(), json!({"f:spec": {"f:paused": {}}}));
    }

    #[test]
    fn remove_takes_items_and_emptied_maps() {
        let ctx = Ctx::root("Deployment");
        let mut obj = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"template": {"spec": {
            "containers": [{"name": "web", "image": "x"}, {"name": "side", "image": "y"}]}}}});
        let item = Element::Key("{\"name\":\"side\"}".into());
        let path = [f("spec"), f("template"), f("spec"), f("containers"), item];
        assert!(remove(&mut obj, ctx, &path));
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"],
            json!([{"name": "web", "image": "x"}])
        );
        assert!(remove(&mut obj, ctx, &[f("metadata"), f("labels"), f("a")]));
        assert_eq!(obj.get("metadata"), None);
        assert!(!remove(&mut obj, ctx, &[f("nope"), f("x")]));
    }
}
