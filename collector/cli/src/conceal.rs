//! Keeps the problem ids out of the process list while agents run. An agent runs as the same user
//! as `collector`, so it can read `collector`'s command line (`ps`, `/proc/PPID/cmdline`): `live
//! --problem ID`, `eval --problems IDS` or a replayed dataset's path would hand it the answer (or
//! a hint). The commands that start agents
//! write their command line to a private file and re-execute this binary (same PID, so the
//! caller's shell and signals are unaffected) with only that file's name, which the new image
//! reads and deletes before anything else. An agent listing processes sees
//! `collector --args-from /tmp/.session-...` and nothing more.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;

use anyhow::Context;

/// The hidden form of the command line: `collector --args-from FILE`.
const FLAG: &str = "--args-from";

/// This process's command line: as given, or read back (and deleted) from the file the hidden
/// form names. The second value says whether it was concealed already.
pub fn argv() -> anyhow::Result<(Vec<OsString>, bool)> {
    let given: Vec<OsString> = std::env::args_os().collect();
    match given.as_slice() {
        [_, flag, file] if flag == FLAG => Ok((read(Path::new(file))?, true)),
        _ => Ok((given, false)),
    }
}

fn read(file: &Path) -> anyhow::Result<Vec<OsString>> {
    let text = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let _ = std::fs::remove_file(file);
    let argv: Vec<String> = serde_json::from_slice(&text)
        .with_context(|| format!("{}: not a saved command line", file.display()))?;
    Ok(argv.into_iter().map(OsString::from).collect())
}

/// Re-executes this binary with `argv` hidden in a private file; returns only if that fails.
pub fn reexec(argv: &[OsString]) -> anyhow::Error {
    let failed = match save(argv) {
        Ok(path) => {
            let exe = std::env::current_exe().context("finding this executable");
            let err = exe.map(|exe| std::process::Command::new(exe).arg(FLAG).arg(&path).exec());
            let _ = std::fs::remove_file(&path);
            err.map_or_else(|e| e, anyhow::Error::new)
        }
        Err(e) => e,
    };
    failed.context("re-executing collector to keep the problems out of the process list")
}

/// Writes `argv` to a private file (readable by this user only) that outlives this image.
fn save(argv: &[OsString]) -> anyhow::Result<std::path::PathBuf> {
    let mut file = tempfile::Builder::new()
        .prefix(".session-")
        .tempfile()
        .context("writing the command line to a private file")?;
    let text: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    file.write_all(&serde_json::to_vec(&text)?)?;
    let (_, path) = file.keep().context("keeping the command line's file")?;
    Ok(path)
}
