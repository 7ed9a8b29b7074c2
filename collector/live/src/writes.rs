//! A live environment's writes: the Kubernetes API's POST, PUT, PATCH and DELETE applied to the
//! running simulation's world, as the apiserver applies them (body decoding and patches from the
//! `apiserver` crate, registry semantics from `cluster::writes`). A dry run works on a copy of the
//! world. What a write changed is flushed at once, so that the answer carries the resource version
//! every later read agrees with.

use std::sync::{Arc, Mutex};

use apis::kube::writes::{ClusterWriter, Verb, WriteReply, WriteRequest, scale_of};
use apiserver::patch::{self, PatchType};
use apiserver::status::Failure;
use serde_json::{Value, json};
use sim::kinds::Kind;
use sim::objects::{Key, key};
use sim::world::World;
use sim::writes::{DeleteOptions, Propagation};

use super::stores::LiveStores;
use runner::problem::ProblemRun;

/// The running world, behind the Kubernetes API.
pub struct LiveCluster {
    pub run: Arc<Mutex<ProblemRun>>,
    pub stores: Arc<LiveStores>,
}

fn kind_of(req: &WriteRequest) -> Result<Kind, Failure> {
    Kind::ALL
        .iter()
        .copied()
        .find(|k| k.resource() == req.resource.plural && k.group() == req.resource.group)
        .ok_or_else(|| {
            Failure::new(
                405,
                "MethodNotAllowed",
                format!(
                    "the server does not allow this method on the requested resource ({})",
                    req.resource.plural
                ),
            )
        })
}

fn decode(req: &WriteRequest) -> Result<Value, Failure> {
    apiserver::body::decode(req.content_type.as_deref(), &req.body)
}

impl ClusterWriter for LiveCluster {
    fn write(&self, req: WriteRequest) -> Result<WriteReply, Failure> {
        let kind = kind_of(&req)?;
        let ns = req.namespace.clone().unwrap_or_default();
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        let now = run.sim.world.now;
        let mut scratch;
        let world: &mut World = if req.dry_run {
            scratch = run.sim.world.clone();
            &mut scratch
        } else {
            &mut run.sim.world
        };
        let served_rv = |name: &str| -> Option<String> {
            let objects = self.stores.objects.read();
            objects
                .state
                .get(kind.api_version(), kind.name(), &ns, name)
                .and_then(|o| {
                    o["metadata"]["resourceVersion"]
                        .as_str()
                        .map(str::to_string)
                })
        };
        let time = schemas::time::rfc3339(now);
        let manager = req
            .field_manager
            .clone()
            .unwrap_or_else(|| patch::default_manager(&req.user_agent));
        let (k, code, deleted) = match (req.verb, req.name.as_deref(), req.subresource.as_deref()) {
            (Verb::Create, None, None) => {
                let mut body = decode(&req)?;
                strict_fields(&req, kind, &body)?;
                patch::record_update(None, &mut body, &manager, None, &time);
                let k = kind.objects().create(world, &ns, &body)?;
                (k, 201, None)
            }
            (Verb::Create, Some(name), Some("eviction")) if kind == Kind::Pod => {
                let k = key(&ns, name);
                kind.objects().delete(world, &k, DeleteOptions::default())?;
                let reply = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
                drop(run);
                if !req.dry_run {
                    self.flush()?;
                }
                return Ok(WriteReply {
                    code: 201,
                    body: reply,
                });
            }
            (Verb::Update | Verb::Patch, Some(name), sub) if writable_subresource(kind, sub) => {
                let served = served_rv(name);
                let at = Target {
                    kind,
                    ns: &ns,
                    name,
                    sub,
                };
                update(world, &req, at, served.as_deref(), &manager, &time)?
            }
            (Verb::Delete, Some(name), None) => {
                let k = key(&ns, name);
                let opts = delete_options(&req.body)?;
                let uid = kind.objects().meta(world, &k).map(|m| m.uid.clone());
                preconditions(&req.body, uid.as_deref(), served_rv(name).as_deref())?;
                let gone = kind.objects().delete(world, &k, opts)?;
                (k, 200, Some(gone))
            }
            _ => {
                return Err(Failure::new(
                    405,
                    "MethodNotAllowed",
                    "the server does not allow this method on the requested resource",
                ));
            }
        };
        // The answer: from the copy for a dry run (nothing stored, no new resource version);
        // otherwise what the flush stored.
        let answer = if req.dry_run {
            let mut v = deleted
                .or_else(|| world.render(kind, &k).map(|(v, _)| v))
                .unwrap_or(Value::Null);
            set_rv(&mut v, served_rv(&k.1).as_deref());
            v
        } else {
            drop(run);
            self.flush()?;
            let objects = self.stores.objects.read();
            match objects
                .state
                .get(kind.api_version(), kind.name(), &k.0, &k.1)
            {
                Some(o) => (**o).clone(),
                None => deleted.unwrap_or(Value::Null),
            }
        };
        let mut body = answer;
        if let Some(m) = body.as_object_mut() {
            m.insert("kind".into(), kind.name().into());
            m.insert("apiVersion".into(), kind.api_version().into());
        }
        if req.subresource.as_deref() == Some("scale") {
            body = scale_of(&body);
        } else if req.verb == Verb::Delete && !kind.returns_deleted_object() {
            body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": k.1, "group": kind.group(), "kind": kind.resource(),
                            "uid": body.pointer("/metadata/uid").cloned().unwrap_or(Value::Null)}});
        }
        Ok(WriteReply { code, body })
    }
}

impl LiveCluster {
    /// Emits what writes changed and routes it to the stores.
    fn flush(&self) -> Result<(), Failure> {
        // Routed under the world's lock: the ticker's next second must not reach the stores
        // before this one's rows, which are older (the stores take rows in time order).
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        run.sim.world.flush_objects();
        let rows = run.sim.drain();
        self.stores
            .route(rows)
            .map_err(|e| Failure::new(500, "InternalError", e.to_string()))
    }
}

/// The object a PATCH makes of `base`, by its Content-Type.
fn patched(
    req: &WriteRequest,
    base: &Value,
    kind: Kind,
    manager: &str,
    time: &str,
) -> Result<Value, Failure> {
    let ct = req.content_type.as_deref().unwrap_or("");
    let ty = PatchType::from_content_type(ct).ok_or_else(|| Failure::unsupported_media_type(ct))?;
    match ty {
        PatchType::Apply => {
            let config = apiserver::body::decode(Some("application/yaml"), &req.body)?;
            patch::apply(Some(base), &config, manager, req.force, time)
        }
        _ => patch::patch(base, &req.body, ty, kind.name()),
    }
}

/// A patch whose result is not of the kind's type (a list where a map belongs) is the patch's
/// fault: 422 Invalid on field `patch`, as the apiserver's patch handler answers when the patched
/// object does not convert (a PUT of the same body is a 400 from the decoder instead).
fn patched_shape(kind: Kind, patched: &Value) -> Result<(), Failure> {
    let Some(causes) = kind.objects().decode_error(patched) else {
        return Ok(());
    };
    let detail: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    Err(patch::shape_error(patched, &detail.join(", ")))
}

/// Under `fieldValidation=Strict`, fields the kind's type does not have are a 400 with the
/// strict decoder's words.
fn strict_fields(req: &WriteRequest, kind: Kind, object: &Value) -> Result<(), Failure> {
    let unknown = kind.unknown_fields(object);
    if !req.strict || unknown.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    Err(Failure::bad_request(format!(
        "strict decoding error: {}",
        named.join(", ")
    )))
}

/// The object itself and the subresources a PUT or PATCH may write.
fn writable_subresource(kind: Kind, sub: Option<&str>) -> bool {
    match sub {
        None | Some("status" | "scale") => true,
        Some("ephemeralcontainers") => kind == Kind::Pod,
        Some(_) => false,
    }
}

/// What a write names: the kind, namespace, object name and subresource.
#[derive(Clone, Copy)]
struct Target<'a> {
    kind: Kind,
    ns: &'a str,
    name: &'a str,
    sub: Option<&'a str>,
}

/// A PUT or PATCH of an object (or of its `status`, `scale` or a pod's `ephemeralcontainers`);
/// a server-side apply of a
/// missing object creates it. `served` is the resourceVersion clients were last shown.
fn update(
    world: &mut World,
    req: &WriteRequest,
    at: Target<'_>,
    served: Option<&str>,
    manager: &str,
    time: &str,
) -> Result<(Key, u16, Option<Value>), Failure> {
    let Target {
        kind, name, sub, ..
    } = at;
    let k = key(at.ns, name);
    let is_apply = req
        .content_type
        .as_deref()
        .and_then(PatchType::from_content_type)
        == Some(PatchType::Apply);
    let Some((current, _)) = kind.objects().render(world, &k) else {
        if is_apply && sub.is_none() {
            return apply_create(world, req, at, manager, time);
        }
        return Err(Failure::not_found(
            &req.resource.plural,
            &req.resource.group,
            name,
        ));
    };
    let mut base = current.clone();
    set_rv(&mut base, served);
    if sub == Some("scale") {
        base = scale_of(&base);
    }
    let mut new = match req.verb {
        Verb::Update => decode(req)?,
        _ => patched(req, &base, kind, manager, time)?,
    };
    // A resourceVersion the client sent must be the served one (409 otherwise).
    if let Some(rv) = new
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        && served.is_some_and(|s| s != rv)
    {
        return Err(Failure::conflict(
            &req.resource.plural,
            &req.resource.group,
            name,
        ));
    }
    if sub == Some("scale") {
        let replicas = new
            .pointer("/spec/replicas")
            .cloned()
            .unwrap_or(Value::Null);
        new = current.clone();
        new["spec"]["replicas"] = replicas;
    }
    strip_rv(&mut new);
    if sub != Some("scale") {
        if req.verb == Verb::Patch {
            patched_shape(kind, &new)?;
        }
        strict_fields(req, kind, &new)?;
    }
    if !is_apply {
        patch::record_update(Some(&current), &mut new, manager, sub, time);
    }
    match sub {
        Some("status") => kind.objects().update_status(world, &k, &new)?,
        Some("ephemeralcontainers") => sim::writes::update_ephemeral(world, &k, &new)?,
        _ => kind.objects().update(world, &k, &new)?,
    };
    Ok((k, 200, None))
}

/// Server-side apply of an object that does not exist yet creates it, as the apiserver does.
fn apply_create(
    world: &mut World,
    req: &WriteRequest,
    at: Target<'_>,
    manager: &str,
    time: &str,
) -> Result<(Key, u16, Option<Value>), Failure> {
    let config = apiserver::body::decode(Some("application/yaml"), &req.body)?;
    let mut body = patch::apply(None, &config, manager, req.force, time)?;
    let named = body.pointer("/metadata/name").and_then(Value::as_str);
    if named != Some(at.name) {
        return Err(Failure::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            named.unwrap_or(""),
            at.name
        )));
    }
    strip_rv(&mut body);
    strict_fields(req, at.kind, &body)?;
    let k = at.kind.objects().create(world, at.ns, &body)?;
    Ok((k, 201, None))
}

fn set_rv(v: &mut Value, rv: Option<&str>) {
    if let (Some(meta), Some(rv)) = (v.get_mut("metadata").and_then(Value::as_object_mut), rv) {
        meta.insert("resourceVersion".into(), rv.into());
    }
}

fn strip_rv(v: &mut Value) {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
}

/// A DELETE's `preconditions` (uid, resourceVersion): a 409 Conflict in the apiserver's words
/// when the object is not the one the client means. A missing object is left to the delete.
fn preconditions(body: &[u8], uid: Option<&str>, rv: Option<&str>) -> Result<(), Failure> {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    let Some(uid) = uid else { return Ok(()) };
    let wanted = |field: &str| v["preconditions"][field].as_str().map(str::to_string);
    if let Some(want) = wanted("uid")
        && want != uid
    {
        return Err(Failure::new(
            409,
            "Conflict",
            format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
        ));
    }
    if let (Some(want), Some(rv)) = (wanted("resourceVersion"), rv)
        && want != rv
    {
        return Err(Failure::new(
            409,
            "Conflict",
            format!(
                "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
            ),
        ));
    }
    Ok(())
}

/// A DELETE's options body (`propagationPolicy`, `gracePeriodSeconds`); none means defaults.
fn delete_options(body: &[u8]) -> Result<DeleteOptions, Failure> {
    if body.is_empty() {
        return Ok(DeleteOptions::default());
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| Failure::bad_request(format!("the DeleteOptions body is not JSON: {e}")))?;
    let propagation = match v["propagationPolicy"].as_str() {
        None | Some("Background") => Propagation::Background,
        Some("Foreground") => Propagation::Foreground,
        Some("Orphan") => Propagation::Orphan,
        Some(other) => {
            return Err(Failure::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    };
    Ok(DeleteOptions {
        grace_seconds: v["gracePeriodSeconds"].as_i64(),
        propagation,
    })
}
