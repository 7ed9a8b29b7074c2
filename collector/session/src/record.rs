//! What a session leaves in its run directory besides the dataset: the agent's requests counted
//! (`api_requests` of `run.json`), its trajectory as an ATIF-style JSON document (the agent's
//! task, every request it made to the session's APIs with the answer's status, its submissions),
//! and `run.json` itself, written last and atomically: a run directory without `run.json` is
//! unfinished, and nothing reads it as a result.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use apis::audit::{Api, AuditEvent};
use schemas::run_result::{AgentUsage, ApiRequests, RunMode, RunResult};
use serde_json::{Value, json};

/// The file that marks a finished run.
pub const RUN_FILE: &str = "run.json";
/// The trajectory's file name.
pub const TRAJECTORY_FILE: &str = "trajectory.json";

/// Is this audited request a change to the cluster? Dry runs change nothing.
fn is_write(e: &AuditEvent) -> bool {
    e.api == Api::Kubernetes
        && matches!(
            e.info.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
        && !form_urlencoded::parse(e.exchange.query.as_bytes()).any(|(k, _)| k == "dryRun")
}

/// Counts the agent's reads and writes, per API; `mcp` requests to the MCP server beside them (the
/// tools' own calls to the APIs are among the events).
pub fn count_requests(events: &[AuditEvent], mcp: u64) -> ApiRequests {
    let mut counts = ApiRequests::default();
    if mcp > 0 {
        counts.by_api.insert("mcp".into(), mcp);
    }
    for e in events {
        if is_write(e) {
            counts.writes += 1;
        } else {
            counts.reads += 1;
        }
        *counts.by_api.entry(e.api.name().to_string()).or_default() += 1;
    }
    counts
}

/// Restarting one thing this many times is a loop, not a fix.
pub const RESTART_LOOP: usize = 3;

/// Restart loops in the agent's requests: a workload restarted (`kubectl rollout restart`), or a
/// namespace's pods deleted, by [`RESTART_LOOP`] or more separate commands. A system that is only
/// healthy because something keeps restarting it is not fixed; the fork a mitigation is graded
/// on no longer has the agent in it, so the loop is read from what the agent did. One kubectl
/// invocation (its `Kubectl-Session`) counts once however many requests it sent; a client without
/// sessions counts per request.
pub fn restart_loops(events: &[AuditEvent]) -> Vec<String> {
    let mut commands: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| e.api == Api::Kubernetes && e.exchange.code < 300)
    {
        let (x, i) = (&e.exchange, &e.info);
        let ns = i.namespace.as_deref().unwrap_or("");
        let target = match (i.verb.as_str(), i.resource.as_str()) {
            ("patch", _) if x.kubectl_command.as_deref() == Some("kubectl rollout restart") => {
                format!(
                    "{} {ns}/{}",
                    singular(&i.resource),
                    i.name.as_deref().unwrap_or("?")
                )
            }
            ("delete" | "deletecollection", "pods") if i.subresource.is_none() => {
                format!("the pods of namespace {ns}")
            }
            _ => continue,
        };
        let command = x
            .kubectl_session
            .clone()
            .unwrap_or_else(|| e.audit_id.clone());
        commands.entry(target).or_default().insert(command);
    }
    commands
        .into_iter()
        .filter(|(_, c)| c.len() >= RESTART_LOOP)
        .map(|(target, c)| {
            format!(
                "restart loop: {target} restarted by {} separate commands; a fix must hold without restarting things over and over",
                c.len()
            )
        })
        .collect()
}

/// How a reason names a kind of workload: `deployment` for `deployments`, by the kind registry.
fn singular(resource: &str) -> String {
    sim::kinds::Kind::ALL
        .iter()
        .find(|k| k.resource() == resource)
        .map_or_else(|| resource.to_string(), |k| k.name().to_ascii_lowercase())
}

/// A submission as the trajectory shows it.
pub struct SubmittedStep {
    /// Wall-clock time, RFC 3339.
    pub at: String,
    pub stage: &'static str,
    pub solution: String,
}

/// The trajectory, in the shape of ATIF (agent trajectory interchange format): a system step with
/// the task, then one agent step per request (the tool call and its observation), in order, and
/// the totals. Requests carry the wall-clock times the APIs served; submissions are merged in by
/// time.
pub fn trajectory(
    session_id: &str,
    agent: &str,
    prompt: &str,
    events: &[AuditEvent],
    submissions: &[SubmittedStep],
    usage: Option<&AgentUsage>,
) -> Value {
    let mut steps: Vec<(String, Value)> = Vec::with_capacity(events.len() + submissions.len());
    for e in events {
        let x = &e.exchange;
        let at = schemas::time::rfc3339_nanos(x.received_ns + x.shift_ns);
        let mut arguments = json!({"method": x.method, "uri": e.request_uri()});
        if let Some(cmd) = &x.kubectl_command {
            arguments["kubectl_command"] = cmd.as_str().into();
        }
        if let Some(ua) = &x.user_agent {
            arguments["user_agent"] = ua.as_str().into();
        }
        let mut content = json!({"status": x.code});
        if let Some(f) = &x.failure {
            content["error"] = f.message.as_str().into();
        }
        let call = json!({
            "tool_call_id": e.audit_id,
            "function_name": format!("{}.{}", e.api.name(), e.info.verb),
            "arguments": arguments,
        });
        let observation = json!({"results": [{"source_call_id": e.audit_id, "content": content}]});
        steps.push((
            at,
            json!({"source": "agent", "tool_calls": [call], "observation": observation}),
        ));
    }
    for s in submissions {
        let call = json!({
            "tool_call_id": format!("submit-{}", s.stage),
            "function_name": "submit",
            "arguments": {"stage": s.stage, "solution": s.solution},
        });
        steps.push((
            s.at.clone(),
            json!({"source": "agent", "tool_calls": [call]}),
        ));
    }
    // RFC 3339 in UTC with a fixed width sorts as text; the sort is stable for equal times.
    steps.sort_by(|a, b| a.0.cmp(&b.0));
    let mut all = vec![json!({"step_id": 1, "source": "system", "message": prompt})];
    for (i, (at, mut step)) in steps.into_iter().enumerate() {
        step["step_id"] = (i + 2).into();
        step["timestamp"] = at.into();
        all.push(step);
    }
    let usage = usage.cloned().unwrap_or_default();
    json!({
        "schema_version": "ATIF-v1.4",
        "session_id": session_id,
        "agent": {"name": agent},
        "steps": all,
        "final_metrics": {
            "total_prompt_tokens": usage.input_tokens,
            "total_completion_tokens": usage.output_tokens,
            "total_cached_tokens": usage.cached_input_tokens,
            "total_cost_usd": usage.cost_usd,
            "total_steps": usage.steps,
        },
    })
}

/// Writes `run.json` (atomically: a reader sees the whole record or none).
pub fn write_run(dir: &Path, run: &RunResult) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec_pretty(run)?;
    datasets::write_atomically(&dir.join(RUN_FILE), &bytes)?;
    Ok(())
}

/// A few lines for people: how the run ended and what it scored.
pub fn summary(run: &RunResult, dir: &Path) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "run written to {} (agent {}, trial {}): ended {}",
        dir.display(),
        run.agent,
        run.trial,
        run.ended
            .and_then(|e| serde_json::to_value(e).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "?".into())
    );
    if let Some(e) = &run.error {
        let _ = write!(s, " ({e})");
    }
    if let Some(d) = &run.diagnosis {
        let verdict = match d.pass {
            Some(true) => "pass",
            Some(false) => "fail",
            None => "undecided",
        };
        let _ = match (d.submitted, run.ttd_secs) {
            (true, Some(ttd)) => write!(s, "\ndiagnosis: {verdict}, submitted after {ttd:.1}s"),
            _ => write!(s, "\ndiagnosis: not submitted"),
        };
        if let Some(e) = &d.judge_error {
            let _ = write!(s, " (judge model failed, deterministic rule used: {e})");
        }
    }
    if let Some(m) = &run.mitigation {
        let how = if m.submitted {
            "submitted"
        } else {
            "graded at the end"
        };
        if m.success {
            let _ = write!(
                s,
                "\nmitigation: pass ({how}; recovered {}s after it){}",
                m.recovered_after_secs.unwrap_or_default(),
                run.ttm_secs
                    .map_or(String::new(), |t| format!(", TTM {t:.1}s"))
            );
        } else {
            let _ = write!(s, "\nmitigation: fail ({how})");
            for r in &m.reasons {
                let _ = write!(s, "\n  - {r}");
            }
        }
    }
    if let Some(r) = &run.api_requests {
        let _ = write!(s, "\nrequests: {} reads, {} writes", r.reads, r.writes);
    }
    if run.agent_sandbox == Some(schemas::run_result::AgentSandbox::None) {
        s.push_str("\nwarning: the agent ran without its sandbox (--no-sandbox)");
    }
    s
}

/// A run's reward, as an RL environment or a harness reports it: each stage scores 1 when it
/// passed and 0 otherwise (a diagnosis the judge could not decide scores 0), and the reward is
/// their mean, so an agent must diagnose *and* mitigate a live problem to earn 1.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Reward {
    pub reward: f64,
    pub diagnosis: f64,
    /// Absent for a replay, which has no mitigation stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mitigation: Option<f64>,
}

pub fn reward(run: &RunResult) -> Reward {
    let score = |pass: bool| if pass { 1.0 } else { 0.0 };
    let diagnosis = score(run.diagnosis.as_ref().and_then(|d| d.pass) == Some(true));
    let mitigation = match run.mode {
        RunMode::Live => Some(score(run.mitigation.as_ref().is_some_and(|m| m.success))),
        RunMode::Replay | RunMode::Static => None,
    };
    let reward = match mitigation {
        Some(m) => (diagnosis + m) / 2.0,
        None => diagnosis,
    };
    Reward {
        reward,
        diagnosis,
        mitigation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::audit::Exchange;

    fn event(api: Api, method: &str, path: &str, query: &str, at: i64) -> AuditEvent {
        AuditEvent::new(
            api,
            format!("id-{at}"),
            Exchange {
                method: method.into(),
                path: path.into(),
                query: query.into(),
                code: 200,
                received_ns: at,
                ..Exchange::default()
            },
        )
    }

    #[test]
    fn writes_are_kubernetes_changes_that_are_not_dry_runs() {
        let events = [
            event(Api::Kubernetes, "GET", "/api/v1/namespaces/a/pods", "", 1),
            event(
                Api::Kubernetes,
                "PATCH",
                "/api/v1/namespaces/a/services/geo",
                "",
                2,
            ),
            event(
                Api::Kubernetes,
                "PATCH",
                "/api/v1/namespaces/a/services/geo",
                "dryRun=All",
                3,
            ),
            event(
                Api::Kubernetes,
                "DELETE",
                "/api/v1/namespaces/a/pods/x",
                "",
                4,
            ),
            event(Api::Prometheus, "POST", "/api/v1/query", "", 5),
        ];
        let c = count_requests(&events, 0);
        assert_eq!((c.reads, c.writes), (3, 2));
        assert_eq!(c.by_api["kubernetes"], 4);
        assert_eq!(c.by_api["prometheus"], 1);
    }

    #[test]
    fn repeated_restarts_of_one_target_are_a_loop_and_one_restart_is_not() {
        let restart = |name: &str, session: &str, at: i64| {
            let mut e = event(
                Api::Kubernetes,
                "PATCH",
                &format!("/apis/apps/v1/namespaces/a/deployments/{name}"),
                "",
                at,
            );
            e.exchange.kubectl_command = Some("kubectl rollout restart".into());
            e.exchange.kubectl_session = Some(session.into());
            e
        };
        // `rollout restart deploy --all` twice: every deployment restarted by two commands.
        let mut events = vec![
            restart("geo", "s1", 1),
            restart("rate", "s1", 2),
            restart("geo", "s2", 3),
            restart("rate", "s2", 4),
        ];
        assert!(restart_loops(&events).is_empty());
        events.push(restart("geo", "s3", 5));
        let loops = restart_loops(&events);
        assert_eq!(loops.len(), 1, "{loops:?}");
        assert!(
            loops[0].contains("deployment a/geo restarted by 3"),
            "{loops:?}"
        );
        // Pods deleted one request at a time by a client without kubectl sessions.
        let deletes: Vec<AuditEvent> = (0..3)
            .map(|i| {
                event(
                    Api::Kubernetes,
                    "DELETE",
                    &format!("/api/v1/namespaces/a/pods/p{i}"),
                    "",
                    i,
                )
            })
            .collect();
        assert!(restart_loops(&deletes)[0].contains("pods of namespace a"));
        // A patch that is not a restart is no restart.
        let patches: Vec<AuditEvent> = (0..5)
            .map(|i| {
                event(
                    Api::Kubernetes,
                    "PATCH",
                    "/api/v1/namespaces/a/services/geo",
                    "",
                    i,
                )
            })
            .collect();
        assert!(restart_loops(&patches).is_empty());
    }

    #[test]
    fn the_trajectory_orders_requests_and_submissions_by_time() {
        let events = [
            event(Api::Kubernetes, "GET", "/api/v1/pods", "", 1_000_000_000),
            event(
                Api::Loki,
                "GET",
                "/loki/api/v1/query_range",
                "query=x",
                3_000_000_000,
            ),
        ];
        let subs = [SubmittedStep {
            at: schemas::time::rfc3339_nanos(2_000_000_000),
            stage: "diagnosis",
            solution: "geo".into(),
        }];
        let t = trajectory("s", "a", "task", &events, &subs, None);
        let steps = t["steps"].as_array().unwrap();
        let names: Vec<&str> = steps[1..]
            .iter()
            .map(|s| s["tool_calls"][0]["function_name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["kubernetes.list", "submit", "loki.get"]);
        assert_eq!(steps[0]["message"], "task");
        assert_eq!(steps[3]["step_id"], 4);
    }
}
