//! Benchmark: faultline as an RL and evaluation environment, beside the published figures of the
//! peer (SREGym's Harbor adapter: one container with a 4-node k3s cluster per task, 4 CPU / 8 GiB
//! at least, about 7 minutes from start to the agent's first step; its oracle took 6 m 43 s on
//! Daytona). The peer needs Docker and k3s, which this machine has not: its figure is quoted, ours
//! measured.
//!
//! - Harbor: exported tasks run by the real `harbor run -a oracle` on the namespace provider, one at
//!   a time; the healthcheck (start to ready) is read from each trial's timings.
//! - OpenEnv: `collector serve openenv` and the stock GenericEnvClient playing episodes back to
//!   back (reset -> 10 tool calls -> diagnosis -> mitigation); reset latency, and episodes per hour
//!   per core from the server's CPU time (its own and its kubectl children's).
//!
//! Run: `cargo bench --profile dev -p e2e --bench rl_envs [-- harbor|openenv]` (needs tests/install's
//! /opt/harbor-venv and /opt/openenv-venv; root, for the namespace provider).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// SREGym's Harbor task: minutes to the agent's first step, and CPUs it asks for at least.
const PEER_SETUP_SECS: f64 = 7.0 * 60.0;
const PEER_CPUS: f64 = 4.0;

fn main() {
    let which: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wants = |w: &str| which.is_empty() || which.iter().any(|a| a == w);
    println!(
        "{:<34} {:>12} {:>12} {:>12} {:>10}",
        "figure", "faultline", "SREGym", "ratio", "samples"
    );
    if wants("harbor") {
        harbor();
    }
    if wants("openenv") {
        openenv();
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn row(figure: &str, ours: f64, peer: f64, samples: usize) {
    println!(
        "{figure:<34} {ours:>12.2} {peer:>12.1} {:>11.4}x {samples:>10}",
        ours / peer
    );
}

fn harbor() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tasks = tmp.path().join("tasks");
    let out = Command::new(e2e::binary("collector"))
        .args([
            "harbor", "export", "--seeds", "5", "--image", "bench", "--out",
        ])
        .arg(&tasks)
        .args(["--problems", "hotel-geo-target-port"])
        .output()
        .expect("collector runs");
    assert!(out.status.success(), "{}", e2e::text(&out));
    let bind = format!(
        "binds={}:/usr/local/bin/collector",
        e2e::binary("collector").display()
    );
    let jobs = tmp.path().join("jobs");
    let run = Command::new("/opt/harbor-venv/bin/harbor")
        .args([
            "run", "--yes", "--quiet", "-a", "oracle", "-n", "1", "--ek", &bind,
        ])
        .args([
            "--env",
            "faultline_harbor.namespace:NamespaceEnvironment",
            "--path",
        ])
        .arg(&tasks)
        .arg("--jobs-dir")
        .arg(&jobs)
        .args(["--job-name", "bench"])
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .output()
        .expect("harbor runs (bash integrations/harbor/install.sh)");
    assert!(run.status.success(), "{}", e2e::text(&run));
    let (mut ready, mut trial) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(jobs.join("bench")).expect("the job") {
        let result = entry.expect("an entry").path().join("result.json");
        if !result.is_file() {
            continue;
        }
        let r = e2e::read_json(&result);
        assert_eq!(r["verifier_result"]["rewards"]["reward"], 1.0, "{r}");
        let at = |phase: &str, end: &str| {
            chrono::DateTime::parse_from_rfc3339(r[phase][end].as_str().expect("a time"))
                .expect("RFC 3339")
        };
        // Harbor runs the healthcheck between the environment's start and the agent's setup.
        type At = chrono::DateTime<chrono::FixedOffset>;
        let secs = |a: At, b: At| (b - a).num_microseconds().unwrap_or_default() as f64 / 1e6;
        ready.push(secs(
            at("environment_setup", "started_at"),
            at("agent_setup", "started_at"),
        ));
        trial.push(secs(
            at("environment_setup", "started_at"),
            at("verifier", "finished_at"),
        ));
    }
    let n = ready.len();
    row(
        "harbor: start to agent's step (s)",
        median(ready),
        PEER_SETUP_SECS,
        n,
    );
    row(
        "harbor: whole oracle trial (s)",
        median(trial),
        6.0 * 60.0 + 43.0,
        n,
    );
}

fn openenv() {
    let server = e2e::openenv::Server::start(&[]);
    let url = server.url.clone();
    let episodes = 12;
    let cpu0 = cpu_secs(server.child.id());
    let out = Command::new("/opt/openenv-venv/bin/python")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/openenv/throughput.py"))
        .args([&url, &episodes.to_string(), "hotel-*,social-*,astro-*"])
        .output()
        .expect("python runs");
    assert!(out.status.success(), "{}", e2e::text(&out));
    let cpu = cpu_secs(server.child.id()) - cpu0;
    drop(server);
    let played: Vec<Value> = serde_json::from_slice(
        out.stdout
            .split(|b| *b == b'\n')
            .rfind(|l| !l.is_empty())
            .expect("a line"),
    )
    .expect("JSON");
    assert!(played.iter().all(|e| e["done"] == true), "{played:?}");
    let resets: Vec<f64> = played
        .iter()
        .filter_map(|e| e["reset_secs"].as_f64())
        .collect();
    let walls: Vec<f64> = played
        .iter()
        .filter_map(|e| e["episode_secs"].as_f64())
        .collect();
    let n = played.len();
    row(
        "openenv: reset latency (s)",
        median(resets),
        PEER_SETUP_SECS,
        n,
    );
    println!(
        "{:<34} {:>12.2} {:>12} {:>12} {:>10}",
        "openenv: episode wall time (s)",
        median(walls),
        "-",
        "",
        n
    );
    // The peer's bound: its setup alone, on the CPUs it asks for.
    let peer = 3600.0 / (PEER_SETUP_SECS * PEER_CPUS);
    let ours = n as f64 * 3600.0 / cpu.max(1e-9);
    println!(
        "{:<34} {ours:>12.1} {peer:>12.2} {:>11.1}x {n:>10}",
        "openenv: episodes / hour / core",
        ours / peer
    );
}

/// A process's CPU seconds, its waited-for children's included (`/proc/PID/stat`).
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the server's stat");
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .expect("fields")
        .split_whitespace()
        .collect();
    // utime, stime, cutime, cstime are fields 14 to 17 (1-based), 12 to 15 after the name.
    let ticks: f64 = fields[11..15]
        .iter()
        .map(|f| f.parse::<f64>().expect("a number"))
        .sum();
    let hz = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(100.0);
    ticks / hz
}
