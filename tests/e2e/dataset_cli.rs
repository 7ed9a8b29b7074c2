//! `collector dataset` verbs and the dataset files, driven through the real binaries and read by
//! third-party readers (pyarrow, pandas).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use e2e::{binary, run, text};
use schemas::tables::Table;

fn synthetic(dir: &Path, rows: usize) {
    let out = run(
        "e2e-write-synthetic",
        &[dir.to_str().unwrap(), &rows.to_string()],
    );
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn inspect_validate_and_export_a_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    synthetic(&dir, 5_000);
    let d = dir.to_str().unwrap();

    let out = run("collector", &["dataset", "inspect", d]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for table in Table::ALL.map(Table::name) {
        assert!(stdout.contains(table), "{stdout}");
    }

    let out = run("collector", &["dataset", "inspect", d, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let metrics = &json["tables"]["metrics"];
    assert_eq!(metrics["rows"], 5_000 + 32);
    assert!(
        metrics["time_min"]
            .as_str()
            .unwrap()
            .starts_with("2026-01-01T00:00:00")
    );

    let out = run("collector", &["dataset", "validate", d]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("valid"));

    let out = run("collector", &["dataset", "export", d, "--table", "logs"]);
    assert!(out.status.success(), "{}", text(&out));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.len() as u64,
        json["tables"]["logs"]["rows"].as_u64().unwrap()
    );
    assert!(lines[0]["pod"].as_str().unwrap().contains('-'));

    let csv_dir = tmp.path().join("csv");
    let out = run(
        "collector",
        &[
            "dataset",
            "export",
            d,
            "--format",
            "csv",
            "--out",
            csv_dir.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let metrics_csv = std::fs::read_to_string(csv_dir.join("metrics.csv")).unwrap();
    let mut csv_lines = metrics_csv.lines();
    assert_eq!(
        csv_lines.next().unwrap(),
        "metric,namespace,labels,time,value"
    );
    let first = csv_lines.next().unwrap();
    assert!(
        first.contains(r#"""namespace"":""hotel-reservation"""#),
        "{first}"
    );
    assert_eq!(csv_lines.count() + 1, 5_032);
}

#[test]
fn a_flipped_byte_fails_validation_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    synthetic(&dir, 2_000);
    let path = dir.join("metrics.parquet");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 3;
    bytes[at] = !bytes[at];
    std::fs::write(&path, bytes).unwrap();
    let out = run("collector", &["dataset", "validate", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("metrics.parquet") && stderr.contains("checksum"),
        "{stderr}"
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(
        "collector",
        &["dataset", "inspect", tmp.path().to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no manifest.json"));

    let out = run("collector", &["dataset", "export", ".", "--table", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected one of objects"));

    for verb in ["inspect", "validate", "export"] {
        let out = run("collector", &["dataset", verb, "--help"]);
        assert!(out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Example"),
            "{verb}"
        );
    }
}

/// A `kill -9` in the middle of a large write leaves no directory that validates as a dataset.
#[test]
fn a_killed_write_leaves_nothing_that_validates() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let mut child = Command::new(binary("e2e-write-synthetic"))
        .arg(&dir)
        .arg("30000000")
        .spawn()
        .unwrap();
    // Wait until the writer has spilled at least one sorted run to disk, i.e. is well into the write.
    let deadline = Instant::now() + Duration::from_secs(300);
    let spilled = || {
        std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_dir(e.path().join(".runs")).ok())
            .any(|mut runs| runs.next().is_some())
    };
    while !spilled() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "writer ended before it was killed"
        );
        assert!(Instant::now() < deadline, "writer never spilled a run");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    assert!(!dir.exists(), "the final directory must not exist");
    for entry in std::fs::read_dir(tmp.path()).unwrap().flatten() {
        let out = run(
            "collector",
            &["dataset", "validate", entry.path().to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("manifest.json"));
    }
}

/// pyarrow and pandas read every table with the documented column types.
#[test]
fn pyarrow_and_pandas_read_every_table() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    synthetic(&dir, 1_000);
    let script = r#"
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
out = {}
for name, entry in m["tables"].items():
    t = pq.read_table(d + "/" + entry["file"])
    assert t.num_rows == entry["rows"], name
    df = t.to_pandas()
    out[name] = {f.name: str(f.type) for f in t.schema}
    out[name]["__pandas_rows"] = len(df)
    out[name]["__meta"] = t.schema.metadata[b"faultline.table"].decode()
print(json.dumps(out))
"#;
    let out = Command::new("python3")
        .args(["-c", script, dir.to_str().unwrap()])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python3 with pyarrow and pandas is required (pip install pyarrow pandas): {}",
        text(&out)
    );
    let types: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ts = "timestamp[ns, tz=UTC]";
    assert_eq!(types["metrics"]["time"], ts);
    assert_eq!(types["metrics"]["value"], "double");
    let is_string_map =
        |t: &serde_json::Value| t.as_str().unwrap().starts_with("map<string, string");
    assert!(
        is_string_map(&types["metrics"]["labels"]),
        "{}",
        types["metrics"]["labels"]
    );
    assert_eq!(types["spans"]["start"], ts);
    assert_eq!(types["spans"]["duration"], "int64");
    assert!(
        is_string_map(&types["spans"]["attributes"]),
        "{}",
        types["spans"]["attributes"]
    );
    assert_eq!(types["logs"]["restart"], "int32");
    assert_eq!(types["events"]["count"], "int32");
    assert_eq!(types["alerts"]["active_at"], ts);
    assert_eq!(types["objects"]["object"], "string");
    for table in Table::ALL.map(Table::name) {
        assert_eq!(types[table]["__meta"], table);
        assert!(
            types[table]["__pandas_rows"].as_u64().unwrap() > 0,
            "{table}"
        );
    }
}

/// A six-hour snapshot streams into its dataset: it validates, its checks ran, and the process's
/// peak memory stays under what one simulated hour took when the writer held every row (1.3 GB),
/// where a writer whose memory grows with the duration would need several GB.
#[test]
fn a_six_hour_snapshot_validates_in_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("six-hours");
    let out = run(
        "collector",
        &[
            "snapshot",
            "--problem",
            "hotel-geo-target-port",
            "--duration",
            "6h",
            "--out",
            out_dir.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["simulated_secs"], 6 * 3600, "{report}");
    assert!(
        report["rows"]["metrics"].as_u64().unwrap() > 2_000_000,
        "{report}"
    );
    assert!(report["leaks"].as_array().unwrap().is_empty(), "{report}");
    let checks = report["checks"].as_array().unwrap();
    assert!(
        !checks.is_empty() && checks.iter().all(|c| c["passed"] == true),
        "{report}"
    );
    let peak = report["peak_rss_bytes"]
        .as_u64()
        .expect("peak memory on Linux");
    assert!(
        peak < 1 << 30,
        "peak memory {} MiB for six simulated hours",
        peak >> 20
    );

    let dataset = out_dir.join("dataset");
    let out = run(
        "collector",
        &["dataset", "validate", dataset.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("valid"));
    assert!(
        std::fs::read_dir(&out_dir).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("partial")),
        "no partial directory is left behind"
    );
}
