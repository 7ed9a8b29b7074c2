//! Benchmark P1: faultline's Parquet writer against pyarrow on the same Arrow table.
//!
//! Builds one table of metric samples (5 million rows by default, cAdvisor-like label maps, sorted by
//! series then time as datasets are) into an Arrow IPC file, then in the same run times faultline's
//! table writer and pyarrow's `pq.write_table` writing it to Parquet with ZSTD at the same level and
//! row-group size, both ending with an fsync. Prints both throughputs, the output sizes and the ratios.
//!
//! Run: `cargo bench -p datasets --bench p1_parquet_write`
//! (env: P1_ROWS, P1_SERIES, P1_REPEAT; needs python3 with pyarrow).

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow_array::RecordBatch;
use datasets::encode::{cmp_rows, encode};
use datasets::synth::metric_samples;
use datasets::{TableFileWriter, WriteOptions};
use schemas::tables::{Row, Table};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The samples in dataset order (series, then time), encoded batch by batch to keep memory low.
fn sorted_batches(rows: usize, series: usize) -> Vec<RecordBatch> {
    let mut first_scrape: Vec<Row> = metric_samples(series, series).map(Row::Metric).collect();
    first_scrape.sort_by(cmp_rows);
    let scrapes = rows / series;
    let mut batches = Vec::new();
    let mut chunk = Vec::with_capacity(65_536);
    for row in &first_scrape {
        let Row::Metric(s) = row else { unreachable!() };
        for scrape in 0..scrapes as i64 {
            let mut sample = s.clone();
            sample.time_ns += scrape * 15_000_000_000;
            sample.value += scrape as f64 * 0.25;
            chunk.push(Row::Metric(sample));
            if chunk.len() == 65_536 {
                batches.push(encode(Table::Metrics, &chunk).unwrap());
                chunk.clear();
            }
        }
    }
    if !chunk.is_empty() {
        batches.push(encode(Table::Metrics, &chunk).unwrap());
    }
    batches
}

fn faultline_write(batches: &[RecordBatch], out: &Path, opts: WriteOptions) -> f64 {
    let started = Instant::now();
    let mut w = TableFileWriter::create(out, Table::Metrics, opts).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
    started.elapsed().as_secs_f64()
}

const PYARROW: &str = r#"
import json, os, sys, time
import pyarrow as pa, pyarrow.parquet as pq
src, out, level, rg, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
table = pa.ipc.open_file(src).read_all()
times = []
for _ in range(repeat):
    t0 = time.perf_counter()
    pq.write_table(table, out, compression="zstd", compression_level=level, row_group_size=rg)
    fd = os.open(out, os.O_RDONLY); os.fsync(fd); os.close(fd)
    times.append(time.perf_counter() - t0)
print(json.dumps({"times": times, "bytes": os.path.getsize(out), "version": pa.__version__}))
"#;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rows = env_usize("P1_ROWS", 5_000_000);
    let series = env_usize("P1_SERIES", 4_000);
    let repeat = env_usize("P1_REPEAT", 3);
    let opts = WriteOptions::default();
    let tmp = tempfile::tempdir().unwrap();
    let ipc = tmp.path().join("metrics.arrow");

    eprintln!("building {rows} metric samples over {series} series ...");
    let batches = sorted_batches(rows, series);
    let total_rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let arrow_bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
    {
        let mut w = FileWriter::try_new(
            BufWriter::new(File::create(&ipc).unwrap()),
            &Table::Metrics.schema(),
        )
        .unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.finish().unwrap();
    }
    drop(batches);
    // Both writers start from the same IPC file, read into memory before the clock starts.
    let batches: Vec<RecordBatch> = FileReader::try_new(File::open(&ipc).unwrap(), None)
        .unwrap()
        .map(Result::unwrap)
        .collect();

    let ours_path = tmp.path().join("faultline.parquet");
    let ours: Vec<f64> = (0..repeat)
        .map(|_| faultline_write(&batches, &ours_path, opts))
        .collect();
    let ours_bytes = std::fs::metadata(&ours_path).unwrap().len();
    drop(batches);

    let theirs_path = tmp.path().join("pyarrow.parquet");
    let output = Command::new("python3")
        .arg("-c")
        .arg(PYARROW)
        .arg(&ipc)
        .arg(&theirs_path)
        .arg(opts.zstd_level.to_string())
        .arg(opts.row_group_rows.to_string())
        .arg(repeat.to_string())
        .output()
        .expect("python3 runs");
    if !output.status.success() {
        eprintln!(
            "pyarrow run failed (pip install pyarrow): {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::process::exit(1);
    }
    let theirs: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let theirs_times: Vec<f64> = theirs["times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    let theirs_bytes = theirs["bytes"].as_u64().unwrap();

    let (a, b) = (median(ours), median(theirs_times));
    let mib = arrow_bytes as f64 / (1 << 20) as f64;
    println!(
        "P1 Parquet write: {total_rows} metric samples, {series} series, {mib:.0} MiB in Arrow"
    );
    println!(
        "  settings: ZSTD level {}, {} rows per row group, {} encoder threads (faultline); median of {repeat}",
        opts.zstd_level, opts.row_group_rows, opts.threads
    );
    println!(
        "  faultline        {a:>7.3} s  {:>10.0} rows/s  {:>7.1} MiB/s  output {:>10} bytes",
        total_rows as f64 / a,
        mib / a,
        ours_bytes
    );
    println!(
        "  pyarrow {:<8} {b:>7.3} s  {:>10.0} rows/s  {:>7.1} MiB/s  output {:>10} bytes",
        theirs["version"].as_str().unwrap_or("?"),
        total_rows as f64 / b,
        mib / b,
        theirs_bytes
    );
    println!(
        "  throughput ratio faultline/pyarrow: {:.2}x   size ratio faultline/pyarrow: {:.3}",
        b / a,
        ours_bytes as f64 / theirs_bytes as f64
    );
}
