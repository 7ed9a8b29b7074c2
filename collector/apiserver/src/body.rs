//! A create or update request's body, whatever its Content-Type, decoded to API JSON: JSON (also a
//! missing Content-Type, which `kubectl scale --current-replicas` sends), YAML, or Kubernetes
//! protobuf (kubectl's typed clients). Bodies over the apiserver's 3 MiB limit are refused before
//! decoding. Patch bodies have media types of their own and go to [`crate::patch`] instead.

use serde_json::Value;

use crate::protobuf;
use crate::status::Failure;

/// The apiserver's request body limit (`Request entity too large: limit is 3145728`).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The body formats an apiserver reads for create and update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
    Protobuf,
}

/// The format a Content-Type names: parameters (`; charset=utf-8`) and case are ignored, and no
/// header at all means JSON. Anything else is 415.
pub fn format(content_type: Option<&str>) -> Result<Format, Failure> {
    let Some(header) = content_type else {
        return Ok(Format::Json);
    };
    let essence = header
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "" | "application/json" => Ok(Format::Json),
        "application/yaml" => Ok(Format::Yaml),
        protobuf::CONTENT_TYPE => Ok(Format::Protobuf),
        _ => Err(Failure::unsupported_media_type(header)),
    }
}

/// 413 for a body over [`MAX_BODY_BYTES`]; a transport can call it with a Content-Length before
/// reading the body.
pub fn check_size(len: usize) -> Result<(), Failure> {
    if len > MAX_BODY_BYTES {
        return Err(Failure::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {MAX_BODY_BYTES}"),
        ));
    }
    Ok(())
}

/// The body as an API object (a JSON object), or the Status to answer: 413 too large, 415 unknown
/// Content-Type or protobuf kind, 400 undecodable (with the line and column for JSON and YAML).
pub fn decode(content_type: Option<&str>, bytes: &[u8]) -> Result<Value, Failure> {
    check_size(bytes.len())?;
    let format = format(content_type)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Failure::bad_request("the request body is empty"));
    }
    let value = match format {
        Format::Json => serde_json::from_slice::<Value>(bytes).map_err(|e| {
            Failure::bad_request(format!("the request body is not valid JSON: {e}"))
        })?,
        Format::Yaml => serde_norway::from_slice::<Value>(bytes).map_err(|e| {
            Failure::bad_request(format!("the request body is not valid YAML: {e}"))
        })?,
        Format::Protobuf => protobuf::decode(bytes)?,
    };
    if !value.is_object() {
        return Err(Failure::bad_request(format!(
            "the request body must be an object, got {}",
            match value {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
            }
        )));
    }
    Ok(value)
}
