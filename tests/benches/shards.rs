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
        let local = tmp.path().join(format!("{kind}-local"));
        let started = Instant::now();
        let status = collector(&moto, tmp.path(), &args)
            .args(["--jobs", "2", "--out"])
            .arg(&local)
            .status()
            .expect("collector runs");
        assert!(status.success(), "{kind} into a directory: {status:?}");
        let one = started.elapsed().as_secs_f64();
        let url = format!("s3://bench/{kind}");
        let started = Instant::now();
        let shards: Vec<Child> = (0..2)
            .map(|i| {
                collector(&moto, tmp.path(), &args)
                    .args(["--jobs", "1", "--out", &url])
                    .env("JOB_COMPLETION_INDEX", i.to_string())
                    .env("FAULTLINE_SHARD_COUNT", "2")
                    .spawn()
                    .expect("collector runs")
            })
            .collect();
        for mut s in shards {
            let status = s.wait().unwrap();
            assert!(status.success(), "a {kind} shard: {status:?}");
        }
        let sharded = started.elapsed().as_secs_f64();
        let stored = moto.bytes("bench", &format!("{kind}/"));
        println!(
            "{kind:<7} {runs:>5} {:>16.1} {:>16.1} {:>9.1}% {:>14.1}",
            runs as f64 * 60.0 / one,
            runs as f64 * 60.0 / sharded,
            (sharded / one - 1.0) * 100.0,
            stored as f64 / runs as f64 / 1024.0
        );
    }
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
