//! Benchmark: a snapshot's peak memory and speed as the simulated duration grows (15 m, 1 h,
//! 6 h, 24 h of hotel-reservation), each in its own `collector snapshot` process so each peak is
//! its own. Flat memory is the goal: a day within 1 GiB.
//!
//! Run: `cargo bench --profile dev -p collector --bench dataset_memory [-- 15m 1h ...]`
//! (no argument runs all four; the day takes a few minutes).

use std::process::Command;

fn main() {
    let durations: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let durations = if durations.is_empty() {
        ["15m", "1h", "6h", "24h"].map(String::from).to_vec()
    } else {
        durations
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    println!("snapshot of hotel-geo-target-port by simulated duration:");
    println!(
        "  {:>8} {:>10} {:>10} {:>12} {:>14} {:>11}",
        "duration", "wall s", "x real", "peak MiB", "rows", "dataset MiB"
    );
    for d in &durations {
        let out_dir = tmp.path().join(d);
        let out = Command::new(env!("CARGO_BIN_EXE_collector"))
            .args([
                "snapshot",
                "--problem",
                "hotel-geo-target-port",
                "--duration",
                d,
            ])
            .arg("--out")
            .arg(&out_dir)
            .arg("--json")
            .output()
            .expect("collector runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
        let wall = r["wall_secs"].as_f64().unwrap_or(f64::NAN);
        let simulated = r["simulated_secs"].as_f64().unwrap_or(f64::NAN);
        let rows: u64 = r["rows"]
            .as_object()
            .map(|t| t.values().filter_map(|v| v.as_u64()).sum())
            .unwrap_or(0);
        let bytes: u64 = std::fs::read_dir(out_dir.join("dataset"))
            .expect("dataset directory")
            .map(|e| e.expect("entry").metadata().expect("metadata").len())
            .sum();
        println!(
            "  {d:>8} {wall:>10.1} {:>10.0} {:>12} {rows:>14} {:>11.1}",
            simulated / wall,
            r["peak_rss_bytes"].as_u64().unwrap_or(0) >> 20,
            bytes as f64 / (1 << 20) as f64
        );
        std::fs::remove_dir_all(&out_dir).expect("remove the snapshot");
    }
}
