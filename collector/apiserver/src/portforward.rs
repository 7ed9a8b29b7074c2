//! `kubectl port-forward`'s protocol over SPDY, IO-free: every TCP connection kubectl accepts
//! locally becomes a pair of streams it opens, an error stream and a data stream, with the same
//! `requestID` and the pod's `port` in their headers. Bytes on the data stream are the
//! connection's; the server answers on the data stream, or writes why it could not connect on
//! the error stream. kube-rs' plain WebSocket variant (`v4.channel.k8s.io`, one channel pair per
//! port) is framed by [`channel_open`] and [`channel_data`].

use std::collections::BTreeMap;

use crate::spdy::{Codec, Error, Frame};

/// The WebSocket subprotocol kubectl tunnels SPDY in.
pub const SPDY_TUNNEL: &str = "SPDY/3.1+portforward.k8s.io";

/// What the caller has to do for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A new connection to `port`: connect to it, then [`Tunnel::fail`] if that is refused.
    Connect { request: String, port: u16 },
    /// Bytes the client sent on a connection.
    Data { request: String, bytes: Vec<u8> },
    /// The client closed its side of a connection.
    Closed { request: String },
}

#[derive(Debug, Default)]
struct Pair {
    port: u16,
    error: Option<u32>,
    data: Option<u32>,
    announced: bool,
    done: bool,
}

/// The server side of one port-forward session.
#[derive(Default)]
pub struct Tunnel {
    codec: Codec,
    pairs: BTreeMap<String, Pair>,
    /// Which request a stream belongs to.
    streams: BTreeMap<u32, String>,
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

impl Tunnel {
    pub fn new() -> Tunnel {
        Tunnel::default()
    }

    /// Bytes from the client: what to send back at once (stream replies, pongs) and the events
    /// for the caller.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<(Vec<u8>, Vec<Event>), Error> {
        self.codec.feed(bytes);
        let mut out = vec![];
        let mut events = vec![];
        while let Some(frame) = self.codec.next_frame()? {
            match frame {
                Frame::SynStream {
                    stream_id, headers, ..
                } => {
                    out.extend(self.codec.encode(&Frame::SynReply {
                        stream_id,
                        headers: vec![],
                        fin: false,
                    }));
                    let request = header(&headers, "requestid").unwrap_or("0").to_string();
                    let port: u16 = header(&headers, "port")
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(0);
                    let pair = self.pairs.entry(request.clone()).or_default();
                    pair.port = port;
                    match header(&headers, "streamtype") {
                        Some("error") => pair.error = Some(stream_id),
                        Some("data") => pair.data = Some(stream_id),
                        _ => {}
                    }
                    self.streams.insert(stream_id, request.clone());
                    if pair.error.is_some() && pair.data.is_some() && !pair.announced {
                        pair.announced = true;
                        events.push(Event::Connect { request, port });
                    }
                }
                Frame::Data {
                    stream_id,
                    fin,
                    payload,
                } => {
                    let Some(request) = self.streams.get(&stream_id).cloned() else {
                        continue;
                    };
                    let is_data = self.pairs.get(&request).and_then(|p| p.data) == Some(stream_id);
                    if is_data && !payload.is_empty() {
                        events.push(Event::Data {
                            request: request.clone(),
                            bytes: payload,
                        });
                    }
                    if is_data && fin {
                        events.push(Event::Closed { request });
                    }
                }
                Frame::RstStream { stream_id, .. } => {
                    if let Some(request) = self.streams.remove(&stream_id) {
                        events.push(Event::Closed { request });
                    }
                }
                Frame::Ping(id) => out.extend(self.codec.encode(&Frame::Ping(id))),
                Frame::SynReply { .. }
                | Frame::Settings
                | Frame::GoAway { .. }
                | Frame::Headers { .. }
                | Frame::WindowUpdate { .. } => {}
            }
        }
        Ok((out, events))
    }

    /// The server's bytes on a connection; `close` ends the server's side of it (and of its
    /// error stream).
    pub fn send(&mut self, request: &str, bytes: &[u8], close: bool) -> Vec<u8> {
        let Some(pair) = self.pairs.get_mut(request) else {
            return vec![];
        };
        let (Some(data), Some(error)) = (pair.data, pair.error) else {
            return vec![];
        };
        if pair.done {
            return vec![];
        }
        let mut out = vec![];
        // Data frames of at most 32 KiB, under the peer's initial window.
        for piece in bytes.chunks(32 * 1024) {
            out.extend(self.codec.encode(&Frame::Data {
                stream_id: data,
                fin: false,
                payload: piece.to_vec(),
            }));
        }
        if close {
            pair.done = true;
            out.extend(self.codec.encode(&Frame::Data {
                stream_id: data,
                fin: true,
                payload: vec![],
            }));
            out.extend(self.codec.encode(&Frame::Data {
                stream_id: error,
                fin: true,
                payload: vec![],
            }));
        }
        out
    }

    /// The connection could not be made (or broke): `message` on its error stream, both
    /// streams closed.
    pub fn fail(&mut self, request: &str, message: &str) -> Vec<u8> {
        let Some(pair) = self.pairs.get_mut(request) else {
            return vec![];
        };
        let (Some(data), Some(error)) = (pair.data, pair.error) else {
            return vec![];
        };
        pair.done = true;
        let mut out = self.codec.encode(&Frame::Data {
            stream_id: error,
            fin: true,
            payload: message.as_bytes().to_vec(),
        });
        out.extend(self.codec.encode(&Frame::Data {
            stream_id: data,
            fin: true,
            payload: vec![],
        }));
        out
    }

    /// The port a connection goes to.
    pub fn port(&self, request: &str) -> Option<u16> {
        self.pairs.get(request).map(|p| p.port)
    }
}

/// kube-rs' port-forward: the first message on each of a port's channels (`2i` data, `2i+1`
/// errors) is the channel and the port, little-endian.
pub fn channel_open(index: usize, port: u16) -> [Vec<u8>; 2] {
    let [lo, hi] = port.to_le_bytes();
    let data = (index * 2) as u8;
    [vec![data, lo, hi], vec![data + 1, lo, hi]]
}

/// A data message on port `index`'s channel.
pub fn channel_data(index: usize, bytes: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(bytes.len() + 1);
    m.push((index * 2) as u8);
    m.extend_from_slice(bytes);
    m
}

/// The `ports` of a kube-rs port-forward request.
pub fn query_ports(query: &str) -> Vec<u16> {
    form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "ports")
        .flat_map(|(_, v)| {
            v.split(',')
                .filter_map(|p| p.trim().parse().ok())
                .collect::<Vec<u16>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syn(c: &mut Codec, id: u32, kind: &str, port: &str, request: &str) -> Vec<u8> {
        c.encode(&Frame::SynStream {
            stream_id: id,
            headers: vec![
                ("streamType".into(), kind.into()),
                ("port".into(), port.into()),
                ("requestID".into(), request.into()),
            ],
            fin: false,
        })
    }

    #[test]
    fn a_connection_is_a_pair_of_streams() {
        let mut client = Codec::new();
        let mut t = Tunnel::new();
        let mut wire = syn(&mut client, 1, "error", "5000", "0");
        wire.extend(syn(&mut client, 3, "data", "5000", "0"));
        wire.extend(client.encode(&Frame::Data {
            stream_id: 3,
            fin: false,
            payload: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        }));
        let (back, events) = t.receive(&wire).unwrap();
        assert_eq!(
            events,
            [
                Event::Connect {
                    request: "0".into(),
                    port: 5000
                },
                Event::Data {
                    request: "0".into(),
                    bytes: b"GET / HTTP/1.1\r\n\r\n".to_vec()
                }
            ]
        );
        // Both streams were answered.
        client.feed(&back);
        assert!(matches!(
            client.next_frame().unwrap(),
            Some(Frame::SynReply { stream_id: 1, .. })
        ));
        assert!(matches!(
            client.next_frame().unwrap(),
            Some(Frame::SynReply { stream_id: 3, .. })
        ));
        client.feed(&t.send("0", b"HTTP/1.1 200 OK\r\n\r\n", true));
        assert!(matches!(
            client.next_frame().unwrap(),
            Some(Frame::Data {
                stream_id: 3,
                fin: false,
                ..
            })
        ));
        assert!(matches!(
            client.next_frame().unwrap(),
            Some(Frame::Data {
                stream_id: 3,
                fin: true,
                ..
            })
        ));
        assert!(matches!(
            client.next_frame().unwrap(),
            Some(Frame::Data {
                stream_id: 1,
                fin: true,
                ..
            })
        ));
    }

    #[test]
    fn a_refused_connection_says_why_on_its_error_stream() {
        let mut client = Codec::new();
        let mut t = Tunnel::new();
        let mut wire = syn(&mut client, 1, "error", "9", "4");
        wire.extend(syn(&mut client, 3, "data", "9", "4"));
        let (back, _) = t.receive(&wire).unwrap();
        client.feed(&back);
        client.feed(&t.fail("4", "connection refused"));
        let frames: Vec<Frame> = std::iter::from_fn(|| client.next_frame().unwrap()).collect();
        assert!(frames.contains(&Frame::Data {
            stream_id: 1,
            fin: true,
            payload: b"connection refused".to_vec()
        }));
    }

    #[test]
    fn kube_rs_channels() {
        assert_eq!(query_ports("ports=80%2C1234"), [80, 1234]);
        assert_eq!(
            channel_open(1, 1234),
            [vec![2, 0xd2, 0x04], vec![3, 0xd2, 0x04]]
        );
        assert_eq!(channel_data(0, b"x"), vec![0, b'x']);
    }
}
