//! `collector dataset inspect | validate | export | import`: a dataset's tables, its checks, its
//! rows as JSON Lines or CSV, and ITBench snapshots in and out.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Subcommand, ValueEnum};
use datasets::Dataset;
use datasets::export::{self, Format, export};
use schemas::tables::Table;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  collector dataset inspect out/dataset\n  collector dataset validate out/dataset\n  collector dataset export out/dataset --table events\n  collector dataset import itbench Scenario-2 --out out/scenario-2\n  collector dataset export itbench out/geo/dataset --out out/geo-itbench"
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
    /// Write tables as JSON Lines or CSV, or the whole dataset as an ITBench snapshot.
    Export(ExportArgs),
    /// Make a dataset from another benchmark's data (an ITBench snapshot).
    #[command(
        subcommand,
        after_help = "Example:\n  collector dataset import itbench Scenario-2 --out out/scenario-2"
    )]
    Import(ImportFrom),
}

#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Examples:\n  collector dataset export out/dataset --table logs | head\n  collector dataset export out/dataset --format csv --out out/csv   # every table, one file each\n  collector dataset export itbench out/dataset --out out/itbench      # ITBench's scenario layout"
)]
pub struct ExportArgs {
    #[command(subcommand)]
    pub to: Option<ExportTo>,
    /// The dataset directory (the one holding manifest.json).
    #[arg(required = true)]
    pub dir: Option<PathBuf>,
    /// Tables to export (repeat the flag); all tables when omitted.
    #[arg(long = "table", value_parser = parse_table)]
    pub tables: Vec<Table>,
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
    pub format: ExportFormat,
    /// Output: a file (or `-` for stdout) for one table, a directory for several.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ExportTo {
    /// Write the dataset as an ITBench scenario: alerts/, k8s_events_raw.tsv, k8s_objects_raw.tsv,
    /// otel_logs_raw.tsv, otel_traces_raw.tsv, metrics/, app.json (ITBench's tools and agents run on it).
    #[command(
        after_help = "Example:\n  collector dataset export itbench out/geo/dataset --out out/geo-itbench\n  collector dataset export itbench out/geo/dataset --out out/geo-itbench --include-ground-truth   # for ITBench's judge"
    )]
    Itbench {
        /// The dataset directory (the one holding manifest.json).
        dataset: PathBuf,
        /// The scenario directory to write (must not exist).
        #[arg(long)]
        out: PathBuf,
        /// Also write the ground truth beside the dataset as ground_truth.yaml, where ITBench
        /// keeps it (agents given the directory can read it).
        #[arg(long)]
        include_ground_truth: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ImportFrom {
    /// Import an ITBench scenario (ITBench-Lite snapshot): alerts JSON in both shapes, Kubernetes
    /// objects and events, metrics, OTel traces and logs TSV, and ground_truth.yaml. Writes
    /// OUT/dataset, OUT/ground_truth.json beside it and OUT/import_report.json (what was left out).
    #[command(
        after_help = "Example:\n  collector dataset import itbench snapshots/sre/v0.2-B96DF826-4BB2-4B62-97AB-6D84254C53D7/Scenario-2 --out out/scenario-2\n  collector dataset validate out/scenario-2/dataset\n  collector replay out/scenario-2/dataset --write-kubeconfig /tmp/kc"
    )]
    Itbench {
        /// The scenario directory.
        dir: PathBuf,
        /// The output directory (must not exist).
        #[arg(long)]
        out: PathBuf,
        /// The problem id the ground truth is kept under (default: its id, else the scenario
        /// number in the directory name).
        #[arg(long)]
        problem_id: Option<String>,
        /// The application the manifest names (default: astronomy-shop for ITBench's otel-demo).
        #[arg(long)]
        application: Option<String>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
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
        DatasetCommand::Export(ExportArgs {
            to:
                Some(ExportTo::Itbench {
                    dataset,
                    out,
                    include_ground_truth,
                    json,
                }),
            ..
        }) => export_itbench(&dataset, &out, include_ground_truth, json),
        DatasetCommand::Export(ExportArgs {
            dir,
            tables,
            format,
            out,
            ..
        }) => {
            let dir = dir.context("a dataset directory is needed")?;
            export_tables(&dir, tables, format, out)
        }
        DatasetCommand::Import(ImportFrom::Itbench {
            dir,
            out,
            problem_id,
            application,
            json,
        }) => import_itbench(&dir, &out, problem_id, application, json),
    }
}

/// A spinner that names the file being worked on.
fn spinner(what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {prefix} {wide_msg} [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_prefix(what.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

fn print_report(report: &itbench::Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    println!("{} -> {}", report.source, report.destination);
    for (table, rows) in &report.rows {
        println!("  {table:<16} {rows:>10} rows");
    }
    if let Some(id) = &report.ground_truth {
        println!("  ground truth     problem id {id}");
    }
    if !report.not_mapped.is_empty() {
        println!("not mapped:");
        for m in &report.not_mapped {
            println!("  {:>8} x {} (first: {})", m.count, m.what, m.first);
        }
    }
    Ok(())
}

fn import_itbench(
    dir: &Path,
    out: &Path,
    problem_id: Option<String>,
    application: Option<String>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let bar = spinner("importing");
    let opts = itbench::ImportOptions {
        problem_id,
        application,
    };
    let report = itbench::import(dir, out, &opts, &mut |path| {
        bar.set_message(path.display().to_string());
    });
    bar.finish_and_clear();
    print_report(&report?, json)?;
    Ok(ExitCode::SUCCESS)
}

fn export_itbench(
    dataset: &Path,
    out: &Path,
    include_ground_truth: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let bar = spinner("exporting");
    let opts = itbench::ExportOptions {
        include_ground_truth,
    };
    let report = itbench::export(dataset, out, &opts, &mut |what| {
        bar.set_message(what.to_string())
    });
    bar.finish_and_clear();
    print_report(&report?, json)?;
    Ok(ExitCode::SUCCESS)
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
            let rows = export::to_file(&ds, *table, fmt, &path)?;
            eprintln!("wrote {rows} rows to {}", path.display());
        }
        (_, Some(out_dir)) if out_dir.as_os_str() == "-" => {
            bail!(
                "--out -: standard output takes one table; pick one with --table, or give a \
                 directory for several"
            )
        }
        (_, Some(out_dir)) => {
            for (file, rows) in export::to_dir(&ds, &tables, fmt, ext, &out_dir)? {
                eprintln!("wrote {rows} rows to {}", file.display());
            }
        }
        (_, None) => {
            bail!("several tables need --out DIR (one file per table); or pick one with --table")
        }
    }
    Ok(ExitCode::SUCCESS)
}
