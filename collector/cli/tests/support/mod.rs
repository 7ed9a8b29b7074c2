//! What the collector's integration tests and benches share: running the real binary, taking a
//! simulator snapshot, and a `collector replay` that stops when dropped.
//!
//! Included by several test and bench targets, each using a part of it.
#![allow(dead_code)]

pub mod load;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test: the one cargo built, or `FAULTLINE_COLLECTOR_BIN` (a bench comparing
/// builds).
pub fn collector() -> Command {
    match std::env::var_os("FAULTLINE_COLLECTOR_BIN") {
        Some(bin) => Command::new(bin),
        None => Command::new(env!("CARGO_BIN_EXE_collector")),
    }
}

/// `collector snapshot --problem PROBLEM --duration DURATION --out OUT`; the dataset directory.
pub fn snapshot(problem: &str, duration: &str, out: &Path) -> PathBuf {
    let status = collector()
        .args(["snapshot", "--problem", problem, "--duration", duration])
        .args(["--json", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .status()
        .expect("collector snapshot runs");
    assert!(
        status.success(),
        "collector snapshot --problem {problem} failed"
    );
    out.join("dataset")
}

/// `collector capture` over a dataset's namespaces and window, through the Kubernetes API a
/// kubeconfig names; the caller adds the other sources and runs it.
pub fn capture_of(manifest: &schemas::Manifest, kubeconfig: &Path) -> Command {
    let mut cmd = collector();
    cmd.arg("capture")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespaces", &manifest.namespaces.join(",")])
        .args(["--since", &manifest.window.start.to_rfc3339()])
        .args(["--until", &manifest.window.end.to_rfc3339()]);
    cmd
}

/// Runs a capture to the end and returns its stdout; its stderr when it fails.
pub fn run_capture(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("collector capture runs");
    assert!(
        out.status.success(),
        "capture failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `collector replay DATASET --json EXTRA..`, stopped when dropped.
pub struct Replay {
    pub child: Child,
    /// The endpoints line (`kubernetes`, `prometheus`, `jaeger`, `loki`).
    pub endpoints: Value,
    /// From spawning to the endpoints line: every table loaded, every listener up.
    pub ready_after: Duration,
}

impl Replay {
    pub fn start(dataset: &Path, extra: &[&std::ffi::OsStr]) -> Replay {
        let started = Instant::now();
        let mut child = collector()
            .arg("replay")
            .arg(dataset)
            .arg("--json")
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("collector replay starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("endpoints line");
        let ready_after = started.elapsed();
        let endpoints = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("endpoints JSON expected, got {line:?}: {e}"));
        Replay {
            child,
            endpoints,
            ready_after,
        }
    }

    /// A frozen replay (times as recorded, so that what is captured from it matches the
    /// dataset) that writes a kubeconfig for its Kubernetes API.
    pub fn with_kubeconfig(dataset: &Path, kubeconfig: &Path) -> Replay {
        Replay::start(
            dataset,
            &[
                "--frozen".as_ref(),
                "--write-kubeconfig".as_ref(),
                kubeconfig.as_os_str(),
            ],
        )
    }

    pub fn url(&self, api: &str) -> String {
        self.endpoints[api]
            .as_str()
            .unwrap_or_else(|| panic!("no {api} endpoint in {}", self.endpoints))
            .to_string()
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `collector env up --problem PROBLEM --json --write-kubeconfig DIR/kubeconfig EXTRA..`,
/// stopped when dropped.
pub struct LiveEnv {
    pub child: Child,
    pub endpoints: Value,
    pub kubeconfig: PathBuf,
    /// From spawning to the ready line.
    pub ready_after: Duration,
}

impl LiveEnv {
    pub fn start(problem: &str, dir: &Path, extra: &[&str]) -> LiveEnv {
        let started = Instant::now();
        let kubeconfig = dir.join("kubeconfig");
        let mut child = collector()
            .args(["env", "up", "--problem", problem, "--json"])
            .arg("--write-kubeconfig")
            .arg(&kubeconfig)
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("collector env up starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("ready line");
        let ready_after = started.elapsed();
        let endpoints = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("ready JSON expected, got {line:?}: {e}"));
        LiveEnv {
            child,
            endpoints,
            kubeconfig,
            ready_after,
        }
    }

    pub fn url(&self, api: &str) -> String {
        self.endpoints[api]
            .as_str()
            .unwrap_or_else(|| panic!("no {api} endpoint in {}", self.endpoints))
            .to_string()
    }
}

impl Drop for LiveEnv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time (user + system) a process has used, from /proc.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) are space-separated; utime and stime are
    // the 14th and 15th fields, counted in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// A numeric setting of a bench from the environment.
pub fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The dataset a bench runs on: `FAULTLINE_BENCH_DATASET`, or a fresh snapshot of `problem` over
/// `FAULTLINE_BENCH_MINUTES` (default 60).
pub fn bench_dataset(problem: &str, tmp: &Path) -> PathBuf {
    if let Ok(dir) = std::env::var("FAULTLINE_BENCH_DATASET") {
        return PathBuf::from(dir);
    }
    let minutes = env_num("FAULTLINE_BENCH_MINUTES", 60);
    let started = Instant::now();
    let dataset = snapshot(problem, &format!("{minutes}m"), &tmp.join("snap"));
    println!(
        "snapshot: {problem}, {minutes} min, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    dataset
}

/// Bytes of the files directly in `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// VmRSS and VmHWM of a process, in MiB.
pub fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The `q` quantile (0..=1) of sorted durations; zero for none.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}
