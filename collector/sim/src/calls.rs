//! A call between services as both the workload model and the span generator see it: the
//! (service, operation) key, the outcome view of an operation the workload computes each second
//! and the span generator replays, and the text a client library reports when a call fails (in
//! the caller's language, for its protocol).

use problems::app::Protocol;

use super::logs::LogStyle;
use super::network::DialError;

/// A service operation: (service, operation).
pub type OpKey = (String, String);

/// This second's outcome of one operation, as the span generator walks it.
#[derive(Debug, Clone)]
pub struct OpView {
    pub ok: f64,
    pub own_ok: f64,
    pub own_error: Option<(String, String)>,
    pub latency: f64,
    pub error: Option<(String, String, Option<String>)>,
}

/// gRPC status name of a dial error or timeout.
pub fn grpc_code(e: &DialError) -> &'static str {
    match e {
        DialError::Timeout { .. } => "DeadlineExceeded",
        _ => "Unavailable",
    }
}

/// How a gRPC client library renders a failed call's status, in the caller's language.
pub fn grpc_status(style: LogStyle, code: &str, msg: &str) -> String {
    let upper = || {
        let mut out = String::new();
        for (i, ch) in code.chars().enumerate() {
            if ch.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_uppercase());
        }
        out
    };
    let number = match code {
        "OK" => 0,
        "Canceled" => 1,
        "InvalidArgument" => 3,
        "DeadlineExceeded" => 4,
        "NotFound" => 5,
        "PermissionDenied" => 7,
        "ResourceExhausted" => 8,
        "Unimplemented" => 12,
        "Internal" => 13,
        "Unavailable" => 14,
        "Unauthenticated" => 16,
        _ => 2,
    };
    match style {
        LogStyle::Pino => format!("{number} {}: {msg}", upper()),
        LogStyle::Python => format!("StatusCode.{}: {msg}", upper()),
        LogStyle::Java => format!("io.grpc.StatusRuntimeException: {}: {msg}", upper()),
        LogStyle::Dotnet => format!("Status(StatusCode=\"{code}\", Detail=\"{msg}\")"),
        _ => format!("rpc error: code = {code} desc = {msg}"),
    }
}

/// What a client library prints for a failed call, in the caller's language and protocol.
pub fn client_error(
    style: LogStyle,
    proto: Protocol,
    host: &str,
    port: u16,
    e: &DialError,
) -> String {
    let addr = match e {
        DialError::Refused { addr } | DialError::Timeout { addr } => addr.clone(),
        DialError::NoSuchHost { .. } => format!("{host}:{port}"),
    };
    match style {
        LogStyle::Pino => {
            // grpc-js reports a failed lookup by its resolver, not by the socket error.
            if proto == Protocol::Grpc && matches!(e, DialError::NoSuchHost { .. }) {
                return format!(
                    "14 UNAVAILABLE: Name resolution failed for target dns:{host}:{port}"
                );
            }
            let last = match e {
                DialError::NoSuchHost { .. } => format!("Error: getaddrinfo ENOTFOUND {host}"),
                DialError::Refused { .. } => format!("Error: connect ECONNREFUSED {addr}"),
                DialError::Timeout { .. } => format!("Error: connect ETIMEDOUT {addr}"),
            };
            return if proto == Protocol::Grpc {
                format!("14 UNAVAILABLE: No connection established. Last error: {last}")
            } else {
                last
            };
        }
        LogStyle::Python | LogStyle::Dotnet | LogStyle::Java if proto == Protocol::Grpc => {
            let last = match e {
                DialError::NoSuchHost { .. } => format!(
                    "DNS resolution failed for {host}:{port}: C-ares status is not ARES_SUCCESS qtype=A name={host} is_balancer=0: Domain name not found"
                ),
                DialError::Refused { .. } => {
                    format!("ipv4:{addr}: Failed to connect to remote host: Connection refused")
                }
                DialError::Timeout { .. } => {
                    format!("ipv4:{addr}: Failed to connect to remote host: Timeout occurred")
                }
            };
            return format!(
                "StatusCode.UNAVAILABLE: failed to connect to all addresses; last error: UNKNOWN: {last}"
            );
        }
        LogStyle::Rust if proto == Protocol::Http => {
            let cause = match e {
                DialError::NoSuchHost { .. } => {
                    "dns error: failed to lookup address information: Name or service not known"
                        .to_string()
                }
                DialError::Refused { .. } => {
                    "tcp connect error: Connection refused (os error 111)".to_string()
                }
                DialError::Timeout { .. } => "operation timed out".to_string(),
            };
            return format!(
                "error sending request for url (http://{host}:{port}/): error trying to connect: {cause}"
            );
        }
        LogStyle::Dotnet if proto == Protocol::Postgres => {
            return match e {
                DialError::NoSuchHost { .. } => format!(
                    "Npgsql.NpgsqlException (0x80004005): Failed to connect to {host}:{port}\n ---> System.Net.Sockets.SocketException (0xFFFDFFFF): Name or service not known"
                ),
                DialError::Refused { addr } => format!(
                    "Npgsql.NpgsqlException (0x80004005): Failed to connect to {addr}\n ---> System.Net.Sockets.SocketException (111): Connection refused"
                ),
                DialError::Timeout { addr } => format!(
                    "Npgsql.NpgsqlException (0x80004005): Failed to connect to {addr}\n ---> System.TimeoutException: The operation has timed out."
                ),
            };
        }
        LogStyle::Dotnet if proto == Protocol::Redis => {
            return format!(
                "It was not possible to connect to the redis server(s). Error connecting right now. To allow this multiplexer to continue retrying until it's able to connect, use abortConnect=false in your connection string or AbortOnConnectFail=false; in your code. ({})",
                match e {
                    DialError::NoSuchHost { .. } => format!("{host}:{port}/Unknown host"),
                    DialError::Refused { .. } => format!(
                        "{addr}/Interactive, Disconnected, last: NONE, origin: BeginConnectAsync, outstanding: 0, last-read: 0s ago, last-write: 0s ago, connection refused"
                    ),
                    DialError::Timeout { .. } =>
                        format!("{addr}/Interactive, Connecting, last: NONE, connect timeout"),
                }
            );
        }
        _ => {}
    }
    match proto {
        Protocol::Grpc => format!(
            "rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: {}\"",
            e.text()
        ),
        Protocol::Http => format!("Get \"http://{host}:{port}/\": {}", e.text()),
        Protocol::Thrift => match e {
            DialError::NoSuchHost { .. } => {
                format!("Could not resolve host for client socket: {host}: no such host")
            }
            DialError::Timeout { .. } => format!(
                "TSocket::open() connect() <Host: {host} Port: {port}>: Connection timed out"
            ),
            DialError::Refused { .. } => {
                format!("TSocket::open() connect() <Host: {host} Port: {port}>: Connection refused")
            }
        },
        Protocol::Mongodb => match e {
            DialError::NoSuchHost { .. } => format!("no reachable servers: {}", e.text()),
            other => format!(
                "server selection error: context deadline exceeded, current topology: {{ Type: Unknown, Servers: [{{ Addr: {host}:{port}, Type: Unknown, Last error: {} }}, ] }}",
                other.text()
            ),
        },
        Protocol::Memcached => {
            format!("memcache: no servers configured or available: {}", e.text())
        }
        Protocol::Redis => format!("Error {}", e.text()),
        _ => e.text(),
    }
}
