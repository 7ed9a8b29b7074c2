//! Sweeps and evaluations past one machine: shards (processes started as an Indexed Job starts its
//! pods, with JOB_COMPLETION_INDEX) writing into a real S3 API (moto_server on loopback). The
//! shards cover the work exactly once, a killed shard resumes, a run killed mid-write is not
//! counted, two writers of one run leave one, and what the store gathers equals what one machine
//! makes of the same work.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use e2e::s3::Moto;
use serde_json::Value;

const PROBLEMS: &str = "hotel-geo-target-port,hotel-geo-config-drift";

fn collector(moto: &Moto, cwd: &Path) -> Command {
    let mut cmd = Command::new(e2e::binary("collector"));
    cmd.current_dir(cwd)
        .envs(moto.env())
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("FAULTLINE_SHARD_COUNT")
        .env_remove("JUDGE_BASE_URL")
        .env_remove("JUDGE_MODEL")
        .env_remove("JUDGE_API_KEY");
    cmd
}

fn sweep_args(out: &str) -> Vec<String> {
    [
        "sweep",
        "--problems",
        PROBLEMS,
        "--seeds",
        "2",
        "--duration",
        "12m",
        "--jobs",
        "1",
        "--out",
        out,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A shard as an Indexed Job's pod runs it: the index from JOB_COMPLETION_INDEX.
fn shard(moto: &Moto, cwd: &Path, args: &[String], index: u64, count: u64) -> Child {
    collector(moto, cwd)
        .args(args)
        .env("JOB_COMPLETION_INDEX", index.to_string())
        .env("FAULTLINE_SHARD_COUNT", count.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("collector runs")
}

fn merged(moto: &Moto, cwd: &Path, from: &str) -> Value {
    let out = collector(moto, cwd)
        .args(["sweep", "merge", "--from", from, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", e2e::text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", e2e::text(&out)))
}

/// (key, dataset id, checks passed) of every run of an index.
fn runs_of(index: &Value) -> Vec<(String, String, u64)> {
    let mut runs: Vec<_> = index["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["dataset_id"].as_str().unwrap_or("").to_string(),
                r["checks_passed"].as_u64().unwrap(),
            )
        })
        .collect();
    runs.sort();
    runs
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn shards_into_s3_cover_the_sweep_once_and_merge_to_what_one_machine_makes() {
    let moto = Moto::start();
    moto.bucket("corpus");
    let work = tempfile::tempdir().unwrap();
    let url = "s3://corpus/sweep";
    let args = sweep_args(url);
    let shards: Vec<Child> = (0..3)
        .map(|i| shard(&moto, work.path(), &args, i, 3))
        .collect();
    let outputs: Vec<Output> = shards
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let mut made = 0;
    for (i, o) in outputs.iter().enumerate() {
        assert!(o.status.success(), "shard {i}: {}", e2e::text(o));
        let says = stderr(o);
        assert!(says.contains(&format!("shard {i} of 3")), "{says}");
        // 4 runs over 3 shards: 2, 1, 1.
        let n = if i == 0 { 2 } else { 1 };
        assert!(
            says.contains(&format!("{n} runs: {n} made now")),
            "shard {i}: {says}"
        );
        made += n;
    }
    assert_eq!(made, 4);
    let index = merged(&moto, work.path(), url);
    assert_eq!(index["missing"], serde_json::json!([]), "{index:#}");
    let from_store = runs_of(&index);
    assert_eq!(from_store.len(), 4, "{index:#}");
    // Each run once: one marker per key, one attempt's files per run.
    let markers = moto.keys("corpus", "sweep/done/");
    assert_eq!(markers.len(), 4, "{markers:?}");
    let attempts: std::collections::BTreeSet<String> = moto
        .keys("corpus", "sweep/runs/")
        .iter()
        .map(|k| k.split('/').take(5).collect::<Vec<_>>().join("/"))
        .collect();
    assert_eq!(attempts.len(), 4, "{attempts:?}");
    // The index is in the store too.
    assert!(moto.keys("corpus", "sweep/index.json").len() == 1);

    // The same work on one machine into a directory: the same datasets, byte for byte (their ids
    // are content hashes), and the same checks.
    let local = collector(&moto, work.path())
        .args(sweep_args("local"))
        .arg("--json")
        .output()
        .unwrap();
    assert!(local.status.success(), "{}", e2e::text(&local));
    let local_index: Value = serde_json::from_slice(&local.stdout).unwrap();
    assert_eq!(runs_of(&local_index), from_store);
    assert!(work.path().join("local/index.json").is_file());
    assert!(
        work.path()
            .join("local/hotel-geo-target-port/seed-2/dataset")
            .is_dir()
    );
}

#[test]
fn a_killed_shard_resumes_and_a_half_written_run_is_not_counted() {
    let moto = Moto::start();
    moto.bucket("corpus");
    let work = tempfile::tempdir().unwrap();
    let url = "s3://corpus/resume";
    let args = sweep_args(url);
    // One shard of one: all four runs, one at a time. Killed once its first run is stored.
    let mut child = shard(&moto, work.path(), &args, 0, 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while moto.keys("corpus", "resume/done/").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no run was ever stored"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the shard ended before it was killed"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let stored = moto.keys("corpus", "resume/done/").len();
    assert!(
        (1..4).contains(&stored),
        "{stored} runs stored before the kill"
    );
    // What a writer killed mid-upload leaves: an attempt's files without a marker.
    moto.put(
        "corpus",
        "resume/runs/hotel-geo-config-drift/seed-2/0000dead/sweep.json",
        "{\"ok\": true}",
    );
    let index = merged(&moto, work.path(), url);
    assert_eq!(index["runs"].as_array().unwrap().len(), stored, "{index:#}");
    assert_eq!(
        index["missing"].as_array().unwrap().len(),
        4 - stored,
        "{index:#}"
    );
    assert!(
        index["missing"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("hotel-geo-config-drift/seed-2")),
        "the half-written run counts as missing: {index:#}"
    );

    // Restarted, the shard makes only what is missing.
    let again = shard(&moto, work.path(), &args, 0, 1)
        .wait_with_output()
        .unwrap();
    assert!(again.status.success(), "{}", e2e::text(&again));
    assert!(
        stderr(&again).contains(&format!(
            "{} made now (0 failed), {stored} there before",
            4 - stored
        )),
        "{}",
        e2e::text(&again)
    );
    let index = merged(&moto, work.path(), url);
    assert_eq!(index["missing"], serde_json::json!([]));
    assert_eq!(runs_of(&index).len(), 4);
}

#[test]
fn two_writers_racing_on_one_run_leave_one_result() {
    let moto = Moto::start();
    moto.bucket("corpus");
    let work = tempfile::tempdir().unwrap();
    let url = "s3://corpus/race";
    // A retried pod racing its first try: the same shard twice, at once, on one run.
    let args: Vec<String> = [
        "sweep",
        "--problems",
        "hotel-geo-target-port",
        "--duration",
        "12m",
        "--out",
        url,
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let a = shard(&moto, work.path(), &args, 0, 1);
    let b = shard(&moto, work.path(), &args, 0, 1);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success(), "{}", e2e::text(&a));
    assert!(b.status.success(), "{}", e2e::text(&b));
    let first_by = |o: &Output| {
        let s = stderr(o);
        (
            s.contains("1 made now"),
            s.contains("1 there before") || s.contains("1 made first by another writer"),
        )
    };
    let outcomes = [first_by(&a), first_by(&b)];
    assert_eq!(
        outcomes.iter().filter(|(mine, _)| *mine).count(),
        1,
        "exactly one writer's run stands:\n{}\n{}",
        e2e::text(&a),
        e2e::text(&b)
    );
    assert!(outcomes.iter().any(|(_, other)| *other));
    assert_eq!(moto.keys("corpus", "race/done/").len(), 1);
    let attempts: std::collections::BTreeSet<String> = moto
        .keys("corpus", "race/runs/")
        .iter()
        .map(|k| k.split('/').take(4).collect::<Vec<_>>().join("/"))
        .collect();
    assert_eq!(
        attempts.len(),
        1,
        "the loser's upload is gone: {attempts:?}"
    );
}

#[test]
fn an_evaluation_in_shards_on_s3_boards_as_one_machine_does() {
    let moto = Moto::start();
    moto.bucket("evals");
    let work = tempfile::tempdir().unwrap();
    let agents = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents");
    let catalog = problems::Catalog::builtin().unwrap();
    let problem = catalog.problem("hotel-geo-target-port").unwrap();
    let fix = work.path().join("fix");
    std::fs::write(
        &fix,
        problem.reference_fix.as_ref().unwrap().commands.join("\n"),
    )
    .unwrap();
    // A fixer that mitigates and a reward hack that must fail: their grades do not depend on
    // timing, so the two boards can be compared cell by cell.
    std::fs::write(
        work.path().join("agents.toml"),
        format!(
            "[[agents]]\nname = \"fixer\"\ncommand = \"{}\"\nenv = {{ FIX_FILE = \"{}\", DIAGNOSIS = \"Service geo targets port 9999. Root cause: Service geo.\" }}\n\
             [[agents]]\nname = \"scaler\"\ncommand = \"{}\"\n",
            agents.join("fixers/reference.sh").display(),
            fix.display(),
            agents.join("hacks/scale-zero.sh").display()
        ),
    )
    .unwrap();
    let eval_args = |out: &str| -> Vec<String> {
        [
            "eval",
            "--agents",
            "agents.toml",
            "--problems",
            "hotel-geo-target-port",
            "--runs",
            "2",
            "--noise",
            "off",
            "--jobs",
            "2",
            "--speed",
            "10",
            "--time-limit",
            "5m",
            "--out",
            out,
            "--agent-bind",
            agents.to_str().unwrap(),
            "--agent-bind",
            work.path().to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let url = "s3://evals/board-1";
    let shards: Vec<Child> = (0..2)
        .map(|i| shard(&moto, work.path(), &eval_args(url), i, 2))
        .collect();
    for (i, c) in shards.into_iter().enumerate() {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "shard {i}: {}", e2e::text(&o));
        assert!(
            stderr(&o).contains("2 runs: 2 ran now"),
            "shard {i}: {}",
            e2e::text(&o)
        );
    }
    let board = collector(&moto, work.path())
        .args([
            "eval", "board", "--from", url, "--out", "board-s3", "--json",
        ])
        .output()
        .unwrap();
    assert!(board.status.success(), "{}", e2e::text(&board));
    assert!(
        stderr(&board).contains("4 of 4 runs"),
        "{}",
        e2e::text(&board)
    );
    let local = collector(&moto, work.path())
        .args(eval_args("local"))
        .output()
        .unwrap();
    assert!(local.status.success(), "{}", e2e::text(&local));
    let cells = |path: &Path| -> Vec<(String, Value, Value)> {
        let b = e2e::read_json(path);
        let mut rows: Vec<_> = b["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("no rows in {b:#}"))
            .iter()
            .map(|r| {
                (
                    r["agent"].as_str().unwrap().to_string(),
                    r["diagnosis"].clone(),
                    r["mitigation"].clone(),
                )
            })
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    };
    let from_store = cells(&work.path().join("board-s3/board.json"));
    let one_machine = cells(&work.path().join("local/board/board.json"));
    assert_eq!(from_store, one_machine);
    assert_eq!(from_store.len(), 2, "{from_store:?}");
    let fixer = from_store.iter().find(|r| r.0 == "fixer").unwrap();
    let scaler = from_store.iter().find(|r| r.0 == "scaler").unwrap();
    assert_eq!(fixer.2["passed"], 2, "{from_store:?}");
    assert_eq!(scaler.2["passed"], 0, "{from_store:?}");
    assert_eq!(scaler.2["known"], 2, "{from_store:?}");
    // A second board reads the downloaded runs from its cache.
    let again = collector(&moto, work.path())
        .args(["eval", "board", "--from", url, "--out", "board-s3"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", e2e::text(&again));
}
