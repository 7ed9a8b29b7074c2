//! The submission API an agent reports to, compatible with SREGym's conductor: `POST /submit`
//! `{"solution": ...}`, `GET /status` (the stage), `GET /get_app` (the application, never the
//! problem). A submission is handed to the session, which records it (and, for a mitigation,
//! forks the world at that instant) before the agent gets its answer; grading happens after, and
//! its result is not told to the agent.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use schemas::AgentOutput;
use schemas::run_result::AgentUsage;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::stages::{Progress, Refusal, Stage};

/// What `GET /get_app` tells the agent.
#[derive(Debug, Clone, Serialize)]
pub struct AppInfo {
    pub app_name: String,
    pub namespace: String,
    pub namespaces: Vec<String>,
    pub descriptions: String,
}

impl AppInfo {
    /// What the catalog says of an app the session runs.
    pub fn of(app: &problems::AppSpec) -> AppInfo {
        AppInfo {
            app_name: app.name.clone(),
            namespaces: vec![app.namespace.clone()],
            namespace: app.namespace.clone(),
            descriptions: app.description.trim().to_string(),
        }
    }
}

/// One accepted submission, as the session receives it.
#[derive(Debug)]
pub struct Submission {
    pub stage: Stage,
    pub output: AgentOutput,
    /// Tokens the agent says it used so far (`usage` beside `solution`).
    pub usage: Option<AgentUsage>,
    pub at: Instant,
    /// Answered once the session has recorded the submission.
    pub recorded: oneshot::Sender<()>,
}

/// The API's shared state.
pub struct SubmitState {
    pub progress: Arc<Mutex<Progress>>,
    pub app: AppInfo,
    pub submissions: mpsc::Sender<Submission>,
}

pub fn router(state: Arc<SubmitState>) -> Router {
    Router::new()
        .route("/submit", post(submit))
        .route("/status", get(status))
        .route("/get_app", get(get_app))
        .with_state(state)
}

async fn status(State(s): State<Arc<SubmitState>>) -> Json<Value> {
    let stage = s.progress.lock().unwrap_or_else(|e| e.into_inner()).stage();
    Json(json!({ "stage": stage }))
}

async fn get_app(State(s): State<Arc<SubmitState>>) -> Json<AppInfo> {
    Json(s.app.clone())
}

async fn submit(State(s): State<Arc<SubmitState>>, body: axum::body::Bytes) -> Response {
    let (output, usage) = match parse_body(&body) {
        Ok(parsed) => parsed,
        Err(e) => return answer(StatusCode::BAD_REQUEST, "400", &e),
    };
    let stage = match s
        .progress
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .submit()
    {
        Ok(stage) => stage,
        Err(Refusal::Done) => return answer(StatusCode::OK, "done", "every stage is finished"),
        Err(e @ Refusal::Closed(_)) => {
            return answer(StatusCode::BAD_REQUEST, "400", &e.to_string());
        }
    };
    let (recorded, wait) = oneshot::channel();
    let submission = Submission {
        stage,
        output,
        usage,
        at: Instant::now(),
        recorded,
    };
    if s.submissions.send(submission).await.is_err() || wait.await.is_err() {
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            "503",
            "the session is shutting down",
        );
    }
    answer(StatusCode::OK, "200", "Submission received")
}

fn answer(code: StatusCode, status: &str, message: &str) -> Response {
    (code, Json(json!({ "status": status, "message": message }))).into_response()
}

/// Reads `{"solution": TEXT | OUTPUT, "usage": {...}}`. The solution may be free text (SREGym),
/// or a structured agent output (ITBench's entities and propagations), read as the judge reads
/// output files.
fn parse_body(body: &[u8]) -> Result<(AgentOutput, Option<AgentUsage>), String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the body must be JSON like {{\"solution\": \"...\"}}: {e}"))?;
    let Value::Object(mut map) = value else {
        return Err("the body must be a JSON object with a `solution` field".into());
    };
    let usage = match map.remove("usage") {
        None | Some(Value::Null) => None,
        Some(u) => Some(serde_json::from_value(u).map_err(|e| {
            format!("`usage`: expected {{input_tokens, output_tokens, cached_input_tokens, steps, cost_usd}}: {e}")
        })?),
    };
    let output = match map.remove("solution") {
        None => return Err("missing field `solution` (a string; \"\" for a mitigation)".into()),
        Some(Value::String(text)) => AgentOutput::from_text(text.trim()),
        Some(other) => {
            judge::submission::from_value(other).map_err(|e| format!("`solution`: {e}"))?
        }
    };
    Ok((output, usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_text_or_a_structured_output_with_optional_usage() {
        let (o, u) =
            parse_body(br#"{"solution": " geo's Service targets the wrong port "}"#).unwrap();
        assert_eq!(o.diagnosis, "geo's Service targets the wrong port");
        assert!(u.is_none());
        let (o, u) = parse_body(
            br#"{"solution": {"entities": [{"name": "ns/Service/geo", "contributing_factor": true}]},
                 "usage": {"input_tokens": 10, "output_tokens": 3}}"#,
        )
        .unwrap();
        assert_eq!(o.entities[0].name, "ns/Service/geo");
        assert_eq!(u.map(|u| u.input_tokens + u.output_tokens), Some(13));
    }

    #[test]
    fn bad_bodies_say_what_was_expected() {
        assert!(
            parse_body(b"solution=x")
                .unwrap_err()
                .contains("must be JSON")
        );
        assert!(parse_body(b"[1]").unwrap_err().contains("`solution` field"));
        assert!(
            parse_body(b"{}")
                .unwrap_err()
                .contains("missing field `solution`")
        );
        assert!(
            parse_body(br#"{"solution": "", "usage": {"input_tokens": "many"}}"#)
                .unwrap_err()
                .contains("`usage`")
        );
    }
}
