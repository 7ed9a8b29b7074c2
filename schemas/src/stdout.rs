//! How a command ends when the reader of its standard output goes away (`collector problems list
//! | head -1`): quietly and successfully, as Unix tools do, instead of with a panic.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with `BrokenPipe` and `println!`
//! panics on it. Resetting the signal disposition needs `unsafe`, which this workspace forbids;
//! instead the panic is recognised, kept off stderr, and turned into a clean exit.

use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;

/// Runs a binary's `main` body; a panic caused by writing to a closed standard output ends the
/// process with success and no message, any other panic continues as before.
pub fn run_main(main: impl FnOnce() -> ExitCode) -> ExitCode {
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if !is_broken_pipe(info.payload()) {
            default_hook(info);
        }
    }));
    match panic::catch_unwind(AssertUnwindSafe(main)) {
        Ok(code) => code,
        Err(payload) if is_broken_pipe(&*payload) => ExitCode::SUCCESS,
        Err(payload) => panic::resume_unwind(payload),
    }
}

/// Whether a panic is std's "failed printing to stdout: Broken pipe".
fn is_broken_pipe(payload: &(dyn std::any::Any + Send)) -> bool {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    let broken = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
    text.starts_with("failed printing to stdout")
        && (text.contains("Broken pipe") || text.contains(&broken.to_string()))
}

/// Whether an error (anywhere in its chain) is a write to a closed pipe: a command that writes
/// with `writeln!` and `?` ends successfully on it too.
pub fn is_broken_pipe_error(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::BrokenPipe
        {
            return true;
        }
        cur = err.source();
    }
    false
}
