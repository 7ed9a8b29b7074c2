//! The write verbs' transport: POST, PUT, PATCH and DELETE requests parsed into a
//! [`WriteRequest`] (resource, options from the query string and the DeleteOptions body, the body
//! itself) and handed to the cluster behind the API ([`ClusterWriter`]); its answer or `Status`
//! goes back as the apiserver sends it. What a write does to objects is the writer's business.

use std::sync::Arc;

use apiserver::status::Failure;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use super::resources::Resource;
use super::{KubeFacade, json_response, status};

/// What kind of write a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// POST: create in a collection, or a subresource action (`pods/x/eviction`).
    Create,
    /// PUT: replace.
    Update,
    /// PATCH, with the body's Content-Type.
    Patch,
    Delete,
}

/// One write, as the transport understood it.
#[derive(Debug, Clone)]
pub struct WriteRequest {
    pub verb: Verb,
    pub resource: Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub content_type: Option<String>,
    pub body: Bytes,
    /// `dryRun=All` in the query, or `"dryRun":["All"]` in a DELETE's options.
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    /// `fieldValidation=Strict`: fields the object's type does not have are a 400.
    pub strict: bool,
    pub user_agent: String,
}

/// A successful write: HTTP code and body.
#[derive(Debug, Clone)]
pub struct WriteReply {
    pub code: u16,
    pub body: Value,
}

/// The cluster behind a writable API (a live environment).
pub trait ClusterWriter: Send + Sync {
    fn write(&self, request: WriteRequest) -> Result<WriteReply, Failure>;
}

/// The `Status` response for a failure.
pub fn failure(f: &Failure) -> Response {
    let code = StatusCode::from_u16(f.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, &f.to_json())
}

/// A write's query options.
#[derive(Debug, Default)]
struct Options {
    dry_run: bool,
    field_manager: Option<String>,
    force: bool,
    strict: bool,
}

/// Query options of a write; an unknown dryRun or fieldValidation value is a 400, as the
/// apiserver answers.
fn options(query: &str) -> Result<Options, Failure> {
    let mut o = Options::default();
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "dryRun" => match v.as_ref() {
                "All" => o.dry_run = true,
                "" => {}
                other => {
                    return Err(Failure::bad_request(format!(
                        "Invalid dry run value: {other:?}: supported values: \"All\""
                    )));
                }
            },
            "fieldManager" => o.field_manager = Some(v.into_owned()),
            "force" => o.force = matches!(v.as_ref(), "true" | "1"),
            "fieldValidation" => match v.as_ref() {
                "Strict" => o.strict = true,
                "Warn" | "Ignore" | "" => {}
                other => {
                    return Err(Failure::bad_request(format!(
                        "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
                    )));
                }
            },
            _ => {}
        }
    }
    Ok(o)
}

/// Serves one write on `res` (the path already resolved by the dispatcher).
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    f: &Arc<KubeFacade>,
    method: &Method,
    headers: &HeaderMap,
    query: &str,
    body: Bytes,
    res: Resource,
    namespace: Option<&str>,
    name: Option<&str>,
    subresource: Option<&str>,
) -> Response {
    let Some(writer) = f.writer.clone() else {
        return status::read_only(match *method {
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            _ => "delete",
        });
    };
    let verb = match *method {
        Method::POST => Verb::Create,
        Method::PUT => Verb::Update,
        Method::PATCH => Verb::Patch,
        Method::DELETE => Verb::Delete,
        _ => {
            return failure(&Failure::new(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            ));
        }
    };
    let Options {
        mut dry_run,
        field_manager,
        force,
        strict,
    } = match options(query) {
        Ok(o) => o,
        Err(e) => return failure(&e),
    };
    // `kubectl delete --dry-run=server` puts dryRun in the DeleteOptions body, and
    // `kubectl drain --dry-run=server` in the Eviction's `deleteOptions`.
    let options_in_body = match (verb, subresource) {
        (Verb::Delete, _) => Some(""),
        (Verb::Create, Some("eviction")) => Some("/deleteOptions"),
        _ => None,
    };
    if let Some(pointer) = options_in_body
        && !body.is_empty()
        && let Ok(v) = serde_json::from_slice::<Value>(&body)
    {
        dry_run |= v
            .pointer(&format!("{pointer}/dryRun"))
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"));
    }
    let text = |h: header::HeaderName| {
        headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let request = WriteRequest {
        verb,
        resource: res,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        subresource: subresource.map(str::to_string),
        content_type: text(header::CONTENT_TYPE),
        body,
        dry_run,
        field_manager,
        force,
        strict,
        user_agent: text(header::USER_AGENT).unwrap_or_default(),
    };
    // The writer locks the simulation: keep it off the async threads.
    let res = request.resource.clone();
    match tokio::task::spawn_blocking(move || writer.write(request)).await {
        Ok(Ok(reply)) => {
            // Served like a read (times shifted, kind set), so that kubectl can tell a no-op
            // patch from a change by comparing it with what it read before.
            let body = if reply.body["kind"] == "Status" || reply.body["kind"] == "Scale" {
                reply.body
            } else {
                super::objects::served(&res, &reply.body, &f.clock.read())
            };
            json_response(
                StatusCode::from_u16(reply.code).unwrap_or(StatusCode::OK),
                &body,
            )
        }
        Ok(Err(e)) => failure(&e),
        Err(e) => failure(&Failure::new(
            500,
            "InternalError",
            format!("the write failed: {e}"),
        )),
    }
}

/// The `autoscaling/v1` Scale of a workload (Deployment, ReplicaSet, StatefulSet), as the `scale`
/// subresource serves it.
pub fn scale_of(object: &Value) -> Value {
    let meta = &object["metadata"];
    let selector: Vec<String> = object
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    serde_json::json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": object.pointer("/spec/replicas").cloned().unwrap_or(0.into())},
        "status": {
            "replicas": object.pointer("/status/replicas").cloned().unwrap_or(0.into()),
            "selector": selector.join(","),
        },
    })
}
