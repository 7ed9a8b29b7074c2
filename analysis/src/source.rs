//! Where the tools read: a dataset's table files, or a live session's recording, each table as a
//! polars `LazyFrame`; and the clock by which the session serves times, so that arguments and
//! answers are in the times an agent sees through the other APIs. A source keeps what the tools
//! derive from its tables until those tables change (see `cache`).

use std::path::Path;
use std::sync::Arc;

use datasets::{Dataset, Recording};
use polars::prelude::LazyFrame;
use schemas::tables::Table;
use schemas::time::{Clock, Reading};

use crate::cache::{Cache, Derived};
use crate::{Error, Result};

/// Tables as lazy frames.
pub trait Tables: Send + Sync + std::fmt::Debug {
    /// Every row of a table (a table never recorded reads as empty).
    fn scan(&self, table: Table) -> Result<LazyFrame>;

    /// A number that changes whenever the table's rows do.
    fn version(&self, table: Table) -> Result<u64>;
}

impl Tables for Dataset {
    fn scan(&self, table: Table) -> Result<LazyFrame> {
        Ok(self.lazy(table)?)
    }

    /// A dataset is complete once written (its manifest holds every file's checksum).
    fn version(&self, _table: Table) -> Result<u64> {
        Ok(0)
    }
}

impl Tables for Recording {
    fn scan(&self, table: Table) -> Result<LazyFrame> {
        Ok(self.lazy(table)?)
    }

    fn version(&self, table: Table) -> Result<u64> {
        Ok(Recording::version(self, table)?)
    }
}

/// The tables the tools read and the clock their times are served by. Clones share what was
/// derived from the tables.
#[derive(Debug, Clone)]
pub struct Source {
    tables: Arc<dyn Tables>,
    clock: Clock,
    cache: Arc<Cache>,
}

impl Source {
    pub fn new(tables: Arc<dyn Tables>, clock: Clock) -> Source {
        Source {
            tables,
            clock,
            cache: Arc::default(),
        }
    }

    /// A dataset directory, its times as recorded (frozen at its virtual now).
    pub fn dataset(dir: &Path) -> Result<Source> {
        let dataset = Dataset::open(dir)?;
        let now = dataset
            .manifest()
            .virtual_now
            .timestamp_nanos_opt()
            .ok_or_else(|| Error::Data(format!("{}: virtual_now out of range", dir.display())))?;
        Ok(Source::new(Arc::new(dataset), Clock::frozen(now)))
    }

    /// The same tables served by another clock (a replay shifted to look live).
    pub fn with_clock(mut self, clock: Clock) -> Source {
        self.clock = clock;
        self
    }

    pub fn scan(&self, table: Table) -> Result<LazyFrame> {
        self.tables.scan(table)
    }

    /// What the tools derive from the tables, as kept since the tables last changed.
    pub(crate) fn derived<T: Derived>(&self) -> Result<Arc<T>> {
        let versions = T::TABLES
            .iter()
            .map(|t| self.tables.version(*t))
            .collect::<Result<Vec<_>>>()?;
        self.cache.get(self, versions)
    }

    /// The clock read once for one tool call, so that every time in it moves by the same shift.
    pub fn reading(&self) -> Reading {
        self.clock.read()
    }
}
