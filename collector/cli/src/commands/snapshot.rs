//! `collector snapshot`: run one problem in the simulator and write its dataset, ground truth and
//! evaluator record.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use problems::{Catalog, Dur};

use runner::snapshot::{self, Options, Report};
use sim::SimConfig;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  collector snapshot --problem hotel-geo-target-port --seed 7 --out out/geo\n  collector snapshot --problem hotel-profile-oom --duration 3m --json\n  collector snapshot --env kube --kubeconfig ~/.kube/config --problem hotel-geo-target-port \\\n    --prometheus http://localhost:9090 --baseline 1m --hold 5m --out out/real"
)]
pub struct Args {
    /// Problem id (see `collector problems list`).
    #[arg(long)]
    pub problem: String,
    /// Seed: the same seed gives the same dataset, byte for byte (with --env kube: the same
    /// noise schedule).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Length of the run, baseline included (e.g. `15m`, `3m`); the problem's own duration by
    /// default. Shorter runs keep the problem's proportions.
    #[arg(long)]
    pub duration: Option<Dur>,
    /// Output directory: the dataset goes to OUT/dataset, the ground truth and evaluator record
    /// beside it. Default: out/<problem>-seed<seed>.
    #[arg(long, value_parser = schemas::paths::output_dir)]
    pub out: Option<PathBuf>,
    /// Also load specs from this catalog directory.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Run without the problem's noise profile (with --env kube: no pod is killed as noise).
    #[arg(long)]
    pub no_noise: bool,
    /// Prometheus scrape interval in seconds.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(i64).range(1..=300))]
    pub scrape_interval: i64,
    /// Exit with status 1 when a capture-quality check fails or the leak scan finds something.
    #[arg(long)]
    pub strict: bool,
    /// Print the report as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Where the problem runs: `sim`, the embedded simulator; `kube`, a real cluster (--kubeconfig):
    /// a baseline is captured, the faults are injected through the API and held, captured, then
    /// reverted.
    #[arg(long, value_enum, default_value = "sim")]
    pub env: EnvKind,
    #[command(flatten)]
    pub kube: super::cluster::KubeSnapshotArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EnvKind {
    Sim,
    Kube,
}

/// Loads the built-in catalog, with an optional directory laid over it.
pub fn load_catalog(dir: Option<&std::path::Path>) -> anyhow::Result<Catalog> {
    Ok(match dir {
        Some(d) => Catalog::builtin_with_dir(d)?,
        None => Catalog::builtin()?,
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let catalog = load_catalog(args.catalog.as_deref())?;
    let problem = catalog.problem(&args.problem).with_context(|| {
        format!(
            "no problem `{}` in the catalog (see `collector problems list`)",
            args.problem
        )
    })?;
    if args.env == EnvKind::Kube {
        return on_cluster(&args, &catalog, problem);
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("out/{}-seed{}", problem.id, args.seed)));
    let opts = Options {
        seed: args.seed,
        duration: args.duration,
        no_noise: args.no_noise,
        sim: SimConfig {
            scrape_interval: args.scrape_interval,
            ..SimConfig::default()
        },
        start_ns: None,
    };
    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} simulating {msg} [{bar:30}] {pos}/{len} s ({elapsed})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_message(problem.application.clone());
    let report = snapshot::snapshot(&catalog, problem, &opts, &out, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&report);
    }
    let clean = report.checks_passed() == report.checks.len() && report.leaks.is_empty();
    Ok(if args.strict && !clean {
        ExitCode::from(crate::EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--env kube`: the problem on a real cluster.
fn on_cluster(
    args: &Args,
    catalog: &Catalog,
    problem: &problems::ProblemSpec,
) -> anyhow::Result<ExitCode> {
    let app = catalog
        .app(&problem.application)
        .with_context(|| format!("problem {} names no known app", problem.id))?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("out/{}-kube", problem.id)));
    let run = realcluster::snapshot::Run {
        catalog,
        problem,
        app,
        noise_seed: (!args.no_noise).then_some(args.seed),
    };
    let report = realcluster::snapshot::snapshot(&args.kube.options(), &run, &out, !args.json)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("snapshot of {} on a cluster", report.problem);
        println!("  dataset       {}", report.dataset.display());
        println!("  ground truth  {}", report.ground_truth.display());
        for (table, rows) in &report.capture.rows {
            println!("  {table:<13} {rows} rows");
        }
        for k in &report.kept {
            println!("  left as found: {k}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_summary(r: &Report) {
    let rows = |t: &str| r.rows.get(t).copied().unwrap_or(0);
    println!(
        "snapshot of {} (seed {}, {})",
        r.problem, r.seed, r.application
    );
    println!(
        "  dataset       {}  (id {})",
        r.dataset.display(),
        &r.dataset_id[..r.dataset_id.len().min(16)]
    );
    println!(
        "  window        {} .. {}  ({} s simulated)",
        r.window_start, r.window_end, r.simulated_secs
    );
    println!(
        "  rows          objects {} · events {} · logs {} · metrics {} · spans {} · alerts {}",
        rows("objects"),
        rows("events"),
        rows("logs"),
        rows("metrics"),
        rows("spans"),
        rows("alerts")
    );
    for i in &r.injections {
        println!("  injected      {i}");
    }
    println!("  noise         {} transient disturbances", r.noise_events);
    println!(
        "  capture       {}/{} visibility checks passed",
        r.checks_passed(),
        r.checks.len()
    );
    for c in r.checks.iter().filter(|c| !c.passed) {
        println!("    not seen:   {} ({})", c.expectation, c.observed);
    }
    if r.leaks.is_empty() {
        println!("  leak scan     clean");
    } else {
        println!(
            "  leak scan     {} findings, e.g. {}",
            r.leaks.len(),
            r.leaks[0]
        );
    }
    println!("  ground truth  {}", r.ground_truth.display());
    println!("  evaluation    {}", r.evaluation.display());
    println!(
        "  took          {:.1} s ({:.0}x real time){}",
        r.wall_secs,
        r.simulated_secs as f64 / r.wall_secs.max(1e-3),
        r.peak_rss_bytes
            .map(|b| format!(", peak memory {} MiB", b >> 20))
            .unwrap_or_default()
    );
}
