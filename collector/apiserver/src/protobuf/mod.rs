//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded to the JSON
//! the same object would have been sent as. kubectl 1.32+ sends these for every typed-client write
//! (`create configmap|secret|deployment|…`, `autoscale`, `auth can-i`) and does not retry in JSON
//! after a 415, so a server that cannot read them cannot serve those commands.
//!
//! What flows through: the body's bytes → the envelope (`k8s\0`, then a `runtime.Unknown` holding
//! `typeMeta{apiVersion, kind}` and `raw`, the object's own message) → the kind's message, looked
//! up in the schema table → JSON, `kind` and `apiVersion` first.
//!
//! Why a table and a hand-written wire reader rather than generated structs: the object has to
//! come out as the JSON Go's encoding/json would have written, and that depends on Go facts the
//! .proto files do not carry (omitempty, pointer or not, inlined embedded structs). `k8s-pb`
//! (prost structs) and `prost-reflect` (dynamic messages) both decode from the .proto alone and
//! would still need per-field Go knowledge on top, plus a descriptor set built with `protoc`. So
//! `gen_schema.py` reads k8s.io/api and k8s.io/apimachinery once (generated.proto for numbers and
//! wire types, the Go types for JSON names and omit rules) into `schema.txt`, committed; the
//! decoder walks that table with a bounds-checked reader (`wire.rs`) and no new dependencies.
//! A kind outside the table's packages is answered 415, naming it.

mod json;
mod schema;
mod wire;

use serde_json::{Map, Value};

use crate::status::Failure;
use wire::{Reader, Wire};

/// The media type kubectl's typed clients send.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// Options kinds every group version registers (`metav1.AddToGroupVersion`): they decode as the
/// meta/v1 message whatever the apiVersion says.
const META_OPTIONS: [&str; 6] = [
    "DeleteOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
    "GetOptions",
    "ListOptions",
];
const META_PACKAGE: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

/// A protobuf body to API JSON: 400 if it is not Kubernetes protobuf, 415 if it holds a kind this
/// server has no schema for.
pub fn decode(bytes: &[u8]) -> Result<Value, Failure> {
    let table = schema::schema().map_err(|e| Failure::new(500, "InternalError", e))?;
    envelope(table, bytes, 0)
}

/// The envelope and the object in it; also used for objects nested in a RawExtension.
fn envelope(table: &schema::Schema, bytes: &[u8], depth: usize) -> Result<Value, Failure> {
    let bad = |problem: String| Failure::bad_request(format!("protobuf body: {problem}"));
    let Some(unknown) = bytes.strip_prefix(&MAGIC) else {
        return Err(bad(format!(
            "does not start with the Kubernetes protobuf magic bytes \"k8s\\x00\" (starts with {:?})",
            String::from_utf8_lossy(bytes.get(..4).unwrap_or(bytes))
        )));
    };
    let fields = Reader::all(unknown).map_err(|e| bad(format!("envelope: {e}")))?;
    let bytes_of = |number: u32, what: &str| -> Result<&[u8], Failure> {
        match fields.iter().rev().find(|(n, _)| *n == number) {
            None => Ok(&[]),
            Some((_, Wire::Bytes(b))) => Ok(b),
            Some((_, other)) => Err(bad(format!(
                "envelope {what} must be length-delimited, found {}",
                other.describe()
            ))),
        }
    };
    let type_meta = bytes_of(1, "typeMeta")?;
    let raw = bytes_of(2, "raw")?;
    let text = |number: u32, what: &str| {
        bytes_of(number, what).map(|b| String::from_utf8_lossy(b).into_owned())
    };
    let encoding = text(3, "contentEncoding")?;
    let content_type = text(4, "contentType")?;
    let meta = Reader::all(type_meta).map_err(|e| bad(format!("typeMeta: {e}")))?;
    let meta_text = |number: u32| match meta.iter().rev().find(|(n, _)| *n == number) {
        Some((_, Wire::Bytes(b))) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    };
    let (api_version, kind) = (meta_text(1), meta_text(2));
    if kind.is_empty() {
        return Err(bad("envelope typeMeta has no kind".into()));
    }
    if !encoding.is_empty() || !(content_type.is_empty() || content_type == CONTENT_TYPE) {
        return Err(Failure::new(
            415,
            "UnsupportedMediaType",
            format!(
                "protobuf body of {kind}: contentEncoding {encoding:?} and contentType {content_type:?} are not supported (only plain protobuf)"
            ),
        ));
    }
    let Some(message) = message_for(table, &api_version, &kind) else {
        return Err(Failure::new(
            415,
            "UnsupportedMediaType",
            format!(
                "protobuf body holds kind {kind:?} of apiVersion {api_version:?}, which this server cannot decode from protobuf; send it as application/json"
            ),
        ));
    };
    let decoder = json::Decoder {
        schema: table,
        what: format!("{kind} {api_version}"),
    };
    let object = decoder.message(&message, raw, "", depth)?;
    let mut out = Map::new();
    out.insert("kind".into(), Value::String(kind));
    out.insert("apiVersion".into(), Value::String(api_version));
    if let Value::Object(fields) = object {
        out.extend(fields);
    }
    Ok(Value::Object(out))
}

/// The proto message of `kind` in `apiVersion` (`apps/v1` → `k8s.io.api.apps.v1.<kind>`).
fn message_for(table: &schema::Schema, api_version: &str, kind: &str) -> Option<String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let name_ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    if !name_ok(kind) || !name_ok(version) {
        return None;
    }
    let package = match group {
        "" => Some("core".to_string()),
        "meta.k8s.io" => None,
        // Built-in groups are one word or `<word>[.authorization].k8s.io`; the package is the
        // first word (`rbac.authorization.k8s.io` → rbac). Anything else is a custom resource.
        g if !g.contains('.') || g.ends_with(".k8s.io") => g.split('.').next().map(str::to_string),
        _ => None,
    };
    let in_group = package
        .map(|p| format!("k8s.io.api.{p}.{version}.{kind}"))
        .filter(|name| table.contains_key(name));
    in_group.or_else(|| {
        let meta = format!("{META_PACKAGE}.{kind}");
        (META_OPTIONS.contains(&kind) && version == "v1").then_some(meta)
    })
}
