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

    /// What only a create is refused for.
    fn validate_create(&self, _out: &mut Causes) {}

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
    o.validate_create(&mut causes);
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

/// A write to a pod's `ephemeralcontainers` subresource: the debuggers of `body` are added to
/// the stored pod; the rest of `body` is ignored, as the API server ignores it.
pub fn update_ephemeral(w: &mut World, k: &Key, body: &Value) -> Result<bool, Failure> {
    let (old, new) = decode_for_update::<Pod>(w, k, body)?;
    let mut next = old.clone();
    let mut causes = vec![];
    next.take_ephemeral(new, &mut causes);
    if !causes.is_empty() {
        return Err(invalid(Kind::Pod, &k.1, causes));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Runtime;

    const NS: &str = "app";

    /// A world with nodes and the `app` namespace, from the first catalog app.
    fn world() -> World {
        let catalog = problems::Catalog::builtin().expect("builtin catalog");
        let mut app = catalog.apps().next().expect("an app").clone();
        app.namespace = NS.into();
        let mut w = World::new(3, 1_700_000_000_000_000_000, Runtime::new());
        crate::bootstrap::build(&mut w, &app);
        w
    }

    fn deployment(name: &str, image: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "web", "image": image,
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
                }
            }
        })
    }

    fn settle(w: &mut World, passes: usize) {
        for _ in 0..passes {
            controllers::reconcile(w);
            w.now += 1_000_000_000;
        }
    }

    fn invalid_causes(f: Failure) -> Vec<(String, String)> {
        assert_eq!((f.code, f.reason.as_str()), (422, "Invalid"), "{f}");
        f.causes.into_iter().map(|c| (c.field, c.message)).collect()
    }

    #[test]
    fn create_assigns_identity_and_defaults() {
        let mut w = world();
        let k = create::<Deployment>(&mut w, NS, &deployment("web", "nginx")).unwrap();
        let d = w.object::<Deployment>(&k).unwrap().clone();
        assert_eq!(d.meta.uid.len(), 36);
        assert_eq!(d.meta.created, w.now);
        assert_eq!(d.meta.generation, 1);
        assert_eq!(d.strategy, crate::objects::Strategy::rolling());
        let v = d.to_json();
        assert_eq!(v["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(v["spec"]["progressDeadlineSeconds"], 600);
        let c = &v["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always", "untagged image");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        let s = &v["spec"]["template"]["spec"];
        assert_eq!(s["restartPolicy"], "Always");
        assert_eq!(s["dnsPolicy"], "ClusterFirst");
        assert_eq!(s["schedulerName"], "default-scheduler");
        assert_eq!(s["serviceAccountName"], "default");

        let svc = json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
        let sk = create::<Service>(&mut w, NS, &svc).unwrap();
        let sv = w.object::<Service>(&sk).unwrap().to_json();
        assert!(
            sv["spec"]["clusterIP"]
                .as_str()
                .unwrap()
                .starts_with("10.96.")
        );
        assert_eq!(
            sv["spec"]["ports"][0],
            json!({"protocol": "TCP", "port": 80, "targetPort": 80})
        );
        assert_eq!(sv["spec"]["type"], "ClusterIP");

        let pod = json!({"metadata": {"generateName": "job-"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}});
        let pk = create::<Pod>(&mut w, NS, &pod).unwrap();
        assert!(pk.1.starts_with("job-") && pk.1.len() == 9, "{}", pk.1);
        let p = &w.pods[&pk];
        assert_eq!(p.spec.containers[0].image_pull_policy, "IfNotPresent");
        assert_eq!(p.spec.tolerations, default_tolerations());
        assert_eq!(p.phase, "Pending");
        assert_eq!(p.statuses.len(), 1);

        let again = create::<Deployment>(&mut w, NS, &deployment("web", "nginx")).unwrap_err();
        assert_eq!(again.code, 409);
        assert_eq!(again.message, "deployments.apps \"web\" already exists");
        let missing =
            create::<ConfigMap>(&mut w, "nope", &json!({"metadata": {"name": "x"}})).unwrap_err();
        assert_eq!(
            (missing.code, missing.message.as_str()),
            (404, "namespaces \"nope\" not found")
        );
    }

    #[test]
    fn a_client_pod_without_owner_is_scheduled() {
        let mut w = world();
        let pod = json!({"metadata": {"name": "debug"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        let k = Kind::Pod.objects().create(&mut w, NS, &pod).unwrap();
        settle(&mut w, 2);
        let p = &w.pods[&k];
        assert!(p.spec.node_name.is_some(), "scheduled: {:?}", p.conditions);
        assert!(p.meta.owner.is_none());
    }

    #[test]
    fn update_keeps_identity_status_and_counts_generations() {
        let mut w = world();
        let k = create::<Deployment>(&mut w, NS, &deployment("web", "nginx:1.26")).unwrap();
        settle(&mut w, 3);
        let before = w.object::<Deployment>(&k).unwrap().clone();
        assert!(before.counts.replicas > 0 || !before.conditions.is_empty());
        let mut body = before.to_json();
        body["status"] = json!({"replicas": 99});
        body["metadata"]["uid"] = json!("forged");
        assert!(
            !update::<Deployment>(&mut w, &k, &body).unwrap(),
            "no change, no write"
        );

        body["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.27");
        body["spec"]["template"]["spec"]["containers"][0]["startupProbe"] =
            json!({"tcpSocket": {"port": 80}});
        body["spec"]["paused"] = json!(false);
        assert!(update::<Deployment>(&mut w, &k, &body).unwrap());
        let after = w.object::<Deployment>(&k).unwrap();
        assert_eq!(after.meta.uid, before.meta.uid);
        assert_eq!(after.meta.created, before.meta.created);
        assert_eq!(after.counts, before.counts, "status is the controller's");
        assert_eq!(after.meta.generation, before.meta.generation + 1);
        let v = after.to_json();
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["tcpSocket"]["port"],
            80
        );
        assert_eq!(v["spec"]["paused"], false);

        let mut annotated = v.clone();
        annotated["metadata"]["annotations"]["team"] = json!("sre");
        assert!(update::<Deployment>(&mut w, &k, &annotated).unwrap());
        assert_eq!(
            w.object::<Deployment>(&k).unwrap().meta.generation,
            before.meta.generation + 2
        );

        // A stale resourceVersion conflicts; none at all is an unconditional update.
        let mut stale = annotated.clone();
        stale["metadata"]["resourceVersion"] = json!("1");
        stale["spec"]["replicas"] = json!(5);
        let c = update::<Deployment>(&mut w, &k, &stale).unwrap_err();
        assert_eq!(c.code, 409);
        settle(&mut w, 3);
        assert_eq!(
            w.replicasets
                .values()
                .filter(|r| r.meta.is_owned_by(&before.meta.uid))
                .count(),
            2,
            "a rollout started"
        );
    }

    #[test]
    fn validation_errors_in_the_api_servers_words() {
        let mut w = world();
        let mut bad = deployment("Bad_Name", "");
        bad["spec"]["replicas"] = json!(-1);
        bad["spec"]["template"]["spec"]["containers"] = json!([
            {"name": "web", "image": "", "ports": [{"containerPort": 70000}],
             "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
            {"name": "web", "image": "x"}
        ]);
        let f = create::<Deployment>(&mut w, NS, &bad).unwrap_err();
        assert!(
            f.message
                .starts_with("Deployment.apps \"Bad_Name\" is invalid: ["),
            "{}",
            f.message
        );
        let causes = invalid_causes(f);
        let has = |field: &str, msg: &str| causes.iter().any(|(f, m)| f == field && m == msg);
        assert!(
            has(
                "metadata.name",
                "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ),
            "{causes:#?}"
        );
        assert!(has(
            "spec.replicas",
            "Invalid value: -1: must be greater than or equal to 0"
        ));
        assert!(has(
            "spec.template.spec.containers[0].image",
            "Required value"
        ));
        assert!(has(
            "spec.template.spec.containers[1].name",
            "Duplicate value: \"web\""
        ));
        assert!(has(
            "spec.template.spec.containers[0].ports[0].containerPort",
            "Invalid value: 70000: must be between 1 and 65535, inclusive"
        ));
        assert!(has(
            "spec.template.spec.containers[0].resources.requests",
            "Invalid value: \"2\": must be less than or equal to cpu limit of 1"
        ));

        let mut mismatch = deployment("web", "nginx");
        mismatch["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
        mismatch["metadata"]["labels"] = json!({"bad key!": "v"});
        let causes = invalid_causes(create::<Deployment>(&mut w, NS, &mismatch).unwrap_err());
        assert!(
            causes.contains(&(
                "spec.template.metadata.labels".into(),
                "Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"
                    .into()
            )),
            "{causes:#?}"
        );
        assert!(causes.iter().any(|(f, m)| f == "metadata.labels"
            && m.starts_with(
                "Invalid value: \"bad key!\": name part must consist of alphanumeric characters"
            )));

        let no_containers = json!({"metadata": {"name": "p"}, "spec": {}});
        let causes = invalid_causes(create::<Pod>(&mut w, NS, &no_containers).unwrap_err());
        assert_eq!(
            causes,
            vec![("spec.containers".to_string(), "Required value".to_string())]
        );
        let unnamed = json!({"metadata": {}, "spec": {"containers": [{"image": "x"}]}});
        let causes = invalid_causes(create::<Pod>(&mut w, NS, &unnamed).unwrap_err());
        assert!(causes.contains(&(
            "metadata.name".into(),
            "Required value: name or generateName is required".into()
        )));
        assert!(causes.contains(&("spec.containers[0].name".into(), "Required value".into())));

        let portless = json!({"metadata": {"name": "svc"}, "spec": {"selector": {"a": "b"}}});
        let f = create::<Service>(&mut w, NS, &portless).unwrap_err();
        assert_eq!(
            f.message,
            "Service \"svc\" is invalid: spec.ports: Required value"
        );
        let zero = json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 0}]}});
        let causes = invalid_causes(create::<Service>(&mut w, NS, &zero).unwrap_err());
        assert!(causes.contains(&(
            "spec.ports[0].port".into(),
            "Invalid value: 0: must be between 1 and 65535, inclusive".into()
        )));
        let f = create::<Service>(
            &mut w,
            NS,
            &json!({"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 80}]}}),
        )
        .unwrap_err();
        assert!(f.message.contains("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character"), "{}", f.message);
    }

    #[test]
    fn immutable_fields_stay() {
        let mut w = world();
        let k = create::<Deployment>(&mut w, NS, &deployment("web", "nginx")).unwrap();
        let mut body = w.object::<Deployment>(&k).unwrap().to_json();
        body["spec"]["selector"]["matchLabels"] = json!({"app": "web2"});
        body["spec"]["template"]["metadata"]["labels"] = json!({"app": "web2"});
        let causes = invalid_causes(update::<Deployment>(&mut w, &k, &body).unwrap_err());
        assert_eq!(
            causes,
            vec![(
                "spec.selector".to_string(),
                "Invalid value: {\"matchLabels\":{\"app\":\"web2\"}}: field is immutable"
                    .to_string()
            )]
        );

        let sk = create::<Service>(
            &mut w,
            NS,
            &json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}),
        )
        .unwrap();
        let mut svc = w.object::<Service>(&sk).unwrap().to_json();
        let ip = svc["spec"]["clusterIP"].clone();
        svc["spec"]["clusterIP"] = json!("10.96.9.9");
        let causes = invalid_causes(update::<Service>(&mut w, &sk, &svc).unwrap_err());
        assert_eq!(
            causes,
            vec![(
                "spec.clusterIPs[0]".to_string(),
                "Invalid value: [\"10.96.9.9\"]: may not change once set".to_string()
            )]
        );
        svc["spec"].as_object_mut().unwrap().remove("clusterIP");
        svc["spec"]["ports"][0]["port"] = json!(8080);
        assert!(update::<Service>(&mut w, &sk, &svc).unwrap());
        assert_eq!(
            w.object::<Service>(&sk).unwrap().to_json()["spec"]["clusterIP"],
            ip,
            "kept when left out"
        );

        let ck = create::<ConfigMap>(
            &mut w,
            NS,
            &json!({"metadata": {"name": "cfg"}, "data": {"a": "1"}, "immutable": true}),
        )
        .unwrap();
        let mut cm = w.object::<ConfigMap>(&ck).unwrap().to_json();
        cm["data"]["a"] = json!("2");
        cm["immutable"] = json!(false);
        let causes = invalid_causes(update::<ConfigMap>(&mut w, &ck, &cm).unwrap_err());
        assert_eq!(
            causes,
            vec![
                (
                    "data".to_string(),
                    "Forbidden: field is immutable when `immutable` is set".to_string()
                ),
                (
                    "immutable".to_string(),
                    "Forbidden: field is immutable when `immutable` is set".to_string()
                ),
            ]
        );
    }

    #[test]
    fn pod_updates_change_images_only() {
        let mut w = world();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}});
        let k = create::<Pod>(&mut w, NS, &pod).unwrap();
        settle(&mut w, 1);
        let mut body = w.pods[&k].to_json();
        body["spec"]["containers"][0]["image"] = json!("busybox:2");
        body["spec"]["activeDeadlineSeconds"] = json!(60);
        assert!(update::<Pod>(&mut w, &k, &body).unwrap());
        assert_eq!(w.pods[&k].spec.containers[0].image, "busybox:2");
        assert!(
            w.pods[&k].spec.node_name.is_some(),
            "kept from the stored pod"
        );
        body["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
        let causes = invalid_causes(update::<Pod>(&mut w, &k, &body).unwrap_err());
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].0, "spec");
        assert!(causes[0].1.starts_with(
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
        ));
    }

    #[test]
    fn ephemeral_containers_are_only_added_through_their_subresource() {
        let mut w = world();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "app:1"}]}});
        let with_debugger = |mut p: Value, list: Value| {
            p["spec"]["ephemeralContainers"] = list;
            p
        };
        let debugger =
            json!({"name": "dbg", "image": "busybox", "stdin": true, "targetContainerName": "c"});
        let causes = invalid_causes(
            create::<Pod>(&mut w, NS, &with_debugger(pod.clone(), json!([debugger]))).unwrap_err(),
        );
        assert_eq!(
            causes,
            [(
                "spec.ephemeralContainers".to_string(),
                "Forbidden: cannot be set on create".to_string()
            )]
        );
        let k = create::<Pod>(&mut w, NS, &pod).unwrap();
        settle(&mut w, 1);
        let stored = w.pods[&k].to_json();
        // Not through the pod itself.
        let causes = invalid_causes(
            update::<Pod>(
                &mut w,
                &k,
                &with_debugger(stored.clone(), json!([debugger])),
            )
            .unwrap_err(),
        );
        assert_eq!(causes[0].0, "spec");
        // Through the subresource: added with a status waiting for the kubelet; the fields kept.
        assert!(
            update_ephemeral(
                &mut w,
                &k,
                &with_debugger(stored.clone(), json!([debugger]))
            )
            .unwrap()
        );
        let p = &w.pods[&k];
        assert_eq!(p.spec.ephemeral_containers[0].image_pull_policy, "Always");
        assert_eq!(p.ephemeral_statuses.len(), 1);
        assert_eq!(p.ephemeral_statuses[0].name, "dbg");
        let rendered = p.to_json();
        assert_eq!(
            rendered["spec"]["ephemeralContainers"][0]["targetContainerName"],
            "c"
        );
        assert_eq!(rendered["spec"]["ephemeralContainers"][0]["stdin"], true);
        // An existing debugger is neither changed nor removed; a new one is checked as the
        // apiserver checks it.
        let changed = json!([{"name": "dbg", "image": "alpine"}]);
        let causes = invalid_causes(
            update_ephemeral(&mut w, &k, &with_debugger(stored.clone(), changed)).unwrap_err(),
        );
        assert_eq!(
            causes,
            [(
                "spec.ephemeralContainers[0]".to_string(),
                "Forbidden: existing ephemeral containers \"dbg\" may not be changed".to_string()
            )]
        );
        let causes = invalid_causes(
            update_ephemeral(&mut w, &k, &with_debugger(stored.clone(), json!([]))).unwrap_err(),
        );
        assert!(causes[0].1.contains("may not be removed"), "{causes:?}");
        let bad = json!([debugger, {"name": "c", "image": "busybox", "ports": [{"containerPort": 80}],
            "resources": {"limits": {"cpu": "1"}}, "targetContainerName": "nope"}]);
        let causes = invalid_causes(
            update_ephemeral(&mut w, &k, &with_debugger(stored.clone(), bad)).unwrap_err(),
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.ephemeralContainers[1].name",
                "spec.ephemeralContainers[1].ports",
                "spec.ephemeralContainers[1].resources",
                "spec.ephemeralContainers[1].targetContainerName"
            ],
            "{causes:?}"
        );
        assert_eq!(causes[0].1, "Duplicate value: \"c\"");
        // Unchanged: nothing stored.
        let same = w.pods[&k].to_json();
        assert!(!update_ephemeral(&mut w, &k, &same).unwrap());
        // Never in a template.
        let mut d = deployment("web", "nginx");
        d["spec"]["template"]["spec"]["ephemeralContainers"] = json!([debugger]);
        let causes = invalid_causes(create::<Deployment>(&mut w, NS, &d).unwrap_err());
        assert!(
            causes
                .iter()
                .any(|c| c.0 == "spec.template.spec.ephemeralContainers"
                    && c.1 == "Forbidden: ephemeral containers not allowed in pod template"),
            "{causes:?}"
        );
    }

    #[test]
    fn deletes_terminate_pods_and_collect_garbage() {
        let mut w = world();
        let k = create::<Deployment>(&mut w, NS, &deployment("web", "nginx")).unwrap();
        settle(&mut w, 3);
        let uid = w.object::<Deployment>(&k).unwrap().meta.uid.clone();
        let rs: Vec<Key> = w
            .replicasets
            .iter()
            .filter(|(_, r)| r.meta.is_owned_by(&uid))
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(rs.len(), 1);
        let rs_uid = w.replicasets[&rs[0]].meta.uid.clone();
        let pods: Vec<Key> = w
            .pods
            .iter()
            .filter(|(_, p)| p.meta.is_owned_by(&rs_uid))
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(pods.len(), 2);

        // A pod owned by a ReplicaSet comes back under a new name.
        let gone = delete::<Pod>(
            &mut w,
            &pods[0],
            DeleteOptions {
                grace_seconds: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(gone["metadata"]["name"], pods[0].1.as_str());
        assert!(!w.pods.contains_key(&pods[0]));
        settle(&mut w, 1);
        let now_owned = w
            .pods
            .iter()
            .filter(|(_, p)| p.meta.is_owned_by(&rs_uid) && p.meta.deleted_at.is_none())
            .count();
        assert_eq!(now_owned, 2, "replaced");

        // Graceful: the pod stays, terminating.
        let v = delete::<Pod>(&mut w, &pods[1], DeleteOptions::default()).unwrap();
        assert!(v["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 30);

        // Background: the Deployment goes now, its ReplicaSet and pods over the next passes.
        let deleted = Kind::Deployment
            .objects()
            .delete(&mut w, &k, DeleteOptions::default())
            .unwrap();
        assert_eq!(deleted["metadata"]["uid"], uid.as_str());
        settle(&mut w, 1);
        assert!(!w.replicasets.contains_key(&rs[0]));
        settle(&mut w, 1);
        assert!(
            w.pods
                .values()
                .filter(|p| p.meta.is_owned_by(&rs_uid))
                .all(|p| p.meta.deleted_at.is_some())
        );
        let missing = delete::<Deployment>(&mut w, &k, DeleteOptions::default()).unwrap_err();
        assert_eq!(missing.message, "deployments.apps \"web\" not found");
    }

    #[test]
    fn orphan_and_foreground_propagation() {
        let mut w = world();
        let k = create::<Deployment>(&mut w, NS, &deployment("web", "nginx")).unwrap();
        settle(&mut w, 3);
        let uid = w.object::<Deployment>(&k).unwrap().meta.uid.clone();
        delete::<Deployment>(
            &mut w,
            &k,
            DeleteOptions {
                grace_seconds: None,
                propagation: Propagation::Orphan,
            },
        )
        .unwrap();
        let orphans: Vec<&ReplicaSet> = w
            .replicasets
            .values()
            .filter(|r| r.meta.name.starts_with("web-"))
            .collect();
        assert_eq!(orphans.len(), 1);
        assert!(orphans[0].meta.owner.is_none());
        settle(&mut w, 2);
        assert!(
            w.replicasets
                .values()
                .any(|r| r.meta.name.starts_with("web-")),
            "orphans stay"
        );

        let k2 = create::<Deployment>(&mut w, NS, &deployment("api", "nginx")).unwrap();
        settle(&mut w, 3);
        let uid2 = w.object::<Deployment>(&k2).unwrap().meta.uid.clone();
        assert_ne!(uid, uid2);
        delete::<Deployment>(
            &mut w,
            &k2,
            DeleteOptions {
                grace_seconds: None,
                propagation: Propagation::Foreground,
            },
        )
        .unwrap();
        assert!(
            !w.replicasets
                .values()
                .any(|r| r.meta.name.starts_with("api-")),
            "dependents first"
        );
        assert!(
            w.pods
                .values()
                .filter(|p| p.meta.name.starts_with("api-"))
                .all(|p| p.meta.deleted_at.is_some() || p.spec.node_name.is_none())
        );
    }

    #[test]
    fn deleting_a_namespace_deletes_its_content() {
        let mut w = world();
        create::<Namespace>(&mut w, "", &json!({"metadata": {"name": "scratch"}})).unwrap();
        assert!(w.service_accounts.contains_key(&key("scratch", "default")));
        create::<ConfigMap>(&mut w, "scratch", &json!({"metadata": {"name": "c"}})).unwrap();
        create::<Pod>(&mut w, "scratch", &json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})).unwrap();
        let v = delete::<Namespace>(&mut w, &key("", "scratch"), DeleteOptions::default()).unwrap();
        assert_eq!(v["status"]["phase"], "Terminating");
        assert!(!w.configmaps.contains_key(&key("scratch", "c")));
        let f = create::<ConfigMap>(&mut w, "scratch", &json!({"metadata": {"name": "d"}}))
            .unwrap_err();
        assert_eq!(f.code, 403);
        settle(&mut w, 1);
        assert!(!w.namespaces.contains_key("scratch"));
    }

    #[test]
    fn status_writes_change_status_only() {
        let mut w = world();
        let k = create::<Deployment>(&mut w, NS, &deployment("web", "nginx")).unwrap();
        let mut body = w.object::<Deployment>(&k).unwrap().to_json();
        body["spec"]["replicas"] = json!(7);
        body["status"]["observedGeneration"] = json!(1);
        body["status"]["readyReplicas"] = json!(2);
        assert!(update_status::<Deployment>(&mut w, &k, &body).unwrap());
        let d = w.object::<Deployment>(&k).unwrap();
        assert_eq!((d.replicas, d.counts.ready), (2, 2));
    }

    #[test]
    fn wrong_typed_bodies_are_refused_not_panicked_on() {
        let mut w = world();
        let k = create::<Deployment>(&mut w, NS, &deployment("web", "nginx")).unwrap();
        let bodies = [
            json!(null),
            json!("x"),
            json!([1]),
            json!({"metadata": []}),
            json!({"metadata": {"name": "web"}, "spec": {"replicas": "2"}}),
            json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": "x"}}}}),
            json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "b", "resources": {"limits": {"memory": "lots"}}}]}}}}),
            json!({"metadata": {"name": "web", "labels": ["a"]}}),
        ];
        for &kind in Kind::ALL {
            for b in &bodies {
                let objects = kind.objects();
                let ns = if kind.namespaced() { NS } else { "" };
                if let Err(f) = objects.create(&mut w, ns, b) {
                    assert!(matches!(f.code, 400 | 409 | 422), "{kind:?} {b}: {f}");
                }
                let target = key(ns, "web");
                if let Err(f) = objects.update(&mut w, &target, b) {
                    assert!(matches!(f.code, 400 | 404 | 409 | 422), "{kind:?} {b}: {f}");
                }
            }
        }
        let f = update::<Deployment>(&mut w, &k, &bodies[6]).unwrap_err();
        assert_eq!(f.code, 400);
        assert_eq!(
            f.message,
            format!(
                "Deployment in version \"v1\" cannot be handled as a Deployment: spec.template.spec.containers[0]: {}",
                crate::quantity::FORMAT_ERROR
            )
        );
    }

    /// Gives the selected pods what their kubelet would: an address and readiness.
    fn run_pods(w: &mut World, app: &str) {
        let now = w.now;
        let keys: Vec<Key> = w
            .pods
            .iter()
            .filter(|(_, p)| p.meta.labels.get("app").map(String::as_str) == Some(app))
            .map(|(k, _)| k.clone())
            .collect();
        for (i, k) in keys.iter().enumerate() {
            let p = w.pods.get_mut(k).unwrap();
            p.pod_ip = Some(format!("10.244.9.{}", i + 2));
            p.phase = "Running".into();
            set_condition(&mut p.conditions, "Ready", true, None, None, now);
            w.touch(Kind::Pod, k);
        }
    }

    #[test]
    fn endpoint_slices_follow_their_service_and_its_pods() {
        let mut w = world();
        create::<Deployment>(&mut w, NS, &deployment("slice-web", "nginx:1.27")).unwrap();
        let svc = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "slice-web", "labels": {"tier": "front"}},
            "spec": {"selector": {"app": "slice-web"}, "ports": [{"port": 80, "targetPort": 8080}]}});
        let sk = create::<Service>(&mut w, NS, &svc).unwrap();
        settle(&mut w, 3);
        let slices = |w: &World| -> Vec<EndpointSlice> {
            w.objects::<EndpointSlice>()
                .filter(|s| s.service() == Some("slice-web"))
                .cloned()
                .collect()
        };
        // A Service whose pods have no address yet has an empty slice.
        let first = slices(&w);
        assert_eq!(first.len(), 1);
        assert!(first[0].endpoints.is_empty());
        assert_eq!(first[0].to_json()["endpoints"], Value::Null);
        run_pods(&mut w, "slice-web");
        settle(&mut w, 1);
        let slice = slices(&w).remove(0);
        assert_eq!(
            slice.meta.name, first[0].meta.name,
            "the same slice, updated"
        );
        assert!(slice.meta.generation > first[0].meta.generation);
        let suffix = slice.meta.name.strip_prefix("slice-web-").unwrap();
        assert_eq!(suffix.len(), 5);
        assert_eq!(slice.meta.generate_name.as_deref(), Some("slice-web-"));
        assert_eq!(
            slice.meta.labels["tier"], "front",
            "the Service's labels come along"
        );
        assert!(slice.controller_managed());
        let svc_uid = w.services[&sk].meta.uid.clone();
        assert!(slice.meta.is_owned_by(&svc_uid));
        assert_eq!(slice.address_type, "IPv4");
        assert_eq!(
            slice.ports,
            vec![SlicePort {
                name: Some(String::new()),
                protocol: Some("TCP".into()),
                port: Some(8080),
                app_protocol: None,
            }]
        );
        assert_eq!(slice.endpoints.len(), 2);
        let e = &slice.endpoints[0];
        assert_eq!(
            (
                e.conditions.ready,
                e.conditions.serving,
                e.conditions.terminating
            ),
            (Some(true), Some(true), Some(false))
        );
        assert_eq!(e.target_ref.as_ref().unwrap().kind, "Pod");
        // A terminating pod stays, serving but not ready.
        let victim = key(NS, &e.target_ref.as_ref().unwrap().name);
        delete::<Pod>(&mut w, &victim, DeleteOptions::default()).unwrap();
        settle(&mut w, 1);
        let slice = slices(&w).remove(0);
        let gone = slice
            .endpoints
            .iter()
            .find(|x| x.target_ref.as_ref().unwrap().name == victim.1)
            .expect("the terminating pod is still listed");
        assert_eq!(
            (
                gone.conditions.ready,
                gone.conditions.serving,
                gone.conditions.terminating
            ),
            (Some(false), Some(true), Some(true))
        );
        // The round trip through the API's JSON keeps everything.
        let back = EndpointSlice::from_api(&slice.to_json()).unwrap();
        assert_eq!(back, slice);
        // A slice deleted by a client is made again under a new name.
        delete::<EndpointSlice>(&mut w, &key(NS, &slice.meta.name), DeleteOptions::default())
            .unwrap();
        settle(&mut w, 1);
        let again = slices(&w);
        assert_eq!(again.len(), 1);
        assert_ne!(again[0].meta.name, slice.meta.name);
        // The slice goes with its Service.
        delete::<Service>(&mut w, &sk, DeleteOptions::default()).unwrap();
        settle(&mut w, 2);
        assert!(slices(&w).is_empty());
    }

    #[test]
    fn a_cordon_taints_the_node_and_keeps_new_pods_off_it() {
        let mut w = world();
        let names: Vec<String> = w.nodes.keys().cloned().collect();
        let cordoned = names.last().unwrap().clone();
        let mut node = w.nodes[&cordoned].to_json();
        node["spec"]["unschedulable"] = json!(true);
        assert!(update::<Node>(&mut w, &key("", &cordoned), &node).unwrap());
        settle(&mut w, 1);
        let taint_keys = |w: &World| -> Vec<String> {
            w.nodes[&cordoned]
                .taints
                .iter()
                .map(|t| t.key.clone())
                .collect()
        };
        assert!(taint_keys(&w).contains(&"node.kubernetes.io/unschedulable".to_string()));
        let t = w.nodes[&cordoned]
            .taints
            .iter()
            .find(|t| t.key == "node.kubernetes.io/unschedulable")
            .unwrap();
        assert_eq!(t.effect, "NoSchedule");
        create::<Deployment>(&mut w, NS, &deployment("spread", "nginx:1.27")).unwrap();
        settle(&mut w, 4);
        let placed: Vec<&str> = w
            .pods
            .values()
            .filter(|p| p.meta.labels.get("app").map(String::as_str) == Some("spread"))
            .filter_map(|p| p.spec.node_name.as_deref())
            .collect();
        assert_eq!(placed.len(), 2);
        assert!(!placed.contains(&cordoned.as_str()), "{placed:?}");
        // Uncordon: the taint goes.
        let mut node = w.nodes[&cordoned].to_json();
        node["spec"]
            .as_object_mut()
            .unwrap()
            .remove("unschedulable");
        assert!(update::<Node>(&mut w, &key("", &cordoned), &node).unwrap());
        settle(&mut w, 1);
        assert!(!taint_keys(&w).contains(&"node.kubernetes.io/unschedulable".to_string()));
    }
}
