//! The on-disk faultline dataset: the only crate that touches dataset files.
//!
//! A dataset is a directory with `manifest.json` and one Parquet file per table (see
//! [`schemas::tables::Table`]). [`DatasetWriter`] produces one from rows in bounded memory and moves
//! it into place atomically; [`Dataset`] reads it back as Arrow batches, rows, or polars LazyFrames;
//! [`TableFile`] reads one table's file in place, only the rows its statistics leave; [`Recording`]
//! keeps a running system's rows as Parquet segments, readable while it runs;
//! [`validate()`] checks everything a reader relies on; [`export`] writes JSON Lines or CSV.

pub mod encode;
pub mod error;
pub mod export;
pub mod in_place;
mod parallel;
pub mod reader;
pub mod recording;
pub mod sort_key;
mod sorter;
pub mod synth;
pub mod table_file;
pub mod validate;
pub mod writer;

use std::io::{Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

pub use error::{DatasetError, Result};
pub use in_place::TableFile;
pub use reader::Dataset;
pub use recording::Recording;
pub use table_file::{TableFileWriter, WriteOptions};
pub use validate::{Finding, Report, validate};
pub use writer::{DatasetInfo, DatasetWriter, WriterConfig};

/// File name of the manifest inside a dataset directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Lower-case hex SHA-256 of a file, read in a streaming fashion.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| DatasetError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| DatasetError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Writes `bytes` to a temporary sibling of `path`, fsyncs it, and renames it over `path`, so a
/// reader sees either the old file or the whole new one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| DatasetError::invalid(path, "is not a file name"))?
        .to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        DatasetError::io(path, e)
    })
}

/// Makes a directory's entries (renames, new files) durable.
pub fn fsync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| DatasetError::io(dir, e))
}
