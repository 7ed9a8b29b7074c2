//! Runs Prometheus promqltest scripts against faultline's PromQL engine and reports each eval
//! block as passed, failed or unsupported.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use promql::promqltest::{FileReport, Score, Status, run_script};

#[derive(Parser)]
#[command(
    about = "Run Prometheus promqltest scripts (load/clear/eval) against faultline's PromQL engine",
    after_help = "Example: promqltest ../shared/conformance/promql/*.test --show failed\n\nExit codes: 0 no eval failed, 1 some eval failed, 2 bad usage or unreadable script."
)]
struct Args {
    /// Script files (`.test`).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print the eval blocks with this outcome (repeatable): passed, failed, unsupported.
    #[arg(long, value_parser = ["passed", "failed", "unsupported"])]
    show: Vec<String>,
    /// Print one JSON document with every outcome instead of text.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut total = Score::default();
    let mut reports: Vec<(String, FileReport)> = Vec::new();
    for f in &args.files {
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", f.display());
                return ExitCode::from(2);
            }
        };
        let report = match run_script(&text) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {}: {e}", f.display());
                return ExitCode::from(2);
            }
        };
        total.add(&report.score);
        reports.push((f.display().to_string(), report));
    }
    if args.json {
        let files: Vec<serde_json::Value> = reports
            .iter()
            .map(|(name, r)| serde_json::json!({"file": name, "score": r.score, "outcomes": r.outcomes}))
            .collect();
        println!("{}", serde_json::json!({"total": total, "files": files}));
    } else {
        for (name, r) in &reports {
            println!("{name}: {}", r.score);
            for o in &r.outcomes {
                let kind = match o.status {
                    Status::Passed => "passed",
                    Status::Failed => "failed",
                    Status::Unsupported => "unsupported",
                };
                if args.show.iter().any(|s| s == kind) {
                    println!("  line {} {kind}: {}  {}", o.line, o.query, o.reason);
                }
            }
        }
        println!("total: {total}");
    }
    if total.failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
