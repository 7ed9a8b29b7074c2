//! One injection from start to end: load (no change yet), journal, attach, run the window, detach,
//! verify, clear the journal. A refused program fails the injection before anything is changed; a
//! crash at any later point leaves journal entries that `collector recover` reverts.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::signal::unix::{SignalKind, signal};

use crate::bpf::{self, Counts, FileId, Loaded, Params};
use crate::cgroup::{self, Cgroup, CgroupError};
use crate::journal::{Entry, Journal, JournalError, State};
use crate::probe;
use crate::request::{Fault, Tier};
use crate::undo::Undo;

/// Which processes are faulted.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    /// Every process in this cgroup v2 directory and below, now and later.
    Cgroup(PathBuf),
    /// A command faultline starts in a cgroup of its own (removed when the injection ends).
    Command(Vec<String>),
}

/// What to inject, where, for how long.
#[derive(Debug, Clone)]
pub struct Injection {
    pub fault: Fault,
    pub scope: Scope,
    /// Until the injection is ended when absent.
    pub window: Option<Duration>,
}

/// Said once everything is attached.
#[derive(Debug, Clone, Serialize)]
pub struct Ready {
    pub event: &'static str,
    pub id: String,
    pub fault: Fault,
    pub cgroup: PathBuf,
    pub cgroup_id: u64,
    pub hooks: Vec<&'static str>,
    pub program_ids: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_pid: Option<u32>,
    pub journal: PathBuf,
}

/// Why an injection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// `--for` ran out.
    Window,
    /// SIGINT or SIGTERM.
    Signal,
    /// The command faultline started exited.
    CommandExited,
}

impl Ended {
    pub fn name(self) -> &'static str {
        match self {
            Ended::Window => "the window ended",
            Ended::Signal => "a signal ended it",
            Ended::CommandExited => "the command exited",
        }
    }
}

/// How an injection ended.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub event: &'static str,
    pub id: String,
    pub ended: Ended,
    /// Calls (or packets) that matched, and those faulted.
    pub counts: Counts,
    /// Whether the kernel had released every program when the injector checked (otherwise the
    /// journal entry stays for `collector recover`).
    pub released: bool,
    /// The command's exit code (128 + signal when a signal ended it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_exit: Option<i32>,
}

#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// The kernel refused a program: nothing was changed.
    #[error("this kernel cannot carry out the fault, nothing was changed: {0}")]
    Refused(String),
    #[error("{0}")]
    Request(String),
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> InjectError {
    let what = what.into();
    move |source| InjectError::Io { what, source }
}

/// How long the kernel may take to free the programs once their links are closed.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a started command has to exit on SIGTERM before it is killed.
const COMMAND_GRACE: Duration = Duration::from_secs(5);

/// Runs an injection to its end. `on_ready` is called once the fault is in effect.
pub async fn run(
    injection: Injection,
    journal: &Journal,
    on_ready: impl FnOnce(&Ready),
) -> Result<Outcome, InjectError> {
    // Signals are taken before anything is attached, so an early Ctrl-C still undoes.
    let mut sigterm = signal(SignalKind::terminate()).map_err(io("SIGTERM handler"))?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(io("SIGINT handler"))?;
    let fault = injection.fault.clone();
    let hooks = fault.hooks();
    let file = match &fault {
        Fault::Syscall {
            path: Some(path), ..
        } => Some(FileId::of(path).map_err(io(format!("--path-prefix {}", path.display())))?),
        _ => None,
    };
    let existing = match &injection.scope {
        Scope::Cgroup(path) => Some(Cgroup::open(path)?),
        Scope::Command(argv) if argv.is_empty() => {
            return Err(InjectError::Request("no command to run".into()));
        }
        Scope::Command(_) => None,
    };
    let deadline = injection.window.map_or(0, bpf::deadline_after);
    let until = injection
        .window
        .and_then(|w| chrono::Duration::from_std(w).ok())
        .map(|w| Utc::now() + w);
    let params = |cgroup_id| Params::of(&fault, deadline, cgroup_id, file);
    // Loading changes nothing: a refusal ends here with the system untouched.
    let kernel = probe::kernel();
    let refused = |r: bpf::Refusal| InjectError::Refused(probe::reason(&r, &kernel));
    let mut loaded =
        Loaded::load(&hooks, &params(existing.as_ref().map_or(0, Cgroup::id))).map_err(refused)?;

    let mut created: Option<Entry<Undo>> = None;
    let cgroup = match existing {
        Some(cgroup) => cgroup,
        None => {
            let (cgroup, entry) = create_command_cgroup(journal)?;
            created = Some(entry);
            if fault.tier() == Tier::Lsm {
                // LSM programs pick processes by cgroup id, known only now.
                match Loaded::load(&hooks, &params(cgroup.id())) {
                    Ok(reloaded) => loaded = reloaded,
                    Err(r) => {
                        undo_now(journal, created.take());
                        return Err(refused(r));
                    }
                }
            }
            cgroup
        }
    };

    let mut links = Entry::new(
        format!("{fault}, in cgroup {}", cgroup.path().display()),
        Undo::BpfLinks {
            cgroup: cgroup.path().to_owned(),
            hooks: hooks.iter().map(|h| h.section().to_owned()).collect(),
            program_ids: loaded.program_ids().to_vec(),
        },
    )
    .map_err(io("journal owner"))?;
    journal.record(&links)?;
    if let Err(refusal) = loaded.attach(Some(&cgroup)) {
        drop(loaded);
        undo_now(journal, Some(links));
        undo_now(journal, created);
        return Err(refused(refusal));
    }
    journal.set_state(&mut links, State::Applied)?;

    let mut child = match (&injection.scope, &created) {
        (Scope::Command(argv), Some(_)) => match spawn_in(&cgroup, argv).await {
            Ok(child) => Some(child),
            Err(err) => {
                drop(loaded);
                undo_now(journal, Some(links));
                undo_now(journal, created);
                return Err(err);
            }
        },
        _ => None,
    };
    on_ready(&Ready {
        event: "ready",
        id: links.id.clone(),
        fault: fault.clone(),
        cgroup: cgroup.path().to_owned(),
        cgroup_id: cgroup.id(),
        hooks: hooks.iter().map(|h| h.section()).collect(),
        program_ids: loaded.program_ids().to_vec(),
        until,
        command_pid: child.as_ref().and_then(|c| c.id()),
        journal: journal.dir().to_owned(),
    });

    let window = async {
        match injection.window {
            Some(w) => tokio::time::sleep(w).await,
            None => std::future::pending().await,
        }
    };
    let exited = async {
        match child.as_mut() {
            Some(child) => child.wait().await.ok(),
            None => std::future::pending().await,
        }
    };
    let (ended, mut status) = tokio::select! {
        () = window => (Ended::Window, None),
        _ = sigterm.recv() => (Ended::Signal, None),
        _ = sigint.recv() => (Ended::Signal, None),
        status = exited => (Ended::CommandExited, status),
    };

    let counts = loaded.counts();
    let ids = loaded.program_ids().to_vec();
    drop(loaded);
    let left = bpf::wait_released(&ids, RELEASE_TIMEOUT);
    let released = left.is_empty();
    if released {
        journal.remove(&links.id)?;
    } else {
        tracing::warn!(
            "programs {left:?} are still loaded after detaching; `collector recover` checks again"
        );
    }
    if let Some(child) = child.as_mut()
        && status.is_none()
    {
        status = end_command(child).await;
    }
    undo_now(journal, created);
    Ok(Outcome {
        event: "ended",
        id: links.id,
        ended,
        counts,
        released,
        command_exit: status.map(exit_code),
    })
}

/// Journals, then creates, a cgroup for a command, under the hierarchy's `faultline/` directory.
fn create_command_cgroup(journal: &Journal) -> Result<(Cgroup, Entry<Undo>), InjectError> {
    let root = cgroup::hierarchy_root()?;
    let path = root
        .join("faultline")
        .join(format!("run-{}", uuid::Uuid::new_v4().simple()));
    let mut entry = Entry::new(
        format!("cgroup {} for a command", path.display()),
        Undo::CgroupDir {
            path: path.clone(),
            return_to: cgroup::own_cgroup()?,
        },
    )
    .map_err(io("journal owner"))?;
    journal.record(&entry)?;
    match cgroup::create(&path) {
        Ok(cgroup) => {
            journal.set_state(&mut entry, State::Applied)?;
            Ok((cgroup, entry))
        }
        Err(err) => {
            undo_now(journal, Some(entry));
            Err(err.into())
        }
    }
}

/// Starts the command inside the cgroup: a shell moves itself in, then becomes the command, so the
/// command's first instruction already runs faulted. Returns once the process is in the cgroup.
async fn spawn_in(cgroup: &Cgroup, argv: &[String]) -> Result<tokio::process::Child, InjectError> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$0" && exec "$@""#)
        .arg(cgroup.path().join("cgroup.procs"))
        .args(argv)
        .stdin(Stdio::inherit())
        .spawn()
        .map_err(io(format!("starting {}", argv[0])))?;
    let pid = child.id().unwrap_or_default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if cgroup.pids()?.contains(&pid) {
            return Ok(child);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(InjectError::Request(format!(
                "{} exited ({status}) before it joined {}",
                argv[0],
                cgroup.path().display()
            )));
        }
        if tokio::time::Instant::now() > deadline {
            let _ = child.start_kill();
            return Err(InjectError::Request(format!(
                "{} did not join {} within 10 s",
                argv[0],
                cgroup.path().display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Ends a command still running when the injection ends: SIGTERM, then SIGKILL after a grace.
async fn end_command(child: &mut tokio::process::Child) -> Option<std::process::ExitStatus> {
    if let Some(pid) = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    match tokio::time::timeout(COMMAND_GRACE, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            let _ = child.start_kill();
            child.wait().await.ok()
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Undoes a journaled change at once and clears its entry; a failure leaves the entry for
/// `collector recover` and is logged.
fn undo_now(journal: &Journal, entry: Option<Entry<Undo>>) {
    let Some(entry) = entry else { return };
    match entry.undo.revert_local() {
        Ok(done) => {
            tracing::debug!("{done}");
            if let Err(err) = journal.remove(&entry.id) {
                tracing::warn!("{err}");
            }
        }
        Err(err) => tracing::warn!("{} is left for `collector recover`: {err}", entry.change),
    }
}
