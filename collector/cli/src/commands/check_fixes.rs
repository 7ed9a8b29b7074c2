//! `collector problems check-fixes`: the mitigation proof of every selected problem, one live
//! environment after another, with a progress bar (or one JSON line per problem) and a summary.

use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use problems::{Catalog, ProblemSpec};

use live::LiveOptions;
use live::proof::{self, FixProof};

pub fn run(
    catalog: &Catalog,
    selected: &[ProblemSpec],
    seed: u64,
    no_noise: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let bar = if json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(selected.len() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} problems ({elapsed}) {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let opts = LiveOptions {
        seed,
        speed: 1.0,
        since_onset: problems::Dur::from_secs(300),
        no_noise,
        listen: "127.0.0.1:0".parse()?,
        out: None,
        record: false,
        bare: false,
        limits: Default::default(),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let mut proofs: Vec<FixProof> = vec![];
    for p in selected {
        bar.set_message(p.id.clone());
        let proof = runtime.block_on(proof::prove(catalog, p, &opts, &oracle::failure_reasons))?;
        if json {
            println!("{}", serde_json::to_string(&proof)?);
        } else {
            bar.suspend(|| println!("{}", line(&proof)));
        }
        bar.inc(1);
        proofs.push(proof);
    }
    bar.finish_and_clear();
    let passed = proofs.iter().filter(|p| p.passed).count();
    let unreachable = proofs.iter().filter(|p| p.unreachable.is_some()).count();
    let failed = proofs.len() - passed - unreachable;
    if json {
        println!(
            "{}",
            serde_json::json!({"passed": passed, "unreachable": unreachable, "failed": failed, "total": proofs.len()})
        );
    } else {
        println!(
            "{passed}/{} problems proved: the reference fix recovers them and they do not recover alone; {unreachable} without a fix through the API, {failed} failed",
            proofs.len()
        );
    }
    Ok(if failed > 0 {
        ExitCode::from(crate::EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}

/// One human line per problem, with the reasons of a failure.
fn line(p: &FixProof) -> String {
    if let Some(why) = &p.unreachable {
        return format!("SKIP {}: {why}", p.problem);
    }
    if p.passed {
        let secs = p
            .fixed
            .as_ref()
            .and_then(|v| v.recovered_after_secs)
            .unwrap_or_default();
        return format!("PASS {}: recovered {secs}s after the fix", p.problem);
    }
    let mut out = format!("FAIL {}", p.problem);
    for c in p.commands.iter().filter(|c| !c.ok) {
        out.push_str(&format!("\n  `{}` failed: {}", c.command, c.output));
    }
    if let Some(v) = p.fixed.as_ref().filter(|v| !v.passed) {
        out.push_str("\n  with the fix:");
        for r in &v.reasons {
            out.push_str(&format!("\n    {r}"));
        }
    }
    if p.left_alone.as_ref().is_some_and(|v| v.passed) {
        out.push_str("\n  left alone, the problem recovers by itself");
    }
    out
}
