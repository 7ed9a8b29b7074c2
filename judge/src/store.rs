//! Where verdicts are kept: a content-addressed cache shared by runs (one file per verdict, written
//! to a temporary sibling and renamed), and a run's append-only `verdicts.jsonl`, which a killed run
//! reads back to resume where it stopped.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use schemas::verdict::Verdict;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

/// Writes `bytes` to `path` atomically: temporary sibling, fsync, rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_replacing(path, bytes, true)
}

/// Temporary sibling then rename, so a reader never sees half a file; `durable` adds the fsync
/// before the rename. Files that can be regenerated at no cost (cache entries, per-trial copies of
/// results) skip it: a disk flush per file would cap re-judging at a few hundred verdicts a second.
pub fn write_replacing(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        rand::random::<u32>()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Pretty JSON with a trailing newline, written atomically and durably.
pub fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    write_json_with(path, value, true)
}

pub fn write_json_with(path: &Path, value: &impl Serialize, durable: bool) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    write_replacing(path, &bytes, durable)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// sha256 over a canonical JSON rendering of the parts (object keys are sorted by serde_json's
/// `Value` map when `preserve_order` is off; with it on, callers pass values built in a fixed order).
pub fn content_key(parts: &impl Serialize) -> String {
    struct Hashing(Sha256);
    impl Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Sha256::new());
    serde_json::to_writer(&mut h, parts).expect("key parts serialise");
    hex::encode(h.0.finalize())
}

/// The verdict cache: `<dir>/<first two hex>/<key>.json`.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir
            .join(&key[..2.min(key.len())])
            .join(format!("{key}.json"))
    }

    /// A cached verdict; a damaged entry counts as absent (and is overwritten later).
    pub fn get(&self, key: &str) -> Option<Verdict> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        match serde_json::from_slice::<Verdict>(&bytes) {
            Ok(v) if v.cache_key == key => Some(v),
            _ => {
                tracing::warn!(key, "ignoring a damaged cache entry");
                None
            }
        }
    }

    pub fn put(&self, verdict: &Verdict) -> anyhow::Result<()> {
        let path = self.path(&verdict.cache_key);
        let bytes = serde_json::to_vec(verdict)?;
        // A torn entry after a power loss fails to parse or to match its key, and is ignored.
        write_replacing(&path, &bytes, false)
            .with_context(|| format!("cannot write cache entry {}", path.display()))
    }
}

/// Reads a run's verdict log: the verdicts by (item id, sample). A line cut short by a crash is
/// skipped with a warning; later lines for the same key replace earlier ones.
pub fn read_log(path: &Path) -> anyhow::Result<HashMap<(String, u32), Verdict>> {
    let mut out = HashMap::new();
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Verdict>(&line) {
            Ok(v) => {
                out.insert((v.item.id.clone(), v.sample), v);
            }
            Err(e) => tracing::warn!(
                "{}:{}: skipping an unreadable line: {e}",
                path.display(),
                i + 1
            ),
        }
    }
    Ok(out)
}

/// Appends verdicts to the log from one writer thread. Verdicts are serialised by whoever appends
/// them (spread over the runtime's threads); lines that arrive together are written together and
/// made durable with one fsync, so a fast stream of cached verdicts is not throttled by the disk.
pub struct LogWriter {
    tx: LogSender,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// A handle that appends to the log; the log is closed once every handle is dropped.
#[derive(Clone)]
pub struct LogSender(mpsc::UnboundedSender<Vec<u8>>);

impl LogSender {
    pub fn append(&self, v: &Verdict) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(v).context("cannot serialise a verdict")?;
        line.push(b'\n');
        // The writer only stops when the log cannot be written; `close` reports that error.
        let _ = self.0.send(line);
        Ok(())
    }
}

impl LogWriter {
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        // A crash may have left half a line: start ours on a fresh one.
        if file.metadata()?.len() > 0 {
            file.write_all(b"\n")?;
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let shown = path.display().to_string();
        let task = tokio::task::spawn_blocking(move || {
            let mut buf = Vec::new();
            while let Some(line) = rx.blocking_recv() {
                buf.clear();
                buf.extend_from_slice(&line);
                while let Ok(more) = rx.try_recv() {
                    buf.extend_from_slice(&more);
                }
                file.write_all(&buf)
                    .and_then(|()| file.sync_data())
                    .with_context(|| format!("cannot append to {shown}"))?;
            }
            Ok(())
        });
        Ok(Self {
            tx: LogSender(tx),
            task,
        })
    }

    pub fn sender(&self) -> LogSender {
        self.tx.clone()
    }

    /// Waits until every sender is dropped and everything is written; reports a write failure.
    pub async fn close(self) -> anyhow::Result<()> {
        drop(self.tx);
        self.task.await.context("the log writer panicked")?
    }
}
