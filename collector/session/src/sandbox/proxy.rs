//! `--agent-network public`: the sandboxed agent's way to the internet (its model's API), an HTTP
//! proxy the sandbox's environment names (`HTTPS_PROXY`, `HTTP_PROXY`), reached like the session's
//! endpoints through a Unix socket. It tunnels `CONNECT host:port` (HTTPS) and forwards
//! absolute-form `http://` requests, to any destination but this host's loopback or an
//! unspecified address: the sandbox's loopback holds only the session's ports, and the way out
//! does not lead back to the other servers on the host's. What the agent sends is not read past
//! the request head.
//!
//! The request head is parsed here, IO-free ([`parse`]); [`serve`] is the transport.

use std::net::IpAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};

/// The largest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// What a client asks of the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `CONNECT host:port`: a tunnel of raw bytes.
    Tunnel { host: String, port: u16 },
    /// An absolute-form request (`GET http://host/path`), forwarded with this head (origin-form,
    /// `Connection: close`, no `Proxy-*` headers).
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

/// Parses the request head at the start of `buf`: the request and the head's length, `None`
/// while the head is incomplete, or why it cannot be served.
pub fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("not an HTTP request: {e}")),
    };
    let (method, target) = (req.method.unwrap_or(""), req.path.unwrap_or(""));
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = host_port(target, None)?;
        return Ok(Some((Request::Tunnel { host, port }, len)));
    }
    let rest = target
        .strip_prefix("http://")
        .ok_or_else(|| format!("`{target}`: expected CONNECT host:port or an http:// URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = host_port(authority, Some(80))?;
    let mut head = format!("{method} {path} HTTP/1.{}\r\n", req.version.unwrap_or(1)).into_bytes();
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if name.starts_with("proxy-") || name == "connection" {
            continue;
        }
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    // One request per connection: a next one could be for another host.
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Some((Request::Forward { host, port, head }, len)))
}

/// `host:port`, `[v6]:port`, or a host alone when there is a default port.
fn host_port(authority: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let bad = || format!("`{authority}`: expected host:port");
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !p.contains(']') => (h, p.parse().map_err(|_| bad())?),
        _ => (authority, default.ok_or_else(bad)?),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

/// Whether the way out may lead to `ip`: anything but this host's loopback or an unspecified
/// address (which reaches the host too).
pub fn reachable(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    !(ip.is_loopback() || ip.is_unspecified())
}

/// Serves every connection to `listener` (the sandbox's proxy socket) until the session ends.
pub async fn serve(listener: UnixListener) {
    while let Ok((inbound, _)) = listener.accept().await {
        tokio::spawn(async move {
            if let Err(e) = handle(inbound).await {
                tracing::debug!("agent proxy: {e}");
            }
        });
    }
}

async fn handle(mut inbound: UnixStream) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    let (request, len) = loop {
        let mut chunk = [0u8; 4096];
        let n = inbound.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        match parse(&buf) {
            Ok(Some(parsed)) => break parsed,
            Ok(None) if buf.len() < MAX_HEAD => {}
            Ok(None) => return refuse(&mut inbound, 431, "the request head is too large").await,
            Err(why) => return refuse(&mut inbound, 400, &why).await,
        }
    };
    let (host, port) = match &request {
        Request::Tunnel { host, port } | Request::Forward { host, port, .. } => (host, *port),
    };
    let addrs: Vec<_> = match tokio::net::lookup_host((host.as_str(), port)).await {
        Ok(addrs) => addrs.collect(),
        Err(e) => return refuse(&mut inbound, 502, &format!("cannot resolve {host}: {e}")).await,
    };
    let Some(addr) = addrs.iter().find(|a| reachable(a.ip())) else {
        let why = format!("{host}:{port} is on this host: the sandbox reaches the internet only");
        return refuse(&mut inbound, 403, &why).await;
    };
    let mut outbound = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(e) => {
            return refuse(
                &mut inbound,
                502,
                &format!("cannot reach {host}:{port}: {e}"),
            )
            .await;
        }
    };
    match &request {
        Request::Tunnel { .. } => {
            inbound
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
        }
        Request::Forward { head, .. } => outbound.write_all(head).await?,
    }
    // Whatever came after the head (a tunnel's first bytes, a request's body).
    outbound.write_all(&buf[len..]).await?;
    tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await?;
    Ok(())
}

async fn refuse(inbound: &mut UnixStream, code: u16, why: &str) -> std::io::Result<()> {
    let reason = match code {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        _ => "Bad Gateway",
    };
    let body = format!("{why}\n");
    let answer = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    inbound.write_all(answer.as_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_is_a_tunnel_and_an_absolute_url_is_forwarded_in_origin_form() {
        let head = b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\nTLS";
        let (req, len) = parse(head).unwrap().unwrap();
        assert_eq!(
            req,
            Request::Tunnel {
                host: "api.openai.com".into(),
                port: 443
            }
        );
        assert_eq!(&head[len..], b"TLS");
        let head =
            b"GET http://example.org:8080/v1/models?x=1 HTTP/1.1\r\nHost: example.org:8080\r\n\
            Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n";
        let (req, _) = parse(head).unwrap().unwrap();
        let Request::Forward { host, port, head } = req else {
            panic!("{req:?}")
        };
        assert_eq!((host.as_str(), port), ("example.org", 8080));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /v1/models?x=1 HTTP/1.1\r\nHost: example.org:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let (req, _) = parse(b"GET http://[2001:db8::1]/ HTTP/1.0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(
            matches!(req, Request::Forward { ref host, port: 80, .. } if host == "2001:db8::1")
        );
    }

    #[test]
    fn incomplete_and_unusable_heads_are_told_apart() {
        assert_eq!(parse(b"CONNECT a:443 HTTP/1.1\r\nHost"), Ok(None));
        assert!(
            parse(b"GET /relative HTTP/1.1\r\n\r\n")
                .unwrap_err()
                .contains("http:// URL")
        );
        assert!(
            parse(b"CONNECT nowhere HTTP/1.1\r\n\r\n")
                .unwrap_err()
                .contains("host:port")
        );
        assert!(parse(b"\x16\x03\x01garbage\r\n\r\n").is_err());
    }

    #[test]
    fn the_way_out_never_leads_back_to_this_host() {
        for ip in [
            "127.0.0.1",
            "127.8.9.10",
            "::1",
            "0.0.0.0",
            "::",
            "::ffff:127.0.0.1",
        ] {
            assert!(!reachable(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["192.0.2.2", "10.1.2.3", "2001:db8::1", "::ffff:203.0.113.9"] {
            assert!(reachable(ip.parse().unwrap()), "{ip}");
        }
    }
}
