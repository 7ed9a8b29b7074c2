//! The task an agent is given, rendered from a template with the session's facts (application,
//! namespace, the URLs of its APIs). The built-in templates follow SREGym's two-stage protocol:
//! diagnose and submit a natural-language diagnosis, then mitigate and submit; a replay is a
//! recording, so its task is the diagnosis alone. They name the application, never the problem.

use std::collections::BTreeMap;

use anyhow::bail;

/// The tools both tasks list (a macro, so that `concat!` builds the templates at compile time).
macro_rules! tools {
    () => {
        "What you can use:
- kubectl: KUBECONFIG={kubeconfig} (already set in your environment)
- Prometheus: {prometheus_url}
- Jaeger: {jaeger_url}
- Loki: {loki_url}
- MCP tools (kubectl, Prometheus, Jaeger, Loki, submit): {mcp_url}
"
    };
}

const LIVE: &str = concat!(
    "\
You are the on-call SRE for the application {app_name}, running in the Kubernetes namespace \
{namespace}. {description}

Users are seeing failures. Your work has two stages:

1. Diagnose. Investigate the application (metrics, logs, traces, the cluster) and find the root \
cause: which resource is at fault and why it causes what users see. Then submit a natural-language \
description of the issue you found.
2. Mitigate. Fix the system so that it is healthy again and stays healthy. When the fix is applied, \
submit an empty solution (\"\") to have it validated. Fix the cause, not the symptoms: restarting \
things, scaling to zero, deleting workloads or silencing alerts does not count as a fix.

",
    tools!(),
    "
Submit each stage with:
  curl -s -X POST {submit_url}/submit -H 'Content-Type: application/json' -d '{\"solution\": \"...\"}'
`curl -s {submit_url}/status` tells which stage is open: a submitted stage is evaluated before the \
next opens, so wait until it names the next stage before submitting again. `curl -s \
{submit_url}/get_app` describes the application.
"
);

const REPLAY: &str = concat!(
    "\
You are the on-call SRE for the application {app_name}, running in the Kubernetes namespace \
{namespace}. {description}

Users are seeing failures. Find the root cause: which resource is at fault and why it causes what \
users see. The cluster is read-only: investigate, do not change anything. When you know the cause, \
submit your diagnosis in plain language.

",
    tools!(),
    "
Submit with:
  curl -s -X POST {submit_url}/submit -H 'Content-Type: application/json' -d '{\"solution\": \"...\"}'
"
);

/// The built-in template of a session that does (live) or does not (replay) mitigate.
pub fn builtin(mitigation: bool) -> &'static str {
    if mitigation { LIVE } else { REPLAY }
}

/// The names a template may use.
pub const PLACEHOLDERS: [&str; 10] = [
    "app_name",
    "namespace",
    "description",
    "kubeconfig",
    "kubernetes_url",
    "prometheus_url",
    "jaeger_url",
    "loki_url",
    "submit_url",
    "mcp_url",
];

/// Where a task points its agent: the kubeconfig's path and the session's URLs.
#[derive(Debug, Clone, Copy)]
pub struct Pointers<'a> {
    pub kubeconfig: &'a str,
    pub kubernetes: &'a str,
    pub prometheus: &'a str,
    pub jaeger: &'a str,
    pub loki: &'a str,
    pub submit: &'a str,
    pub mcp: &'a str,
}

/// The value of each of [`PLACEHOLDERS`] for an app and what the task points at.
pub fn values(app: &crate::submit::AppInfo, at: &Pointers<'_>) -> BTreeMap<&'static str, String> {
    [
        ("app_name", app.app_name.clone()),
        ("namespace", app.namespace.clone()),
        ("description", app.descriptions.clone()),
        ("kubeconfig", at.kubeconfig.to_string()),
        ("kubernetes_url", at.kubernetes.to_string()),
        ("prometheus_url", at.prometheus.to_string()),
        ("jaeger_url", at.jaeger.to_string()),
        ("loki_url", at.loki.to_string()),
        ("submit_url", at.submit.to_string()),
        ("mcp_url", at.mcp.to_string()),
    ]
    .into_iter()
    .collect()
}

/// Replaces every `{name}` with its value. `{{` and `}}` stand for literal braces; any other
/// `{...}` is an error that names it, so a typo in a user's template never reaches the agent.
/// A `{` not followed by a name character (JSON in the text) is kept as it is.
pub fn render(template: &str, values: &BTreeMap<&str, String>) -> anyhow::Result<String> {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if let Some(after) = tail.strip_prefix('}') {
            out.push('}');
            rest = after;
            continue;
        }
        let name_len = tail[1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len() - 1);
        let name = &tail[1..1 + name_len];
        if name.is_empty() || !tail[1 + name_len..].starts_with('}') {
            out.push('{');
            rest = &tail[1..];
            continue;
        }
        let Some(value) = values.get(name) else {
            bail!(
                "unknown placeholder {{{name}}} in the prompt template (known: {})",
                PLACEHOLDERS.join(", ")
            );
        };
        out.push_str(value);
        rest = &tail[name_len + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> BTreeMap<&'static str, String> {
        PLACEHOLDERS
            .iter()
            .map(|p| (*p, format!("<{p}>")))
            .collect()
    }

    #[test]
    fn the_builtin_templates_render_every_fact_and_keep_the_json_example() {
        for mitigation in [true, false] {
            let text = render(builtin(mitigation), &values()).unwrap();
            for p in [
                "app_name",
                "namespace",
                "submit_url",
                "prometheus_url",
                "mcp_url",
            ] {
                assert!(text.contains(&format!("<{p}>")), "{p} missing:\n{text}");
            }
            assert!(text.contains(r#"-d '{"solution": "..."}'"#), "{text}");
            assert_eq!(text.contains("Mitigate"), mitigation);
        }
    }

    #[test]
    fn a_typo_in_a_template_is_an_error_and_braces_can_be_escaped() {
        let e = render("see {prometheus}", &values()).unwrap_err();
        assert!(e.to_string().contains("{prometheus}"), "{e}");
        assert_eq!(
            render("{{app_name}} is {app_name}; {} {x y}", &values()).unwrap(),
            "{app_name} is <app_name>; {} {x y}"
        );
    }
}
