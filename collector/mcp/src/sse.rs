//! MCP's SSE transport (protocol 2024-11-05), the one SREGym's servers and clients speak: the
//! client opens `GET …/sse` and keeps it open; the first event, `endpoint`, names where to POST
//! its messages (`…/messages/?session_id=ID`); every POST is answered `202 Accepted` and the
//! server's replies come back as `message` events on the open stream.
//!
//! rmcp has no SSE server (it moved on to Streamable HTTP), so this is the transport alone: each
//! open stream is a pair of channels handed to rmcp as a [`Transport`], and the handler behind
//! it is whatever [`Connect`] makes for that connection.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::extract::{OriginalUri, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use rmcp::{ServerHandler, ServiceExt};
use tokio::sync::mpsc;

/// Makes the handler of one SSE connection, from the headers of its `GET` and its session id.
pub trait Connect: Send + Sync + 'static {
    type Handler: ServerHandler;
    fn connect(&self, headers: &HeaderMap, session_id: &str) -> Self::Handler;
}

/// The open connections: where each one's POSTed messages go.
type Sessions = Arc<Mutex<HashMap<String, mpsc::Sender<ClientJsonRpcMessage>>>>;

struct Shared<C> {
    connect: C,
    sessions: Sessions,
}

/// `GET /sse` and `POST /messages/`, to be nested under a mount (`/kubectl`): the endpoint event
/// names the mount's own messages path, as the client reached it.
pub fn router<C: Connect>(connect: C) -> axum::Router {
    let shared = Arc::new(Shared {
        connect,
        sessions: Sessions::default(),
    });
    // Clients differ on the trailing slash (fastmcp's SSETransport adds one): both are served.
    axum::Router::new()
        .route("/sse", get(open::<C>))
        .route("/sse/", get(open::<C>))
        .route("/messages/", post(message::<C>))
        .route("/messages", post(message::<C>))
        .with_state(shared)
}

async fn open<C: Connect>(
    State(shared): State<Arc<Shared<C>>>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    // Python's SSE server names sessions by a UUID's 32 hex digits; clients echo it back as is.
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (to_server, from_client) = mpsc::channel(64);
    let (to_client, from_server) = mpsc::channel(64);
    shared
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id.clone(), to_server);
    let handler = shared.connect.connect(&headers, &id);
    let transport = Channels {
        to_client,
        from_client,
    };
    tokio::spawn(async move {
        match handler.serve(transport).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::debug!("MCP over SSE: the client did not initialise: {e}"),
        }
    });
    let path = uri.path().trim_end_matches('/');
    let mount = path.strip_suffix("/sse").unwrap_or("");
    let endpoint = format!("{mount}/messages/?session_id={id}");
    let closing = Closing {
        id,
        sessions: shared.sessions.clone(),
    };
    let first = Event::default().event("endpoint").data(endpoint);
    let stream = futures_util::stream::unfold(
        (Some(first), from_server, closing),
        |(first, mut from_server, closing)| async move {
            if let Some(event) = first {
                return Some((Ok(event), (None, from_server, closing)));
            }
            let message = from_server.recv().await?;
            let data = serde_json::to_string(&message).unwrap_or_default();
            let event = Event::default().event("message").data(data);
            Some((Ok(event), (None, from_server, closing)))
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[derive(serde::Deserialize)]
struct SessionQuery {
    session_id: Option<String>,
}

async fn message<C: Connect>(
    State(shared): State<Arc<Shared<C>>>,
    Query(query): Query<SessionQuery>,
    body: axum::body::Bytes,
) -> Response {
    let Some(id) = query.session_id else {
        return (StatusCode::BAD_REQUEST, "session_id is required").into_response();
    };
    let to_server = shared
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&id)
        .cloned();
    let Some(to_server) = to_server else {
        return (StatusCode::NOT_FOUND, "Could not find session").into_response();
    };
    let message: ClientJsonRpcMessage = match serde_json::from_slice(&body) {
        Ok(m) => m,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("Could not parse message: {e}"),
            )
                .into_response();
        }
    };
    if to_server.send(message).await.is_err() {
        return (StatusCode::NOT_FOUND, "Could not find session").into_response();
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}

/// Forgets a connection when its stream is dropped (the client went away): its handler's
/// transport then ends, and so does the handler.
struct Closing {
    id: String,
    sessions: Sessions,
}

impl Drop for Closing {
    fn drop(&mut self) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

/// One connection as rmcp sees it: messages in from the POSTs, out to the event stream.
struct Channels {
    to_client: mpsc::Sender<ServerJsonRpcMessage>,
    from_client: mpsc::Receiver<ClientJsonRpcMessage>,
}

#[derive(Debug, thiserror::Error)]
#[error("the client's event stream is closed")]
pub struct StreamClosed;

impl Transport<RoleServer> for Channels {
    type Error = StreamClosed;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), StreamClosed>> + Send + 'static {
        let to_client = self.to_client.clone();
        async move { to_client.send(item).await.map_err(|_| StreamClosed) }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.from_client.recv()
    }

    async fn close(&mut self) -> Result<(), StreamClosed> {
        self.from_client.close();
        Ok(())
    }
}
