//! Label and field selectors, parsed and matched as the apiserver does.
//!
//! Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, comma-separated
//! (a requirement's values may not contain commas outside parentheses). Field selectors: `=`, `==`,
//! `!=` on the fields the apiserver supports for the kind; anything else is refused with the
//! apiserver's message, so agents learn the same lesson they would against a real cluster.

use std::collections::BTreeMap;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
}

/// A parsed label selector; empty selects everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(s)? {
            let part = part.trim();
            if part.is_empty() {
                if s.trim().is_empty() {
                    continue;
                }
                return Err(
                    "unable to parse requirement: found '', expected: identifier".to_string(),
                );
            }
            reqs.push(parse_requirement(part)?);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| {
            let v = labels.get(&r.key);
            match &r.op {
                Op::Eq(x) => v == Some(x),
                Op::NotEq(x) => v != Some(x),
                Op::In(xs) => v.is_some_and(|v| xs.contains(v)),
                Op::NotIn(xs) => v.is_none_or(|v| !xs.contains(v)),
                Op::Exists => v.is_some(),
                Op::NotExists => v.is_none(),
            }
        })
    }

    /// Builds a selector from a `matchLabels` map (a Deployment's or Service's selector).
    pub fn from_map(map: &BTreeMap<String, String>) -> Self {
        LabelSelector(
            map.iter()
                .map(|(k, v)| Requirement {
                    key: k.clone(),
                    op: Op::Eq(v.clone()),
                })
                .collect(),
        )
    }
}

fn split_top_level(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unable to parse requirement: unexpected ')'".into());
                }
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(
            "unable to parse requirement: found '', expected: ',', ')' or identifier".into(),
        );
    }
    parts.push(&s[start..]);
    Ok(parts)
}

/// A label key as the apiserver accepts it: an optional DNS subdomain prefix and `/`, then a
/// name of at most 63 characters that starts and ends with a letter or digit.
fn valid_key(k: &str) -> bool {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    prefix_ok && !name.is_empty() && valid_value(name)
}

/// A label value: empty, or at most 63 characters of letters, digits, `-`, `_` and `.`, starting
/// and ending with a letter or digit.
fn valid_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

fn check_values(op: &Op) -> Result<(), String> {
    let values: &[String] = match op {
        Op::Eq(v) | Op::NotEq(v) => std::slice::from_ref(v),
        Op::In(vs) | Op::NotIn(vs) => vs,
        Op::Exists | Op::NotExists => &[],
    };
    match values.iter().find(|v| !valid_value(v)) {
        None => Ok(()),
        Some(v) => Err(format!(
            "unable to parse requirement: invalid label value: \"{v}\": a valid label must be \
             an empty string or consist of alphanumeric characters, '-', '_' or '.', and must \
             start and end with an alphanumeric character"
        )),
    }
}

fn parse_values(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("unable to parse requirement: found '{rest}', expected: '('"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    let bad_key = |k: &str| {
        format!(
            "unable to parse requirement: invalid label key \"{k}\": name part must consist of \
             alphanumeric characters, '-', '_' or '.', and must start and end with an \
             alphanumeric character"
        )
    };
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return if valid_key(key) {
            Ok(Requirement {
                key: key.into(),
                op: Op::NotExists,
            })
        } else {
            Err(bad_key(key))
        };
    }
    let (key, op) = if let Some((k, v)) = part.split_once("!=") {
        (k, Op::NotEq(v.trim().into()))
    } else if let Some((k, v)) = part.split_once("==") {
        (k, Op::Eq(v.trim().into()))
    } else if let Some((k, v)) = part.split_once('=') {
        (k, Op::Eq(v.trim().into()))
    } else if let Some((k, v)) = split_word(part, "notin") {
        (k, Op::NotIn(parse_values(v)?))
    } else if let Some((k, v)) = split_word(part, "in") {
        (k, Op::In(parse_values(v)?))
    } else {
        (part, Op::Exists)
    };
    let key = key.trim();
    if !valid_key(key) {
        return Err(bad_key(key));
    }
    check_values(&op)?;
    Ok(Requirement {
        key: key.into(),
        op,
    })
}

/// Splits `key in (..)` at the operator word surrounded by white space.
fn split_word<'a>(part: &'a str, word: &str) -> Option<(&'a str, &'a str)> {
    let needle = format!(" {word} ");
    if let Some(i) = part.find(&needle) {
        return Some((&part[..i], &part[i + needle.len()..]));
    }
    let needle = format!(" {word}(");
    part.find(&needle)
        .map(|i| (&part[..i], &part[i + needle.len() - 1..]))
}

/// A parsed field selector.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses and checks the fields against those the apiserver supports for `kind`.
    pub fn parse(s: &str, kind: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let field = field.trim();
            if !supported_fields(kind).contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, eq, value)| {
            let actual = field_value(object, field);
            (actual == *value) == *eq
        })
    }
}

/// Fields the apiserver accepts in field selectors, per kind (`metadata.name` and
/// `metadata.namespace` for every kind).
pub fn supported_fields(kind: &str) -> Vec<&'static str> {
    let mut fields = vec!["metadata.name", "metadata.namespace"];
    fields.extend_from_slice(match kind {
        "Pod" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
        "Event" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        "Secret" => &["type"],
        "Namespace" => &["status.phase"],
        "ReplicaSet" | "ReplicationController" => &["status.replicas"],
        "Job" => &["status.successful"],
        "Node" => &["spec.unschedulable"],
        _ => &[],
    });
    fields
}

/// The string value of a selectable field, as the apiserver renders it for matching.
fn field_value(object: &Value, field: &str) -> String {
    if field == "source" {
        return object
            .pointer("/source/component")
            .or_else(|| object.get("reportingComponent"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
    }
    if field == "status.podIPs" {
        return object
            .pointer("/status/podIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
    }
    let pointer = format!("/{}", field.replace('.', "/"));
    match object.pointer(&pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        // Unset booleans and counts select as their zero value, as in the apiserver.
        None if field == "spec.hostNetwork" || field == "spec.unschedulable" => "false".into(),
        None if field == "status.replicas" || field == "status.successful" => "0".into(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors_match_like_the_apiserver() {
        let l = labels(&[("app", "frontend"), ("tier", "web")]);
        for (sel, want) in [
            ("", true),
            ("app=frontend", true),
            ("app==frontend", true),
            ("app!=frontend", false),
            ("app in (frontend, search)", true),
            ("app notin (frontend)", false),
            ("app,tier", true),
            ("!missing", true),
            ("!app", false),
            ("app=frontend,tier in (db)", false),
            ("missing notin (x)", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&l),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn malformed_label_selectors_are_refused() {
        let err = LabelSelector::parse("app in (a").unwrap_err();
        assert_eq!(
            err,
            "unable to parse requirement: found '', expected: ',', ')' or identifier"
        );
        assert!(LabelSelector::parse("a=b,,c").is_err());
        assert!(LabelSelector::parse("bad key=1").is_err());
    }

    #[test]
    fn field_selectors_are_checked_per_kind() {
        let ev = serde_json::json!({"type": "Warning", "involvedObject": {"kind": "Pod", "name": "p"}, "source": {"component": "kubelet"}});
        let sel = FieldSelector::parse("type=Warning,involvedObject.name=p", "Event").unwrap();
        assert!(sel.matches(&ev));
        assert!(
            !FieldSelector::parse("type!=Warning", "Event")
                .unwrap()
                .matches(&ev)
        );
        assert!(
            FieldSelector::parse("source=kubelet", "Event")
                .unwrap()
                .matches(&ev)
        );
        assert_eq!(
            FieldSelector::parse("spec.bogus=1", "Pod").unwrap_err(),
            "field label not supported: spec.bogus"
        );
        let pod = serde_json::json!({"status": {"phase": "Running"}, "spec": {}});
        assert!(
            FieldSelector::parse("spec.hostNetwork=false", "Pod")
                .unwrap()
                .matches(&pod)
        );
        assert!(
            FieldSelector::parse("status.phase=Running", "Pod")
                .unwrap()
                .matches(&pod)
        );
    }
}
