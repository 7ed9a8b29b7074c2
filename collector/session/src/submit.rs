//! The submission API an agent reports to, compatible with SREGym's conductor: `POST /submit`
//! `{"solution": ...}`, `GET /status` (the stage), `GET /get_app` (the application, never the
//! problem), and its `submit` MCP tool over SSE at `/submit_mcp/sse`. A submission is handed to
//! the session, which records it (and, for a mitigation, forks the world at that instant) before
//! the agent gets its answer; grading happens after, and its result is not told to the agent.
//!
//! Answers are shaped as the conductor's (FastAPI) are: `{"status": "200", "message":
//! "Submission received"}`; a refusal is 400 `{"detail": …}`; a body that is not a solution is
//! 422 with FastAPI's validation detail; a submission while the last one is evaluated is taken as
//! the duplicate it is and answered as received.

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

/// The API; its `submit` MCP tool POSTs to `own_url` (this API's base URL).
pub fn router(state: Arc<SubmitState>, own_url: &str) -> anyhow::Result<Router> {
    let conductor = mcp::conductor_router(format!("{own_url}/submit"))
        .map_err(|e| anyhow::anyhow!("the submit MCP tool: {e}"))?;
    Ok(Router::new()
        .route("/submit", post(submit))
        .route("/status", get(status))
        .route("/get_app", get(get_app))
        .with_state(state)
        .merge(conductor))
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
        Err(e) => return invalid(&body, e),
    };
    let taken = s
        .progress
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .submit();
    let stage = match taken {
        Ok(stage) => stage,
        Err(Refusal::Done) => {
            return answer(
                "done",
                "All stages have been completed and graded. No further submissions are needed.",
            );
        }
        Err(Refusal::Duplicate(stage)) => {
            tracing::info!("a {stage} submission while the last one is evaluated: ignored");
            return answer(
                "200",
                "Submission already accepted; evaluation in progress.",
            );
        }
        Err(Refusal::Closed(_)) => {
            let stage = s.progress.lock().unwrap_or_else(|e| e.into_inner()).stage();
            let why = format!("Cannot submit at stage: '{}'", stage.name());
            return detail(StatusCode::BAD_REQUEST, json!(why));
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
        return detail(
            StatusCode::SERVICE_UNAVAILABLE,
            json!("the session is shutting down"),
        );
    }
    answer("200", "Submission received")
}

fn answer(status: &str, message: &str) -> Response {
    Json(json!({ "status": status, "message": message })).into_response()
}

/// An error as FastAPI answers one: `{"detail": …}`.
fn detail(code: StatusCode, detail: Value) -> Response {
    (code, Json(json!({ "detail": detail }))).into_response()
}

/// A body that is not a solution, answered 422 as FastAPI's validation answers it.
fn invalid(body: &[u8], e: BadBody) -> Response {
    let input: Value = serde_json::from_slice(body).unwrap_or_else(|_| json!({}));
    let (kind, loc, msg) = match &e {
        BadBody::NotJson(_) => (
            "json_invalid",
            json!(["body", 0]),
            "JSON decode error".to_string(),
        ),
        BadBody::NotObject => (
            "model_attributes_type",
            json!(["body"]),
            "Input should be a valid dictionary or object to extract fields from".to_string(),
        ),
        BadBody::NoSolution => (
            "missing",
            json!(["body", "solution"]),
            "Field required".to_string(),
        ),
        BadBody::Field(field, why) => ("value_error", json!(["body", field]), why.clone()),
    };
    let item = json!({"type": kind, "loc": loc, "msg": msg, "input": input, "ctx": {"error": e.to_string()}});
    detail(StatusCode::UNPROCESSABLE_ENTITY, json!([item]))
}

/// Why a body is not a solution.
#[derive(Debug, thiserror::Error)]
enum BadBody {
    #[error("the body must be JSON like {{\"solution\": \"...\"}}: {0}")]
    NotJson(String),
    #[error("the body must be a JSON object with a `solution` field")]
    NotObject,
    #[error("missing field `solution` (a string; \"\" for a mitigation)")]
    NoSolution,
    #[error("`{0}`: {1}")]
    Field(&'static str, String),
}

/// Reads `{"solution": TEXT | OUTPUT, "usage": {...}}`. The solution may be free text (SREGym),
/// or a structured agent output (ITBench's entities and propagations), read as the judge reads
/// output files.
fn parse_body(body: &[u8]) -> Result<(AgentOutput, Option<AgentUsage>), BadBody> {
    let value: Value = serde_json::from_slice(body).map_err(|e| BadBody::NotJson(e.to_string()))?;
    let Value::Object(mut map) = value else {
        return Err(BadBody::NotObject);
    };
    let usage = match map.remove("usage") {
        None | Some(Value::Null) => None,
        Some(u) => Some(serde_json::from_value(u).map_err(|e| {
            BadBody::Field("usage", format!("expected {{input_tokens, output_tokens, cached_input_tokens, steps, cost_usd}}: {e}"))
        })?),
    };
    let output = match map.remove("solution") {
        None => return Err(BadBody::NoSolution),
        Some(Value::String(text)) => AgentOutput::from_text(text.trim()),
        Some(other) => judge::submission::from_value(other)
            .map_err(|e| BadBody::Field("solution", e.to_string()))?,
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

    async fn body_of(r: Response) -> (StatusCode, Value) {
        let code = r.status();
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (code, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn refusals_are_shaped_as_fastapi_answers_them() {
        let (code, v) = body_of(invalid(br#"{"answer": "x"}"#, BadBody::NoSolution)).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(v["detail"][0]["type"], "missing");
        assert_eq!(v["detail"][0]["loc"], json!(["body", "solution"]));
        assert_eq!(v["detail"][0]["input"], json!({"answer": "x"}));
        let (code, v) = body_of(invalid(b"{", BadBody::NotJson("eof".into()))).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(v["detail"][0]["type"], "json_invalid");
        let (code, v) = body_of(detail(
            StatusCode::BAD_REQUEST,
            json!("Cannot submit at stage: 'setup'"),
        ))
        .await;
        assert_eq!(code, StatusCode::BAD_REQUEST);
        assert_eq!(v, json!({"detail": "Cannot submit at stage: 'setup'"}));
    }

    #[test]
    fn bad_bodies_say_what_was_expected() {
        let err = |b: &[u8]| parse_body(b).unwrap_err().to_string();
        assert!(err(b"solution=x").contains("must be JSON"));
        assert!(err(b"[1]").contains("`solution` field"));
        assert!(err(b"{}").contains("missing field `solution`"));
        assert!(err(br#"{"solution": "", "usage": {"input_tokens": "many"}}"#).contains("`usage`"));
    }
}
