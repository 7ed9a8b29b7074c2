//! The CI pass: every target's corpus (seeds and past findings) as it is, then generated inputs
//! for a few seconds each (`FAULTLINE_FUZZ_SECS`, default 3; `FAULTLINE_FUZZ_SEED` picks other
//! inputs). No input may panic or run past the target's limit.

use std::time::Duration;

use fuzz::engine::{Budget, run_target};

fn pass(name: &str) {
    let secs: f64 = std::env::var("FAULTLINE_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let seed: u64 = std::env::var("FAULTLINE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let target = fuzz::targets::by_name(name).expect("a target");
    let report = run_target(
        &*target,
        Budget {
            inputs: u64::MAX,
            time: Duration::from_secs_f64(secs),
            seed,
            first: 0,
            with_corpus: true,
        },
    );
    for f in &report.findings {
        let shown: String = String::from_utf8_lossy(&f.input)
            .chars()
            .take(300)
            .collect();
        eprintln!("{name}: input {:?}: {}\n  {shown:?}", f.index, f.what);
    }
    assert!(report.corpus > 0, "{name}: the corpus is empty");
    assert!(
        report.inputs >= 50,
        "{name}: only {} generated inputs ran in {secs}s",
        report.inputs
    );
    assert_eq!(
        report.findings.len(),
        0,
        "{name}: {} panics, {} inputs past the limit (seed {seed}; replay with `cargo run -p fuzz -- replay {name} --seed {seed} --index I`)",
        report.panics(),
        report.hangs()
    );
    eprintln!(
        "{name}: {} corpus files and {} generated inputs in {:.1}s, slowest {:?}",
        report.corpus,
        report.inputs,
        report.elapsed.as_secs_f64(),
        report.slowest
    );
}

#[test]
fn promql() {
    pass("promql");
}

#[test]
fn prometheus_api() {
    pass("prometheus_api");
}

#[test]
fn logql() {
    pass("logql");
}

#[test]
fn kube_params() {
    pass("kube_params");
}

#[test]
fn problem_spec() {
    pass("problem_spec");
}

#[test]
fn ground_truth() {
    pass("ground_truth");
}

#[test]
fn agent_output() {
    pass("agent_output");
}

#[test]
fn manifest() {
    pass("manifest");
}
