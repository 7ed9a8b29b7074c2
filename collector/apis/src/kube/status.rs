//! `Status` error bodies shaped like the apiserver's, which kubectl turns into
//! `Error from server (Reason): message`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

pub fn status(code: StatusCode, reason: &str, message: impl Into<String>) -> Response {
    status_with_details(code, reason, message, None)
}

pub fn status_with_details(
    code: StatusCode,
    reason: &str,
    message: impl Into<String>,
    details: Option<(&str, &str)>,
) -> Response {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message.into(),
        "reason": reason,
        "code": code.as_u16(),
    });
    if let Some((name, kind)) = details {
        body["details"] = json!({"name": name, "kind": kind});
    }
    (code, axum::Json(body)).into_response()
}

pub fn not_found(plural: &str, name: &str) -> Response {
    status_with_details(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{plural} \"{name}\" not found"),
        Some((name, plural)),
    )
}

pub fn no_such_resource() -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
}

pub fn bad_request(message: impl Into<String>) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message)
}

pub fn gone(message: impl Into<String>) -> Response {
    status(StatusCode::GONE, "Expired", message)
}

/// Every write verb, and exec/attach/port-forward: a recording cannot change.
pub fn read_only(verb: &str) -> Response {
    status(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!(
            "{verb} is not allowed: this cluster is a read-only replay of a recording (only get, \
             list and watch are served)"
        ),
    )
}
