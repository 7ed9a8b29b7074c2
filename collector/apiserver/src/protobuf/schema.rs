//! The message table (`schema.txt`, written by `gen_schema.py` from k8s.io/api and
//! k8s.io/apimachinery): for each Kubernetes protobuf message, its fields by number with the JSON
//! name, the wire type and what Go's encoding/json does with the field (omitempty, omitzero,
//! pointer, inline). Parsed once, on first use.

use std::collections::HashMap;
use std::sync::OnceLock;

const SCHEMA: &str = include_str!("schema.txt");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scalar {
    String,
    Bytes,
    Bool,
    Int32,
    Int64,
    Uint32,
    Uint64,
    Sint32,
    Sint64,
    Fixed32,
    Fixed64,
    Sfixed32,
    Sfixed64,
    Double,
    Float,
}

impl Scalar {
    fn parse(name: &str) -> Option<Scalar> {
        Some(match name {
            "string" => Scalar::String,
            "bytes" => Scalar::Bytes,
            "bool" => Scalar::Bool,
            "int32" => Scalar::Int32,
            "int64" => Scalar::Int64,
            "uint32" => Scalar::Uint32,
            "uint64" => Scalar::Uint64,
            "sint32" => Scalar::Sint32,
            "sint64" => Scalar::Sint64,
            "fixed32" => Scalar::Fixed32,
            "fixed64" => Scalar::Fixed64,
            "sfixed32" => Scalar::Sfixed32,
            "sfixed64" => Scalar::Sfixed64,
            "double" => Scalar::Double,
            "float" => Scalar::Float,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Type {
    Scalar(Scalar),
    /// The full proto name, e.g. `k8s.io.api.core.v1.PodSpec`.
    Message(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Card {
    Optional,
    Repeated,
    /// `map<string, T>`: repeated entries {1: key, 2: value}.
    Map,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub number: u32,
    pub json: String,
    pub card: Card,
    pub ty: Type,
    /// A Go pointer: sent (and kept in JSON) even when zero.
    pub pointer: bool,
    pub omitempty: bool,
    pub omitzero: bool,
    /// An embedded Go struct whose fields JSON puts in the parent object.
    pub inline: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Message {
    /// A Go named slice (`type ExtraValue []string`): JSON is the `items` array itself.
    pub list: bool,
    /// In Go struct order, which is the JSON order.
    pub fields: Vec<Field>,
}

impl Message {
    #[cfg(test)]
    pub(crate) fn field(&self, number: u32) -> Option<&Field> {
        self.fields.iter().find(|f| f.number == number)
    }
}

pub(crate) type Schema = HashMap<String, Message>;

/// The table, or why the embedded file does not parse (a build defect a test catches).
pub(crate) fn schema() -> Result<&'static Schema, &'static str> {
    static TABLE: OnceLock<Result<Schema, String>> = OnceLock::new();
    TABLE
        .get_or_init(|| parse(SCHEMA))
        .as_ref()
        .map_err(String::as_str)
}

fn parse(text: &str) -> Result<Schema, String> {
    let mut table = Schema::new();
    let mut current: Option<&mut Message> = None;
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => {}
            [first, ..] if first.starts_with('#') => {}
            [kind @ ("message" | "list"), name] => {
                let message = table.entry((*name).to_string()).or_default();
                message.list = *kind == "list";
                current = Some(message);
            }
            [number, json, card, ty, flags] => {
                let field = parse_field(number, json, card, ty, flags)
                    .ok_or_else(|| format!("schema.txt line {}: bad field {line:?}", i + 1))?;
                let message = current
                    .as_deref_mut()
                    .ok_or_else(|| format!("schema.txt line {}: field outside a message", i + 1))?;
                message.fields.push(field);
            }
            _ => return Err(format!("schema.txt line {}: unreadable {line:?}", i + 1)),
        }
    }
    Ok(table)
}

fn parse_field(number: &str, json: &str, card: &str, ty: &str, flags: &str) -> Option<Field> {
    let card = match card {
        "opt" => Card::Optional,
        "rep" => Card::Repeated,
        "map" => Card::Map,
        _ => return None,
    };
    let ty = Scalar::parse(ty).map_or_else(|| Type::Message(ty.to_string()), Type::Scalar);
    let has = |flag: &str| flags.split(',').any(|f| f == flag);
    Some(Field {
        number: number.parse().ok()?,
        json: json.to_string(),
        card,
        ty,
        pointer: has("ptr"),
        omitempty: has("omitempty"),
        omitzero: has("omitzero"),
        inline: has("inline"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_parses_and_knows_the_kinds_kubectl_creates() {
        let table = schema().unwrap();
        let spec = &table["k8s.io.api.apps.v1.DeploymentSpec"];
        let replicas = spec.field(1).unwrap();
        assert_eq!(replicas.json, "replicas");
        assert!(replicas.pointer && replicas.omitempty);
        assert_eq!(replicas.ty, Type::Scalar(Scalar::Int32));
        let volume = &table["k8s.io.api.core.v1.Volume"];
        assert!(volume.field(2).unwrap().inline);
        assert!(table["k8s.io.api.authorization.v1.ExtraValue"].list);
        let data = table["k8s.io.api.core.v1.Secret"].field(2).unwrap();
        assert_eq!(
            (data.card, &data.ty),
            (Card::Map, &Type::Scalar(Scalar::Bytes))
        );
    }

    #[test]
    fn a_bad_line_names_itself() {
        let err = parse("message a.B\n1 x opt string\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        let err = parse("1 x opt string -\n").unwrap_err();
        assert!(err.contains("outside a message"), "{err}");
    }
}
