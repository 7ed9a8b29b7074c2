//! `pods/NAME/exec` and `pods/NAME/attach` over WebSocket (`v5.channel.k8s.io`, or v4 for older
//! clients), the transport only: the framing and the exit `Status` come from
//! `apiserver::remotecommand`, the process from the cluster behind the API ([`ContainerExec`]).
//! A command's simulated run time is waited before its output goes out, without holding
//! anything, so a slow `curl` takes as long as it would.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::remotecommand::{self as rc, Incoming, Options};
use apiserver::status::Failure;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;

use super::writes;

/// What a running process printed since the last call, and whether it ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chunk {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// How long producing it took, waited before it is sent.
    pub wait: Duration,
    /// The exit code once the process has ended.
    pub exit: Option<i32>,
}

/// A process in a container, driven by its client's stdin.
pub trait ExecSession: Send {
    /// What the process prints as it starts (all of it, for a command that needs no input).
    fn start(&mut self) -> Chunk;
    fn stdin(&mut self, data: &[u8]) -> Chunk;
    fn stdin_closed(&mut self) -> Chunk;
}

/// The containers behind a writable API.
pub trait ContainerExec: Send + Sync {
    /// Starts `options.command` (attach: reaches the main process) in a container of a pod, or
    /// says why the apiserver would refuse.
    fn open(
        &self,
        namespace: &str,
        pod: &str,
        options: &Options,
        attach: bool,
    ) -> Result<Box<dyn ExecSession>, Failure>;
}

/// A session with no input for this long is closed, as the kubelet closes idle streams.
const IDLE: Duration = Duration::from_secs(30 * 60);
/// Largest payload of one message.
const FRAME: usize = 32 * 1024;
/// A container runtime takes tens of milliseconds to start an exec'd process, and clients count
/// on it: client-go reads the socket while it is still creating its streams and drops a frame for
/// a stream it has not created yet. Output sent at once would race that and be lost now and then.
const PROCESS_START: Duration = Duration::from_millis(50);

/// Serves one exec or attach request. The pod and container are checked before the upgrade: a
/// client that falls back to SPDY after a refused WebSocket (kubectl) gets the same refusal.
pub fn serve(
    exec: &Arc<dyn ContainerExec>,
    upgrade: Result<WebSocketUpgrade, Response>,
    namespace: &str,
    pod: &str,
    query: &str,
    attach: bool,
) -> Response {
    let options = match Options::parse(query, attach) {
        Ok(o) => o,
        Err(e) => return writes::failure(&e),
    };
    let session = match exec.open(namespace, pod, &options, attach) {
        Ok(s) => s,
        Err(e) => return writes::failure(&e),
    };
    let upgrade = match upgrade {
        Ok(u) => u,
        Err(refused) => return refused,
    };
    let session = Arc::new(Mutex::new(session));
    upgrade
        .protocols(rc::PROTOCOLS)
        .on_upgrade(move |socket| stream(socket, session, options))
}

/// Runs one call on the session off the async workers (it takes the world's lock).
async fn call(
    session: &Arc<Mutex<Box<dyn ExecSession>>>,
    f: impl FnOnce(&mut dyn ExecSession) -> Chunk + Send + 'static,
) -> Chunk {
    let s = session.clone();
    tokio::task::spawn_blocking(move || {
        let mut guard = s.lock().unwrap_or_else(|e| e.into_inner());
        f(guard.as_mut())
    })
    .await
    .unwrap_or_else(|_| Chunk {
        exit: Some(1),
        ..Chunk::default()
    })
}

async fn stream(
    mut socket: WebSocket,
    session: Arc<Mutex<Box<dyn ExecSession>>>,
    options: Options,
) {
    let mut chunk = call(&session, |s| s.start()).await;
    chunk.wait = chunk.wait.max(PROCESS_START);
    loop {
        if send(&mut socket, &options, &mut chunk).await.is_err() {
            return;
        }
        if let Some(code) = chunk.exit {
            let status = rc::exit_status(code).to_string();
            let _ = socket
                .send(Message::Binary(
                    rc::frame(rc::STATUS, status.as_bytes()).into(),
                ))
                .await;
            super::close(&mut socket).await;
            return;
        }
        let message = match tokio::time::timeout(IDLE, socket.recv()).await {
            Ok(Some(Ok(m))) => m,
            // The client left (or went quiet): the process is ended with its session.
            _ => return,
        };
        chunk = match message {
            Message::Binary(b) => match rc::incoming(&b) {
                Incoming::Stdin(data) => call(&session, move |s| s.stdin(&data)).await,
                Incoming::StdinClosed => call(&session, |s| s.stdin_closed()).await,
                Incoming::Resize { .. } | Incoming::Ignored => Chunk::default(),
            },
            Message::Close(_) => return,
            _ => Chunk::default(),
        };
    }
}

/// Waits the chunk's run time, then sends its output on the channels the client asked for.
async fn send(socket: &mut WebSocket, options: &Options, chunk: &mut Chunk) -> Result<(), ()> {
    if !chunk.wait.is_zero() {
        tokio::time::sleep(chunk.wait).await;
    }
    let streams = [
        (
            rc::STDOUT,
            options.stdout,
            std::mem::take(&mut chunk.stdout),
        ),
        (
            rc::STDERR,
            options.stderr && !options.tty,
            std::mem::take(&mut chunk.stderr),
        ),
    ];
    for (channel, wanted, data) in streams {
        if !wanted {
            continue;
        }
        for piece in data.chunks(FRAME) {
            socket
                .send(Message::Binary(rc::frame(channel, piece).into()))
                .await
                .map_err(|_| ())?;
        }
    }
    Ok(())
}
