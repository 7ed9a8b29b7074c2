//! Files and command lines from strangers, through the real `collector` binary: a dataset whose
//! manifest names files outside it or wrong checksums, specs with values the simulator cannot
//! run, outputs that must not be left half-written, and a reader that closes the pipe.

#[path = "support/mod.rs"]
mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::OnceLock;

use support::{collector, snapshot};

fn dataset() -> &'static Path {
    static DATASET: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DATASET
        .get_or_init(|| {
            let tmp = tempfile::tempdir().expect("tempdir");
            let ds = snapshot("hotel-geo-target-port", "1m", &tmp.path().join("snap"));
            (tmp, ds)
        })
        .1
}

/// A copy of the shared dataset whose manifest `edit` changes.
fn edited(tmp: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let copy = tmp.join("dataset");
    std::fs::create_dir_all(&copy).expect("mkdir");
    for e in std::fs::read_dir(dataset()).expect("dataset").flatten() {
        std::fs::copy(e.path(), copy.join(e.file_name())).expect("copy");
    }
    let path = copy.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("manifest")).expect("JSON");
    edit(&mut m);
    std::fs::write(&path, serde_json::to_vec_pretty(&m).expect("JSON")).expect("write");
    copy
}

fn run(args: &[&str], dir: &Path) -> Output {
    collector()
        .args(args)
        .arg(dir)
        .output()
        .expect("collector runs")
}

fn fails_saying(out: &Output, says: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for s in says {
        assert!(err.contains(s), "expected {s:?} in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn manifest_paths_stay_in_the_dataset() {
    for file in ["../../../../etc/passwd", "/etc/passwd", "sub/logs.parquet"] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ds = edited(tmp.path(), |m| m["tables"]["logs"]["file"] = file.into());
        for args in [
            &["dataset", "inspect"][..],
            &["dataset", "validate"][..],
            &["replay"][..],
        ] {
            fails_saying(
                &run(args, &ds),
                &["tables.logs.file", file, "not a plain name"],
            );
        }
        let out = collector()
            .args(["dataset", "export", "--table", "logs"])
            .arg(&ds)
            .output()
            .expect("collector runs");
        fails_saying(&out, &["tables.logs.file"]);
        assert!(out.stdout.is_empty(), "nothing of {file} is served");
    }
}

#[test]
fn checksums_and_row_counts_are_checked_where_data_is_opened() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ds = edited(tmp.path(), |m| {
        m["tables"]["events"]["sha256"] = "0".repeat(64).into();
    });
    for args in [&["dataset", "inspect"][..], &["replay"][..]] {
        fails_saying(&run(args, &ds), &["events.parquet", "checksum mismatch"]);
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let ds = edited(tmp.path(), |m| {
        let rows = m["tables"]["objects"]["rows"].as_u64().expect("rows");
        m["tables"]["objects"]["rows"] = (rows + 1).into();
    });
    for args in [&["dataset", "inspect"][..], &["replay"][..]] {
        fails_saying(
            &run(args, &ds),
            &["objects.parquet", "rows, the manifest says"],
        );
    }
}

/// Runs `args` with a stdout whose reader goes away after `read` bytes (0: before anything is
/// written); the command must end with status 0 and no panic.
fn reader_goes_away(args: &[&str], read: usize) {
    let mut child = collector()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("collector runs");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut got = vec![0u8; read];
    stdout.read_exact(&mut got).expect("the first bytes");
    // As `| head -c N` leaves it: the pipe's only reader is closed here.
    drop(stdout);
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr");
    let status = child.wait().expect("exits");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(status.code(), Some(0), "{args:?}: {err}");
}

#[test]
fn a_closed_pipe_ends_a_listing_quietly() {
    // Closed before the listing is written: its first line already meets a closed pipe.
    reader_goes_away(&["problems", "list"], 0);
    // Closed after the first bytes of an export far larger than a pipe's buffer.
    let ds = dataset().display().to_string();
    reader_goes_away(&["dataset", "export", "--table", "metrics", &ds], 100);
}

#[test]
fn simulated_durations_are_bounded() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = collector()
        .args([
            "snapshot",
            "--problem",
            "hotel-geo-target-port",
            "--duration",
            "10000h",
        ])
        .arg("--out")
        .arg(tmp.path().join("o"))
        .output()
        .expect("collector runs");
    fails_saying(&out, &["--duration 10000h", "longer than the limit of 24h"]);
}

/// A catalog directory holding one problem or noise file.
fn catalog_with(dir: &Path, kind: &str, name: &str, text: &str) -> PathBuf {
    let d = dir.join(kind);
    std::fs::create_dir_all(&d).expect("mkdir");
    std::fs::write(d.join(name), text).expect("write");
    dir.to_path_buf()
}

#[test]
fn spec_values_the_simulator_cannot_run_are_refused_at_their_field() {
    let problem = include_str!("../../../problems/catalog/problems/hotel-geo-target-port.toml");
    let noise = include_str!("../../../problems/catalog/noise/default.toml");
    let spike = |m: &str| {
        problem.replace(
            "primitive = \"service_target_port\"\nservice = \"geo\"\ntarget_port = 9999",
            &format!("primitive = \"load_spike\"\nmultiplier = {m}"),
        )
    };
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "problems",
            problem.replace("target_port = 9999", "target_port = 0"),
            "field `faults[0].target_port`",
            "0 is not a port",
        ),
        (
            "problems",
            problem.replace("target_port = 9999", "target_port = \"x\""),
            "hotel-geo-target-port.toml:10:",
            "field `faults[0].target_port`",
        ),
        (
            "problems",
            spike("inf"),
            "field `faults[0].multiplier`",
            "not a load multiplier",
        ),
        (
            "problems",
            spike("nan"),
            "field `faults[0].multiplier`",
            "not a load multiplier",
        ),
        (
            "problems",
            spike("1e300"),
            "field `faults[0].multiplier`",
            "at most 1000",
        ),
        (
            "noise",
            noise.replace("every = \"5m\"", "every = \"0s\""),
            "field `every`",
            "not a period",
        ),
        (
            "noise",
            noise.replace("percent = 2.0", "percent = -250"),
            "field `disturbances[3].percent`",
            "not a percentage",
        ),
        (
            "noise",
            noise.replace("per_period = 2", "per_period = 1000000"),
            "field `per_period`",
            "expected 1 to 4",
        ),
    ];
    for (kind, text, field, says) in cases {
        let tmp = tempfile::tempdir().expect("tempdir");
        let name = if kind == "problems" {
            "hotel-geo-target-port.toml"
        } else {
            "default.toml"
        };
        let dir = catalog_with(tmp.path(), kind, name, &text);
        let out = run(&["problems", "validate"], &dir);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "{all}");
        assert!(
            all.contains(field) && all.contains(says),
            "{field} / {says}: {all}"
        );
    }
}

#[test]
fn a_killed_writer_leaves_nothing_behind_after_the_next_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("o");
    let mut child = collector()
        .args([
            "snapshot",
            "--problem",
            "hotel-geo-target-port",
            "--duration",
            "20h",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("collector runs");
    let partial = out.join(format!(".dataset.partial-{}", child.id()));
    // The writer's directory appears as soon as the run starts writing.
    let seen = (0..600).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        partial.exists()
    });
    assert!(seen, "{} appears", partial.display());
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    assert!(partial.exists(), "kill -9 leaves the partial directory");
    let ds = snapshot("hotel-geo-target-port", "1m", &out);
    assert!(ds.join("manifest.json").is_file());
    assert!(
        !partial.exists(),
        "the next run removes what the killed one left"
    );
}

#[test]
fn outputs_named_dash_are_refused() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let out = collector()
        .current_dir(cwd.path())
        .args([
            "snapshot",
            "--problem",
            "hotel-geo-target-port",
            "--out",
            "-",
        ])
        .output()
        .expect("collector runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot hold a directory"), "{err}");
    assert!(!cwd.path().join("-").exists());
    let out = collector()
        .args(["dataset", "export", "--out", "-"])
        .arg(dataset())
        .output()
        .expect("collector runs");
    fails_saying(&out, &["standard output takes one table"]);
}

#[test]
fn a_multi_table_export_appears_whole() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dest = tmp.path().join("csv");
    let out = collector()
        .args(["dataset", "export", "--format", "csv", "--out"])
        .arg(&dest)
        .arg(dataset())
        .output()
        .expect("collector runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = std::fs::read_dir(tmp.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["csv"], "no staging directory is left beside it");
    assert!(dest.join("objects.csv").is_file());
}
