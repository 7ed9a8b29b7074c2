//! `exec` and `attach` as the apiserver serves them over WebSocket (`v5.channel.k8s.io`, and
//! `v4.channel.k8s.io` for older clients), IO-free: the request's options from the query string,
//! the channel framing of every message, and the `Status` that carries a command's exit code.
//!
//! Every binary message is one channel byte and a payload: 0 stdin, 1 stdout, 2 stderr, 3 the
//! final `Status`, 4 terminal resize. v5 adds 255, "close": `[255, 0]` from the client ends stdin.
//! The client reads the status channel until the connection closes, so the server sends the
//! `Status` last and then closes.

use serde_json::{Value, json};

use crate::status::Failure;

/// The channel protocols served, preferred first.
pub const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const STATUS: u8 = 3;
pub const RESIZE: u8 = 4;
/// v5: the peer closes one of its channels (the client closes stdin this way).
pub const CLOSE: u8 = 255;

/// What an exec or attach request asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Options {
    /// The command, one element per `command=` parameter (empty for attach).
    pub command: Vec<String>,
    pub container: Option<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

impl Options {
    /// Parses the query string of `pods/NAME/exec` (`attach` = false) or `pods/NAME/attach`,
    /// refusing what the apiserver refuses.
    pub fn parse(query: &str, attach: bool) -> Result<Options, Failure> {
        let mut o = Options::default();
        let truthy = |v: &str| matches!(v, "true" | "1" | "True");
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match k.as_ref() {
                "command" => o.command.push(v.into_owned()),
                "container" => o.container = Some(v.into_owned()).filter(|c| !c.is_empty()),
                "stdin" => o.stdin = truthy(&v),
                "stdout" => o.stdout = truthy(&v),
                "stderr" => o.stderr = truthy(&v),
                "tty" => o.tty = truthy(&v),
                _ => {}
            }
        }
        if !(o.stdin || o.stdout || o.stderr) {
            return Err(Failure::bad_request(
                "you must specify at least 1 of stdin, stdout, stderr",
            ));
        }
        if !attach && o.command.is_empty() {
            return Err(Failure::bad_request(
                "you must specify at least one command for the container",
            ));
        }
        Ok(o)
    }
}

/// One message for the client: `channel` then `payload`.
pub fn frame(channel: u8, payload: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(payload.len() + 1);
    m.push(channel);
    m.extend_from_slice(payload);
    m
}

/// What a client's message means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Stdin(Vec<u8>),
    /// The terminal's new size.
    Resize {
        width: u16,
        height: u16,
    },
    /// The client closed stdin (v5 close of channel 0).
    StdinClosed,
    /// Anything else (an empty message, a close of another channel, a channel clients do not
    /// write to): ignored, as the kubelet ignores it.
    Ignored,
}

/// Reads one binary message from the client.
pub fn incoming(message: &[u8]) -> Incoming {
    let Some((&channel, payload)) = message.split_first() else {
        return Incoming::Ignored;
    };
    match channel {
        STDIN => Incoming::Stdin(payload.to_vec()),
        RESIZE => {
            let size: Value = serde_json::from_slice(payload).unwrap_or(Value::Null);
            let dim = |k: &str| size[k].as_u64().map(|v| v.min(u64::from(u16::MAX)) as u16);
            match (dim("Width"), dim("Height")) {
                (Some(width), Some(height)) => Incoming::Resize { width, height },
                _ => Incoming::Ignored,
            }
        }
        CLOSE if payload.first() == Some(&STDIN) => Incoming::StdinClosed,
        _ => Incoming::Ignored,
    }
}

/// The `Status` sent on the status channel when the command ended with `code` (kubectl exits
/// with the same code, which must fit a byte).
pub fn exit_status(code: i32) -> Value {
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    let code = code.clamp(1, 255);
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: error executing command [...], exit code {code}"),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// The `Status` for a session that failed for another reason than the command's exit code
/// (kubectl prints the message and exits 1).
pub fn failure_status(message: &str) -> Value {
    json!({"metadata": {}, "status": "Failure", "message": message})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_take_one_command_element_per_parameter() {
        let o = Options::parse(
            "command=sh&command=-c&command=echo%20hi&container=web&stderr=true&stdout=true",
            false,
        )
        .unwrap();
        assert_eq!(o.command, ["sh", "-c", "echo hi"]);
        assert_eq!(o.container.as_deref(), Some("web"));
        assert!(o.stdout && o.stderr && !o.stdin && !o.tty);
    }

    #[test]
    fn options_refuse_what_the_apiserver_refuses() {
        let e = Options::parse("command=ls", false).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("at least 1 of stdin"), "{e:?}");
        let e = Options::parse("stdout=true", false).unwrap_err();
        assert!(e.message.contains("at least one command"), "{e:?}");
        // Attach has no command.
        assert!(Options::parse("stdout=true&stdin=true", true).is_ok());
    }

    #[test]
    fn client_messages_are_read_by_channel() {
        assert_eq!(incoming(&[0, b'l', b's']), Incoming::Stdin(b"ls".to_vec()));
        assert_eq!(
            incoming(b"\x04{\"Width\":120,\"Height\":40}\n"),
            Incoming::Resize {
                width: 120,
                height: 40
            }
        );
        assert_eq!(incoming(&[255, 0]), Incoming::StdinClosed);
        assert_eq!(incoming(&[255, 1]), Incoming::Ignored);
        assert_eq!(incoming(&[]), Incoming::Ignored);
        assert_eq!(incoming(b"\x04not json"), Incoming::Ignored);
    }

    #[test]
    fn exit_codes_travel_as_kubectl_reads_them() {
        assert_eq!(exit_status(0)["status"], "Success");
        let s = exit_status(3);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(s["details"]["causes"][0]["message"], "3");
        // An exit code past a byte would make kubectl fail to parse it.
        assert_eq!(exit_status(300)["details"]["causes"][0]["message"], "255");
        assert_eq!(frame(STDOUT, b"hi"), vec![1, b'h', b'i']);
    }
}
