//! P3: the same SRE questions answered by ITBench's own offline tools (sre_tools: Python and
//! pandas over TSV and JSON files) and by faultline's analysis (Rust and polars over Parquet), on
//! the same data, in one run: the median time per tool, the ratio, and each side's peak memory.
//!
//! 1. A dataset: `FAULTLINE_BENCH_DATASET=DIR`, or a fresh snapshot of `FAULTLINE_BENCH_PROBLEM`
//!    (default hotel-geo-target-port) over `FAULTLINE_BENCH_MINUTES` (default 30).
//! 2. The same data for the peer: `collector dataset export itbench` (ITBench's scenario layout).
//! 3. The peer: `benches/p3_peer.py` imports ITBench-SRE-Agent's `sre_tools` from
//!    `FAULTLINE_ITBENCH_PEER` (default `~/.cache/faultline/itbench-peer`, holding `sre_tools/`
//!    and a `venv/` with pandas, numpy, mcp and drain3; never part of faultline) and asks each
//!    question `FAULTLINE_BENCH_REPS` times (default 3).
//! 4. Ours: the analysis library asks the same questions (the file arguments are ignored: the
//!    data is the dataset's), as many times (and more, up to 0.1 s, for calls of microseconds),
//!    in this process, of one source (as an MCP session does: what the tools derive from the
//!    tables is kept between calls); then each once of a fresh source ("fresh": nothing derived
//!    yet, what a call costs after a live session's stores changed).
//!
//! Run: `CARGO_PROFILE_BENCH_DEBUG=0 cargo bench -p collector --bench p3_sre_tools`. Goal: at
//! least 10x faster per tool.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../tests/support/mod.rs"]
mod support;
use support::{collector, env_num, memory_mib, snapshot};

fn peer_dir() -> PathBuf {
    match std::env::var_os("FAULTLINE_ITBENCH_PEER") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(".cache/faultline/itbench-peer"),
    }
}

const SETUP: &str = "ITBench's sre_tools are not installed. Set them up outside the repository:
  git clone --depth 1 https://github.com/itbench-hub/ITBench-SRE-Agent /tmp/itbench-sre-agent
  mkdir -p ~/.cache/faultline/itbench-peer && cp -r /tmp/itbench-sre-agent/sre_tools ~/.cache/faultline/itbench-peer/
  python3 -m venv ~/.cache/faultline/itbench-peer/venv
  ~/.cache/faultline/itbench-peer/venv/bin/pip install pandas numpy mcp drain3
(or point FAULTLINE_ITBENCH_PEER at such a directory)";

/// The fault's onset from the evaluator's record beside a snapshot, else the window's middle.
fn pivot(dataset: &Path) -> String {
    let record = dataset.parent().map(|d| d.join("evaluation.json"));
    let onset = record
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| {
            v.pointer("/injections/0/onset")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
    onset.unwrap_or_else(|| {
        let m = datasets::Dataset::open(dataset)
            .expect("dataset")
            .manifest()
            .clone();
        let mid = m.window.start + (m.window.end - m.window.start) / 2;
        mid.to_rfc3339()
    })
}

/// A metric with a `pod` label the dataset has, for `metric_analysis`.
fn pod_metric(dataset: &Path) -> String {
    let ds = datasets::Dataset::open(dataset).expect("dataset");
    let metas = ds
        .read_rows(schemas::tables::Table::MetricMetadata)
        .expect("metadata");
    let names: Vec<String> = metas
        .into_iter()
        .filter_map(|r| match r {
            schemas::tables::Row::MetricMeta(m) => Some(m.metric),
            _ => None,
        })
        .collect();
    [
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
    ]
    .iter()
    .find(|n| names.iter().any(|m| m == *n))
    .map(|n| n.to_string())
    .unwrap_or_else(|| names.first().cloned().unwrap_or_default())
}

/// The benchmark's questions, with the peer's file arguments (ours ignore them).
fn questions(snap: &Path, dataset: &Path, tmp: &Path) -> Vec<Value> {
    let ns = datasets::Dataset::open(dataset)
        .expect("dataset")
        .manifest()
        .namespaces
        .first()
        .cloned()
        .unwrap_or_default();
    let p = |f: &str| snap.join(f).display().to_string();
    let pivot = pivot(dataset);
    let topology = tmp.join("topology.json").display().to_string();
    vec![
        json!({"name": "alert_summary", "tool": "alert_summary", "args": {"base_dir": p("alerts")}}),
        json!({"name": "alert_analysis", "tool": "alert_analysis", "args": {"base_dir": p("alerts"), "group_by": "alertname"}}),
        json!({"name": "event_analysis", "tool": "event_analysis", "args": {"events_file": p("k8s_events_raw.tsv"), "group_by": "reason"}}),
        json!({"name": "metric_analysis", "tool": "metric_analysis", "args": {"base_dir": p("metrics"), "object_pattern": "pod/*", "metric_names": [pod_metric(dataset)], "group_by": "deployment", "agg": "max"}}),
        json!({"name": "get_metric_anomalies", "tool": "get_metric_anomalies", "args": {"base_dir": p("metrics"), "k8_object_name": "pod/frontend", "raw_content": false}}),
        json!({"name": "get_trace_error_tree", "tool": "get_trace_error_tree", "args": {"trace_file": p("otel_traces_raw.tsv"), "pivot_time": pivot, "delta_time": "5m"}}),
        json!({"name": "build_topology", "tool": "build_topology", "args": {"arch_file": p("app.json"), "k8s_objects_file": p("k8s_objects_raw.tsv"), "output_file": topology}}),
        json!({"name": "topology_analysis", "tool": "topology_analysis", "args": {"topology_file": topology, "entity": "frontend"}}),
        json!({"name": "k8s_spec_change_analysis", "tool": "k8s_spec_change_analysis", "args": {"k8s_objects_file": p("k8s_objects_raw.tsv")}}),
        json!({"name": "get_context_contract", "tool": "get_context_contract", "args": {"k8_object": format!("{ns}/Service/frontend"), "snapshot_dir": snap.display().to_string(), "start_time": pivot}}),
    ]
}

/// Every question asked of one source, as an MCP session asks them: the median seconds of each,
/// and a note when ours failed. Each is asked `reps` times, and again until 0.1 s has gone by
/// (at most 1000 times), so that the median of a call of microseconds is not one preemption.
fn kept_times(source: &analysis::Source, qs: &[Value], reps: usize) -> Vec<(f64, String)> {
    qs.iter()
        .map(|q| {
            let mut times = Vec::new();
            let mut note = String::new();
            let started = Instant::now();
            while times.len() < reps
                || (started.elapsed() < Duration::from_millis(100) && times.len() < 1000)
            {
                let t = Instant::now();
                let answer = analysis::run(source, q["tool"].as_str().unwrap(), q["args"].clone());
                times.push(t.elapsed());
                if let Err(e) = answer {
                    note = format!("ours failed: {e}");
                }
            }
            (median(times).as_secs_f64(), note)
        })
        .collect()
}

/// Every question asked once of a fresh source (nothing derived from the tables yet): seconds.
fn fresh_times(dataset: &Path, qs: &[Value]) -> Vec<f64> {
    qs.iter()
        .map(|q| {
            let source = analysis::Source::dataset(dataset).expect("dataset");
            let t = Instant::now();
            let _ = analysis::run(&source, q["tool"].as_str().unwrap(), q["args"].clone());
            t.elapsed().as_secs_f64()
        })
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let peer = peer_dir();
    let python = peer.join("venv/bin/python");
    if !peer.join("sre_tools").is_dir() || !python.is_file() {
        eprintln!("{SETUP}");
        std::process::exit(1);
    }
    let reps = env_num("FAULTLINE_BENCH_REPS", 3).max(1) as usize;
    let tmp = tempfile::tempdir().expect("temp dir");
    let problem =
        std::env::var("FAULTLINE_BENCH_PROBLEM").unwrap_or_else(|_| "hotel-geo-target-port".into());
    let dataset = match std::env::var_os("FAULTLINE_BENCH_DATASET") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let minutes = env_num("FAULTLINE_BENCH_MINUTES", 30);
            let t = Instant::now();
            let d = snapshot(&problem, &format!("{minutes}m"), &tmp.path().join("snap"));
            println!(
                "snapshot: {problem}, {minutes} min, {:.1} s",
                t.elapsed().as_secs_f64()
            );
            d
        }
    };
    let snap = tmp.path().join("itbench");
    let t = Instant::now();
    let status = collector()
        .args(["dataset", "export", "itbench"])
        .arg(&dataset)
        .arg("--out")
        .arg(&snap)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("collector runs");
    assert!(status.success(), "export failed");
    println!(
        "export to ITBench's layout: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let qs = questions(&snap, &dataset, tmp.path());
    let qfile = tmp.path().join("questions.json");
    std::fs::write(&qfile, serde_json::to_string(&qs).unwrap()).unwrap();

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/p3_peer.py");
    let t = Instant::now();
    let out = Command::new(&python)
        .arg(&script)
        .args([
            "--tools",
            &peer.display().to_string(),
            "--questions",
            &qfile.display().to_string(),
            "--reps",
            &reps.to_string(),
        ])
        .output()
        .expect("the peer's python runs");
    assert!(
        out.status.success(),
        "peer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Value = serde_json::from_slice(&out.stdout).expect("peer JSON");
    println!("peer run: {:.1} s", t.elapsed().as_secs_f64());

    let source = analysis::Source::dataset(&dataset).expect("dataset");
    let (_, before) = memory_mib(std::process::id());
    println!();
    println!(
        "{:<26} {:>12} {:>12} {:>9} {:>10} {:>9}   notes",
        "tool", "ITBench ms", "faultline ms", "ratio", "fresh ms", "ratio"
    );
    let kept = kept_times(&source, &qs, reps);
    let fresh = fresh_times(&dataset, &qs);
    let (mut ratios, mut fresh_ratios) = (Vec::new(), Vec::new());
    for ((q, (ours, mut note)), fresh) in qs.iter().zip(kept).zip(fresh) {
        let name = q["name"].as_str().unwrap();
        let peer = &theirs["results"][name];
        let peer_s = peer["seconds"].as_f64().unwrap_or(f64::NAN);
        if peer["error"].as_bool() == Some(true) {
            note.push_str(" (ITBench's answer is an error on this data)");
        }
        let ratio = peer_s / ours;
        ratios.push(ratio);
        fresh_ratios.push(peer_s / fresh);
        println!(
            "{name:<26} {:>12.1} {:>12.3} {:>8.0}x {:>10.1} {:>8.1}x  {note}",
            peer_s * 1e3,
            ours * 1e3,
            ratio,
            fresh * 1e3,
            peer_s / fresh
        );
    }
    let (_, peak) = memory_mib(std::process::id());
    let geo = |r: &[f64]| (r.iter().map(|r| r.ln()).sum::<f64>() / r.len() as f64).exp();
    let min = |r: &[f64]| r.iter().copied().fold(f64::INFINITY, f64::min);
    println!();
    println!(
        "ratio: geometric mean {:.0}x, lowest {:.0}x (goal: >= 10x per tool); on a fresh source: geometric mean {:.1}x, lowest {:.1}x",
        geo(&ratios),
        min(&ratios),
        geo(&fresh_ratios),
        min(&fresh_ratios)
    );
    println!(
        "peak resident memory: ITBench {:.0} MiB (after imports {:.0} MiB); faultline {:.0} MiB (before the tools {:.0} MiB)",
        theirs["peak_rss_mib"].as_f64().unwrap_or(f64::NAN),
        theirs["baseline_rss_mib"].as_f64().unwrap_or(f64::NAN),
        peak,
        before
    );
}
