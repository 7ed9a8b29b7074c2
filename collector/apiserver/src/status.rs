//! The `Status` failure an apiserver answers with. kubectl prints `Error from server (<reason>):
//! <message>`, or, for `Invalid` with details, one line per cause (`<field>: <message>`).

use serde::Serialize;
use serde_json::{Value, json};

/// One reason a request is invalid, as in `details.causes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, `FieldManagerConflict`...
    pub reason: String,
    pub message: String,
    /// The field path, e.g. `spec.replicas` (SSA conflicts: `.spec.replicas`).
    pub field: String,
}

impl Cause {
    pub fn new(reason: &str, field: &str, message: impl Into<String>) -> Cause {
        Cause {
            reason: reason.into(),
            message: message.into(),
            field: field.into(),
        }
    }
}

/// A failed request: HTTP code, `reason`, `message` and, where the apiserver gives them, details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: u16,
    pub reason: String,
    pub message: String,
    /// `details.name`, `details.group`, `details.kind` (the resource for NotFound, AlreadyExists
    /// and Conflict; the Kind for Invalid).
    pub name: Option<String>,
    pub group: Option<String>,
    pub kind: Option<String>,
    pub causes: Vec<Cause>,
}

impl Failure {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Failure {
        Failure {
            code,
            reason: reason.into(),
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
        }
    }

    /// 400: an undecodable body, an unknown field under strict validation, a bad parameter.
    pub fn bad_request(message: impl Into<String>) -> Failure {
        Failure::new(400, "BadRequest", message)
    }

    /// 415: a body type the endpoint does not take.
    pub fn unsupported_media_type(content_type: &str) -> Failure {
        Failure::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {content_type:?})"
            ),
        )
    }

    /// 422 `Invalid`: `<Kind>.<group> "<name>" is invalid: <field>: <message>[, ...]`.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<Cause>) -> Failure {
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let list: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let body = match list.as_slice() {
            [one] => one.clone(),
            _ => format!("[{}]", list.join(", ")),
        };
        Failure {
            code: 422,
            reason: "Invalid".into(),
            message: format!("{qualified} \"{name}\" is invalid: {body}"),
            name: Some(name.into()),
            group: Some(group.into()),
            kind: Some(kind.into()),
            causes,
        }
    }

    /// 409 `Conflict` on a stale resourceVersion (or a failed JSON patch `test`).
    pub fn conflict(resource: &str, group: &str, name: &str) -> Failure {
        Failure {
            message: format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(resource, group)
            ),
            ..Failure::with_details(409, "Conflict", resource, group, name)
        }
    }

    /// 404 `NotFound`: `<resource>.<group> "<name>" not found`.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Failure {
        Failure {
            message: format!("{} \"{name}\" not found", qualified(resource, group)),
            ..Failure::with_details(404, "NotFound", resource, group, name)
        }
    }

    /// 409 `AlreadyExists`.
    pub fn already_exists(resource: &str, group: &str, name: &str) -> Failure {
        Failure {
            message: format!("{} \"{name}\" already exists", qualified(resource, group)),
            ..Failure::with_details(409, "AlreadyExists", resource, group, name)
        }
    }

    fn with_details(code: u16, reason: &str, resource: &str, group: &str, name: &str) -> Failure {
        Failure {
            name: Some(name.into()),
            group: Some(group.into()),
            kind: Some(resource.into()),
            ..Failure::new(code, reason, "")
        }
    }

    /// The `Status` object the apiserver sends.
    pub fn to_json(&self) -> Value {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.name.is_some() || !self.causes.is_empty() {
            let mut details = serde_json::Map::new();
            for (k, v) in [
                ("name", &self.name),
                ("group", &self.group),
                ("kind", &self.kind),
            ] {
                if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                    details.insert(k.into(), v.clone().into());
                }
            }
            if !self.causes.is_empty() {
                details.insert("causes".into(), json!(self.causes));
            }
            body["details"] = Value::Object(details);
        }
        body
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.code, self.message)
    }
}

impl std::error::Error for Failure {}

/// `deployments.apps`, or `pods` for the core group.
pub fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_lists_causes_like_the_apiserver() {
        let one = Failure::invalid(
            "Deployment",
            "apps",
            "web",
            vec![Cause::new(
                "FieldValueInvalid",
                "spec.replicas",
                "Invalid value: -1: must be greater than or equal to 0",
            )],
        );
        assert_eq!(
            one.message,
            "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        let body = one.to_json();
        assert_eq!(body["code"], 422);
        assert_eq!(body["details"]["kind"], "Deployment");
        assert_eq!(body["details"]["causes"][0]["field"], "spec.replicas");
        let two = Failure::invalid(
            "Service",
            "",
            "geo",
            vec![
                Cause::new("FieldValueRequired", "spec.ports", "Required value"),
                Cause::new("FieldValueInvalid", "metadata.name", "Invalid value: \"A\""),
            ],
        );
        assert!(
            two.message
                .starts_with("Service \"geo\" is invalid: [spec.ports: Required value, ")
        );
        assert!(two.to_json()["details"].get("group").is_none());
    }

    #[test]
    fn conflict_and_not_found_name_the_resource() {
        let c = Failure::conflict("configmaps", "", "app-cfg");
        assert_eq!(c.code, 409);
        assert!(c.message.starts_with(
            "Operation cannot be fulfilled on configmaps \"app-cfg\": the object has been modified"
        ));
        let n = Failure::not_found("deployments", "apps", "x");
        assert_eq!(n.message, "deployments.apps \"x\" not found");
        assert_eq!(n.to_json()["details"]["kind"], "deployments");
    }
}
