//! Runs Prometheus' promqltest scripts and fails if any file scores fewer passes than recorded in
//! `conformance-score.json`. Set `PROMQL_CONFORMANCE_UPDATE=1` to rewrite the record.

use std::collections::BTreeMap;
use std::path::PathBuf;

use promql::promqltest::{Score, run_script};

fn conformance_dir() -> PathBuf {
    let shared = std::env::var_os("FAULTLINE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    shared.join("conformance/promql")
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    total: Score,
    files: BTreeMap<String, Score>,
}

#[test]
fn conformance_score_does_not_drop() {
    let dir = conformance_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e} (set FAULTLINE_SHARED)", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "test"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .test files in {}", dir.display());
    let mut record = Record {
        total: Score::default(),
        files: BTreeMap::new(),
    };
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read script");
        let report = run_script(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let name = f.file_name().expect("name").to_string_lossy().to_string();
        println!("{name}: {}", report.score);
        for o in &report.outcomes {
            if o.status != promql::promqltest::Status::Passed {
                println!(
                    "  {name}:{} {:?} {} — {}",
                    o.line, o.status, o.query, o.reason
                );
            }
        }
        record.total.add(&report.score);
        record.files.insert(name, report.score);
    }
    println!("total: {}", record.total);
    let score_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance-score.json");
    if std::env::var_os("PROMQL_CONFORMANCE_UPDATE").is_some() {
        let tmp = score_path.with_extension("json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_string_pretty(&record).expect("json") + "\n",
        )
        .expect("write");
        std::fs::rename(&tmp, &score_path).expect("rename");
        return;
    }
    let recorded: Record = serde_json::from_str(
        &std::fs::read_to_string(&score_path).expect("read conformance-score.json"),
    )
    .expect("parse conformance-score.json");
    for (name, rec) in &recorded.files {
        let now = record.files.get(name).copied().unwrap_or_default();
        assert!(
            now.passed >= rec.passed,
            "{name}: {} passed now, {} recorded",
            now.passed,
            rec.passed
        );
    }
    assert!(record.total.passed >= recorded.total.passed);
}
