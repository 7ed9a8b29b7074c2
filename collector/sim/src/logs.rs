//! Log lines in the formats the real services write: zerolog's console writer for the Go services
//! of hotel-reservation, Boost.Log for social-network's C++ services, slog/pino/.NET/log4j/Python
//! JSON for the OpenTelemetry demo, MongoDB's structured JSON, Redis, PostgreSQL, nginx and Envoy.

use chrono::{Datelike, Timelike};

use super::util::instant;

/// How a program logs: the format family of its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStyle {
    /// Go with zerolog's console writer (DeathStarBench hotel-reservation).
    Zerolog,
    /// C++ with Boost.Log (DeathStarBench social-network).
    BoostLog,
    /// Go with log/slog JSON (OTel demo Go services).
    SlogJson,
    /// .NET console logger (OTel demo cart).
    Dotnet,
    /// Java/Log4j-ish (OTel demo ad, kafka).
    Java,
    /// Python logging JSON (OTel demo recommendation).
    Python,
    /// Node.js pino JSON (OTel demo payment, frontend).
    Pino,
    /// MongoDB structured JSON.
    Mongo,
    /// Redis/Valkey.
    Redis,
    /// PostgreSQL.
    Postgres,
    /// nginx/OpenResty error log.
    Nginx,
    /// Envoy access log.
    Envoy,
    /// Quiet programs (memcached, consul agents at info).
    Quiet,
    /// Ruby's Logger (OTel demo email, Sinatra).
    Ruby,
    /// Rust `tracing` formatter (OTel demo shipping).
    Rust,
    /// PHP Monolog line format (OTel demo quote, Slim).
    Php,
}

/// Severity of a line; the declaration order indexes [`level_words`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
    Fatal,
}

fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// A stable source line number for a message, so repeats of one log statement share it.
fn line_no(msg: &str, base: u32) -> u32 {
    base + fnv(msg.split(':').next().unwrap_or(msg)) % 180
}

fn camel(s: &str) -> String {
    s.split('-')
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// The word (or mark) each style prints for a level, in [`Level`] order.
fn level_words(style: LogStyle) -> [&'static str; 4] {
    match style {
        LogStyle::Zerolog => ["INF", "WRN", "ERR", "PNC"],
        LogStyle::BoostLog => ["info", "warning", "error", "fatal"],
        LogStyle::SlogJson | LogStyle::Java | LogStyle::Rust => ["INFO", "WARN", "ERROR", "ERROR"],
        LogStyle::Dotnet => ["info", "warn", "fail", "crit"],
        LogStyle::Python | LogStyle::Php => ["INFO", "WARNING", "ERROR", "CRITICAL"],
        LogStyle::Pino => ["30", "40", "50", "60"],
        LogStyle::Ruby => ["INFO", "WARN", "ERROR", "FATAL"],
        LogStyle::Mongo => ["I", "W", "E", "F"],
        LogStyle::Redis => ["*", "#", "#", "#"],
        LogStyle::Postgres => ["LOG", "WARNING", "ERROR", "FATAL"],
        LogStyle::Nginx | LogStyle::Envoy | LogStyle::Quiet => ["notice", "warn", "error", "emerg"],
    }
}

/// One log line as the program would print it at `ts_ns`.
pub fn line(style: LogStyle, service: &str, level: Level, ts_ns: i64, msg: &str) -> String {
    let t = instant(ts_ns);
    let lvl = level_words(style)[level as usize];
    match style {
        LogStyle::Zerolog => {
            let file = if matches!(level, Level::Error | Level::Warn) {
                format!("services/{service}/server.go")
            } else {
                format!("cmd/{service}/main.go")
            };
            format!(
                "{} {lvl} {file}:{} > {msg}",
                t.format("%Y-%m-%dT%H:%M:%SZ"),
                line_no(msg, 20)
            )
        }
        LogStyle::BoostLog => {
            let handler = camel(service.trim_end_matches("-service"));
            format!(
                "[{}] <{lvl}>: ({handler}Handler.h:{}:{handler}) {msg}",
                t.format("%Y-%b-%d %H:%M:%S%.6f"),
                line_no(msg, 60)
            )
        }
        LogStyle::SlogJson => format!(
            "{{\"time\":\"{}\",\"level\":\"{lvl}\",\"msg\":{}}}",
            t.format("%Y-%m-%dT%H:%M:%S%.9fZ"),
            json_str(msg)
        ),
        LogStyle::Dotnet => {
            // Microsoft.Extensions.Logging's console format: level, category[event id].
            let category = match service {
                "cart" => "cart.cartstore.ValkeyCartStore",
                "accounting" => "Accounting.Consumer",
                other => other,
            };
            format!("{lvl}: {category}[0] {msg}")
        }
        LogStyle::Java => format!(
            "{} {lvl} - oteldemo.{}Service - {msg}",
            t.format("%Y-%m-%d %H:%M:%S"),
            camel(service)
        ),
        LogStyle::Python => {
            let file = format!("{}_server.py", service.replace('-', "_"));
            format!(
                "{{\"asctime\": \"{}\", \"levelname\": \"{lvl}\", \"name\": \"{}\", \"filename\": \"{file}\", \"lineno\": {}, \"otelServiceName\": \"{service}\", \"message\": {}}}",
                t.format("%Y-%m-%d %H:%M:%S,%3f"),
                file.trim_end_matches(".py"),
                line_no(msg, 40),
                json_str(msg)
            )
        }
        LogStyle::Pino => format!(
            "{{\"level\":{lvl},\"time\":{},\"pid\":1,\"hostname\":\"{service}\",\"msg\":{}}}",
            ts_ns / 1_000_000,
            json_str(msg)
        ),
        // Ruby's Logger leads with the level's initial, then the padded name.
        LogStyle::Ruby => format!(
            "{}, [{} #1] {lvl:>5} -- : {msg}",
            &lvl[..1],
            t.format("%Y-%m-%dT%H:%M:%S%.6f")
        ),
        LogStyle::Rust => format!(
            "{} {lvl:>5} {}: {msg}",
            t.format("%Y-%m-%dT%H:%M:%S%.6fZ"),
            service.replace('-', "_")
        ),
        LogStyle::Php => format!(
            "[{}] {service}.{lvl}: {msg} [] []",
            t.format("%Y-%m-%dT%H:%M:%S%.6f+00:00")
        ),
        LogStyle::Mongo => {
            let (c, id, ctx) = mongo_component(msg);
            format!(
                "{{\"t\":{{\"$date\":\"{}\"}},\"s\":\"{lvl}\",  \"c\":\"{c}\", \"id\":{id}, \"ctx\":\"{ctx}\",\"msg\":{}}}",
                t.format("%Y-%m-%dT%H:%M:%S%.3f+00:00"),
                json_str(msg)
            )
        }
        LogStyle::Redis => format!(
            "1:M {:02} {} {} {:02}:{:02}:{:02}.{:03} {lvl} {msg}",
            t.day(),
            t.format("%b"),
            t.year(),
            t.hour(),
            t.minute(),
            t.second(),
            t.timestamp_subsec_millis()
        ),
        LogStyle::Postgres => format!(
            "{} UTC [{}] {lvl}:  {msg}",
            t.format("%Y-%m-%d %H:%M:%S%.3f"),
            100 + fnv(msg) % 900
        ),
        LogStyle::Nginx | LogStyle::Envoy | LogStyle::Quiet => {
            format!("{} [{lvl}] 1#1: {msg}", t.format("%Y/%m/%d %H:%M:%S"))
        }
    }
}

/// MongoDB's log component, message id and context for a message, guessed from its words.
fn mongo_component(msg: &str) -> (&'static str, u32, &'static str) {
    if msg.contains("onnection") {
        ("NETWORK", 22943, "listener")
    } else if msg.contains("uthentic") || msg.contains("authorized") {
        ("ACCESS", 20249, "conn")
    } else if msg.contains("I/O") || msg.contains("WiredTiger") {
        ("STORAGE", 22435, "conn")
    } else {
        ("COMMAND", 51803, "conn")
    }
}

/// An access-log line for a request an edge server (Envoy's default format, nginx's `combined`)
/// handled; `None` for programs that log no access lines.
#[allow(clippy::too_many_arguments)]
pub fn access(
    style: LogStyle,
    ts_ns: i64,
    op: &str,
    status: u16,
    upstream_failed: bool,
    dur_ms: f64,
    authority: &str,
    request_id: &str,
) -> Option<String> {
    let t = instant(ts_ns);
    let mut parts = op.split_whitespace();
    let (method, path) = match (parts.next(), parts.next(), parts.next()) {
        (Some("HTTP"), Some(m), Some(p)) => (m, p),
        (Some(m), Some(p), _) => (m, p),
        _ => ("GET", "/"),
    };
    let bytes = if status == 200 {
        200 + fnv(path) % 4000
    } else {
        91
    };
    match style {
        LogStyle::Envoy => Some(format!(
            "[{}] \"{method} {path} HTTP/1.1\" {status} {} 0 {bytes} {:.0} {} \"-\" \"python-requests/2.32.4\" \"{request_id}\" \"{authority}\" \"-\"",
            t.format("%Y-%m-%dT%H:%M:%S%.3fZ"),
            if upstream_failed { "UF" } else { "-" },
            dur_ms.max(1.0),
            if upstream_failed {
                "-".to_string()
            } else {
                format!("{:.0}", (dur_ms - 0.5).max(0.0))
            },
        )),
        LogStyle::Nginx => Some(format!(
            "10.244.0.1 - - [{}] \"{method} {path} HTTP/1.1\" {status} {bytes} \"-\" \"wrk2\"",
            t.format("%d/%b/%Y:%H:%M:%S +0000")
        )),
        _ => None,
    }
}

/// The start-up lines of a healthy program.
pub fn startup(style: LogStyle, service: &str, port: Option<u16>) -> Vec<(Level, String)> {
    let port = port.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
    let i = |m: String| (Level::Info, m);
    match style {
        LogStyle::Zerolog => vec![
            i("Reading config...".into()),
            i(format!("Read target port: {port}")),
            i("Read consul address: consul:8500".into()),
            i("Read jaeger address: jaeger:6831".into()),
            i(format!(
                "Initializing jaeger agent [service name: {service} | host: jaeger:6831]..."
            )),
            i("Jaeger agent initialized".into()),
            i("Initializing consul agent [host: consul:8500]...".into()),
            i("Consul agent initialized".into()),
            i("Starting server...".into()),
        ],
        LogStyle::BoostLog => vec![i(format!("Starting the {service} server..."))],
        LogStyle::Mongo => vec![i("Build Info".into()), i("Waiting for connections".into())],
        LogStyle::Redis => vec![
            i("Server initialized".into()),
            i("Ready to accept connections tcp".into()),
        ],
        LogStyle::Postgres => vec![
            i(format!(
                "listening on IPv4 address \"0.0.0.0\", port {port}"
            )),
            i("database system is ready to accept connections".into()),
        ],
        LogStyle::Quiet => vec![],
        LogStyle::Nginx | LogStyle::Envoy => vec![i("start worker processes".into())],
        _ => vec![i(format!(
            "{service} service started, listening on port {port}"
        ))],
    }
}

/// How a caller reports a failed call to `peer` in its own words.
pub fn call_error(style: LogStyle, peer: &str, op: &str, err: &str) -> String {
    match style {
        LogStyle::Zerolog => format!("Failed to call {peer}: {err}"),
        LogStyle::BoostLog => format!("Failed to connect {peer}-client: {err}"),
        LogStyle::Dotnet => format!("Failed to access {peer}: {err}"),
        LogStyle::Java => format!("{op} to {peer} failed: {err}"),
        LogStyle::Python => format!("Error calling {peer}: {err}"),
        LogStyle::Pino => format!("{op} failed: {err}"),
        LogStyle::Nginx => format!(
            "*{} connect() to {peer} failed ({err}) while connecting to upstream",
            fnv(op) % 90000
        ),
        _ => format!("failed to {op} via {peer}: {err}"),
    }
}
