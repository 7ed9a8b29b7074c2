//! What a session costs around the agent, and how fast `collector eval` gets through a board.
//!
//! 1. Session overhead: from starting `collector live` to the agent process running with its API
//!    ready (the agent prints the time it started, then the time its first `GET /api/v1/pods`
//!    answered), median of `FAULTLINE_BENCH_RUNS` (default 5) sessions in the agent's sandbox (the
//!    default) and as many with `--no-sandbox`, taken in turn; beside them, in the same run,
//!    `collector env up` from start to its ready line (the environment alone: the session's own
//!    cost is the difference). Goals: agent started with a ready API within 1 s; the sandbox adds
//!    at most 50 ms to it.
//! 2. Board throughput: `collector eval` with a trivial agent (it submits an empty diagnosis and
//!    mitigation at once) over every problem of the catalog (`FAULTLINE_BENCH_PROBLEMS`, default
//!    `*`) with noise on and off, `FAULTLINE_BENCH_JOBS` (default 4) sessions at once: wall time
//!    and sessions per minute. Goal: the whole board (78 × 2) in under 10 minutes. SREGym, the
//!    peer, needs a Kubernetes cluster and hours per agent; it cannot run on this machine.
//!
//! Run: `cargo bench --profile dev -p collector --bench sessions`.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[path = "../tests/support/mod.rs"]
mod support;
use support::{LiveEnv, collector, env_num};

const PROBLEM: &str = "hotel-geo-target-port";

fn unix_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One session, sandboxed or not; (agent started, agent's first API answer) after the launch.
fn one_session(dir: &Path, i: u64, sandboxed: bool) -> (Duration, Duration) {
    // The agent prints its start time, then the time its first API request was answered (its
    // output is stored in the run).
    let agent = "date +%s.%N; curl -sf -o /dev/null \"$(sed -n 's/ *server: //p' \"$KUBECONFIG\")/api/v1/pods\" && date +%s.%N; \
         curl -s -X POST \"$FAULTLINE_SUBMIT_URL/submit\" -d '{\"solution\": \"\"}' >/dev/null; \
         curl -s -X POST \"$FAULTLINE_SUBMIT_URL/submit\" -d '{\"solution\": \"\"}' >/dev/null";
    let out = dir.join(format!(
        "run-{i}-{}",
        if sandboxed { "sandbox" } else { "open" }
    ));
    let launched = unix_secs();
    let mut command = collector();
    command
        .args(["live", "--problem", PROBLEM, "--quiet", "--agent", agent])
        .arg("--out")
        .arg(&out);
    if !sandboxed {
        command.arg("--no-sandbox");
    }
    let status = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("collector live runs");
    assert!(status.success(), "collector live failed");
    let text = std::fs::read_to_string(out.join("agent.stdout")).expect("the agent's output");
    let times: Vec<f64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(times.len(), 2, "marks: {text:?}");
    (
        Duration::from_secs_f64(times[0] - launched),
        Duration::from_secs_f64(times[1] - launched),
    )
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn overhead(tmp: &Path) {
    let runs = env_num("FAULTLINE_BENCH_RUNS", 5).max(1);
    let (mut started, mut answered, mut env_ready) = (vec![], vec![], vec![]);
    let mut open_answered = vec![];
    for i in 0..runs {
        let (s, a) = one_session(tmp, i, true);
        started.push(s);
        answered.push(a);
        open_answered.push(one_session(tmp, i, false).1);
        let dir = tmp.join(format!("env-{i}"));
        std::fs::create_dir_all(&dir).expect("a directory");
        let mut env = LiveEnv::start(PROBLEM, &dir, &[]);
        env_ready.push(env.ready_after);
        let _ = env.child.kill();
        let _ = env.child.wait();
    }
    let (s, a, e) = (median(started), median(answered), median(env_ready));
    let open = median(open_answered);
    println!("session overhead ({PROBLEM}, median of {runs}):");
    println!(
        "  collector live -> agent started:            {:>7.3} s",
        s.as_secs_f64()
    );
    println!(
        "  collector live -> agent's first API answer: {:>7.3} s (goal <= 1 s)",
        a.as_secs_f64()
    );
    println!(
        "  same, --no-sandbox:                         {:>7.3} s",
        open.as_secs_f64()
    );
    println!(
        "  the sandbox's start-up: {:+.0} ms (goal <= 50 ms)",
        (a.as_secs_f64() - open.as_secs_f64()) * 1000.0
    );
    println!(
        "  peer, collector env up -> ready line:       {:>7.3} s",
        e.as_secs_f64()
    );
    println!(
        "  ratio session / env up: {:.2}",
        a.as_secs_f64() / e.as_secs_f64()
    );
}

fn board(tmp: &Path) {
    let problems = std::env::var("FAULTLINE_BENCH_PROBLEMS").unwrap_or_else(|_| "*".into());
    let jobs = env_num("FAULTLINE_BENCH_JOBS", 4).max(1);
    let agents = tmp.join("agents.toml");
    std::fs::write(
        &agents,
        "[[agents]]\nname = \"trivial\"\ncommand = \"curl -s -X POST $FAULTLINE_SUBMIT_URL/submit -d '{\\\"solution\\\": \\\"\\\"}' && curl -s -X POST $FAULTLINE_SUBMIT_URL/submit -d '{\\\"solution\\\": \\\"\\\"}'\"\n",
    )
    .expect("writing agents.toml");
    let started = Instant::now();
    let out = collector()
        .args(["eval", "--agents"])
        .arg(&agents)
        .args(["--problems", &problems, "--noise", "on,off", "--json"])
        .args(["--jobs", &jobs.to_string(), "--time-limit", "1m", "--out"])
        .arg(tmp.join("board"))
        .output()
        .expect("collector eval runs");
    let wall = started.elapsed();
    assert!(
        out.status.success(),
        "collector eval failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sessions = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("{\"run\""))
        .count();
    println!(
        "board: {sessions} sessions (problems `{problems}`, noise on and off, {jobs} at once)"
    );
    println!(
        "  wall {:.1} s, {:.1} sessions per minute (goal: 156 sessions in under 10 minutes)",
        wall.as_secs_f64(),
        sessions as f64 / wall.as_secs_f64() * 60.0
    );
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let which = std::env::args().nth(1).unwrap_or_default();
    if which.is_empty() || which == "overhead" || which.starts_with('-') {
        overhead(tmp.path());
    }
    if which.is_empty() || which == "board" || which.starts_with('-') {
        board(tmp.path());
    }
}
