//! Test support: writes a synthetic dataset of N metric samples (plus one of every other table) with
//! the real dataset writer, so tests can interrupt a large write.
//!
//! Example: `e2e-write-synthetic out/ds 20000000`

use chrono::{DateTime, Utc};
use datasets::synth::{START_NS, metric_samples, mixed_rows};
use datasets::{DatasetInfo, DatasetWriter};
use schemas::TimeWindow;
use schemas::tables::Row;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(rows)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: e2e-write-synthetic DIR ROWS");
    };
    let rows: usize = rows.parse()?;
    let mut writer = DatasetWriter::create(std::path::Path::new(&dir))?;
    writer.extend(mixed_rows(4))?;
    writer.extend(metric_samples(rows, 2_000).map(Row::Metric))?;
    let start = DateTime::<Utc>::from_timestamp_nanos(START_NS);
    let end = start + chrono::Duration::days(30);
    let manifest = writer.finish(DatasetInfo {
        environment: "sim".into(),
        application: Some("hotel-reservation".into()),
        namespaces: vec!["hotel-reservation".into()],
        window: TimeWindow { start, end },
        virtual_now: end,
    })?;
    println!("{}", manifest.dataset_id);
    Ok(())
}
