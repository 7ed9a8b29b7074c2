//! Where the tools read: a dataset's table files, or a live session's recording, each table as a
//! polars `LazyFrame`; and the clock by which the session serves times, so that arguments and
//! answers are in the times an agent sees through the other APIs.

use std::path::Path;
use std::sync::Arc;

use datasets::{Dataset, Recording};
use polars::prelude::LazyFrame;
use schemas::tables::Table;
use schemas::time::{Clock, Reading};

use crate::{Error, Result};

/// Tables as lazy frames.
pub trait Tables: Send + Sync + std::fmt::Debug {
    /// Every row of a table (a table never recorded reads as empty).
    fn scan(&self, table: Table) -> Result<LazyFrame>;
}

impl Tables for Dataset {
    fn scan(&self, table: Table) -> Result<LazyFrame> {
        Ok(self.lazy(table)?)
    }
}

impl Tables for Recording {
    fn scan(&self, table: Table) -> Result<LazyFrame> {
        Ok(self.lazy(table)?)
    }
}

/// The tables the tools read and the clock their times are served by.
#[derive(Debug, Clone)]
pub struct Source {
    tables: Arc<dyn Tables>,
    clock: Clock,
}

impl Source {
    pub fn new(tables: Arc<dyn Tables>, clock: Clock) -> Source {
        Source { tables, clock }
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

    /// The clock read once for one tool call, so that every time in it moves by the same shift.
    pub fn reading(&self) -> Reading {
        self.clock.read()
    }
}
