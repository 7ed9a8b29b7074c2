//! One protobuf message (its bytes and its schema entry) in, the JSON Go's encoding/json would
//! have written for the same Go struct out:
//! - fields in Go struct order under their JSON names; inlined structs merged into the parent;
//! - a zero scalar is dropped where the Go field is `omitempty` and not a pointer (kubectl's Go
//!   structs put every non-pointer scalar on the wire, zero or not), kept where it is a pointer;
//! - a field absent from the wire gets Go's zero value where JSON would still show it (non-pointer
//!   structs, fields without omitempty);
//! - the apimachinery types with a JSON form of their own: Quantity (a string), IntOrString (a
//!   number or a string), Time and MicroTime (RFC 3339), Duration (Go's `1h2m3s`), RawExtension
//!   and FieldsV1 (embedded JSON), Go named slices (`ExtraValue`: a bare array), bytes (base64).

use std::borrow::Cow;

use base64::Engine as _;
use serde_json::{Map, Number, Value};

use super::schema::{Card, Field, Message, Scalar, Schema, Type};
use super::wire::{Reader, Wire};
use crate::status::Failure;

/// Deeper nesting than any Kubernetes object has; past it the body is refused, not recursed into.
pub(crate) const MAX_DEPTH: usize = 64;

const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";

/// Go's zero `time.Time` as Unix seconds (0001-01-01T00:00:00Z): JSON `null`.
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// Walks messages of one body, naming the JSON path of whatever fails.
pub(crate) struct Decoder<'s> {
    pub schema: &'s Schema,
    /// What the errors call the body, e.g. `Deployment apps/v1`.
    pub what: String,
}

impl Decoder<'_> {
    pub(crate) fn bad(&self, path: &str, problem: impl std::fmt::Display) -> Failure {
        let at = if path.is_empty() { "" } else { ": " };
        Failure::bad_request(format!(
            "protobuf body of {}: {path}{at}{problem}",
            self.what
        ))
    }

    /// The message `name` decoded from `bytes`.
    pub(crate) fn message(
        &self,
        name: &str,
        bytes: &[u8],
        path: &str,
        depth: usize,
    ) -> Result<Value, Failure> {
        if depth > MAX_DEPTH {
            return Err(self.bad(path, format!("nested deeper than {MAX_DEPTH} messages")));
        }
        let wire = Reader::all(bytes).map_err(|e| self.bad(path, e))?;
        if let Some(value) = self.special(name, &wire, path, depth)? {
            return Ok(value);
        }
        let Some(message) = self.schema.get(name) else {
            return Err(self.bad(path, format!("no schema for message {name}")));
        };
        let mut out = Map::new();
        for field in &message.fields {
            let sent: Vec<Wire> = wire
                .iter()
                .filter(|(n, _)| *n == field.number)
                .map(|(_, w)| *w)
                .collect();
            // An inlined struct's fields sit in this object, so errors name them from here.
            let child = match (field.inline, path.is_empty()) {
                (true, _) => path.to_string(),
                (false, true) => field.json.clone(),
                (false, false) => format!("{path}.{}", field.json),
            };
            match field.card {
                Card::Optional => self.optional(field, &sent, &child, depth, &mut out)?,
                Card::Repeated => {
                    let items = self.repeated(field, &sent, &child, depth)?;
                    put_collection(field, Value::Array(items), &mut out);
                }
                Card::Map => {
                    let entries = self.map(field, &sent, &child, depth)?;
                    put_collection(field, Value::Object(entries), &mut out);
                }
            }
        }
        Ok(list_or_object(message, out))
    }

    fn optional(
        &self,
        field: &Field,
        sent: &[Wire],
        path: &str,
        depth: usize,
        out: &mut Map<String, Value>,
    ) -> Result<(), Failure> {
        let omittable = field.omitempty || field.omitzero;
        let value = match (&field.ty, sent.last()) {
            (Type::Scalar(s), Some(w)) => {
                let v = self.scalar(*s, *w, path)?;
                if !field.pointer && omittable && is_zero(&v) {
                    return Ok(());
                }
                v
            }
            (Type::Scalar(s), None) => {
                if omittable {
                    return Ok(());
                }
                if field.pointer { Value::Null } else { zero(*s) }
            }
            (Type::Message(_), None) if field.pointer => {
                if omittable {
                    return Ok(());
                }
                Value::Null
            }
            (Type::Message(name), _) => {
                // Repeated occurrences of one message field merge, as protobuf parsers do.
                let bytes = self.joined(sent, path)?;
                let v = self.message(name, &bytes, path, depth + 1)?;
                if field.inline {
                    if let Value::Object(inner) = v {
                        out.extend(inner);
                    }
                    return Ok(());
                }
                if field.omitzero && !field.pointer && is_zero(&v) {
                    return Ok(());
                }
                v
            }
        };
        out.insert(field.json.clone(), value);
        Ok(())
    }

    fn joined<'b>(&self, sent: &[Wire<'b>], path: &str) -> Result<Cow<'b, [u8]>, Failure> {
        let mut parts = Vec::with_capacity(sent.len());
        for w in sent {
            match w {
                Wire::Bytes(b) => parts.push(*b),
                other => {
                    return Err(self.bad(
                        path,
                        format!(
                            "expected a length-delimited message, found {}",
                            other.describe()
                        ),
                    ));
                }
            }
        }
        Ok(match parts.as_slice() {
            [] => Cow::Borrowed(&[]),
            [one] => Cow::Borrowed(*one),
            many => Cow::Owned(many.concat()),
        })
    }

    fn repeated(
        &self,
        field: &Field,
        sent: &[Wire],
        path: &str,
        depth: usize,
    ) -> Result<Vec<Value>, Failure> {
        let mut items = Vec::with_capacity(sent.len());
        for w in sent {
            let item_path = format!("{path}[{}]", items.len());
            match (&field.ty, w) {
                (Type::Message(name), Wire::Bytes(b)) => {
                    items.push(self.message(name, b, &item_path, depth + 1)?);
                }
                (Type::Message(_), other) => {
                    return Err(self.bad(
                        &item_path,
                        format!(
                            "expected a length-delimited message, found {}",
                            other.describe()
                        ),
                    ));
                }
                // Packed numbers: one length-delimited run of values.
                (Type::Scalar(s), Wire::Bytes(b)) if packable(*s) => {
                    let mut reader = Reader::new(b);
                    while !reader.at_end() {
                        let w = match s {
                            Scalar::Fixed32 | Scalar::Sfixed32 | Scalar::Float => {
                                reader.fixed32().map(Wire::Fixed32)
                            }
                            Scalar::Fixed64 | Scalar::Sfixed64 | Scalar::Double => {
                                reader.fixed64().map(Wire::Fixed64)
                            }
                            _ => reader.varint().map(Wire::Varint),
                        }
                        .map_err(|e| self.bad(path, format!("packed values: {e}")))?;
                        items.push(self.scalar(*s, w, path)?);
                    }
                }
                (Type::Scalar(s), w) => items.push(self.scalar(*s, *w, &item_path)?),
            }
        }
        Ok(items)
    }

    fn map(
        &self,
        field: &Field,
        sent: &[Wire],
        path: &str,
        depth: usize,
    ) -> Result<Map<String, Value>, Failure> {
        let mut entries = Map::new();
        for w in sent {
            let Wire::Bytes(entry) = w else {
                return Err(self.bad(
                    path,
                    format!(
                        "expected a length-delimited map entry, found {}",
                        w.describe()
                    ),
                ));
            };
            let parts =
                Reader::all(entry).map_err(|e| self.bad(path, format!("map entry: {e}")))?;
            let key = match parts.iter().rev().find(|(n, _)| *n == 1) {
                Some((_, Wire::Bytes(k))) => String::from_utf8_lossy(k).into_owned(),
                Some((_, other)) => {
                    return Err(self.bad(
                        path,
                        format!("map key must be a string, found {}", other.describe()),
                    ));
                }
                None => String::new(),
            };
            let value_path = format!("{path}[{key:?}]");
            let sent_value = parts.iter().rev().find(|(n, _)| *n == 2).map(|(_, w)| *w);
            let value = match (&field.ty, sent_value) {
                (Type::Scalar(s), Some(w)) => self.scalar(*s, w, &value_path)?,
                (Type::Scalar(s), None) => zero(*s),
                (Type::Message(name), w) => {
                    let bytes = self.joined(w.as_slice(), &value_path)?;
                    self.message(name, &bytes, &value_path, depth + 1)?
                }
            };
            entries.insert(key, value);
        }
        Ok(entries)
    }

    fn scalar(&self, s: Scalar, w: Wire, path: &str) -> Result<Value, Failure> {
        let mismatch = || {
            self.bad(
                path,
                format!("a {s:?} field cannot be {}", w.describe()).to_lowercase(),
            )
        };
        Ok(match (s, w) {
            (Scalar::String, Wire::Bytes(b)) => Value::String(String::from_utf8_lossy(b).into()),
            (Scalar::Bytes, Wire::Bytes(b)) => {
                Value::String(base64::engine::general_purpose::STANDARD.encode(b))
            }
            (Scalar::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
            (Scalar::Int32, Wire::Varint(v)) => Value::from(v as i32),
            (Scalar::Int64, Wire::Varint(v)) => Value::from(v as i64),
            (Scalar::Uint32, Wire::Varint(v)) => Value::from(v as u32),
            (Scalar::Uint64, Wire::Varint(v)) => Value::from(v),
            (Scalar::Sint32, Wire::Varint(v)) => Value::from(unzigzag(v) as i32),
            (Scalar::Sint64, Wire::Varint(v)) => Value::from(unzigzag(v)),
            (Scalar::Fixed32, Wire::Fixed32(v)) => Value::from(v),
            (Scalar::Sfixed32, Wire::Fixed32(v)) => Value::from(v as i32),
            (Scalar::Fixed64, Wire::Fixed64(v)) => Value::from(v),
            (Scalar::Sfixed64, Wire::Fixed64(v)) => Value::from(v as i64),
            (Scalar::Float, Wire::Fixed32(v)) => self.float(f64::from(f32::from_bits(v)), path)?,
            (Scalar::Double, Wire::Fixed64(v)) => self.float(f64::from_bits(v), path)?,
            _ => return Err(mismatch()),
        })
    }

    fn float(&self, f: f64, path: &str) -> Result<Value, Failure> {
        Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| self.bad(path, format!("{f} has no JSON form")))
    }

    /// The apimachinery types whose JSON is not their protobuf structure.
    fn special(
        &self,
        name: &str,
        wire: &[(u32, Wire)],
        path: &str,
        depth: usize,
    ) -> Result<Option<Value>, Failure> {
        let last = |number: u32| {
            wire.iter()
                .rev()
                .find(|(n, _)| *n == number)
                .map(|(_, w)| *w)
        };
        let scalar = |number: u32, s: Scalar| -> Result<Option<Value>, Failure> {
            last(number).map(|w| self.scalar(s, w, path)).transpose()
        };
        let value = match name {
            QUANTITY => match scalar(1, Scalar::String)? {
                Some(Value::String(q)) if !q.is_empty() => Value::String(q),
                _ => Value::String("0".into()),
            },
            INT_OR_STRING => {
                let kind = scalar(1, Scalar::Int64)?
                    .and_then(|v| v.as_i64())
                    .unwrap_or(0);
                match kind {
                    0 => scalar(2, Scalar::Int32)?.unwrap_or(Value::from(0)),
                    1 => scalar(3, Scalar::String)?.unwrap_or(Value::String(String::new())),
                    other => {
                        return Err(self.bad(
                            path,
                            format!("IntOrString type {other} is neither 0 (int) nor 1 (string)"),
                        ));
                    }
                }
            }
            TIME | MICRO_TIME => {
                if wire.is_empty() {
                    return Ok(Some(Value::Null));
                }
                let seconds = scalar(1, Scalar::Int64)?
                    .and_then(|v| v.as_i64())
                    .unwrap_or(0);
                let nanos = scalar(2, Scalar::Int32)?
                    .and_then(|v| v.as_i64())
                    .unwrap_or(0);
                self.time(seconds, nanos, name == MICRO_TIME, path)?
            }
            DURATION => {
                let ns = scalar(1, Scalar::Int64)?
                    .and_then(|v| v.as_i64())
                    .unwrap_or(0);
                Value::String(go_duration(ns))
            }
            RAW_EXTENSION | FIELDS_V1 => match last(1) {
                None => Value::Null,
                Some(Wire::Bytes(raw)) => self.embedded(raw, path, depth)?,
                Some(other) => {
                    return Err(self.bad(path, format!("raw bytes cannot be {}", other.describe())));
                }
            },
            _ => return Ok(None),
        };
        Ok(Some(value))
    }

    /// `metav1.Time` (whole seconds: the apiserver drops nanos on decode) or `MicroTime`.
    fn time(&self, seconds: i64, nanos: i64, micro: bool, path: &str) -> Result<Value, Failure> {
        if seconds == GO_ZERO_TIME_SECONDS && (nanos == 0 || !micro) {
            return Ok(Value::Null);
        }
        let nanos = if micro { nanos } else { 0 };
        let at = u32::try_from(nanos)
            .ok()
            .filter(|n| *n < 1_000_000_000)
            .and_then(|n| chrono::DateTime::from_timestamp(seconds, n))
            .filter(|t| (0..=9999).contains(&chrono::Datelike::year(t)))
            .ok_or_else(|| self.bad(path, format!("time {seconds}s {nanos}ns is out of range")))?;
        let format = if micro {
            "%Y-%m-%dT%H:%M:%S%.6fZ"
        } else {
            "%Y-%m-%dT%H:%M:%SZ"
        };
        Ok(Value::String(at.format(format).to_string()))
    }

    /// A RawExtension's or FieldsV1's bytes: JSON, or (RawExtension) a nested protobuf object.
    fn embedded(&self, raw: &[u8], path: &str, depth: usize) -> Result<Value, Failure> {
        if raw.is_empty() {
            return Ok(Value::Null);
        }
        if raw.starts_with(&super::MAGIC) {
            return super::envelope(self.schema, raw, depth + 1);
        }
        serde_json::from_slice(raw)
            .map_err(|e| self.bad(path, format!("embedded object is not JSON: {e}")))
    }
}

/// Repeated fields and maps: Go's nil slice or map is `null`, or dropped under omitempty.
fn put_collection(field: &Field, value: Value, out: &mut Map<String, Value>) {
    let empty = match &value {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if empty {
        if !(field.omitempty || field.omitzero) {
            out.insert(field.json.clone(), Value::Null);
        }
    } else {
        out.insert(field.json.clone(), value);
    }
}

fn list_or_object(message: &Message, mut out: Map<String, Value>) -> Value {
    if !message.list {
        return Value::Object(out);
    }
    let items = message.fields.first().and_then(|f| out.remove(&f.json));
    items.unwrap_or(Value::Array(Vec::new()))
}

fn packable(s: Scalar) -> bool {
    !matches!(s, Scalar::String | Scalar::Bytes)
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Go's JSON of a zero-valued non-pointer scalar field.
fn zero(s: Scalar) -> Value {
    match s {
        Scalar::String => Value::String(String::new()),
        // A nil []byte.
        Scalar::Bytes => Value::Null,
        Scalar::Bool => Value::Bool(false),
        _ => Value::from(0),
    }
}

/// What Go's omitempty (and, for decoded structs, omitzero) leaves out.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// `time.Duration.String()`: `0s`, `1.5s`, `2m0s`, `1h0m0s`, `300ms`, `1.5µs`.
pub(crate) fn go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let u = ns.unsigned_abs();
    let body = if u < 1_000_000_000 {
        let (unit, per) = match u {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        format!("{}{unit}", decimal(u, per))
    } else {
        const HOUR: u64 = 3_600_000_000_000;
        const MINUTE: u64 = 60_000_000_000;
        let (h, rest) = (u / HOUR, u % HOUR);
        let (m, s) = (rest / MINUTE, rest % MINUTE);
        let mut out = String::new();
        if h > 0 {
            out.push_str(&format!("{h}h"));
        }
        if h > 0 || m > 0 {
            out.push_str(&format!("{m}m"));
        }
        out.push_str(&format!("{}s", decimal(s, 1_000_000_000)));
        out
    };
    format!("{sign}{body}")
}

/// `v / per` with the fraction's trailing zeros dropped (`per` a power of ten).
fn decimal(v: u64, per: u64) -> String {
    let (whole, frac) = (v / per, v % per);
    if frac == 0 {
        return whole.to_string();
    }
    let width = per.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoder() -> Decoder<'static> {
        Decoder {
            schema: super::super::schema::schema().unwrap(),
            what: "test".into(),
        }
    }

    #[test]
    fn specials_decode_to_their_json_forms() {
        let d = decoder();
        // Duration {1: 90s in ns}.
        let ns = 90_000_000_000u64;
        let mut duration = vec![0x08];
        let mut v = ns;
        while v >= 0x80 {
            duration.push((v as u8) | 0x80);
            v >>= 7;
        }
        duration.push(v as u8);
        assert_eq!(d.message(DURATION, &duration, "", 0).unwrap(), "1m30s");
        // Quantity {1: "250m"}; an empty one is Go's zero Quantity, "0".
        assert_eq!(d.message(QUANTITY, b"\x0a\x04250m", "", 0).unwrap(), "250m");
        assert_eq!(d.message(QUANTITY, b"", "", 0).unwrap(), "0");
        // IntOrString {1: 1 (string), 3: "http"} and {2: 8080}.
        assert_eq!(
            d.message(INT_OR_STRING, b"\x08\x01\x1a\x04http", "", 0)
                .unwrap(),
            "http"
        );
        assert_eq!(
            d.message(INT_OR_STRING, b"\x10\x90\x3f", "", 0).unwrap(),
            8080
        );
        // An empty Time is Go's zero time: null.
        assert_eq!(d.message(TIME, b"", "", 0).unwrap(), Value::Null);
        let err = d.message(TIME, b"\x08\xff\xff\xff\xff\xff\xff\xff\x7f", "t", 0);
        assert!(err.unwrap_err().message.contains("t: time"));
    }

    #[test]
    fn durations_read_like_go() {
        for (ns, want) in [
            (0, "0s"),
            (1_500_000_000, "1.5s"),
            (120_000_000_000, "2m0s"),
            (3_600_000_000_000, "1h0m0s"),
            (300_000_000, "300ms"),
            (1_500, "1.5µs"),
            (7, "7ns"),
            (-90_000_000_000, "-1m30s"),
        ] {
            assert_eq!(go_duration(ns), want, "{ns}");
        }
        assert!(go_duration(i64::MIN).starts_with("-2562047h"));
    }
}
