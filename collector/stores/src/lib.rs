//! The signals the APIs serve, and the queries over them that need no HTTP: the object timeline
//! ([`objects`]), spans with trace search ([`spans`]), container logs ([`logs`]) and LogQL evaluated
//! over them ([`logql`]; the language's parser is the `logql` crate), and the patterns lines
//! share ([`patterns`]).
//!
//! Objects live in memory; spans and logs come from a source the APIs cannot tell apart: rows held
//! in memory, or a dataset's Parquet files read in place through their statistics by
//! [`datasets::in_place`] ([`spans_file`], [`logs_file`]), so a large dataset serves at once, within
//! bounded memory.

pub mod live;
pub mod logql;
pub mod logs;
pub mod logs_file;
pub mod objects;
pub mod patterns;
pub mod spans;
pub mod spans_file;

use std::sync::{Arc, Mutex};

/// A value computed on first use and kept: callers that come while it is computed
/// wait for it; a failure is not kept (the next caller tries again).
pub struct Cached<T>(Mutex<Option<Arc<T>>>);

impl<T> Default for Cached<T> {
    fn default() -> Self {
        Cached(Mutex::new(None))
    }
}

impl<T> Cached<T> {
    pub fn get_or_try(&self, make: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<Arc<T>> {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = slot.as_ref() {
            return Ok(v.clone());
        }
        let v = Arc::new(make()?);
        *slot = Some(v.clone());
        Ok(v)
    }

    /// The value if it is there already; never waits for it to be computed.
    pub fn ready(&self) -> Option<Arc<T>> {
        match self.0.try_lock() {
            Ok(slot) => slot.clone(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().clone(),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}
