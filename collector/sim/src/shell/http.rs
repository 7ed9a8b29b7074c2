//! What a program answers when someone sends it an HTTP request over a connection it accepted
//! (a `curl` in a container, or `kubectl port-forward`): an HTTP server answers its routes with
//! the outcome its operation has now (success share, latency, dominant error), its probe paths
//! and `/` with 200, anything else with 404; servers of other protocols answer as they do to a
//! stray HTTP request (gRPC's HTTP/2 preface, MongoDB's famous notice, Redis' error, a silent
//! close).

use problems::app::Protocol;

use super::Model;
use crate::objects::Key;
use crate::programs;

/// A server's reply to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Http {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
    },
    /// Bytes that are not HTTP (clients call this HTTP/0.9).
    Raw(Vec<u8>),
    /// The server closes the connection without a word.
    Empty,
}

/// The reply and how long the server took, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    pub answer: Answer,
    pub latency_ms: f64,
}

/// HTTP/2's server preface (an empty SETTINGS frame), which a gRPC server sends first.
const H2_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

/// The reason phrase of a status code.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

/// The reply of the process listening on `port` of `pod` to `method path`; `draw` in [0, 1)
/// picks whether this request is one of those that fail.
pub fn request(m: &Model, draw: f64, pod: &Key, port: u16, method: &str, path: &str) -> Served {
    let quiet = Served {
        answer: Answer::Empty,
        latency_ms: 0.5,
    };
    let Some(p) = m.world.pods.get(pod) else {
        return quiet;
    };
    let prog = p
        .spec
        .containers
        .iter()
        .filter_map(|c| programs::identify(m.app, c))
        .find(|prog| programs::protocol_on(prog, port).is_some());
    let Some(prog) = prog else {
        return quiet;
    };
    let raw = |bytes: &[u8]| Served {
        answer: Answer::Raw(bytes.to_vec()),
        latency_ms: 0.4,
    };
    match programs::protocol_on(&prog, port) {
        Some(Protocol::Http) => http(m, draw, &prog, method, path),
        Some(Protocol::Grpc) => raw(H2_SETTINGS),
        Some(Protocol::Mongodb) => Served {
            answer: Answer::Http {
                status: 200,
                content_type: "text/plain",
                body: b"It looks like you are trying to access MongoDB over HTTP on the native driver port.\n".to_vec(),
            },
            latency_ms: 0.3,
        },
        Some(Protocol::Redis) => raw(b"-ERR wrong number of arguments for 'get' command\r\n"),
        Some(Protocol::Memcached) => raw(b"ERROR\r\n"),
        _ => quiet,
    }
}

fn http(m: &Model, draw: f64, prog: &programs::Program, method: &str, path: &str) -> Served {
    let route = path.split('?').next().unwrap_or(path);
    let spec = prog.spec;
    let op = spec.operations.iter().find(|o| {
        let mut words = o.name.split_whitespace();
        let (verb, p) = match (words.next(), words.next_back()) {
            (Some(v), Some(p)) => (v, p),
            _ => return false,
        };
        p == route && (verb == "HTTP" || o.name.contains(method))
    });
    let ok = |body: &[u8], ms: f64| Served {
        answer: Answer::Http {
            status: 200,
            content_type: "application/json",
            body: body.to_vec(),
        },
        latency_ms: ms,
    };
    if let Some(op) = op {
        let Some(out) = m.workload.outcome(&spec.name, &op.name) else {
            return ok(b"{}", op.latency.as_millis() as f64);
        };
        let ms = out.latency * 1000.0;
        if draw < out.ok {
            return ok(b"{}", ms);
        }
        let (code, message) = out
            .error
            .unwrap_or_else(|| ("500".into(), "internal error".into()));
        let status = code
            .parse::<u16>()
            .ok()
            .filter(|s| (400..600).contains(s))
            .unwrap_or(500);
        return Served {
            answer: Answer::Http {
                status,
                content_type: "text/plain; charset=utf-8",
                body: format!("{message}\n").into_bytes(),
            },
            latency_ms: ms,
        };
    }
    if programs::serves_path(prog, route) {
        return Served {
            answer: Answer::Http {
                status: 200,
                content_type: "text/plain; charset=utf-8",
                body: b"OK".to_vec(),
            },
            latency_ms: 0.6,
        };
    }
    Served {
        answer: Answer::Http {
            status: 404,
            content_type: "text/plain; charset=utf-8",
            body: b"404 page not found\n".to_vec(),
        },
        latency_ms: 0.4,
    }
}

/// A reply as bytes on the wire (for a forwarded port), dated `now` (ns).
pub fn encode(answer: &Answer, head: bool, now: i64) -> Vec<u8> {
    match answer {
        Answer::Http {
            status,
            content_type,
            body,
        } => {
            let mut out = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nDate: {}\r\n\r\n",
                reason(*status),
                body.len(),
                chrono::DateTime::from_timestamp_nanos(now).format("%a, %d %b %Y %H:%M:%S GMT")
            )
            .into_bytes();
            if !head {
                out.extend_from_slice(body);
            }
            out
        }
        Answer::Raw(b) => b.clone(),
        Answer::Empty => vec![],
    }
}

/// Bytes of a request kept while waiting for the rest of it.
const MAX_REQUEST: usize = 1 << 20;

/// A TCP connection a client opened to a port of a pod (through `kubectl port-forward`): the
/// bytes it sends are read as HTTP requests and each is answered as the process answers it.
#[derive(Debug, Clone)]
pub struct Connection {
    pub pod: Key,
    pub port: u16,
    buf: Vec<u8>,
    draws: u64,
}

/// What a connection answers to the bytes received so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub bytes: Vec<u8>,
    pub latency_ms: f64,
    /// The server closes the connection after this reply.
    pub close: bool,
}

impl Connection {
    /// Connects to `port` of `pod` from inside the pod's network namespace (as the kubelet
    /// does), or the kubelet's error.
    pub fn open(m: &Model, pod: &Key, port: u16) -> Result<Connection, String> {
        let p = m
            .world
            .pods
            .get(pod)
            .ok_or_else(|| format!("pod {} not found", pod.1))?;
        if !crate::network::listens(m.world, m.app, p, port) {
            return Err(format!(
                "error forwarding port {port} to pod {}, uid : failed to connect to localhost:{port} inside namespace \"{}\", IPv4: dial tcp4 127.0.0.1:{port}: connect: connection refused IPv6 dial tcp6 [::1]:{port}: connect: connection refused ",
                p.meta.uid, p.meta.uid
            ));
        }
        Ok(Connection {
            pod: pod.clone(),
            port,
            buf: vec![],
            draws: m.world.now as u64 ^ u64::from(port),
        })
    }

    /// Bytes from the client; the reply once a whole request is in (`None` while waiting).
    pub fn send(&mut self, m: &Model, bytes: &[u8]) -> Option<Reply> {
        let room = MAX_REQUEST.saturating_sub(self.buf.len());
        self.buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
        let (method, path, last) = match request_line(&self.buf) {
            Parsed::Incomplete if self.buf.len() < MAX_REQUEST => return None,
            Parsed::Request {
                method,
                path,
                length,
                last,
            } => {
                self.buf.drain(..length);
                (method, path, last)
            }
            // Not HTTP (or too long to be): what the server says to anything it cannot read.
            _ => {
                self.buf.clear();
                ("GET".to_string(), "/".to_string(), false)
            }
        };
        self.draws = self
            .draws
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let draw = (self.draws >> 11) as f64 / (1u64 << 53) as f64;
        let served = request(m, draw, &self.pod, self.port, &method, &path);
        let close = last || !matches!(served.answer, Answer::Http { .. });
        let mut bytes = encode(&served.answer, method == "HEAD", m.world.now);
        if last && let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            // As Go's and most servers answer a client that asked to close.
            bytes.splice(end + 2..end + 2, b"Connection: close\r\n".iter().copied());
        }
        Some(Reply {
            bytes,
            latency_ms: served.latency_ms,
            close,
        })
    }
}

enum Parsed {
    Incomplete,
    Request {
        method: String,
        path: String,
        /// The client asked the server to close after answering (`Connection: close`, or
        /// HTTP/1.0 without keep-alive).
        last: bool,
        /// Bytes of the whole request, body included.
        length: usize,
    },
    NotHttp,
}

/// The first request in `buf`: its method, path and length once its head (and the body its
/// Content-Length announces) has arrived.
fn request_line(buf: &[u8]) -> Parsed {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        let looks_http = buf.len() < 8
            || buf
                .iter()
                .take(8)
                .all(|b| b.is_ascii_uppercase() || *b == b' ');
        return if looks_http {
            Parsed::Incomplete
        } else {
            Parsed::NotHttp
        };
    };
    let head = String::from_utf8_lossy(&buf[..end]);
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let (Some(method), Some(path)) = (first.next(), first.next()) else {
        return Parsed::NotHttp;
    };
    let http10 = first.next() == Some("HTTP/1.0");
    let headers: Vec<(&str, &str)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    };
    let body: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let connection = header("connection").map(str::to_ascii_lowercase);
    let last = match connection.as_deref() {
        Some("close") => true,
        Some("keep-alive") => false,
        _ => http10,
    };
    let length = end + 4 + body;
    if buf.len() < length {
        return Parsed::Incomplete;
    }
    Parsed::Request {
        method: method.to_string(),
        path: path.to_string(),
        last,
        length,
    }
}
