//! OpenEnv's wire protocol, IO-free: what a client sends on `/ws` (and in JSON-RPC on `POST /mcp`)
//! parsed into [`Request`]s, and the server's answers as text. The shapes are OpenEnv's
//! (`openenv.core.env_server.types`): a message is `{"type": ..., "data": ...}`; an observation
//! answer carries `observation`, `reward` and `done` (and `metadata`, which newer clients read);
//! an error carries OpenEnv's `code`, which its clients raise.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// OpenEnv's error codes (`WSErrorCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidJson,
    UnknownType,
    ValidationError,
    ExecutionError,
    CapacityReached,
    FactoryError,
    SessionError,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidJson => "INVALID_JSON",
            Code::UnknownType => "UNKNOWN_TYPE",
            Code::ValidationError => "VALIDATION_ERROR",
            Code::ExecutionError => "EXECUTION_ERROR",
            Code::CapacityReached => "CAPACITY_REACHED",
            Code::FactoryError => "FACTORY_ERROR",
            Code::SessionError => "SESSION_ERROR",
        }
    }
}

/// An error answered to the client: a code and what went wrong, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub code: Code,
    pub message: String,
}

impl Refusal {
    pub fn new(code: Code, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code.as_str())
    }
}

/// What `reset` takes: which episode to start. Without `problem`, one of `suite`'s problems (a
/// comma-separated list of globs over problem ids; the server's whole offer by default) is drawn
/// by `seed`, so that a seed names the same episode every time.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetArgs {
    /// A problem id (see `collector problems list`).
    pub problem: Option<String>,
    /// Globs over problem ids to draw from, e.g. `hotel-*`.
    pub suite: Option<String>,
    /// The episode's seed: which problem is drawn and how the simulation runs. Random when absent.
    pub seed: Option<u64>,
    /// `noise` (the default: the problem's background noise plays) or `quiet`.
    pub variant: Option<Variant>,
    /// Names the episode's run directory; letters, digits, `.`, `_` and `-`. Random when absent.
    pub episode_id: Option<String>,
}

/// A problem's variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    Noise,
    Quiet,
}

/// One step: a call of one of the session's tools (the observation of `reset` lists them, with
/// their argument schemas). `submit` with `{"solution": "..."}` submits the open stage: a
/// diagnosis in words, then (for a live problem) an empty solution once the system is fixed.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Action {
    pub tool: String,
    #[serde(default)]
    pub args: Map<String, Value>,
}

/// What the agent sees: after `reset` its task, endpoints and tools; after a step the tool's
/// output and the stage the session is in; at the end the reward's parts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct Observation {
    /// The task (after `reset`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    /// The session's APIs and a kubeconfig for them (after `reset`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<Value>,
    /// The tools a step may call, with their descriptions and argument schemas (after `reset`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// The tool's answer (after a step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Whether the tool call failed (after a step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<bool>,
    /// `diagnosis`, `mitigation` or `done`.
    pub stage: String,
    /// The reward's parts, once the episode is done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

/// What `state` answers.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct State {
    pub episode_id: Option<String>,
    pub step_count: u64,
    /// `idle` before the first `reset`, then the session's stage.
    pub stage: String,
}

/// A message from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Reset(ResetArgs),
    Step(Action),
    State,
    Close,
    /// A JSON-RPC request (OpenEnv's `mcp` message).
    Mcp(Value),
}

/// Parses one WebSocket text message.
pub fn parse(text: &str) -> Result<Request, Refusal> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Refusal::new(Code::InvalidJson, format!("invalid JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(Refusal::new(
            Code::InvalidJson,
            "a message is a JSON object with a `type`",
        ));
    };
    let data = object.get("data").cloned().unwrap_or(Value::Null);
    let kind = object.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "reset" => Ok(Request::Reset(data_as(kind, or_empty(data))?)),
        "step" => Ok(Request::Step(data_as(kind, data)?)),
        "state" => Ok(Request::State),
        "close" => Ok(Request::Close),
        "mcp" => Ok(Request::Mcp(data)),
        other => Err(Refusal::new(
            Code::UnknownType,
            format!("unknown message type `{other}` (expected reset, step, state, close or mcp)"),
        )),
    }
}

fn or_empty(data: Value) -> Value {
    if data.is_null() { json!({}) } else { data }
}

fn data_as<T: serde::de::DeserializeOwned>(kind: &str, data: Value) -> Result<T, Refusal> {
    serde_json::from_value(data)
        .map_err(|e| Refusal::new(Code::ValidationError, format!("`{kind}` data: {e}")))
}

/// The answer to `reset` and `step`.
pub fn observation(
    observation: &Observation,
    reward: Option<f64>,
    done: bool,
    metadata: Option<Value>,
) -> String {
    let mut data = json!({ "observation": observation, "reward": reward, "done": done });
    if let Some(metadata) = metadata {
        data["metadata"] = metadata;
    }
    json!({ "type": "observation", "data": data }).to_string()
}

pub fn state(state: &State) -> String {
    json!({ "type": "state", "data": state }).to_string()
}

pub fn error(refusal: &Refusal) -> String {
    json!({ "type": "error", "data": { "message": refusal.message, "code": refusal.code.as_str() } })
        .to_string()
}

pub fn mcp(response: &Value) -> String {
    json!({ "type": "mcp", "data": response }).to_string()
}

/// `GET /schema`: the JSON Schemas of an action, an observation and the state.
pub fn schema() -> Value {
    json!({
        "action": schemars::schema_for!(Action),
        "observation": schemars::schema_for!(Observation),
        "state": schemars::schema_for!(State),
        "reset": schemars::schema_for!(ResetArgs),
    })
}

/// `GET /metadata`.
pub fn metadata(version: &str) -> Value {
    json!({
        "name": "faultline",
        "description": "SRE incidents on a live simulated Kubernetes application: diagnose the failure, then fix it. Each episode is one problem (a fault with background noise) with its own cluster, metrics, traces and logs; the reward is the mean of the diagnosis (judged) and the mitigation (graded on the system, which must recover and stay recovered).",
        "version": version,
        "author": "faultline",
        "documentation_url": null,
        "readme_content": null,
    })
}

/// `GET /openapi.json`: the HTTP surface. OpenEnv's validator reads `info.version` ("1.x": its
/// standard's profile) and decides the mode from the paths: no `/reset`, `/step` or `/state` over
/// HTTP is its production mode, where episodes live on `/ws` only (an episode is a running
/// environment, so a stateless HTTP step has nothing to act on).
pub fn openapi(version: &str) -> Value {
    let get = |summary: &str| json!({ "get": { "summary": summary, "responses": { "200": { "description": "OK" } } } });
    json!({
        "openapi": "3.1.0",
        "info": { "title": "faultline OpenEnv server", "version": "1.0.0", "x-faultline-version": version },
        "paths": {
            "/health": get("Health: {\"status\": \"healthy\"}"),
            "/metadata": get("The environment's name and description"),
            "/schema": get("JSON Schemas of the action, observation and state"),
            "/ws": get("WebSocket: reset, step, state, close and mcp messages; one episode at a time per connection"),
            "/mcp": { "post": { "summary": "JSON-RPC: openenv/session/create and close, tools/list and tools/call (with session_id)", "responses": { "200": { "description": "A JSON-RPC response" } } } },
        },
    })
}

/// A JSON-RPC request, as `POST /mcp` and the `mcp` message carry it.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcCall {
    pub id: Value,
    pub method: String,
    pub params: Map<String, Value>,
}

/// JSON-RPC's codes.
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// The server's own range: no room for another session.
pub const CAPACITY: i64 = -32000;

pub fn rpc_call(value: &Value) -> Result<RpcCall, Value> {
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let invalid = |why: &str| rpc_error(&id, INVALID_REQUEST, &format!("invalid request: {why}"));
    if value.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("`jsonrpc` must be \"2.0\""));
    }
    let Some(method) = value.get("method").and_then(Value::as_str) else {
        return Err(invalid("`method` is missing"));
    };
    let params = match value.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(invalid("`params` must be an object")),
    };
    Ok(RpcCall {
        id,
        method: method.to_string(),
        params,
    })
}

pub fn rpc_result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

pub fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// Whether an episode id can name a directory: nothing that climbs or hides.
pub fn check_episode_id(id: &str) -> Result<(), Refusal> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Refusal::new(
            Code::ValidationError,
            format!(
                "episode_id `{id}`: expected 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.`"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_parse_into_requests() {
        assert_eq!(
            parse(r#"{"type":"reset","data":{"problem":"p","seed":3,"variant":"quiet"}}"#),
            Ok(Request::Reset(ResetArgs {
                problem: Some("p".into()),
                seed: Some(3),
                variant: Some(Variant::Quiet),
                ..ResetArgs::default()
            }))
        );
        assert_eq!(
            parse(r#"{"type":"reset"}"#),
            Ok(Request::Reset(ResetArgs::default()))
        );
        let step = parse(r#"{"type":"step","data":{"tool":"get_alerts"}}"#).unwrap();
        assert!(matches!(step, Request::Step(a) if a.tool == "get_alerts" && a.args.is_empty()));
        assert_eq!(parse(r#"{"type":"close"}"#), Ok(Request::Close));
    }

    #[test]
    fn bad_messages_get_openenv_codes_and_say_what_is_wrong() {
        let code = |text: &str| parse(text).unwrap_err();
        assert_eq!(code("{").code, Code::InvalidJson);
        assert_eq!(code("[1]").code, Code::InvalidJson);
        let unknown = code(r#"{"type":"jump"}"#);
        assert_eq!(unknown.code, Code::UnknownType);
        assert!(unknown.message.contains("jump"), "{unknown}");
        let field = code(r#"{"type":"reset","data":{"problme":"p"}}"#);
        assert_eq!(field.code, Code::ValidationError);
        assert!(field.message.contains("problme"), "{field}");
        assert_eq!(
            code(r#"{"type":"step","data":{"args":{}}}"#).code,
            Code::ValidationError
        );
        assert_eq!(
            code(r#"{"type":"reset","data":{"variant":"loud"}}"#).code,
            Code::ValidationError
        );
    }

    #[test]
    fn answers_have_openenv_shapes() {
        let obs = Observation {
            output: Some("ok".into()),
            stage: "diagnosis".into(),
            ..Observation::default()
        };
        let text = observation(&obs, None, false, None);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["type"], "observation");
        assert_eq!(v["data"]["observation"]["output"], "ok");
        assert_eq!(v["data"]["done"], false);
        assert!(v["data"]["reward"].is_null());
        let e: Value =
            serde_json::from_str(&error(&Refusal::new(Code::CapacityReached, "full"))).unwrap();
        assert_eq!(e["data"]["code"], "CAPACITY_REACHED");
    }

    #[test]
    fn json_rpc_requests_are_checked() {
        let call = rpc_call(&json!({"jsonrpc":"2.0","id":7,"method":"tools/list"})).unwrap();
        assert_eq!(call.method, "tools/list");
        let empty = rpc_call(&json!({})).unwrap_err();
        assert_eq!(empty["jsonrpc"], "2.0");
        assert_eq!(empty["error"]["code"], INVALID_REQUEST);
    }

    #[test]
    fn episode_ids_cannot_climb_out_of_the_runs_directory() {
        assert!(check_episode_id("ep-1.a_b").is_ok());
        for bad in ["", "..", ".hidden", "a/b", "a b", &"x".repeat(65)] {
            assert!(check_episode_id(bad).is_err(), "{bad}");
        }
    }
}
