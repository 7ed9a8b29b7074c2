//! Bench support: tiles a real dataset over time into a long one (e.g. 1 h of astronomy-shop into
//! two weeks, about 1 GB), so benches measure the composition and cardinality of a long capture
//! rather than synthetic rows.
//!
//! Rows are produced already in each table's sort order (a series' copies follow each other) and
//! encoded straight into the table files with the dataset crate's file writer: `DatasetWriter`
//! would sort them again through uncompressed spill runs, about 40 GB for a 1 GB dataset.
//!
//! Run `cargo run --profile dev -p collector --example tile_dataset -- --help`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use datasets::encode::{cmp_rows, encode};
use datasets::{Dataset, TableFileWriter, WriteOptions};
use indicatif::{ProgressBar, ProgressStyle};
use schemas::tables::{MetricMeta, MetricSample, Row, Table};
use schemas::{Manifest, TimeWindow};
use sha2::{Digest, Sha256};

/// Writes N consecutive copies of a dataset, each shifted by the window's length, as one dataset.
///
/// Metric series keep their labels (a long capture has the same series, more samples); counters
/// continue from one copy to the next instead of resetting. Spans get fresh trace and span ids per
/// copy (parent links kept), events fresh names and uids, so traces and events stay unique. Logs
/// and alerts are shifted as they are. Objects are taken once: the cluster is the same cluster.
/// Rows on the window's end are dropped from every copy but the last, where the next copy starts.
#[derive(Debug, Parser)]
#[command(
    after_help = "Example:\n  collector snapshot --problem astronomy-ad-cpu-stress --duration 60m --out /tmp/astro60\n  cargo run --profile dev -p collector --example tile_dataset -- /tmp/astro60/dataset \\\n      --target-mib 1024 --out ~/.cache/faultline/replay-1g/dataset"
)]
struct Args {
    /// The dataset to tile (the directory holding manifest.json).
    input: PathBuf,
    /// Where the tiled dataset appears (must not exist; written atomically).
    #[arg(long)]
    out: PathBuf,
    /// Number of copies.
    #[arg(long, conflicts_with = "target_mib")]
    copies: Option<u64>,
    /// Aim at about this many MiB of Parquet, estimated from the input's size.
    #[arg(long, default_value_t = 1024)]
    target_mib: u64,
    /// Tile only these tables (repeat the flag); the others keep one copy. For benches that
    /// isolate one signal, e.g. `--tile metrics`.
    #[arg(long = "tile", value_parser = parse_table)]
    tile: Vec<Table>,
}

fn parse_table(s: &str) -> Result<Table, String> {
    s.parse()
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let input = Dataset::open(&args.input)?;
    let manifest = input.manifest().clone();
    let input_bytes: u64 = manifest
        .tables
        .iter()
        .filter(|(t, _)| args.tile.is_empty() || args.tile.contains(t))
        .map(|(_, e)| e.bytes)
        .sum();
    let copies = args
        .copies
        .unwrap_or_else(|| (args.target_mib << 20).div_ceil(input_bytes.max(1)))
        .max(1);
    let start = ns(manifest.window.start)?;
    let period = ns(manifest.window.end)? - start;
    anyhow::ensure!(period > 0, "{}: empty window", args.input.display());

    let mut tables = HashMap::new();
    for table in Table::ALL {
        let rows = input
            .read_rows(table)
            .with_context(|| format!("reading the {table} table of {}", args.input.display()))?;
        tables.insert(table, rows);
    }
    let metadata: Vec<MetricMeta> = tables[&Table::MetricMetadata]
        .iter()
        .filter_map(|r| match r {
            Row::MetricMeta(m) => Some(m.clone()),
            _ => None,
        })
        .collect();
    let growth = counter_growth(&tables[&Table::Metrics], &metadata);
    // Per metrics row: how much its series grows per copy (looked up once, not per copy).
    let growth: Vec<f64> = tables[&Table::Metrics]
        .iter()
        .map(|r| match r {
            Row::Metric(s) => growth.get(&series_key(s)).copied().unwrap_or(0.0),
            _ => 0.0,
        })
        .collect();

    let started = Instant::now();
    let name = args
        .out
        .file_name()
        .context("--out: not a directory name")?
        .to_string_lossy()
        .into_owned();
    anyhow::ensure!(!args.out.exists(), "{}: already exists", args.out.display());
    let parent = args.out.parent().unwrap_or(Path::new(".")).to_path_buf();
    let tmp = parent.join(format!(".{name}.partial-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let written = (|| -> anyhow::Result<Manifest> {
        let total_rows: u64 = tables.values().map(|r| r.len() as u64).sum::<u64>() * copies;
        let bar = ProgressBar::new(total_rows).with_style(
            ProgressStyle::with_template("{bar:40} {percent}% {pos}/{len} rows, eta {eta}")
                .expect("template"),
        );
        let tiling = Tiling {
            copies,
            tile: &args.tile,
            start,
            period,
            growth: &growth,
        };
        let mut entries = BTreeMap::new();
        for table in Table::ALL {
            let path = tmp.join(table.file_name());
            let rows = tiling.write(table, &tables[&table], &path, &bar)?;
            entries.insert(table, datasets::writer::table_entry(table, &path, rows)?);
        }
        bar.finish_and_clear();
        let total = period * copies as i64;
        let manifest = Manifest {
            dataset_id: datasets::writer::dataset_id(&entries),
            window: TimeWindow {
                start: manifest.window.start,
                end: manifest.window.start + chrono::Duration::nanoseconds(total),
            },
            virtual_now: manifest.virtual_now + chrono::Duration::nanoseconds(total - period),
            tables: entries,
            ..manifest.clone()
        };
        let json = serde_json::to_vec_pretty(&manifest)?;
        datasets::write_atomically(&tmp.join(datasets::MANIFEST_FILE), &json)?;
        datasets::fsync_dir(&tmp)?;
        Ok(manifest)
    })();
    let out = match written {
        Ok(m) => m,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, &args.out)
        .with_context(|| format!("moving {} into place", tmp.display()))?;
    datasets::fsync_dir(&parent)?;
    let bytes: u64 = out.tables.values().map(|t| t.bytes).sum();
    eprintln!(
        "{copies} copies, {:.1} MiB in {:.0} s: {}",
        bytes as f64 / 1048576.0,
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(())
}

/// How copies are laid out.
struct Tiling<'a> {
    copies: u64,
    /// Tables to tile; all when empty.
    tile: &'a [Table],
    start: i64,
    period: i64,
    /// Per metrics row: how much its series grows per copy.
    growth: &'a [f64],
}

impl Tiling<'_> {
    /// Writes every copy of `rows` (one table, in its sort order) to `path` in sort order: each
    /// group of rows that differ only in time is followed by its later copies. Returns the rows
    /// written.
    fn write(
        &self,
        table: Table,
        rows: &[Row],
        path: &Path,
        bar: &ProgressBar,
    ) -> anyhow::Result<u64> {
        let mut file = TableFileWriter::create(path, table, WriteOptions::default())?;
        let mut batch: Vec<Row> = Vec::with_capacity(BATCH);
        let mut last: Option<Row> = None;
        let once = !self.tile.is_empty() && !self.tile.contains(&table);
        let copies = if once || matches!(table, Table::Objects | Table::MetricMetadata) {
            1
        } else {
            self.copies
        };
        let mut flush = |batch: &mut Vec<Row>, last: &mut Option<Row>| -> anyhow::Result<()> {
            if let Some(first) = batch.first() {
                if let Some(prev) = last.as_ref() {
                    anyhow::ensure!(cmp_rows(prev, first).is_le(), "{table}: rows out of order");
                }
                anyhow::ensure!(
                    batch.windows(2).all(|w| cmp_rows(&w[0], &w[1]).is_le()),
                    "{table}: rows out of order"
                );
                file.write(&encode(table, batch)?)?;
                bar.inc(batch.len() as u64);
                *last = batch.pop();
                batch.clear();
            }
            Ok(())
        };
        let mut group = 0;
        while group < rows.len() {
            let end = group
                + 1
                + rows[group + 1..]
                    .iter()
                    .take_while(|r| same_group(&rows[group], r))
                    .count();
            for copy in 0..copies {
                let shift = copy as i64 * self.period;
                let mut chunk: Vec<Row> = (group..end)
                    .filter(|&i| {
                        copy + 1 == copies
                            || rows[i]
                                .time_ns()
                                .is_none_or(|t| t < self.start + self.period)
                    })
                    .map(|i| {
                        let g = if table == Table::Metrics {
                            self.growth[i]
                        } else {
                            0.0
                        };
                        shifted(&rows[i], copy, shift, g)
                    })
                    .collect();
                // Fresh ids and names can change the order among rows of one time.
                chunk.sort_by(cmp_rows);
                batch.append(&mut chunk);
                if batch.len() >= BATCH {
                    flush(&mut batch, &mut last)?;
                }
            }
            group = end;
        }
        flush(&mut batch, &mut last)?;
        Ok(file.finish()?)
    }
}

const BATCH: usize = 64 * 1024;

/// Whether two rows of a table differ only in the columns that follow time in the sort key
/// (time itself and what breaks ties), so that copies of the group sort after one another.
fn same_group(a: &Row, b: &Row) -> bool {
    match (a, b) {
        (Row::Metric(a), Row::Metric(b)) => a.metric == b.metric && a.labels == b.labels,
        (Row::Span(a), Row::Span(b)) => a.service == b.service && a.name == b.name,
        (Row::Log(a), Row::Log(b)) => {
            (&a.namespace, &a.pod, &a.container, a.restart)
                == (&b.namespace, &b.pod, &b.container, b.restart)
        }
        (Row::Event(a), Row::Event(b)) => a.namespace == b.namespace,
        (Row::Alert(a), Row::Alert(b)) => a.alertname == b.alertname && a.labels == b.labels,
        // Taken once: every row is its own group.
        _ => false,
    }
}

fn ns(t: chrono::DateTime<chrono::Utc>) -> anyhow::Result<i64> {
    t.timestamp_nanos_opt().context("time out of range")
}

/// A series: metric name and labels.
type SeriesKey = (String, Vec<(String, String)>);

fn series_key(s: &MetricSample) -> SeriesKey {
    (
        s.metric.clone(),
        s.labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// How much each cumulative series (counter, histogram/summary count, sum and buckets) grows over
/// the window, so copy k adds k times that and the series continues instead of resetting.
fn counter_growth(metrics: &[Row], metadata: &[MetricMeta]) -> HashMap<SeriesKey, f64> {
    let kind: HashMap<&str, &str> = metadata
        .iter()
        .map(|m| (m.metric.as_str(), m.metric_type.as_str()))
        .collect();
    let cumulative = |name: &str| {
        if kind.get(name) == Some(&"counter") {
            return true;
        }
        ["_bucket", "_count", "_sum", "_total"]
            .iter()
            .any(|suffix| {
                name.strip_suffix(suffix).is_some_and(|family| {
                    matches!(
                        kind.get(family),
                        Some(&"counter") | Some(&"histogram") | Some(&"summary")
                    )
                })
            })
    };
    // Rows are in (metric, labels, time) order: first and last value of each series.
    let mut span: HashMap<SeriesKey, (f64, f64)> = HashMap::new();
    for row in metrics {
        if let Row::Metric(s) = row
            && cumulative(&s.metric)
        {
            span.entry(series_key(s))
                .and_modify(|(_, last)| *last = s.value)
                .or_insert((s.value, s.value));
        }
    }
    span.into_iter()
        .map(|(k, (first, last))| (k, (last - first).max(0.0)))
        .collect()
}

/// Copy `copy` of a row, `shift` ns later; a cumulative series' value raised `growth` per copy.
fn shifted(row: &Row, copy: u64, shift: i64, growth: f64) -> Row {
    let mut row = row.clone();
    match &mut row {
        Row::Object(_) | Row::MetricMeta(_) => {}
        Row::Event(e) => {
            e.time_ns += shift;
            e.first_time_ns = e.first_time_ns.map(|t| t + shift);
            e.uid = fresh_id(&e.uid, copy);
            // Event names are `<object>.<hex>`: a fresh hex part keeps them unique.
            if let Some((object, suffix)) = e.name.rsplit_once('.') {
                e.name = format!("{object}.{}", fresh_id(suffix, copy));
            }
        }
        Row::Log(l) => l.time_ns += shift,
        Row::Metric(s) => {
            s.time_ns += shift;
            s.value += copy as f64 * growth;
        }
        Row::Span(s) => {
            s.start_ns += shift;
            s.trace_id = fresh_id(&s.trace_id, copy);
            s.span_id = fresh_id(&s.span_id, copy);
            s.parent_span_id = s.parent_span_id.as_deref().map(|p| fresh_id(p, copy));
        }
        Row::Alert(a) => {
            a.time_ns += shift;
            a.active_at_ns = a.active_at_ns.map(|t| t + shift);
        }
        Row::Audit(a) => a.time_ns += shift,
    }
    row
}

/// The id of copy `copy`: every hex digit replaced from a digest of (copy, id), other characters
/// (UUID dashes) kept. Copy 0 keeps the original; the same id maps alike, so links survive.
fn fresh_id(id: &str, copy: u64) -> String {
    if copy == 0 {
        return id.to_string();
    }
    let mut digest = Vec::new();
    let mut round = 0u32;
    while digest.len() * 2 < id.len() {
        let mut h = Sha256::new();
        h.update(copy.to_le_bytes());
        h.update(round.to_le_bytes());
        h.update(id.as_bytes());
        digest.extend_from_slice(&h.finalize());
        round += 1;
    }
    let nibbles = hex::encode(digest);
    id.chars()
        .zip(nibbles.chars())
        .map(|(c, n)| if c.is_ascii_hexdigit() { n } else { c })
        .collect()
}
