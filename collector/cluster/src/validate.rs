//! Validation of written objects, in the API server's words: each problem is a [`Cause`] with
//! the field path and the message kubectl prints (`spec.replicas: Invalid value: -1: must be
//! greater than or equal to 0`). Callers collect the causes and answer 422 Invalid with them.

use apiserver::status::Cause;
use serde_json::Value;

use super::objects::*;
use super::util::{cpu_quantity, memory_quantity};

/// The causes found so far.
pub type Causes = Vec<Cause>;

/// `Invalid value: <value>: <detail>`, the value as the API server prints it (strings quoted,
/// numbers bare, objects as JSON).
pub fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {value}: {detail}"),
    )
}

pub fn required(field: &str, detail: Option<&str>) -> Cause {
    let message = match detail {
        Some(d) => format!("Required value: {d}"),
        None => "Required value".to_string(),
    };
    Cause::new("FieldValueRequired", field, message)
}

pub fn forbidden(field: &str, detail: &str) -> Cause {
    Cause::new("FieldValueForbidden", field, format!("Forbidden: {detail}"))
}

fn duplicate(field: &str, value: &str) -> Cause {
    Cause::new(
        "FieldValueDuplicate",
        field,
        format!("Duplicate value: {}", Value::from(value)),
    )
}

pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Cause::new(
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: {value:?}: supported values: {}",
            list.join(", ")
        ),
    )
}

/// The API server's `RegexError`: the rule, examples, and the expression.
fn regex_error(msg: &str, regex: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{regex}')"));
    out
}

fn alnum_lower(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            alnum_lower(*f) && alnum_lower(*l) && b.iter().all(|c| alnum_lower(*c) || *c == b'-')
        }
        _ => false,
    }
}

/// Problems with a DNS-1123 subdomain (most object names).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut out = vec![];
    if s.len() > 253 {
        out.push("must be no more than 253 characters".to_string());
    }
    if !s.split('.').all(is_label) {
        out.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            &["example.com"],
        ));
    }
    out
}

/// Problems with a DNS-1123 label (namespace and container names).
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut out = vec![];
    if s.len() > 63 {
        out.push("must be no more than 63 characters".to_string());
    }
    if !is_label(s) {
        out.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "123-abc"],
        ));
    }
    out
}

/// Problems with a DNS-1035 label (Service names: they become DNS names that start with a letter).
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut out = vec![];
    if s.len() > 63 {
        out.push("must be no more than 63 characters".to_string());
    }
    if !is_label(s) || !s.as_bytes().first().is_some_and(u8::is_ascii_lowercase) {
        out.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    out
}

const QUALIFIED: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
        }
        _ => false,
    }
}

/// Problems with a label key (`[prefix/]name`).
pub fn label_key(k: &str) -> Vec<String> {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let mut out = vec![];
    if let Some(p) = prefix {
        if p.is_empty() {
            out.push("prefix part must be non-empty".to_string());
        } else {
            out.extend(
                dns1123_subdomain(p)
                    .into_iter()
                    .map(|m| format!("prefix part {m}")),
            );
        }
    }
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 characters".to_string());
    }
    if !name.is_empty() && !is_qualified_part(name) {
        out.push(format!(
            "name part {}",
            regex_error(QUALIFIED_MSG, QUALIFIED, &["MyName", "my.name", "123-abc"])
        ));
    }
    out
}

/// Problems with a label value (empty is allowed).
pub fn label_value(v: &str) -> Vec<String> {
    let mut out = vec![];
    if v.len() > 63 {
        out.push("must be no more than 63 characters".to_string());
    }
    if !v.is_empty() && !is_qualified_part(v) {
        out.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({QUALIFIED})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    out
}

/// Label keys and values of a map at `field`.
pub fn labels(field: &str, l: &Labels, out: &mut Causes) {
    for (k, v) in l {
        for m in label_key(k) {
            out.push(invalid(field, &Value::from(k.as_str()), &m));
        }
        for m in label_value(v) {
            out.push(invalid(field, &Value::from(v.as_str()), &m));
        }
    }
}

/// How an object's name is checked.
#[derive(Debug, Clone, Copy)]
pub enum NameRule {
    Subdomain,
    Label,
    Dns1035,
}

/// `metadata`: the name by its kind's rule, labels.
pub fn meta(m: &Meta, rule: NameRule, out: &mut Causes) {
    if m.name.is_empty() {
        out.push(required(
            "metadata.name",
            Some("name or generateName is required"),
        ));
    } else {
        let problems = match rule {
            NameRule::Subdomain => dns1123_subdomain(&m.name),
            NameRule::Label => dns1123_label(&m.name),
            NameRule::Dns1035 => dns1035_label(&m.name),
        };
        for p in problems {
            out.push(invalid("metadata.name", &Value::from(m.name.as_str()), &p));
        }
    }
    labels("metadata.labels", &m.labels, out);
}

fn port_range(field: &str, port: i32, out: &mut Causes) {
    if !(1..=65535).contains(&port) {
        out.push(invalid(
            field,
            &Value::from(port),
            "must be between 1 and 65535, inclusive",
        ));
    }
}

/// Requests within limits, and no negative amounts.
fn resources(path: &str, r: &Resources, out: &mut Causes) {
    let amounts = [
        (
            "limits",
            "cpu",
            r.limits.cpu_milli,
            cpu_quantity as fn(i64) -> String,
        ),
        ("limits", "memory", r.limits.memory, memory_quantity),
        ("requests", "cpu", r.requests.cpu_milli, cpu_quantity),
        ("requests", "memory", r.requests.memory, memory_quantity),
    ];
    for (list, name, v, show) in amounts {
        if let Some(v) = v.filter(|v| *v < 0) {
            out.push(invalid(
                &format!("{path}.{list}[{name}]"),
                &Value::from(show(v)),
                "must be greater than or equal to 0",
            ));
        }
    }
    let pairs = [
        (
            "cpu",
            r.requests.cpu_milli,
            r.limits.cpu_milli,
            cpu_quantity as fn(i64) -> String,
        ),
        (
            "memory",
            r.requests.memory,
            r.limits.memory,
            memory_quantity,
        ),
    ];
    for (name, request, limit, show) in pairs {
        if let (Some(req), Some(lim)) = (request, limit)
            && req > lim
        {
            out.push(invalid(
                &format!("{path}.requests"),
                &Value::from(show(req)),
                &format!(
                    "must be less than or equal to {name} limit of {}",
                    show(lim)
                ),
            ));
        }
    }
}

fn containers(path: &str, list: &[Container], seen: &mut Vec<String>, out: &mut Causes) {
    for (i, c) in list.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if c.name.is_empty() {
            out.push(required(&format!("{p}.name"), None));
        } else {
            for m in dns1123_label(&c.name) {
                out.push(invalid(
                    &format!("{p}.name"),
                    &Value::from(c.name.as_str()),
                    &m,
                ));
            }
            if seen.contains(&c.name) {
                out.push(duplicate(&format!("{p}.name"), &c.name));
            }
            seen.push(c.name.clone());
        }
        if c.image.trim().is_empty() {
            out.push(required(&format!("{p}.image"), None));
        }
        for (j, port) in c.ports.iter().enumerate() {
            port_range(
                &format!("{p}.ports[{j}].containerPort"),
                port.container_port,
                out,
            );
            if let Some(h) = port.host_port {
                port_range(&format!("{p}.ports[{j}].hostPort"), h, out);
            }
        }
        resources(&format!("{p}.resources"), &c.resources, out);
        if !["Always", "IfNotPresent", "Never"].contains(&c.image_pull_policy.as_str()) {
            out.push(not_supported(
                &format!("{p}.imagePullPolicy"),
                &c.image_pull_policy,
                &["Always", "IfNotPresent", "Never"],
            ));
        }
    }
}

/// A pod spec at `path` (`spec`, or `spec.template.spec` in a workload).
pub fn pod_spec(path: &str, s: &PodSpec, out: &mut Causes) {
    let mut seen = vec![];
    if s.containers.is_empty() {
        out.push(required(&format!("{path}.containers"), None));
    }
    containers(&format!("{path}.containers"), &s.containers, &mut seen, out);
    containers(
        &format!("{path}.initContainers"),
        &s.init_containers,
        &mut seen,
        out,
    );
    ephemeral_containers(path, s, &mut seen, out);
    if !["Always", "OnFailure", "Never"].contains(&s.restart_policy.as_str()) {
        out.push(not_supported(
            &format!("{path}.restartPolicy"),
            &s.restart_policy,
            &["Always", "OnFailure", "Never"],
        ));
    }
    if s.termination_grace_period_seconds < 0 {
        out.push(invalid(
            &format!("{path}.terminationGracePeriodSeconds"),
            &Value::from(s.termination_grace_period_seconds),
            "must be greater than or equal to 0",
        ));
    }
}

/// Ephemeral containers: named and imaged like the others, but a debugger has no ports, probes
/// or resources of its own, and the container it targets must be one of the pod's.
fn ephemeral_containers(path: &str, s: &PodSpec, seen: &mut Vec<String>, out: &mut Causes) {
    let path = format!("{path}.ephemeralContainers");
    containers(&path, &s.ephemeral_containers, seen, out);
    const NOT_FOR_EPHEMERAL: &str = "cannot be set for an Ephemeral Container";
    for (i, c) in s.ephemeral_containers.iter().enumerate() {
        let p = format!("{path}[{i}]");
        if !c.ports.is_empty() {
            out.push(forbidden(&format!("{p}.ports"), NOT_FOR_EPHEMERAL));
        }
        if c.liveness_probe.is_some() {
            out.push(forbidden(&format!("{p}.livenessProbe"), NOT_FOR_EPHEMERAL));
        }
        if c.readiness_probe.is_some() {
            out.push(forbidden(&format!("{p}.readinessProbe"), NOT_FOR_EPHEMERAL));
        }
        for field in ["startupProbe", "lifecycle"] {
            if c.extra.get(field).is_some_and(|v| !v.is_null()) {
                out.push(forbidden(&format!("{p}.{field}"), NOT_FOR_EPHEMERAL));
            }
        }
        if c.resources != Resources::default() {
            out.push(forbidden(&format!("{p}.resources"), NOT_FOR_EPHEMERAL));
        }
        if let Some(t) = c.extra.get("targetContainerName").and_then(Value::as_str)
            && !s.containers.iter().any(|x| x.name == t)
        {
            out.push(Cause::new(
                "FieldValueNotFound",
                &format!("{p}.targetContainerName"),
                format!("Not found: {}", Value::from(t)),
            ));
        }
    }
}

/// A workload's replicas, selector and template (Deployment, ReplicaSet, StatefulSet).
pub fn workload(replicas: i32, selector: &Labels, template: &PodTemplate, out: &mut Causes) {
    if replicas < 0 {
        out.push(invalid(
            "spec.replicas",
            &Value::from(replicas),
            "must be greater than or equal to 0",
        ));
    }
    if selector.is_empty() {
        out.push(required("spec.selector", None));
    }
    labels("spec.selector.matchLabels", selector, out);
    labels(
        "spec.template.metadata.labels",
        &template.metadata.labels,
        out,
    );
    if selector.is_empty() || !selects(selector, &template.metadata.labels) {
        out.push(invalid(
            "spec.template.metadata.labels",
            &serde_json::json!(template.metadata.labels),
            "`selector` does not match template `labels`",
        ));
    }
    pod_spec("spec.template.spec", &template.spec, out);
    if !template.spec.ephemeral_containers.is_empty() {
        out.push(forbidden(
            "spec.template.spec.ephemeralContainers",
            "ephemeral containers not allowed in pod template",
        ));
    }
}

/// The selector of a workload may not change (apps/v1).
pub fn selector_unchanged(old: &Labels, new: &Labels, out: &mut Causes) {
    if old != new {
        out.push(invalid(
            "spec.selector",
            &serde_json::json!({"matchLabels": new}),
            "field is immutable",
        ));
    }
}

pub fn service(s: &Service, out: &mut Causes) {
    if s.ports.is_empty()
        && !s
            .spec_extra
            .get("type")
            .is_some_and(|t| t == "ExternalName")
    {
        out.push(required("spec.ports", None));
    }
    let mut names = vec![];
    for (i, p) in s.ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        port_range(&format!("{path}.port"), p.port, out);
        match &p.target_port {
            IntOrString::Int(t) => port_range(&format!("{path}.targetPort"), *t, out),
            IntOrString::Str(name) if name.is_empty() || name.len() > 15 => out.push(invalid(
                &format!("{path}.targetPort"),
                &Value::from(name.as_str()),
                "must contain at least one letter (a-z) and be no more than 15 characters",
            )),
            IntOrString::Str(_) => {}
        }
        if !["TCP", "UDP", "SCTP"].contains(&p.protocol.as_str()) {
            out.push(not_supported(
                &format!("{path}.protocol"),
                &p.protocol,
                &["SCTP", "TCP", "UDP"],
            ));
        }
        match &p.name {
            None if s.ports.len() > 1 => out.push(required(&format!("{path}.name"), None)),
            Some(n) if names.contains(n) => out.push(duplicate(&format!("{path}.name"), n)),
            Some(n) => names.push(n.clone()),
            None => {}
        }
    }
    labels("spec.selector", &s.selector, out);
}
