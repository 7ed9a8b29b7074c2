//! What the apiserver does with a PATCH body: the request's Content-Type picks a [`PatchType`],
//! [`patch`] applies a JSON patch, JSON merge patch or strategic merge patch to the stored object
//! and returns the object to store, and [`apply`] does server-side apply with field ownership.
//! [`record_update`] keeps `metadata.managedFields` right for every other write, so apply
//! conflicts with earlier `kubectl scale`/`patch`/`edit` writes appear as on a real cluster.
//!
//! Errors are the apiserver's (`pkg/endpoints/handlers/patch.go`, server default
//! `fieldValidation=Warn`):
//! - an undecodable body, or one of the wrong JSON type → 400 `BadRequest`
//!   (`error decoding patch: ...`; a merge patch of `null` → `Invalid JSON Patch`);
//! - a JSON patch operation that cannot be applied (missing path, failed `test`, unknown op) →
//!   422 `Invalid` "the server rejected our request due to an error in our request": the handler
//!   maps every error of applying the operations to that one response, a failed `test` included
//!   (so not the 409 LIVE.md §2.1 suggests); nothing of the patch is applied;
//! - a patched object that no longer decodes as an object → 422 `Invalid` on field `patch`;
//! - a patch that renames the object or moves it to another namespace → 400 `BadRequest`
//!   (`checkName`: "the name of the object (X) does not match the name on the URL (Y)");
//! - strategic merge directives of the wrong shape → 400 (`invalid patch format of ...`), and
//!   the ones apimachinery reports as plain errors (unknown `$patch` value, including `merge`,
//!   which apimachinery only accepts as the default it is; an item without its merge key;
//!   a patch list out of `$setElementOrder` order) → 500 `InternalError`.
//!
//! A patch that sets `metadata.resourceVersion` makes the write conditional; comparing it with the
//! stored version (409 on mismatch) is the store's job, as in the apiserver.

mod apply;
mod fields;
mod schema;
mod strategic;

pub use apply::{apply, default_manager, record_update};

use serde_json::Value;

use crate::status::{Cause, Failure};

/// The apiserver refuses JSON patches longer than this (`maxJSONPatchOperations`).
const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The four patch Content-Types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386/7396).
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply; the body may be YAML or JSON).
    Apply,
}

impl PatchType {
    /// The patch type of a Content-Type header value; parameters (`; charset=utf-8`) and case
    /// are ignored. `None` for anything else (the apiserver answers 415).
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        let ty = essence.to_ascii_lowercase();
        match ty.as_str() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Applies a JSON, merge or strategic merge patch `body` to `current` (an object of Kind `kind`,
/// which strategic merge needs for its list semantics) and returns the object to store.
/// `managedFields` are left as the patch leaves them: call [`record_update`] afterwards.
/// Server-side apply has its own entry point, [`apply`]; passing [`PatchType::Apply`] here is a
/// 400.
pub fn patch(current: &Value, body: &[u8], ty: PatchType, kind: &str) -> Result<Value, Failure> {
    let patched = match ty {
        PatchType::Json => json_patch(current, body)?,
        PatchType::Merge => merge_patch(current, body)?,
        PatchType::Strategic => strategic_patch(current, body, kind)?,
        PatchType::Apply => {
            return Err(Failure::bad_request(
                "an apply patch (application/apply-patch+yaml) needs a field manager: use patch::apply",
            ));
        }
    };
    if !patched.is_object() {
        return Err(shape_error(
            &patched,
            "the patched object must be a JSON object",
        ));
    }
    check_identity(current, &patched)?;
    Ok(patched)
}

/// RFC 6902, all operations or none.
fn json_patch(current: &Value, body: &[u8]) -> Result<Value, Failure> {
    let decoded: Value = decode(body)?;
    let Value::Array(ops) = decoded else {
        return Err(Failure::bad_request(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
            go_type(&decoded)
        )));
    };
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(Failure::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "Request entity too large: The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                ops.len()
            ),
        ));
    }
    // An operation the library cannot even read (unknown op, missing path) fails where the
    // apiserver's library fails it: when applied, with the same 422.
    let ops: Vec<json_patch::PatchOperation> = ops
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()
        .map_err(|_| rejected())?;
    let mut doc = current.clone();
    json_patch::patch(&mut doc, &ops).map_err(|_| rejected())?;
    Ok(doc)
}

/// RFC 7396: objects merge, `null` deletes.
fn merge_patch(current: &Value, body: &[u8]) -> Result<Value, Failure> {
    let decoded: Value = decode(body)?;
    match &decoded {
        Value::Object(_) => {}
        Value::Null => return Err(Failure::bad_request("Invalid JSON Patch")),
        other => {
            return Err(Failure::bad_request(format!(
                "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go_type(other)
            )));
        }
    }
    let mut doc = current.clone();
    json_patch::merge(&mut doc, &decoded);
    Ok(doc)
}

fn strategic_patch(current: &Value, body: &[u8], kind: &str) -> Result<Value, Failure> {
    match decode(body)? {
        Value::Object(p) => strategic::apply(current, &p, kind),
        // Decoding `null` into the patch map leaves it empty: nothing changes.
        Value::Null => Ok(current.clone()),
        other => Err(Failure::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_type(&other)
        ))),
    }
}

fn decode(body: &[u8]) -> Result<Value, Failure> {
    serde_json::from_slice(body)
        .map_err(|e| Failure::bad_request(format!("error decoding patch: {e}")))
}

/// How Go's encoding/json names a JSON value's type in "cannot unmarshal X" errors.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The name (and namespace) in the patched object must still be the one on the URL.
pub(crate) fn check_identity(current: &Value, patched: &Value) -> Result<(), Failure> {
    let meta = |v: &Value, k: &str| -> String {
        v.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (name, new_name) = (meta(current, "name"), meta(patched, "name"));
    if name != new_name {
        return Err(Failure::bad_request(format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    let (ns, new_ns) = (meta(current, "namespace"), meta(patched, "namespace"));
    if !ns.is_empty() && !new_ns.is_empty() && ns != new_ns {
        return Err(Failure::bad_request(format!(
            "the namespace of the object ({new_ns}) does not match the namespace on the request ({ns})"
        )));
    }
    Ok(())
}

/// 422 for a JSON patch that does not apply (`NewGenericServerResponse(422, ...)`, whose message
/// replaces the library's).
fn rejected() -> Failure {
    Failure::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )
}

/// 422 `Invalid` on field `patch`: the patched object does not have the type's shape.
pub fn shape_error(value: &Value, detail: &str) -> Failure {
    let shown = serde_json::to_string(&value.to_string()).unwrap_or_default();
    Failure::invalid(
        "",
        "",
        "",
        vec![Cause::new(
            "FieldValueInvalid",
            "patch",
            format!("Invalid value: {shown}: {detail}"),
        )],
    )
}

/// 500 `InternalError`, for what apimachinery reports as a plain error.
pub(crate) fn internal_error(message: impl std::fmt::Display) -> Failure {
    Failure::new(
        500,
        "InternalError",
        format!("Internal error occurred: {message}"),
    )
}

#[cfg(test)]
mod tests;
