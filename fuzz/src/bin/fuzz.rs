//! `fuzz`: long fuzzing runs (a million inputs per target) with crash isolation.
//!
//! Each target's inputs run in child processes, a chunk at a time: a stack overflow or an abort
//! kills only the child, and the chunk is then bisected in fresh children down to the one input
//! that did it, which is written under `fuzz/findings/`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use fuzz::engine::{self, Budget, Report};
use fuzz::targets;

#[derive(Parser)]
#[command(
    about = "Fuzz faultline's parsers and servers (stable Rust, in process)",
    after_help = "Examples:\n  cargo run -p fuzz --release -- run --inputs 1000000\n  cargo run -p fuzz --release -- run promql logql --inputs 100000 --seed 7\n  cargo run -p fuzz -- replay promql --seed 7 --index 4242\n  cargo run -p fuzz -- list"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run targets (all when none is named), each in chunks of child processes.
    Run {
        targets: Vec<String>,
        #[arg(long, default_value_t = 1_000_000)]
        inputs: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Inputs per child process.
        #[arg(long, default_value_t = 50_000)]
        chunk: u64,
        /// Print one JSON object per target instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run one chunk in this process and print its report as JSON (what `run` starts).
    #[command(hide = true)]
    Chunk {
        target: String,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        first: u64,
        #[arg(long)]
        count: u64,
        #[arg(long)]
        with_corpus: bool,
    },
    /// Re-make one generated input and run it here, panics shown; `--write FILE` keeps it.
    Replay {
        target: String,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        index: u64,
        #[arg(long)]
        write: Option<PathBuf>,
    },
    /// The targets and their corpus sizes.
    List,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn target(name: &str) -> anyhow::Result<Box<dyn targets::Target>> {
    targets::by_name(name).ok_or_else(|| {
        let names: Vec<_> = targets::all().iter().map(|t| t.name()).collect();
        anyhow::anyhow!("no target `{name}` (have: {})", names.join(", "))
    })
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Cmd::List => {
            for t in targets::all() {
                println!(
                    "{:<16} {} corpus files",
                    t.name(),
                    engine::load_corpus(t.name()).len()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Chunk {
            target: name,
            seed,
            first,
            count,
            with_corpus,
        } => {
            let t = target(&name)?;
            let r = engine::run_target(
                &*t,
                Budget {
                    inputs: count,
                    time: Duration::MAX,
                    seed,
                    first,
                    with_corpus,
                },
            );
            println!("{}", chunk_json(&r));
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Replay {
            target: name,
            seed,
            index,
            write,
        } => {
            let t = target(&name)?;
            let corpus: Vec<Vec<u8>> = engine::load_corpus(&name)
                .into_iter()
                .map(|(_, b)| b)
                .collect();
            let input = engine::input(&*t, &corpus, seed, index);
            if let Some(path) = write {
                std::fs::write(&path, &input)?;
            }
            eprintln!("input {index}: {} bytes", input.len());
            let t0 = Instant::now();
            t.run(&input);
            eprintln!("returned after {:?}", t0.elapsed());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run {
            targets: names,
            inputs,
            seed,
            chunk,
            json,
        } => {
            let selected: Vec<String> = if names.is_empty() {
                targets::all()
                    .iter()
                    .map(|t| t.name().to_string())
                    .collect()
            } else {
                names
            };
            let mut failed = false;
            if !json {
                println!(
                    "{:<16} {:>9} {:>7} {:>7} {:>6} {:>11} {:>9}",
                    "target", "inputs", "corpus", "panics", "hangs", "slowest", "inputs/s"
                );
            }
            for name in selected {
                target(&name)?;
                let s = run_chunks(&name, inputs, seed, chunk.max(1))?;
                failed |= s.panics + s.hangs > 0;
                if json {
                    println!(
                        "{}",
                        serde_json::json!({"target": name, "inputs": s.inputs, "corpus": s.corpus,
                            "panics": s.panics, "hangs": s.hangs, "slowest_ms": s.slowest_ms,
                            "seconds": s.elapsed.as_secs_f64(), "seed": seed})
                    );
                } else {
                    println!(
                        "{:<16} {:>9} {:>7} {:>7} {:>6} {:>9}ms {:>9.0}",
                        name,
                        s.inputs,
                        s.corpus,
                        s.panics,
                        s.hangs,
                        s.slowest_ms,
                        s.inputs as f64 / s.elapsed.as_secs_f64().max(1e-9)
                    );
                }
                std::io::stdout().flush()?;
            }
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

fn chunk_json(r: &Report) -> serde_json::Value {
    serde_json::json!({
        "inputs": r.inputs,
        "corpus": r.corpus,
        "slowest_ms": r.slowest.as_millis() as u64,
        "findings": r.findings.iter().map(|f| serde_json::json!({
            "index": f.index, "what": f.what, "input": String::from_utf8_lossy(&f.input),
        })).collect::<Vec<_>>(),
    })
}

#[derive(Default)]
struct Summary {
    inputs: u64,
    corpus: u64,
    panics: u64,
    hangs: u64,
    slowest_ms: u64,
    elapsed: Duration,
}

/// Runs `[first, first + count)` in a child; `Err` with the range when the child died.
fn child(
    name: &str,
    seed: u64,
    first: u64,
    count: u64,
    with_corpus: bool,
) -> anyhow::Result<Option<serde_json::Value>> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["chunk", name, "--seed", &seed.to_string()])
        .args(["--first", &first.to_string(), "--count", &count.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if with_corpus {
        cmd.arg("--with-corpus");
    }
    let out = cmd.output()?;
    if !out.status.success() {
        return Ok(None);
    }
    Ok(Some(serde_json::from_slice(&out.stdout)?))
}

fn run_chunks(name: &str, inputs: u64, seed: u64, chunk: u64) -> anyhow::Result<Summary> {
    let t0 = Instant::now();
    let mut s = Summary::default();
    let mut first = 0;
    while first < inputs {
        let count = chunk.min(inputs - first);
        match child(name, seed, first, count, first == 0)? {
            Some(r) => {
                s.inputs += r["inputs"].as_u64().unwrap_or(0);
                s.corpus = s.corpus.max(r["corpus"].as_u64().unwrap_or(0));
                s.slowest_ms = s.slowest_ms.max(r["slowest_ms"].as_u64().unwrap_or(0));
                for f in r["findings"].as_array().into_iter().flatten() {
                    let what = f["what"].as_str().unwrap_or("");
                    if what.starts_with("panic") {
                        s.panics += 1;
                    } else {
                        s.hangs += 1;
                    }
                    let index = f["index"].as_u64();
                    eprintln!("{name}: input {index:?}: {what}");
                    if let Some(i) = index {
                        save_finding(name, seed, i)?;
                    }
                }
            }
            None => {
                // The child died (stack overflow, abort, hang): find the input that did it.
                let culprit = bisect(name, seed, first, count)?;
                eprintln!("{name}: input {culprit} kills the process");
                save_finding(name, seed, culprit)?;
                s.panics += 1;
                // The rest of the chunk still runs.
                s.inputs += culprit - first + 1;
                first = culprit + 1;
                continue;
            }
        }
        first += count;
    }
    s.elapsed = t0.elapsed();
    Ok(s)
}

/// The first input of `[first, first + count)` that kills a child running it.
fn bisect(name: &str, seed: u64, mut first: u64, mut count: u64) -> anyhow::Result<u64> {
    while count > 1 {
        let half = count / 2;
        if child(name, seed, first, half, false)?.is_none() {
            count = half;
        } else {
            first += half;
            count -= half;
        }
    }
    Ok(first)
}

/// Writes a failing input to `fuzz/findings/TARGET-seedS-I`, to be fixed and then moved into
/// the target's corpus as a regression.
fn save_finding(name: &str, seed: u64, index: u64) -> anyhow::Result<()> {
    let t = target(name)?;
    let corpus: Vec<Vec<u8>> = engine::load_corpus(name)
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("findings");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}-seed{seed}-{index}"));
    std::fs::write(&path, engine::input(&*t, &corpus, seed, index))?;
    eprintln!("  written to {}", path.display());
    Ok(())
}
