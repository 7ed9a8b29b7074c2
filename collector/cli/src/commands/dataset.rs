//! `collector dataset inspect | validate | export`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Subcommand, ValueEnum};
use datasets::Dataset;
use datasets::export::{Format, export};
use schemas::tables::Table;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  collector dataset inspect out/dataset\n  collector dataset validate out/dataset\n  collector dataset export out/dataset --table events"
)]
pub struct Args {
    #[command(subcommand)]
    pub command: DatasetCommand,
}

#[derive(Debug, Subcommand)]
pub enum DatasetCommand {
    /// Show a dataset's tables, rows, sizes and time ranges.
    #[command(
        after_help = "Example:\n  collector dataset inspect out/dataset\n  collector dataset inspect out/dataset --json | jq .tables"
    )]
    Inspect {
        /// The dataset directory (the one holding manifest.json).
        dir: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Check a dataset: manifest, checksums, schemas, row counts, order, time window, references.
    /// Exits 1 when anything is wrong.
    #[command(after_help = "Example:\n  collector dataset validate out/dataset && echo ok")]
    Validate {
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Write tables as JSON Lines or CSV.
    #[command(
        after_help = "Examples:\n  collector dataset export out/dataset --table logs | head\n  collector dataset export out/dataset --format csv --out out/csv   # every table, one file each"
    )]
    Export {
        dir: PathBuf,
        /// Tables to export (repeat the flag); all tables when omitted.
        #[arg(long = "table", value_parser = parse_table)]
        tables: Vec<Table>,
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
        /// Output: a file (or `-` for stdout) for one table, a directory for several.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    Jsonl,
    Csv,
}

fn parse_table(s: &str) -> Result<Table, String> {
    s.parse()
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        DatasetCommand::Inspect { dir, json } => inspect(&dir, json),
        DatasetCommand::Validate { dir, json } => validate(&dir, json),
        DatasetCommand::Export {
            dir,
            tables,
            format,
            out,
        } => export_tables(&dir, tables, format, out),
    }
}

fn inspect(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let ds = Dataset::open_verified(dir)?;
    let m = ds.manifest();
    let mut tables = Vec::new();
    for (table, entry) in &m.tables {
        let range = ds.time_range(*table)?;
        tables.push((*table, entry, range));
    }
    if json {
        let tables: serde_json::Map<String, serde_json::Value> = tables
            .iter()
            .map(|(t, e, r)| {
                let mut v = serde_json::to_value(e).expect("entry serialises");
                if let Some((lo, hi)) = r {
                    v["time_min"] = time(*lo).to_rfc3339().into();
                    v["time_max"] = time(*hi).to_rfc3339().into();
                }
                (t.name().to_string(), v)
            })
            .collect();
        let out = serde_json::json!({
            "dataset_id": m.dataset_id,
            "schema_version": m.schema_version,
            "environment": m.environment,
            "application": m.application,
            "namespaces": m.namespaces,
            "window": m.window,
            "virtual_now": m.virtual_now,
            "generator": m.generator,
            "tables": tables,
            "total_rows": tables_total(&m.tables, |e| e.rows),
            "total_bytes": tables_total(&m.tables, |e| e.bytes),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "dataset     {}  (format v{}, {} by {} {})",
        m.dataset_id, m.schema_version, m.environment, m.generator.name, m.generator.version
    );
    if let Some(app) = &m.application {
        println!("application {app}");
    }
    println!("namespaces  {}", m.namespaces.join(", "));
    println!(
        "window      {} .. {}  ({})",
        m.window.start.to_rfc3339(),
        m.window.end.to_rfc3339(),
        human_duration((m.window.end - m.window.start).num_seconds())
    );
    println!("virtual now {}", m.virtual_now.to_rfc3339());
    println!();
    println!("{:<16} {:>12} {:>11}  time range", "table", "rows", "size");
    for (table, entry, range) in &tables {
        let range = range.map_or_else(
            || "-".to_string(),
            |(lo, hi)| format!("{} .. {}", short(time(lo)), short(time(hi))),
        );
        println!(
            "{:<16} {:>12} {:>11}  {range}",
            table.name(),
            entry.rows,
            human_bytes(entry.bytes)
        );
    }
    println!(
        "{:<16} {:>12} {:>11}",
        "total",
        tables_total(&m.tables, |e| e.rows),
        human_bytes(tables_total(&m.tables, |e| e.bytes))
    );
    Ok(ExitCode::SUCCESS)
}

fn tables_total(
    tables: &std::collections::BTreeMap<Table, schemas::TableEntry>,
    f: impl Fn(&schemas::TableEntry) -> u64,
) -> u64 {
    tables.values().map(f).sum()
}

fn time(ns: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(ns)
}

fn short(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

fn human_duration(secs: i64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn validate(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let report = datasets::validate(dir);
    if json {
        let mut v = serde_json::to_value(&report)?;
        v["valid"] = report.is_valid().into();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if report.is_valid() {
        println!(
            "valid: {} ({} tables, {} rows checked)",
            dir.display(),
            report.tables_checked,
            report.rows_checked
        );
    } else {
        eprintln!("invalid: {}", dir.display());
        for f in &report.findings {
            eprintln!("  {}: {f}", dir.display());
        }
        if report.findings_omitted > 0 {
            eprintln!(
                "  ... and {} more findings of the same kinds",
                report.findings_omitted
            );
        }
    }
    Ok(if report.is_valid() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::EXIT_FAILURE)
    })
}

fn export_tables(
    dir: &Path,
    mut tables: Vec<Table>,
    format: ExportFormat,
    out: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let ds = Dataset::open_verified(dir)?;
    if tables.is_empty() {
        tables = ds.manifest().tables.keys().copied().collect();
    }
    let (fmt, ext) = match format {
        ExportFormat::Jsonl => (Format::JsonLines, "jsonl"),
        ExportFormat::Csv => (Format::Csv, "csv"),
    };
    match (tables.as_slice(), out) {
        ([table], None) => {
            export(&ds, *table, fmt, std::io::stdout().lock())?;
        }
        ([table], Some(path)) if path.as_os_str() == "-" => {
            export(&ds, *table, fmt, std::io::stdout().lock())?;
        }
        ([table], Some(path)) if !path.is_dir() => {
            let rows = export_file(&ds, *table, fmt, &path)?;
            eprintln!("wrote {rows} rows to {}", path.display());
        }
        (_, Some(out_dir)) if out_dir.as_os_str() == "-" => {
            bail!(
                "--out -: standard output takes one table; pick one with --table, or give a \
                 directory for several"
            )
        }
        (_, Some(out_dir)) => export_dir(&ds, &tables, fmt, ext, &out_dir)?,
        (_, None) => {
            bail!("several tables need --out DIR (one file per table); or pick one with --table")
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Exports several tables into `out_dir`, one file each. They are written in a hidden sibling
/// directory first: a new `out_dir` appears whole (one rename); into an existing one each file
/// is moved once every file is complete. A failed or killed export leaves no partial set.
fn export_dir(
    ds: &Dataset,
    tables: &[Table],
    fmt: Format,
    ext: &str,
    out_dir: &Path,
) -> anyhow::Result<()> {
    let name = out_dir
        .file_name()
        .with_context(|| format!("{} is not a directory name", out_dir.display()))?
        .to_string_lossy()
        .into_owned();
    let parent = match out_dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}.partial-"))
        .tempdir_in(parent)
        .with_context(|| format!("cannot create a directory in {}", parent.display()))?;
    let mut written = Vec::new();
    for table in tables {
        let file = format!("{}.{ext}", table.name());
        let rows = export_file(ds, *table, fmt, &staging.path().join(&file))?;
        written.push((file, rows));
    }
    if out_dir.exists() {
        for (file, _) in &written {
            std::fs::rename(staging.path().join(file), out_dir.join(file))
                .with_context(|| format!("cannot move {file} into {}", out_dir.display()))?;
        }
    } else {
        let kept = staging.keep();
        if let Err(e) = std::fs::rename(&kept, out_dir) {
            let _ = std::fs::remove_dir_all(&kept);
            return Err(e)
                .with_context(|| format!("cannot move the export to {}", out_dir.display()));
        }
    }
    for (file, rows) in written {
        eprintln!("wrote {rows} rows to {}", out_dir.join(file).display());
    }
    Ok(())
}

/// Exports into a temporary sibling and renames it into place when complete.
fn export_file(ds: &Dataset, table: Table, fmt: Format, path: &Path) -> anyhow::Result<u64> {
    let name = path
        .file_name()
        .with_context(|| format!("{} is not a file name", path.display()))?;
    let tmp = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    let file =
        std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut writer = std::io::BufWriter::new(file);
    let result = export(ds, table, fmt, &mut writer).and_then(|rows| {
        writer
            .flush()
            .map_err(|e| datasets::DatasetError::io(&tmp, e))?;
        Ok(rows)
    });
    match result {
        Ok(rows) => {
            std::fs::rename(&tmp, path)
                .with_context(|| format!("cannot move {} into place", path.display()))?;
            Ok(rows)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e.into())
        }
    }
}
