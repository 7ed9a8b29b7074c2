//! `pods/NAME/portforward` over WebSocket, the transport only: kubectl's SPDY tunnel
//! (`SPDY/3.1+portforward.k8s.io`, protocol in `apiserver::portforward`) and kube-rs' plain
//! channels (`v4.channel.k8s.io` with `?ports=`). Connections reach the pod through
//! [`PodPorts`]; each answer is sent after the time the server took to give it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::portforward::{self as pf, Event, SPDY_TUNNEL, Tunnel};
use apiserver::status::Failure;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use tokio::sync::mpsc;

use super::writes;

/// What a connection answers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub bytes: Vec<u8>,
    pub wait: Duration,
    /// The server closes the connection after it.
    pub close: bool,
}

/// A TCP connection to a port of a pod.
pub trait PortConnection: Send {
    /// Bytes from the client; the server's answer once it has one.
    fn send(&mut self, bytes: &[u8]) -> Option<Answer>;
}

/// The pods behind a writable API, as far as port-forwarding goes.
pub trait PodPorts: Send + Sync {
    /// Checks that the pod can be forwarded to (exists, runs), before the upgrade.
    fn check(&self, namespace: &str, pod: &str) -> Result<(), Failure>;
    /// Connects to `port` of the pod, or the kubelet's error text.
    fn connect(
        &self,
        namespace: &str,
        pod: &str,
        port: u16,
    ) -> Result<Box<dyn PortConnection>, String>;
}

/// Serves one port-forward request.
pub fn serve(
    ports: &Arc<dyn PodPorts>,
    upgrade: Result<WebSocketUpgrade, Response>,
    namespace: &str,
    pod: &str,
    query: &str,
) -> Response {
    if let Err(e) = ports.check(namespace, pod) {
        return writes::failure(&e);
    }
    let upgrade = match upgrade {
        Ok(u) => u,
        Err(refused) => return refused,
    };
    let (ns, name, wanted) = (
        namespace.to_string(),
        pod.to_string(),
        pf::query_ports(query),
    );
    let ports = ports.clone();
    upgrade
        .protocols([SPDY_TUNNEL, "v5.channel.k8s.io", "v4.channel.k8s.io"])
        .on_upgrade(move |socket| async move {
            let target = Target { ports, ns, name };
            if socket.protocol().and_then(|p| p.to_str().ok()) == Some(SPDY_TUNNEL) {
                spdy(socket, target).await;
            } else {
                channels(socket, target, wanted).await;
            }
        })
}

struct Target {
    ports: Arc<dyn PodPorts>,
    ns: String,
    name: String,
}

type Shared = Arc<Mutex<Box<dyn PortConnection>>>;

impl Target {
    async fn connect(&self, port: u16) -> Result<Shared, String> {
        let (ports, ns, name) = (self.ports.clone(), self.ns.clone(), self.name.clone());
        tokio::task::spawn_blocking(move || ports.connect(&ns, &name, port))
            .await
            .map_err(|e| e.to_string())?
            .map(|c| Arc::new(Mutex::new(c)))
    }
}

/// Bytes to a connection, off the async workers (it takes the world's lock); the answer after
/// the time the server took.
async fn exchange(conn: &Shared, bytes: Vec<u8>) -> Option<Answer> {
    let c = conn.clone();
    let answer = tokio::task::spawn_blocking(move || {
        c.lock().unwrap_or_else(|e| e.into_inner()).send(&bytes)
    })
    .await
    .ok()??;
    tokio::time::sleep(answer.wait).await;
    Some(answer)
}

async fn binary(socket: &mut WebSocket, bytes: Vec<u8>) -> Result<(), ()> {
    if bytes.is_empty() {
        return Ok(());
    }
    socket
        .send(Message::Binary(bytes.into()))
        .await
        .map_err(|_| ())
}

/// kubectl: SPDY frames as a byte stream inside binary messages. Each connection answers on a
/// task of its own, so that a slow answer neither holds the others nor leaves the WebSocket
/// unread (kubectl gives up on a tunnel whose pings go unanswered).
async fn spdy(mut socket: WebSocket, target: Target) {
    let mut tunnel = Tunnel::new();
    let mut conns: BTreeMap<String, mpsc::UnboundedSender<Vec<u8>>> = BTreeMap::new();
    let (answers, mut answered) = mpsc::unbounded_channel::<(String, Answer)>();
    loop {
        let out = tokio::select! {
            message = socket.recv() => {
                let bytes = match message {
                    Some(Ok(Message::Binary(b))) => b,
                    Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                    Some(Ok(_)) => continue,
                };
                let Ok((mut out, events)) = tunnel.receive(&bytes) else {
                    return;
                };
                for event in events {
                    out.extend(match event {
                        Event::Connect { request, port } => match target.connect(port).await {
                            Ok(c) => {
                                conns.insert(request.clone(), answering(c, request, answers.clone()));
                                vec![]
                            }
                            Err(why) => tunnel.fail(&request, &why),
                        },
                        Event::Data { request, bytes } => {
                            if let Some(c) = conns.get(&request) {
                                let _ = c.send(bytes);
                            }
                            vec![]
                        }
                        Event::Closed { request } => {
                            conns.remove(&request);
                            tunnel.send(&request, &[], true)
                        }
                    });
                }
                out
            }
            Some((request, a)) = answered.recv() => tunnel.send(&request, &a.bytes, a.close),
        };
        if binary(&mut socket, out).await.is_err() {
            return;
        }
    }
}

/// The task that feeds one connection its bytes in order and hands back its answers, named by
/// `id` (kubectl's request id, or kube-rs' port index).
fn answering<Id: Clone + Send + 'static>(
    conn: Shared,
    id: Id,
    answers: mpsc::UnboundedSender<(Id, Answer)>,
) -> mpsc::UnboundedSender<Vec<u8>> {
    let (bytes_tx, mut bytes_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Some(bytes) = bytes_rx.recv().await {
            if let Some(a) = exchange(&conn, bytes).await
                && answers.send((id.clone(), a)).is_err()
            {
                return;
            }
        }
    });
    bytes_tx
}

/// kube-rs: one data and one error channel per port of `?ports=`.
async fn channels(mut socket: WebSocket, target: Target, wanted: Vec<u16>) {
    let (answers, mut answered) = mpsc::unbounded_channel::<(usize, Answer)>();
    let mut conns = vec![];
    for (i, port) in wanted.iter().enumerate() {
        for m in pf::channel_open(i, *port) {
            if binary(&mut socket, m).await.is_err() {
                return;
            }
        }
        match target.connect(*port).await {
            Ok(c) => conns.push(Some(answering(c, i, answers.clone()))),
            Err(why) => {
                let mut m = vec![(i * 2 + 1) as u8];
                m.extend_from_slice(why.as_bytes());
                let _ = binary(&mut socket, m).await;
                conns.push(None);
            }
        }
    }
    // As the kubelet, the socket ends once no forwarded connection is left.
    if conns.iter().all(Option::is_none) {
        super::close(&mut socket).await;
        return;
    }
    loop {
        tokio::select! {
            message = socket.recv() => {
                let bytes = match message {
                    Some(Ok(Message::Binary(b))) => b,
                    Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                    Some(Ok(_)) => continue,
                };
                let Some((&channel, payload)) = bytes.split_first() else {
                    continue;
                };
                if channel % 2 != 0 || payload.is_empty() {
                    continue;
                }
                if let Some(Some(c)) = conns.get(usize::from(channel / 2)) {
                    let _ = c.send(payload.to_vec());
                }
            }
            Some((index, a)) = answered.recv() => {
                // An answer queued before its connection closed is not sent after the close.
                if conns[index].is_none() {
                    continue;
                }
                if binary(&mut socket, pf::channel_data(index, &a.bytes)).await.is_err() {
                    return;
                }
                if a.close {
                    conns[index] = None;
                    if conns.iter().all(Option::is_none) {
                        super::close(&mut socket).await;
                        return;
                    }
                }
            }
        }
    }
}
