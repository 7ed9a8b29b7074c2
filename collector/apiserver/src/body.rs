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
        return Err(too_large());
    }
    Ok(())
}

/// 413: a body over [`MAX_BODY_BYTES`].
pub fn too_large() -> Failure {
    Failure::new(
        413,
        "RequestEntityTooLarge",
        format!("Request entity too large: limit is {MAX_BODY_BYTES}"),
    )
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
        // The apiserver's serializers' own prefixes (the parser's detail is serde's, not Go's).
        Format::Json => serde_json::from_slice::<Value>(bytes).map_err(|e| {
            Failure::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        Format::Yaml => serde_norway::from_slice::<Value>(bytes).map_err(|e| {
            Failure::bad_request(format!("error converting YAML to JSON: yaml: {e}"))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const CONFIGMAP_PB: &[u8] = include_bytes!("../tests/fixtures/protobuf/configmap.32.bin");

    #[test]
    fn json_yaml_and_protobuf_give_the_same_object() {
        let want = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}, "data": {"a": "1"}});
        let text = want.to_string();
        assert_eq!(
            decode(Some("application/json"), text.as_bytes()).unwrap(),
            want
        );
        // kubectl scale --current-replicas sends its PUT without a Content-Type.
        assert_eq!(decode(None, text.as_bytes()).unwrap(), want);
        assert_eq!(
            decode(Some("application/json; charset=utf-8"), text.as_bytes()).unwrap(),
            want
        );
        let yaml = "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: c\ndata:\n  a: \"1\"\n";
        assert_eq!(
            decode(Some("application/yaml"), yaml.as_bytes()).unwrap(),
            want
        );
        let pb = decode(Some("application/vnd.kubernetes.protobuf"), CONFIGMAP_PB).unwrap();
        assert_eq!(pb["kind"], "ConfigMap");
        assert_eq!(pb["data"]["a"], "1");
    }

    #[test]
    fn unknown_content_types_are_415_in_the_apiservers_words() {
        for ct in [
            "text/plain",
            "application/xml",
            "application/merge-patch+json",
        ] {
            let err = decode(Some(ct), b"{}").unwrap_err();
            assert_eq!(
                (err.code, err.reason.as_str()),
                (415, "UnsupportedMediaType")
            );
            assert!(
                err.message.starts_with(
                    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
                ),
                "{}",
                err.message
            );
            assert!(err.message.contains(ct), "{}", err.message);
        }
        assert_eq!(format(Some("Application/YAML")).unwrap(), Format::Yaml);
    }

    #[test]
    fn undecodable_bodies_are_400_with_the_position() {
        let err = decode(Some("application/json"), b"{\n  \"kind\": ConfigMap\n}").unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message
                .starts_with("couldn't get version/kind; json parse error: "),
            "{}",
            err.message
        );
        assert!(err.message.contains("line 2 column"), "{}", err.message);
        let err = decode(Some("application/yaml"), b"kind: a\n  bad: [\n").unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message
                .starts_with("error converting YAML to JSON: yaml: "),
            "{}",
            err.message
        );
        assert!(err.message.contains("line 2"), "{}", err.message);
        let err = decode(None, b"[1, 2]").unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "the request body must be an object, got an array")
        );
        let err = decode(Some("application/json"), b"  \n").unwrap_err();
        assert_eq!(err.message, "the request body is empty");
        let err = decode(Some("application/vnd.kubernetes.protobuf"), b"{}").unwrap_err();
        assert_eq!(err.code, 400);
        assert!(err.message.contains("magic bytes"), "{}", err.message);
    }

    #[test]
    fn bodies_over_three_mebibytes_are_413() {
        let big = vec![b' '; MAX_BODY_BYTES + 1];
        let err = decode(Some("application/json"), &big).unwrap_err();
        assert_eq!(err.code, 413);
        assert_eq!(err.reason, "RequestEntityTooLarge");
        assert_eq!(err.message, "Request entity too large: limit is 3145728");
        // The limit is checked before the Content-Type, as the apiserver reads the body first.
        assert_eq!(decode(Some("text/plain"), &big).unwrap_err().code, 413);
        assert!(check_size(MAX_BODY_BYTES).is_ok());
    }
}
