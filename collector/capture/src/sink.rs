//! Where captured rows go: a bounded channel into one writer thread that owns the
//! [`DatasetWriter`], so sources stream rows without holding them and memory stays bounded by the
//! channel and the writer's spill size.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use datasets::{DatasetInfo, DatasetWriter, WriterConfig};
use schemas::Manifest;
use schemas::tables::{Row, Table};
use tokio::sync::mpsc;

/// Rows in flight between the sources and the writer.
const CHANNEL_ROWS: usize = 4 * 1024;

/// The writer's tuning for captures: its memory budget bounds what a capture of any length
/// holds; smaller row groups than a snapshot's, as a capture's files are read in place.
fn writer_config() -> WriterConfig {
    WriterConfig {
        file: datasets::WriteOptions {
            row_group_rows: 64 * 1024,
            ..datasets::WriteOptions::default()
        },
        ..WriterConfig::default()
    }
}

/// A cloneable handle the sources push rows into.
#[derive(Clone)]
pub struct Sink {
    tx: mpsc::Sender<Row>,
    counts: Arc<Mutex<BTreeMap<Table, u64>>>,
}

impl Sink {
    pub async fn push(&self, row: Row) -> anyhow::Result<()> {
        let table = row.table();
        self.tx
            .send(row)
            .await
            .map_err(|_| anyhow::anyhow!("the dataset writer stopped (see its error)"))?;
        *self
            .counts
            .lock()
            .expect("counts lock")
            .entry(table)
            .or_default() += 1;
        Ok(())
    }

    /// Rows pushed so far, by table.
    pub fn counts(&self) -> BTreeMap<Table, u64> {
        self.counts.lock().expect("counts lock").clone()
    }
}

/// The writer thread; [`Writer::finish`] seals the dataset, dropping it abandons the capture (the
/// partial directory is removed and nothing appears at the output path).
pub struct Writer {
    sink: Option<Sink>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<DatasetWriter>>>,
    dir: PathBuf,
}

impl Writer {
    pub fn create(dir: &Path) -> anyhow::Result<Writer> {
        let mut writer = DatasetWriter::with_config(dir, writer_config())
            .with_context(|| format!("cannot create the dataset {}", dir.display()))?;
        let (tx, mut rx) = mpsc::channel::<Row>(CHANNEL_ROWS);
        let path = dir.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("capture-writer".into())
            .spawn(move || {
                while let Some(row) = rx.blocking_recv() {
                    writer
                        .push(row)
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                Ok(writer)
            })?;
        Ok(Writer {
            sink: Some(Sink {
                tx,
                counts: Arc::default(),
            }),
            thread: Some(thread),
            dir: dir.to_path_buf(),
        })
    }

    pub fn sink(&self) -> Sink {
        self.sink.clone().expect("sink taken only by finish")
    }

    /// Waits for every row to be written, then sorts, writes the manifest and renames the dataset
    /// into place. Every [`Sink`] clone must have been dropped.
    pub fn finish(mut self, info: DatasetInfo) -> anyhow::Result<Manifest> {
        drop(self.sink.take());
        let writer = self
            .thread
            .take()
            .expect("joined only here or on drop")
            .join()
            .map_err(|_| anyhow::anyhow!("the dataset writer panicked"))??;
        writer
            .finish(info)
            .with_context(|| format!("finishing the dataset {}", self.dir.display()))
    }
}

impl Drop for Writer {
    /// An abandoned capture: wait for the writer thread so that its [`DatasetWriter`] is dropped,
    /// which removes the partial directory, before the process goes on (or exits).
    fn drop(&mut self) {
        drop(self.sink.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
