//! Benchmark: the cost of running as shards into object storage. The same work is done twice on
//! this machine with the same CPUs: by one process (`--jobs 2`) into a directory, and by two shard
//! processes (`--jobs 1` each, JOB_COMPLETION_INDEX 0 and 1, as an Indexed Job's pods) into S3
//! (moto_server on loopback). Prints runs per minute both ways, the overhead per run, and the bytes
//! stored per run. Two kinds of work: snapshots (`collector sweep`) and live sessions with an agent
//! that ends at once (`collector eval`: environment up, grading, the run written), whose time is
//! all the session's own.
//!
//! Run: `cargo bench --profile dev -p e2e --bench shards [-- sweep|eval]` (needs moto_server:
//! `pip install 'moto[server]'`).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use e2e::s3::Moto;

fn main() {
    let which: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let moto = Moto::start();
    moto.bucket("bench");
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        tmp.path().join("agents.toml"),
        "[[agents]]\nname = \"quick\"\ncommand = \"true\"\n",
    )
    .unwrap();
    println!(
        "{:<7} {:>5} {:>16} {:>16} {:>10} {:>14}",
        "work", "runs", "1 process run/min", "2 shards run/min", "overhead", "stored/run KiB"
    );
    let problems =
        "hotel-geo-target-port,hotel-geo-config-drift,hotel-search-quota,hotel-search-service-port";
    let kinds: [(&str, Vec<&str>, u64); 2] = [
        (
            "sweep",
            vec![
                "sweep",
                "--problems",
                problems,
                "--seeds",
                "3",
                "--duration",
                "20m",
            ],
            12,
        ),
        (
            "eval",
            vec![
                "eval",
                "--agents",
                "agents.toml",
                "--problems",
                problems,
                "--runs",
                "3",
                "--noise",
                "off",
                "--no-sandbox",
                "--time-limit",
                "1m",
                "--since-onset",
                "1m",
            ],
            12,
        ),
    ];
    for (kind, args, runs) in kinds {
        if !which.is_empty() && !which.iter().any(|w| w == kind) {
            continue;
        }
        // Rounds alternate the two ways, so a drift in the machine's speed meets both.
        let (mut one, mut sharded) = (vec![], vec![]);
        let mut stored = 0;
        for round in 0..ROUNDS {
            one.push(one_process(
                &moto,
                tmp.path(),
                &args,
                &format!("{kind}-{round}"),
            ));
            let url = format!("s3://bench/{kind}-{round}");
            sharded.push(two_shards(&moto, tmp.path(), &args, &url));
            stored = moto.bytes("bench", &format!("{kind}-{round}/"));
        }
        let (one, sharded) = (median(one), median(sharded));
        println!(
            "{kind:<7} {runs:>5} {:>16.1} {:>16.1} {:>9.1}% {:>14.1}",
            runs as f64 * 60.0 / one,
            runs as f64 * 60.0 / sharded,
            (sharded / one - 1.0) * 100.0,
            stored as f64 / runs as f64 / 1024.0
        );
    }
    println!(
        "(medians of {ROUNDS} rounds; overhead: the shards' wall time over the one process's, minus 1)"
    );
}

const ROUNDS: usize = 3;

/// Seconds for one process with two jobs, into a directory.
fn one_process(moto: &Moto, cwd: &Path, args: &[&str], out: &str) -> f64 {
    let started = Instant::now();
    let status = collector(moto, cwd, args)
        .args(["--jobs", "2", "--out", out])
        .status()
        .expect("collector runs");
    assert!(status.success(), "{out}: {status:?}");
    started.elapsed().as_secs_f64()
}

/// Seconds for two shard processes with one job each, into S3.
fn two_shards(moto: &Moto, cwd: &Path, args: &[&str], url: &str) -> f64 {
    let started = Instant::now();
    let shards: Vec<Child> = (0..2)
        .map(|i| {
            collector(moto, cwd, args)
                .args(["--jobs", "1", "--out", url])
                .env("JOB_COMPLETION_INDEX", i.to_string())
                .env("FAULTLINE_SHARD_COUNT", "2")
                .spawn()
                .expect("collector runs")
        })
        .collect();
    for mut s in shards {
        let status = s.wait().unwrap();
        assert!(status.success(), "a shard into {url}: {status:?}");
    }
    started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn collector(moto: &Moto, cwd: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(e2e::binary("collector"));
    cmd.args(args)
        .current_dir(cwd)
        .envs(moto.env())
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("FAULTLINE_SHARD_COUNT")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}
