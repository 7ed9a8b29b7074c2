//! The relays that carry an agent's connections out of its network namespace: inside, `netrelay`
//! listens on loopback on each of the session's ports and joins every connection to a Unix socket
//! bound into the sandbox; outside, the session accepts on those sockets and joins each connection
//! to the endpoint on the host's loopback. Bytes are copied as they are; neither side reads them.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// Outside the sandbox: every connection to `listener` joined to a new connection to `to`.
pub async fn unix_to_tcp(listener: UnixListener, to: SocketAddr) {
    while let Ok((inbound, _)) = listener.accept().await {
        tokio::spawn(join(inbound, TcpStream::connect(to)));
    }
}

/// Inside the sandbox: every connection to `listener` joined to a new connection to the socket at
/// `to`.
pub async fn tcp_to_unix(listener: TcpListener, to: PathBuf) {
    while let Ok((inbound, _)) = listener.accept().await {
        tokio::spawn(join(inbound, UnixStream::connect(to.clone())));
    }
}

/// Copies both ways until both sides are done; a peer that cannot be reached closes the inbound
/// connection, as a refused connection would.
async fn join<A, B>(mut inbound: A, outbound: impl Future<Output = std::io::Result<B>>)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    match outbound.await {
        Ok(mut outbound) => {
            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
        }
        Err(e) => tracing::debug!("relay: the endpoint refused: {e}"),
    }
}

/// `netrelay ADDR=SOCKET... -- PROGRAM ARGS...`: binds every `ADDR` (the ports are listening
/// before the program starts, so its first request never races them), starts the program, relays
/// until it exits, and exits as it did.
pub fn main(args: Vec<String>) -> std::process::ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("netrelay: {e:#}");
            std::process::ExitCode::from(125)
        }
    }
}

fn run(args: Vec<String>) -> anyhow::Result<std::process::ExitCode> {
    use anyhow::Context;
    let split = args
        .iter()
        .position(|a| a == "--")
        .context("usage: netrelay ADDR=SOCKET... -- PROGRAM ARGS...")?;
    let (routes, program) = (&args[..split], &args[split + 1..]);
    let (program, program_args) = program.split_first().context("no program after --")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let _entered = runtime.enter();
    for route in routes {
        let (addr, socket) = route
            .split_once('=')
            .with_context(|| format!("`{route}`: expected ADDR=SOCKET"))?;
        let addr: SocketAddr = addr
            .parse()
            .with_context(|| format!("`{addr}`: not an address"))?;
        let listener = std::net::TcpListener::bind(addr)
            .with_context(|| format!("cannot listen on {addr}"))?;
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        runtime.spawn(tcp_to_unix(listener, PathBuf::from(socket)));
    }
    let mut child = std::process::Command::new(program)
        .args(program_args)
        .spawn()
        .with_context(|| format!("cannot start {program}"))?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = runtime.block_on(rx)??;
    use std::os::unix::process::ExitStatusExt;
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    };
    Ok(std::process::ExitCode::from(
        u8::try_from(code).unwrap_or(1),
    ))
}
