//! The undo journal: every change faultline makes to a real system is written here, durably, before
//! it is made, with how to undo it; the entry is removed once the change is undone. Whatever a
//! journal still lists after a crash or kill -9 is what `collector recover` reverts.
//!
//! Generic over the undo action `U`, so that eBPF injections and Kubernetes API faults share one
//! journal format and one recovery loop: an entry says what was changed (for people), how to undo
//! it (for [`Revert`]), who owns it (a live owner is asked to end first) and its state.
//!
//! One JSON file per entry: written to a temporary name, fsynced, renamed into place and the
//! directory fsynced, so a reader never sees half an entry and a recorded entry survives a crash.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Where the journal lives when neither `--journal` nor `FAULTLINE_JOURNAL` says otherwise.
pub const DEFAULT_DIR: &str = "/var/lib/faultline/journal";

/// Whether the change an entry describes may be in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Recorded before the change was made: it may or may not have happened.
    Pending,
    /// The change was made and is in effect until undone.
    Applied,
}

/// The process that made a change, identified so that a reused pid is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/PID/stat` field 22).
    pub start_ticks: u64,
}

impl Owner {
    /// This process.
    pub fn current() -> io::Result<Owner> {
        let pid = std::process::id();
        Ok(Owner {
            pid,
            start_ticks: start_ticks(pid)?,
        })
    }

    /// Whether the owner still runs (the same process, not a later one with its pid).
    pub fn is_alive(&self) -> bool {
        start_ticks(self.pid).is_ok_and(|ticks| ticks == self.start_ticks)
    }
}

fn start_ticks(pid: u32) -> io::Result<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces and parentheses: fields restart after the last ')'.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| io::Error::other("malformed /proc stat"))?;
    after
        .split_whitespace()
        .nth(19)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| io::Error::other("malformed /proc stat"))
}

/// One journaled change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry<U> {
    /// Unique, and ordered by creation: entries are undone newest first.
    pub id: String,
    pub created_at: DateTime<Utc>,
    pub owner: Owner,
    /// What was changed, for people.
    pub change: String,
    /// How to undo it.
    pub undo: U,
    pub state: State,
}

impl<U> Entry<U> {
    /// A pending entry owned by this process.
    pub fn new(change: impl Into<String>, undo: U) -> io::Result<Entry<U>> {
        let created_at = Utc::now();
        let nanos = created_at.timestamp_nanos_opt().unwrap_or_default();
        let short = uuid::Uuid::new_v4().simple().to_string();
        Ok(Entry {
            id: format!("{nanos:020}-{}", &short[..8]),
            created_at,
            owner: Owner::current()?,
            change: change.into(),
            undo,
            state: State::Pending,
        })
    }
}

/// How a kind of change is undone. Must be idempotent: recovery may run it on a change that was
/// half made, already undone, or undone by the kernel (a link closed with its process).
pub trait Revert {
    /// What undoing needs besides the entry (connections to the systems changed).
    type Context;
    /// Undoes the change.
    fn revert(&self, cx: &mut Self::Context) -> Result<Reverted, String>;
}

/// What undoing a change did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Reverted {
    pub detail: String,
    /// Someone else's changes made after this one, which undoing left as found.
    pub kept: Vec<String>,
}

impl From<String> for Reverted {
    fn from(detail: String) -> Reverted {
        Reverted {
            detail,
            kept: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("journal {path}: {source}")]
pub struct JournalError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// A journal directory.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
}

impl Journal {
    /// Opens (creating, mode 0700) a journal directory.
    pub fn open(dir: &Path) -> Result<Journal, JournalError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| JournalError {
                path: dir.to_owned(),
                source,
            })?;
        Ok(Journal {
            dir: dir.to_owned(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn err(&self, source: io::Error) -> JournalError {
        JournalError {
            path: self.dir.clone(),
            source,
        }
    }

    /// Writes (or rewrites) an entry durably: when this returns, the entry survives a crash.
    pub fn record<U: Serialize>(&self, entry: &Entry<U>) -> Result<(), JournalError> {
        let json = serde_json::to_vec_pretty(entry).map_err(|e| self.err(io::Error::other(e)))?;
        let tmp = self.dir.join(format!(".{}.tmp", entry.id));
        let write = || -> io::Result<()> {
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&json)?;
            file.sync_all()?;
            fs::rename(&tmp, self.entry_path(&entry.id))?;
            self.sync_dir()
        };
        write().map_err(|e| self.err(e))
    }

    /// Marks an entry's new state, durably.
    pub fn set_state<U: Serialize>(
        &self,
        entry: &mut Entry<U>,
        state: State,
    ) -> Result<(), JournalError> {
        entry.state = state;
        self.record(entry)
    }

    /// Removes an undone entry, durably. Removing one that is gone is fine.
    pub fn remove(&self, id: &str) -> Result<(), JournalError> {
        match fs::remove_file(self.entry_path(id)) {
            Ok(()) => self.sync_dir().map_err(|e| self.err(e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.err(e)),
        }
    }

    /// Whether the entry is still listed.
    pub fn contains(&self, id: &str) -> bool {
        self.entry_path(id).exists()
    }

    /// Every entry, oldest first; an unreadable file is returned as an error naming it, never
    /// skipped. Temporary files of an interrupted write (never renamed, so never in effect) are
    /// removed.
    pub fn entries<U: DeserializeOwned>(
        &self,
    ) -> Result<Vec<Result<Entry<U>, JournalError>>, JournalError> {
        let mut names = Vec::new();
        for item in fs::read_dir(&self.dir).map_err(|e| self.err(e))? {
            let item = item.map_err(|e| self.err(e))?;
            let name = item.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".tmp") {
                let _ = fs::remove_file(item.path());
            } else if name.ends_with(".json") {
                names.push(name);
            }
        }
        names.sort();
        Ok(names
            .into_iter()
            .map(|name| {
                let path = self.dir.join(&name);
                let read = || -> io::Result<Entry<U>> {
                    let bytes = fs::read(&path)?;
                    serde_json::from_slice(&bytes)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
                };
                read().map_err(|source| JournalError { path, source })
            })
            .collect())
    }

    fn entry_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }
}

/// What recovery did with one entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recovered {
    /// The entry's id, or the file that could not be read.
    pub id: String,
    pub change: String,
    pub reverted: bool,
    /// What was done, or why it failed.
    pub detail: String,
    /// Someone else's later changes that were left as found.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
}

/// Reverts everything the journal lists, newest first, and removes each entry it reverts. An entry
/// whose owner still runs is the owner's to undo: the owner is sent SIGTERM and given `grace` to
/// undo and remove it; whatever it leaves is reverted here. Running it again finds nothing.
pub fn recover<U>(
    journal: &Journal,
    grace: Duration,
    cx: &mut U::Context,
) -> Result<Vec<Recovered>, JournalError>
where
    U: Revert + DeserializeOwned,
{
    let mut entries = journal.entries::<U>()?;
    entries.reverse();
    let me = std::process::id();
    let mut out = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                out.push(Recovered {
                    id: err.path.display().to_string(),
                    change: String::new(),
                    reverted: false,
                    detail: format!("unreadable entry: {}", err.source),
                    kept: Vec::new(),
                });
                continue;
            }
        };
        if entry.owner.pid != me && entry.owner.is_alive() {
            end_owner(journal, &entry, grace);
            if !journal.contains(&entry.id) {
                out.push(Recovered {
                    id: entry.id,
                    change: entry.change,
                    reverted: true,
                    detail: format!("its owner (pid {}) undid it on SIGTERM", entry.owner.pid),
                    kept: Vec::new(),
                });
                continue;
            }
        }
        let (reverted, detail, kept) = match entry.undo.revert(cx) {
            Ok(done) => match journal.remove(&entry.id) {
                Ok(()) => (true, done.detail, done.kept),
                Err(err) => (
                    false,
                    format!("{}, but the entry stays: {err}", done.detail),
                    done.kept,
                ),
            },
            Err(detail) => (false, detail, Vec::new()),
        };
        out.push(Recovered {
            id: entry.id,
            change: entry.change,
            reverted,
            detail,
            kept,
        });
    }
    Ok(out)
}

/// Asks a live owner to end (SIGTERM) and waits up to `grace` for its entry to go.
fn end_owner<U>(journal: &Journal, entry: &Entry<U>, grace: Duration) {
    let Some(pid) = rustix::process::Pid::from_raw(entry.owner.pid as i32) else {
        return;
    };
    if rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_err() {
        return;
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && journal.contains(&entry.id) && entry.owner.is_alive() {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Note {
        ok: bool,
    }

    thread_local!(static REVERTS: Cell<u32> = const { Cell::new(0) });

    impl Revert for Note {
        type Context = ();
        fn revert(&self, _: &mut ()) -> Result<Reverted, String> {
            REVERTS.with(|r| r.set(r.get() + 1));
            if self.ok {
                Ok(Reverted::from("noted".to_string()))
            } else {
                Err("cannot".into())
            }
        }
    }

    #[test]
    fn entries_survive_reopening_and_recovery_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(&dir.path().join("j")).unwrap();
        let mut first = Entry::new("first", Note { ok: true }).unwrap();
        journal.record(&first).unwrap();
        journal.set_state(&mut first, State::Applied).unwrap();
        let failing = Entry::new("second", Note { ok: false }).unwrap();
        journal.record(&failing).unwrap();
        // A torn write (never renamed) is not an entry.
        fs::write(journal.dir().join(".x.tmp"), b"{").unwrap();

        let reopened = Journal::open(journal.dir()).unwrap();
        let listed: Vec<Entry<Note>> = reopened
            .entries()
            .unwrap()
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(listed, vec![first.clone(), failing.clone()]);
        assert!(!journal.dir().join(".x.tmp").exists());

        // The entries are owned by this process, so recovery reverts them itself, newest first.
        let done = recover::<Note>(&reopened, Duration::ZERO, &mut ()).unwrap();
        assert_eq!(done.len(), 2);
        assert_eq!(done[0].change, "second");
        assert!(!done[0].reverted && done[0].detail == "cannot");
        assert!(done[1].reverted);
        assert!(!reopened.contains(&first.id) && reopened.contains(&failing.id));

        let again = recover::<Note>(&reopened, Duration::ZERO, &mut ()).unwrap();
        assert_eq!(again.len(), 1, "only the failing entry is left");
    }

    #[test]
    fn an_unreadable_entry_is_reported_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        fs::write(dir.path().join("0001-bad.json"), b"{not json").unwrap();
        let done = recover::<Note>(&journal, Duration::ZERO, &mut ()).unwrap();
        assert_eq!(done.len(), 1);
        assert!(!done[0].reverted);
        assert!(
            done[0].detail.contains("unreadable entry"),
            "{}",
            done[0].detail
        );
    }

    #[test]
    fn owners_are_told_apart_by_start_time() {
        let me = Owner::current().unwrap();
        assert!(me.is_alive());
        let impostor = Owner {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!impostor.is_alive());
    }
}
