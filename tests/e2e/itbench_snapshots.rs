//! ITBench snapshots in and out through the real `collector` binary: the real Scenario-2
//! fragments import into a dataset that validates, replays through kubectl, PromQL and Jaeger
//! with the fixture's own content, and judges with its ground truth; a simulated dataset exported
//! to ITBench's layout and imported again keeps every row, and replays through Loki as before.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use datasets::Dataset;
use e2e::fixture::ReplayProcess;
use e2e::{http_get, run, shared_dir, text};
use schemas::tables::{Row, Table};
use serde_json::Value;

fn fixtures() -> PathBuf {
    shared_dir().join("fixtures/itbench/Scenario-2-fragments")
}

/// `collector dataset import itbench DIR --out OUT --json`: the report.
fn import(dir: &Path, out: &Path) -> Value {
    let o = run(
        "collector",
        &[
            "dataset",
            "import",
            "itbench",
            dir.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(o.status.success(), "import: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("report JSON: {e}\n{}", text(&o)))
}

fn validate(dataset: &Path) {
    let o = run(
        "collector",
        &["dataset", "validate", dataset.to_str().unwrap()],
    );
    assert!(o.status.success(), "validate: {}", text(&o));
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let o = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .output()
        .expect("kubectl is installed (apt-get install kubectl, or bash tests/run)");
    assert!(o.status.success(), "kubectl {args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

fn not_mapped(report: &Value) -> Vec<String> {
    report["not_mapped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["what"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_scenario_2_fragments_import_replay_and_judge() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("s2");
    let report = import(&fixtures(), &out);
    // One event, four metric rows of which two repeat the other two, one span cut by the end
    // of its file, seven alerts in two files of the two shapes.
    assert_eq!(report["rows"]["events"], 1, "{report}");
    assert_eq!(report["rows"]["metrics"], 2, "{report}");
    assert_eq!(report["rows"]["spans"], 1, "{report}");
    assert_eq!(report["rows"]["alerts"], 7, "{report}");
    assert_eq!(report["ground_truth"], "2", "{report}");
    let skipped = not_mapped(&report);
    for what in [
        "sample repeated by another query or file (kept once)",
        "span record cut short by the end of the file (kept: the fields up to the cut)",
    ] {
        assert!(
            skipped.iter().any(|s| s == what),
            "{what} not reported: {skipped:?}"
        );
    }
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("import_report.json")).unwrap())
            .unwrap();
    assert_eq!(written["rows"], report["rows"]);
    let dataset = out.join("dataset");
    validate(&dataset);
    assert!(
        !dataset.join("ground_truth.json").exists(),
        "the ground truth stays beside the dataset"
    );

    // kubectl reads the fixture's event. The replay is frozen: the fixture's own times are asked.
    let kubeconfig = tmp.path().join("kc");
    let replay = ReplayProcess::start(
        &dataset,
        &[
            "--frozen",
            "--write-kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
    );
    let events = kubectl(&kubeconfig, &["get", "events", "-A", "-o", "json"]);
    let events: Value = serde_json::from_str(&events).unwrap();
    let e = &events["items"][0];
    assert_eq!(e["reason"], "RELOAD", "{events}");
    assert_eq!(
        e["message"],
        "NGINX reload triggered due to a change in configuration"
    );
    assert_eq!(
        e["involvedObject"]["name"],
        "ingress-nginx-controller-75cfcdbd64-pnlpk"
    );
    assert_eq!(e["count"], 13);

    // PromQL over the imported service metrics answers the fixture's bucket counts.
    let prom = replay.url("prometheus");
    let q = "traces_span_metrics_duration_milliseconds_bucket{service_name=\"frontend-proxy\"}";
    let body: Value = http_get(format!(
        "{prom}/api/v1/query?query={}&time=2025-12-15T17:25:03Z",
        urlencode(q)
    ))
    .json()
    .unwrap();
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    for r in body["data"]["result"].as_array().unwrap() {
        values.insert(
            r["metric"]["le"].as_str().unwrap().into(),
            r["value"][1].as_str().unwrap().into(),
        );
    }
    assert_eq!(
        values,
        BTreeMap::from([
            ("+Inf".into(), "557".into()),
            ("10.0".into(), "2064".into())
        ]),
        "{body}"
    );

    // Jaeger finds the fixture's span by its trace id and lists its service.
    let jaeger = replay.url("jaeger");
    let trace: Value = http_get(format!(
        "{jaeger}/api/traces/c75938795ef356bbc7fe576ec34cde3e"
    ))
    .json()
    .unwrap();
    let span = &trace["data"][0]["spans"][0];
    assert_eq!(
        span["operationName"], "/flagd.evaluation.v1.Service/EventStream",
        "{trace}"
    );
    assert_eq!(span["duration"], 600_003_564, "{trace}");
    let services: Value = http_get(format!("{jaeger}/api/services")).json().unwrap();
    assert!(
        services["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "recommendation"),
        "{services}"
    );
    drop(replay);

    // The judge scores the real agent output of this scenario against the imported ground truth:
    // its first root cause (flagd-config) is right, its second (flagd) is not.
    let answer =
        shared_dir().join("fixtures/itbench/agent_run_artifacts/agent_output.scenario2_run1.json");
    let judged = tmp.path().join("judged");
    let o = run(
        "judge",
        &[
            "run",
            "--ground-truth",
            out.join("ground_truth.json").to_str().unwrap(),
            "--outputs",
            &format!("agent={}", answer.display()),
            "--problem",
            "2",
            "--no-llm",
            "--out",
            judged.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(o.status.success(), "judge: {}", text(&o));
    let results = std::fs::read_to_string(judged.join("results.json")).unwrap();
    let results: Value = serde_json::from_str(&results).unwrap();
    let scores = results.to_string();
    assert!(scores.contains("root_cause_entity"), "{scores}");
    let item =
        find_key(&results, "root_cause_entity_recall").unwrap_or_else(|| panic!("{results}"));
    assert_eq!(item, 1.0, "{results}");
    let precision = find_key(&results, "root_cause_entity_precision").unwrap();
    assert_eq!(precision, 0.5, "{results}");
}

/// The first number under a key anywhere in a JSON document.
fn find_key(v: &Value, key: &str) -> Option<f64> {
    match v {
        Value::Object(m) => m
            .get(key)
            .and_then(Value::as_f64)
            .or_else(|| m.values().find_map(|x| find_key(x, key))),
        Value::Array(a) => a.iter().find_map(|x| find_key(x, key)),
        _ => None,
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every row of every table, for comparing datasets.
fn all_rows(dir: &Path) -> BTreeMap<Table, Vec<Row>> {
    let ds = Dataset::open(dir).unwrap();
    Table::ALL
        .iter()
        .map(|t| (*t, ds.read_rows(*t).unwrap()))
        .collect()
}

/// `collector snapshot --problem P --duration D --out OUT`: the dataset directory.
fn snapshot(problem: &str, duration: &str, out: &Path) -> PathBuf {
    let o = run(
        "collector",
        &[
            "snapshot",
            "--problem",
            problem,
            "--duration",
            duration,
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "snapshot: {}", text(&o));
    out.join("dataset")
}

#[test]
fn import_export_import_keeps_every_row() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = snapshot("hotel-geo-target-port", "8m", &tmp.path().join("sim"));
    // A simulated dataset out to ITBench's layout...
    let exported = tmp.path().join("itbench");
    let o = run(
        "collector",
        &[
            "dataset",
            "export",
            "itbench",
            sim.to_str().unwrap(),
            "--out",
            exported.to_str().unwrap(),
            "--include-ground-truth",
            "--json",
        ],
    );
    assert!(o.status.success(), "export: {}", text(&o));
    for f in [
        "k8s_events_raw.tsv",
        "k8s_objects_raw.tsv",
        "otel_logs_raw.tsv",
        "otel_traces_raw.tsv",
        "app.json",
        "ground_truth.yaml",
        "metric_metadata.json",
    ] {
        assert!(exported.join(f).is_file(), "{f} not written");
    }
    assert!(std::fs::read_dir(exported.join("metrics")).unwrap().count() > 3);
    assert!(std::fs::read_dir(exported.join("alerts")).unwrap().count() > 0);
    // ...imported (first import), exported again and imported again: the same rows.
    let first = tmp.path().join("first");
    import(&exported, &first);
    validate(&first.join("dataset"));
    let again = tmp.path().join("again");
    let o = run(
        "collector",
        &[
            "dataset",
            "export",
            "itbench",
            first.join("dataset").to_str().unwrap(),
            "--out",
            again.to_str().unwrap(),
            "--include-ground-truth",
        ],
    );
    assert!(o.status.success(), "export: {}", text(&o));
    let second = tmp.path().join("second");
    import(&again, &second);
    let (a, b) = (
        all_rows(&first.join("dataset")),
        all_rows(&second.join("dataset")),
    );
    for t in Table::ALL {
        assert_eq!(a[&t].len(), b[&t].len(), "{t}: row counts differ");
        assert!(
            a[&t] == b[&t],
            "{t}: rows differ after import -> export -> import"
        );
    }
    let gt = |dir: &Path| -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join("ground_truth.json")).unwrap())
            .unwrap()
    };
    assert_eq!(gt(&first), gt(&second));

    // Against the simulated original: every span, log line, event, alert and sample is there.
    let original = all_rows(&sim);
    for t in [
        Table::Spans,
        Table::Logs,
        Table::Events,
        Table::Alerts,
        Table::Metrics,
        Table::MetricMetadata,
        Table::Objects,
    ] {
        assert_eq!(
            original[&t].len(),
            a[&t].len(),
            "{t}: the simulated dataset's rows were not all kept"
        );
    }
    assert!(
        original[&Table::Spans] == a[&Table::Spans],
        "spans differ from the simulated dataset"
    );
    assert!(
        original[&Table::Logs] == a[&Table::Logs],
        "logs differ from the simulated dataset"
    );
    assert!(
        original[&Table::Metrics] == a[&Table::Metrics],
        "metrics differ from the simulated dataset"
    );

    // Loki answers the imported logs as it answers the simulated ones.
    let query = |dataset: &Path| -> Value {
        let r = ReplayProcess::start(dataset, &["--frozen"]);
        let loki = r.url("loki");
        let q = urlencode("{namespace=\"hotel-reservation\"} |= \"geo\"");
        let v: Value = http_get(format!(
            "{loki}/loki/api/v1/query_range?query={q}&limit=50&direction=backward"
        ))
        .json()
        .unwrap();
        v["data"]["result"].clone()
    };
    let (ours, theirs) = (query(&sim), query(&first.join("dataset")));
    assert!(ours.as_array().is_some_and(|a| !a.is_empty()), "{ours}");
    assert_eq!(ours, theirs);
}

#[test]
fn bad_input_is_refused_with_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    // Not a snapshot.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = run(
        "collector",
        &[
            "dataset",
            "import",
            "itbench",
            empty.to_str().unwrap(),
            "--out",
            tmp.path().join("x").to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no ITBench snapshot data found"),
        "{}",
        text(&o)
    );
    assert!(
        !tmp.path().join("x").exists(),
        "nothing half-written is left"
    );
    // A broken alerts file names the file and line.
    let bad = tmp.path().join("bad");
    std::fs::create_dir_all(bad.join("alerts")).unwrap();
    std::fs::write(
        bad.join("alerts/alerts_at_2025-12-15T17-30-49.329092.json"),
        "[{\"labels\": ",
    )
    .unwrap();
    let o = run(
        "collector",
        &[
            "dataset",
            "import",
            "itbench",
            bad.to_str().unwrap(),
            "--out",
            tmp.path().join("y").to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("alerts_at_2025-12-15T17-30-49.329092.json, line 1"),
        "{err}"
    );
    // An existing output directory is never overwritten.
    let o = run(
        "collector",
        &[
            "dataset",
            "import",
            "itbench",
            fixtures().to_str().unwrap(),
            "--out",
            empty.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already exists"),
        "{}",
        text(&o)
    );
}
