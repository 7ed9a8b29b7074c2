//! Stores a live environment appends to while the APIs read them: every read takes the lock for
//! its own duration only.

use std::sync::{Arc, RwLock, RwLockReadGuard};

use schemas::tables::{LogRow, SpanRow};

use crate::logs::{ContainerKey, Line, LineRange, LogCatalog, LogSource, MemLogs};
use crate::spans::{Catalog, DerivedTags, Links, MemSpans, SpanSource, TraceQuery};

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    // A writer that panicked left whole rows behind (appends are row by row): keep serving.
    lock.read().unwrap_or_else(|e| e.into_inner())
}

/// Spans that grow.
#[derive(Default)]
pub struct LiveSpans(RwLock<MemSpans>);

impl LiveSpans {
    pub fn append(&self, rows: Vec<SpanRow>) {
        if !rows.is_empty() {
            self.0
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .append(rows);
        }
    }
}

impl SpanSource for LiveSpans {
    fn catalog(&self) -> anyhow::Result<Arc<Catalog>> {
        read(&self.0).catalog()
    }
    fn traces(&self, ids: &[String], now: i64) -> anyhow::Result<Vec<Vec<SpanRow>>> {
        read(&self.0).traces(ids, now)
    }
    fn find_traces(
        &self,
        q: &TraceQuery,
        now: i64,
        derived: DerivedTags,
    ) -> anyhow::Result<Vec<String>> {
        read(&self.0).find_traces(q, now, derived)
    }
    fn dependencies(&self, from: i64, to: i64, now: i64) -> anyhow::Result<Links> {
        read(&self.0).dependencies(from, to, now)
    }
}

/// Log lines that grow.
#[derive(Default)]
pub struct LiveLogs(RwLock<MemLogs>);

impl LiveLogs {
    pub fn append(&self, rows: Vec<LogRow>) {
        if !rows.is_empty() {
            self.0
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .append(rows);
        }
    }
}

impl LogSource for LiveLogs {
    fn catalog(&self) -> anyhow::Result<Arc<LogCatalog>> {
        read(&self.0).catalog()
    }
    fn lines(&self, key: &ContainerKey, range: &LineRange) -> anyhow::Result<Vec<Line>> {
        read(&self.0).lines(key, range)
    }
}
