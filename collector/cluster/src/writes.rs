//! Writes from API clients, with a real API server's registry semantics: a request body (API
//! JSON) is decoded, defaulted, validated and stored in the [`World`], or answered with the
//! [`Failure`] the API server would send.
//!
//! - create: a new uid, creationTimestamp from the world clock, generation 1, `generateName`
//!   completed with 5 characters from the world's generator, status reset, admission defaults
//!   (a pod's default tolerations, a Service's cluster IP); 404 when the namespace does not exist,
//!   409 AlreadyExists.
//! - update: identity (uid, creationTimestamp) and status come from the stored object, as does
//!   the runtime state the simulator keeps on it (a pod's container states); generation moves when
//!   the spec does. An update that changes nothing is not stored, so no new version is emitted.
//! - delete: pods terminate gracefully (the kubelet finishes them), other objects go at once;
//!   dependents are orphaned, deleted first (Foreground), or left to the garbage collector
//!   ([`garbage_collect`], run by `controllers::reconcile`).
//!
//! Every change is [`World::touch`]ed so that the simulator emits it. Each kind's own rules are
//! its [`Strategy`].

use apiserver::status::{Cause, Failure};
use serde_json::{Value, json};

use super::controllers;
use super::kinds::{Kind, Object};
use super::objects::*;
use super::util;
use super::validate::{self, Causes, NameRule};
use super::world::World;

/// How a deletion treats the objects the deleted one controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Delete the object now; the garbage collector deletes its dependents afterwards.
    #[default]
    Background,
    /// Delete the dependents first, then the object.
    Foreground,
    /// Delete the object and leave its dependents without an owner.
    Orphan,
}

/// `DeleteOptions` as far as the model uses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`: pods only; 0 deletes at once. Default: the pod's own grace period.
    pub grace_seconds: Option<i64>,
    pub propagation: Propagation,
}

/// A kind's registry rules: defaults, what a write may change, and its validation.
pub trait Strategy: Object {
    /// How the kind's names are checked.
    const NAME: NameRule = NameRule::Subdomain;

    /// Admission defaults and a fresh status for a created object.
    fn prepare_create(&mut self, _w: &mut World) {}

    /// Carries what a write to the main resource may not change (status, runtime state) from
    /// the stored object.
    fn prepare_update(&mut self, _old: &Self, _now: i64) {}

    /// Whether the change from `old` counts as a new generation.
    fn new_generation(&self, _old: &Self) -> bool {
        false
    }

    fn validate(&self, _out: &mut Causes) {}

    fn validate_update(&self, _old: &Self, _out: &mut Causes) {}

    /// Takes the status of `new` (a write to the `/status` subresource); false when the kind
    /// has no status of its own.
    fn take_status(&mut self, _new: Self) -> bool {
        false
    }
}

/// 400 for a body that does not decode, worded as the API server's decoder.
fn undecodable(kind: Kind, causes: &[Cause]) -> Failure {
    let detail: Vec<String> = causes
        .iter()
        .map(|c| {
            if c.field.is_empty() {
                c.message.clone()
            } else {
                format!("{}: {}", c.field, c.message)
            }
        })
        .collect();
    Failure::bad_request(format!(
        "{} in version \"{}\" cannot be handled as a {}: {}",
        kind.name(),
        kind.api_version().rsplit('/').next().unwrap_or_default(),
        kind.name(),
        detail.join(", ")
    ))
}

fn invalid(kind: Kind, name: &str, causes: Causes) -> Failure {
    Failure::invalid(kind.name(), kind.group(), name, causes)
}

fn not_found(kind: Kind, name: &str) -> Failure {
    Failure::not_found(kind.resource(), kind.group(), name)
}

/// The body decoded as `T`, its namespace the request's.
fn decode<T: Strategy>(ns: &str, body: &Value) -> Result<T, Failure> {
    let mut o = T::from_api(body).map_err(|c| undecodable(T::KIND, &c))?;
    let m = o.meta_mut();
    if T::KIND.namespaced() {
        match &m.namespace {
            Some(written) if !written.is_empty() && written != ns => {
                return Err(Failure::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => m.namespace = Some(ns.to_string()),
        }
    } else {
        m.namespace = None;
    }
    Ok(o)
}

/// Stores a new object from `body` in namespace `ns` (ignored for cluster-scoped kinds).
pub fn create<T: Strategy>(w: &mut World, ns: &str, body: &Value) -> Result<Key, Failure> {
    let mut o: T = decode(ns, body)?;
    if T::KIND.namespaced() {
        match w.namespaces.get(ns) {
            None => return Err(not_found(Kind::Namespace, ns)),
            Some(n) if n.meta.deleted_at.is_some() => {
                return Err(Failure::new(
                    403,
                    "Forbidden",
                    format!(
                        "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                        T::KIND.resource(),
                        o.meta().name
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    let m = o.meta_mut();
    if m.name.is_empty()
        && let Some(prefix) = m.generate_name.clone().filter(|g| !g.is_empty())
    {
        m.name = format!("{prefix}{}", util::name_suffix(&mut w.rng, 5));
    }
    m.uid = util::uuid(&mut w.rng);
    m.created = w.now;
    m.resource_version = 0;
    m.generation = 1;
    m.deleted_at = None;
    m.deletion_grace = None;
    o.prepare_create(w);
    let mut causes = vec![];
    validate::meta(o.meta(), T::NAME, &mut causes);
    o.validate(&mut causes);
    let name = o.meta().name.clone();
    if !causes.is_empty() {
        return Err(invalid(T::KIND, &name, causes));
    }
    let k = key(if T::KIND.namespaced() { ns } else { "" }, &name);
    if w.object::<T>(&k).is_some() {
        return Err(Failure::already_exists(
            T::KIND.resource(),
            T::KIND.group(),
            &name,
        ));
    }
    w.insert_object(k.clone(), o);
    w.touch(T::KIND, &k);
    Ok(k)
}

/// The stored object and `body` decoded for a write to it, with the request's checks: the
/// names agree, and a resourceVersion in the body is the stored one.
fn decode_for_update<T: Strategy>(w: &World, k: &Key, body: &Value) -> Result<(T, T), Failure> {
    let old = w
        .object::<T>(k)
        .ok_or_else(|| not_found(T::KIND, &k.1))?
        .clone();
    let mut new: T = decode(&k.0, body)?;
    let m = new.meta_mut();
    if m.name.is_empty() {
        m.name = k.1.clone();
    } else if m.name != k.1 {
        return Err(Failure::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            m.name, k.1
        )));
    }
    let written_rv = body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty());
    if let Some(rv) = written_rv
        && rv != old.meta().resource_version.to_string()
    {
        return Err(Failure::conflict(T::KIND.resource(), T::KIND.group(), &k.1));
    }
    let (om, nm) = (old.meta().clone(), new.meta_mut());
    nm.uid = om.uid;
    nm.created = om.created;
    nm.resource_version = om.resource_version;
    nm.generation = om.generation;
    nm.deleted_at = om.deleted_at;
    nm.deletion_grace = om.deletion_grace;
    if nm.generate_name.is_none() {
        nm.generate_name = om.generate_name;
    }
    Ok((old, new))
}

/// Replaces the object at `k` with `body` (PUT, or the result of a patch). Returns whether
/// anything changed; an unchanged object is not stored or touched.
pub fn update<T: Strategy>(w: &mut World, k: &Key, body: &Value) -> Result<bool, Failure> {
    let (old, mut new) = decode_for_update::<T>(w, k, body)?;
    new.prepare_update(&old, w.now);
    let mut causes = vec![];
    validate::meta(new.meta(), T::NAME, &mut causes);
    new.validate(&mut causes);
    new.validate_update(&old, &mut causes);
    if !causes.is_empty() {
        return Err(invalid(T::KIND, &k.1, causes));
    }
    if new.new_generation(&old) {
        new.meta_mut().generation = old.meta().generation + 1;
    }
    Ok(store_if_changed(w, k, &old, new))
}

fn store_if_changed<T: Strategy>(w: &mut World, k: &Key, old: &T, new: T) -> bool {
    if new.to_json() == old.to_json() {
        return false;
    }
    w.insert_object(k.clone(), new);
    w.touch(T::KIND, k);
    true
}

/// A write to the `/status` subresource: the status of `body` replaces the stored one; spec
/// and metadata stay. Kinds without a status of their own change nothing.
pub fn update_status<T: Strategy>(w: &mut World, k: &Key, body: &Value) -> Result<bool, Failure> {
    let (old, new) = decode_for_update::<T>(w, k, body)?;
    let mut next = old.clone();
    if !next.take_status(new) {
        return Ok(false);
    }
    Ok(store_if_changed(w, k, &old, next))
}

/// Deletes the object at `k`; returns it as deleted (a terminating pod carries its
/// deletionTimestamp).
pub fn delete<T: Strategy>(w: &mut World, k: &Key, opts: DeleteOptions) -> Result<Value, Failure> {
    let o = w
        .object::<T>(k)
        .ok_or_else(|| not_found(T::KIND, &k.1))?
        .clone();
    match T::KIND {
        Kind::Pod => return Ok(delete_pod(w, k, opts.grace_seconds)),
        Kind::Namespace => return Ok(delete_namespace(w, &k.1)),
        _ => {}
    }
    let uid = o.meta().uid.clone();
    match opts.propagation {
        Propagation::Orphan => orphan(w, &uid),
        Propagation::Foreground => delete_dependents(w, &uid),
        Propagation::Background => {}
    }
    w.remove_object::<T>(k);
    w.touch(T::KIND, k);
    Ok(o.to_json())
}

/// A pod goes at once when it never ran or with a zero grace period; otherwise it terminates
/// and the kubelet removes it.
fn delete_pod(w: &mut World, k: &Key, grace: Option<i64>) -> Value {
    let now = w.now;
    let Some(p) = w.pods.get_mut(k) else {
        return Value::Null;
    };
    let grace = grace
        .unwrap_or(p.spec.termination_grace_period_seconds)
        .max(0);
    if grace == 0 || p.spec.node_name.is_none() {
        let v = p.to_json();
        w.pods.remove(k);
        w.touch(Kind::Pod, k);
        return v;
    }
    let started = p.meta.deleted_at.is_none();
    if started {
        p.meta.deleted_at = Some(now);
        p.meta.deletion_grace = Some(grace);
    }
    let v = p.to_json();
    if started {
        w.touch(Kind::Pod, k);
    }
    v
}

/// Every stored object controlled by the object with `uid`: (kind, key).
fn dependents(w: &World, uid: &str) -> Vec<(Kind, Key)> {
    let mut out = vec![];
    for &kind in Kind::ALL {
        let objects = kind.objects();
        for k in objects.keys(w) {
            if objects.meta(w, &k).is_some_and(|m| m.is_owned_by(uid)) {
                out.push((kind, k));
            }
        }
    }
    out
}

fn orphan(w: &mut World, uid: &str) {
    for (kind, k) in dependents(w, uid) {
        if let Some(m) = kind.objects().meta_mut(w, &k) {
            m.owner = None;
        }
        w.touch(kind, &k);
    }
}

/// Deletes the dependents of `uid`, theirs first.
fn delete_dependents(w: &mut World, uid: &str) {
    for (kind, k) in dependents(w, uid) {
        let Some(dep_uid) = kind.objects().meta(w, &k).map(|m| m.uid.clone()) else {
            continue;
        };
        delete_dependents(w, &dep_uid);
        remove_any(w, kind, &k);
    }
}

/// Removes an object of any kind (pods terminate gracefully, as the garbage collector asks).
fn remove_any(w: &mut World, kind: Kind, k: &Key) {
    if kind == Kind::Pod {
        controllers::delete_pod(w, k);
    } else if kind.objects().remove(w, k) {
        w.touch(kind, k);
    }
}

/// A namespace terminates: its content goes now (pods gracefully) and the garbage collector
/// removes the namespace once its last pod is gone.
fn delete_namespace(w: &mut World, name: &str) -> Value {
    for &kind in Kind::ALL.iter().filter(|k| k.namespaced()) {
        for k in kind.objects().keys(w).into_iter().filter(|k| k.0 == name) {
            remove_any(w, kind, &k);
        }
    }
    let now = w.now;
    let Some(n) = w.namespaces.get_mut(name) else {
        return Value::Null;
    };
    if n.meta.deleted_at.is_none() {
        n.meta.deleted_at = Some(now);
        n.meta.deletion_grace = Some(0);
        n.body["status"] = json!({"phase": "Terminating"});
    }
    let v = n.to_json();
    w.touch(Kind::Namespace, &key("", name));
    v
}

/// The garbage collector's pass: objects whose controller is gone are deleted (a Deployment's
/// ReplicaSets, then their pods), and terminating namespaces without pods are removed.
pub fn garbage_collect(w: &mut World) {
    let mut live_uids = std::collections::HashSet::new();
    for &kind in Kind::ALL {
        let objects = kind.objects();
        for k in objects.keys(w) {
            if let Some(m) = objects.meta(w, &k) {
                live_uids.insert(m.uid.clone());
            }
        }
    }
    for &kind in Kind::ALL {
        let objects = kind.objects();
        let orphans: Vec<Key> = objects
            .keys(w)
            .into_iter()
            .filter(|k| {
                objects.meta(w, k).is_some_and(|m| {
                    m.owner
                        .as_ref()
                        .is_some_and(|o| !live_uids.contains(&o.uid))
                        && !(kind == Kind::Pod && m.deleted_at.is_some())
                })
            })
            .collect();
        for k in orphans {
            remove_any(w, kind, &k);
        }
    }
    let finished: Vec<String> = w
        .namespaces
        .iter()
        .filter(|(name, n)| {
            n.meta.deleted_at.is_some() && !w.pods.keys().any(|(ns, _)| ns == *name)
        })
        .map(|(name, _)| name.clone())
        .collect();
    for name in finished {
        w.namespaces.remove(&name);
        w.touch(Kind::Namespace, &key("", &name));
    }
}
