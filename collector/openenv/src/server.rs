//! The transport: OpenEnv's HTTP surfaces and its WebSocket, over axum. A connection to `/ws`
//! owns a session slot (one episode at a time; `reset` replaces it) that ends with the
//! connection, or attaches to a slot made by `openenv/session/create` on `POST /mcp`, which lives
//! until `openenv/session/close`. Slots are counted against `--max-sessions`: one more is
//! answered `CAPACITY_REACHED`. A slot is freed only once its episode's environment is stopped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocket};
use axum::extract::{Query, State, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::episode::{Episode, Settings, Stepped};
use crate::protocol::{self, Code, Refusal, Request};

/// A session slot: at most one episode at a time, one request at a time.
#[derive(Default)]
struct Slot {
    episode: Option<Episode>,
}

type Shared = Arc<tokio::sync::Mutex<Slot>>;

struct App {
    settings: Settings,
    max: usize,
    slots: Mutex<HashMap<String, Shared>>,
    version: String,
}

impl App {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Shared>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new slot, or CAPACITY_REACHED.
    fn open(&self) -> Result<(String, Shared), Refusal> {
        let mut slots = self.slots();
        if slots.len() >= self.max {
            return Err(Refusal::new(
                Code::CapacityReached,
                format!(
                    "the server runs {} sessions already (--max-sessions {})",
                    slots.len(),
                    self.max
                ),
            ));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let slot = Shared::default();
        slots.insert(id.clone(), slot.clone());
        Ok((id, slot))
    }

    fn find(&self, id: &str) -> Result<Shared, Refusal> {
        self.slots()
            .get(id)
            .cloned()
            .ok_or_else(|| Refusal::new(Code::SessionError, format!("unknown session_id `{id}`")))
    }

    /// Ends a slot's episode (its environment stopped), then frees the slot.
    async fn close(&self, id: &str) -> bool {
        let Some(slot) = self.slots().get(id).cloned() else {
            return false;
        };
        if let Some(episode) = slot.lock().await.episode.take() {
            episode.close().await;
        }
        self.slots().remove(id);
        true
    }

    /// Answers one request of a slot, as the text the WebSocket sends; `None` for `close`, which
    /// ends the connection.
    async fn answer(&self, slot: &Shared, request: Request) -> Option<String> {
        let mut slot = slot.lock().await;
        let answered = match request {
            Request::Reset(args) => {
                if let Some(previous) = slot.episode.take() {
                    previous.close().await;
                }
                Episode::start(&self.settings, args)
                    .await
                    .map(|(episode, obs)| {
                        slot.episode = Some(episode);
                        protocol::observation(&obs, None, false, None)
                    })
            }
            Request::Step(action) => match slot.episode.as_mut() {
                Some(episode) => episode.step(action).await.map(|s| stepped(&s)),
                None => Err(no_episode()),
            },
            Request::State => Ok(protocol::state(&match &slot.episode {
                Some(episode) => episode.state(),
                None => protocol::State {
                    episode_id: None,
                    step_count: 0,
                    stage: "idle".into(),
                },
            })),
            Request::Mcp(raw) => Ok(protocol::mcp(&match protocol::rpc_call(&raw) {
                Ok(call) => tools_rpc(&mut slot, &call).await,
                Err(error) => error,
            })),
            Request::Close => return None,
        };
        Some(answered.unwrap_or_else(|r| protocol::error(&r)))
    }
}

fn stepped(s: &Stepped) -> String {
    protocol::observation(&s.observation, s.reward, s.done, s.metadata.clone())
}

fn no_episode() -> Refusal {
    Refusal::new(Code::SessionError, "no episode: send `reset` first")
}

/// `tools/list` and `tools/call` on a slot's episode, in MCP's result shapes.
async fn tools_rpc(slot: &mut Slot, call: &protocol::RpcCall) -> Value {
    let Some(episode) = slot.episode.as_mut() else {
        return protocol::rpc_error(&call.id, protocol::INVALID_PARAMS, &no_episode().message);
    };
    match call.method.as_str() {
        "tools/list" => protocol::rpc_result(&call.id, json!({ "tools": episode.tools() })),
        "tools/call" => {
            let action = json!({
                "tool": call.params.get("name").cloned().unwrap_or(Value::Null),
                "args": call.params.get("arguments").cloned().unwrap_or(json!({})),
            });
            let action = match serde_json::from_value(action) {
                Ok(a) => a,
                Err(e) => {
                    let why = format!("tools/call needs `name` and object `arguments`: {e}");
                    return protocol::rpc_error(&call.id, protocol::INVALID_PARAMS, &why);
                }
            };
            match episode.step(action).await {
                Ok(s) => {
                    let text = s.observation.output.clone().unwrap_or_default();
                    protocol::rpc_result(
                        &call.id,
                        json!({
                            "content": [{ "type": "text", "text": text }],
                            "isError": s.observation.error.unwrap_or(false),
                            "structuredContent": { "stage": s.observation.stage, "done": s.done, "reward": s.reward },
                        }),
                    )
                }
                Err(r) => protocol::rpc_error(&call.id, protocol::INVALID_PARAMS, &r.message),
            }
        }
        other => protocol::rpc_error(
            &call.id,
            protocol::METHOD_NOT_FOUND,
            &format!(
                "no method `{other}` (tools/list, tools/call, openenv/session/create, openenv/session/close)"
            ),
        ),
    }
}

/// The server's routes.
pub fn router(settings: Settings, max_sessions: usize) -> Router {
    let app = Arc::new(App {
        settings,
        max: max_sessions.max(1),
        slots: Mutex::new(HashMap::new()),
        version: env!("CARGO_PKG_VERSION").to_string(),
    });
    Router::new()
        .route("/health", get(health))
        .route("/metadata", get(metadata))
        .route("/schema", get(|| async { Json(protocol::schema()) }))
        .route("/openapi.json", get(openapi))
        .route("/ws", get(ws))
        .route("/mcp", post(mcp))
        .with_state(app)
}

async fn health(State(app): State<Arc<App>>) -> Json<Value> {
    let active = app.slots().len();
    Json(json!({ "status": "healthy", "active_sessions": active, "max_sessions": app.max }))
}

async fn metadata(State(app): State<Arc<App>>) -> Json<Value> {
    Json(protocol::metadata(&app.version))
}

async fn openapi(State(app): State<Arc<App>>) -> Json<Value> {
    Json(protocol::openapi(&app.version))
}

#[derive(serde::Deserialize)]
struct Attach {
    session_id: Option<String>,
}

async fn ws(
    State(app): State<Arc<App>>,
    Query(attach): Query<Attach>,
    upgrade: WebSocketUpgrade,
) -> Response {
    // OpenEnv's clients send up to 100 MB; an answer (a tool's output, a run record) is far less.
    upgrade
        .max_message_size(16 << 20)
        .on_upgrade(move |socket| connection(app, attach.session_id, socket))
}

/// One WebSocket connection, message by message.
async fn connection(app: Arc<App>, attach: Option<String>, mut socket: WebSocket) {
    let opened = match attach {
        Some(id) => app.find(&id).map(|slot| (id, slot, false)),
        None => app.open().map(|(id, slot)| (id, slot, true)),
    };
    let (id, slot, owned) = match opened {
        Ok(o) => o,
        Err(refusal) => {
            // Answered to the first message, which the client waits on, and then closed.
            if let Some(Ok(_)) = socket.recv().await {
                let _ = socket
                    .send(Message::Text(protocol::error(&refusal).into()))
                    .await;
            }
            return;
        }
    };
    while let Some(Ok(message)) = socket.recv().await {
        let text = match message {
            Message::Text(t) => t.to_string(),
            Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        let answer = match protocol::parse(&text) {
            Ok(request) => match app.answer(&slot, request).await {
                Some(answer) => answer,
                None => break,
            },
            Err(refusal) => protocol::error(&refusal),
        };
        if socket.send(Message::Text(answer.into())).await.is_err() {
            break;
        }
    }
    // A client gone mid-episode frees its slot: the session is interrupted, its environment
    // stopped. A slot made over HTTP outlives its connections until it is closed there.
    if owned {
        app.close(&id).await;
    }
}

#[derive(serde::Deserialize)]
struct McpQuery {
    session_id: Option<String>,
}

/// `POST /mcp`: OpenEnv's session lifecycle and the tools of a session's episode.
async fn mcp(
    State(app): State<Arc<App>>,
    Query(query): Query<McpQuery>,
    body: axum::body::Bytes,
) -> Response {
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            let error = protocol::rpc_error(&Value::Null, -32700, &format!("parse error: {e}"));
            return Json(error).into_response();
        }
    };
    let call = match protocol::rpc_call(&value) {
        Ok(call) => call,
        Err(error) => return Json(error).into_response(),
    };
    let param_id = call.params.get("session_id").and_then(Value::as_str);
    let session = query.session_id.as_deref().or(param_id).map(str::to_string);
    let answer = match (call.method.as_str(), session) {
        ("openenv/session/create", _) => match app.open() {
            Ok((id, _)) => protocol::rpc_result(&call.id, json!({ "session_id": id })),
            Err(r) => protocol::rpc_error(&call.id, protocol::CAPACITY, &r.to_string()),
        },
        ("openenv/session/close", Some(id)) => {
            if app.close(&id).await {
                protocol::rpc_result(&call.id, json!({ "session_id": id, "closed": true }))
            } else {
                protocol::rpc_error(
                    &call.id,
                    protocol::INVALID_PARAMS,
                    &format!("unknown session_id `{id}`"),
                )
            }
        }
        (_, None) => protocol::rpc_error(
            &call.id,
            protocol::INVALID_PARAMS,
            "`session_id` is required (in the query or the params): create one with openenv/session/create",
        ),
        (_, Some(id)) => match app.find(&id) {
            Ok(slot) => tools_rpc(&mut *slot.lock().await, &call).await,
            Err(r) => protocol::rpc_error(&call.id, protocol::INVALID_PARAMS, &r.message),
        },
    };
    Json(answer).into_response()
}
