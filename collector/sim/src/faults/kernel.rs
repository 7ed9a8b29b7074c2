//! Kernel faults: failed storage reads and failed syscalls in a service's process, held in the
//! service's runtime conditions for its program model to hit.

use problems::primitive::Primitive;

use super::Result;
use super::context::Ctx;

pub(super) fn apply(cx: &mut Ctx, p: &Primitive) -> Result<()> {
    use Primitive as P;
    match p {
        P::DiskReadErrors { service, percent } => {
            let nodes = cx.nodes_running(service);
            let rt = cx.service_rt(service);
            rt.disk_read_errors = percent / 100.0;
            rt.disk_nodes = nodes;
        }
        P::SyscallFailure {
            service,
            syscall,
            errno,
            percent,
        } => {
            let now = cx.w.now;
            let rt = cx.service_rt(service);
            rt.syscall_failure = Some((syscall_error(syscall, errno), percent / 100.0));
            rt.process_since = Some(now);
        }
        other => unreachable!("`{}` is not a kernel fault", other.name()),
    }
    Ok(())
}

/// How a Go program reports a failed syscall (`accept4: too many open files`).
fn syscall_error(syscall: &str, errno: &str) -> String {
    let text = match errno.to_ascii_uppercase().as_str() {
        "EMFILE" => "too many open files",
        "ENFILE" => "too many open files in system",
        "EIO" => "input/output error",
        "ECONNREFUSED" => "connection refused",
        "ECONNRESET" => "connection reset by peer",
        "ENOSPC" => "no space left on device",
        "EACCES" => "permission denied",
        "EPERM" => "operation not permitted",
        "ENOMEM" => "cannot allocate memory",
        "EAGAIN" => "resource temporarily unavailable",
        "ETIMEDOUT" => "connection timed out",
        "ENETDOWN" => "network is down",
        other => return format!("{syscall}: errno {other}"),
    };
    match syscall {
        "accept" | "accept4" => format!("accept tcp [::]:0: {syscall}: {text}"),
        "openat" | "open" => format!("open /tmp/data: {text}"),
        _ => format!("{syscall}: {text}"),
    }
}
