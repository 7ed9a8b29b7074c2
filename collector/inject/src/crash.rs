//! Crash points: the places between durable steps of an injection or a revert (a journal write,
//! each change sent to a system) where a crash must leave something `collector recover` can
//! finish. Tests make the process kill itself with SIGKILL at the N-th point passed, set by
//! `FAULTLINE_CRASH_AT=N` (or at the first point of a name, `FAULTLINE_CRASH_AT=applied`), to prove that a kill -9 anywhere leaves nothing recovery cannot undo.
//! Unset (always, outside such tests), a point is a counter increment.

use std::sync::atomic::{AtomicU64, Ordering};

/// The variable that names the point to die at (1 is the first point passed).
pub const CRASH_AT: &str = "FAULTLINE_CRASH_AT";

static PASSED: AtomicU64 = AtomicU64::new(0);

/// Passes a crash point; with `FAULTLINE_CRASH_AT` at this point's number, the process dies here
/// as kill -9 would end it (no destructors, no buffered output).
pub fn point(name: &str) {
    let n = PASSED.fetch_add(1, Ordering::SeqCst) + 1;
    let due = std::env::var(CRASH_AT).is_ok_and(|v| {
        let v = v.trim();
        v.parse::<u64>().map_or(v == name, |at| at == n)
    });
    if due {
        tracing::warn!("{CRASH_AT}={n}: killing this process at `{name}`");
        let me = rustix::process::getpid();
        let _ = rustix::process::kill_process(me, rustix::process::Signal::KILL);
        // SIGKILL to oneself is delivered before the call returns; should it not be, stop anyway.
        std::process::abort();
    }
}

/// How many points this process has passed (what a test draws its kill point from).
pub fn passed() -> u64 {
    PASSED.load(Ordering::SeqCst)
}
