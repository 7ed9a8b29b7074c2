//! `collector sweep`: many snapshots in parallel, with an index.

use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};
use problems::Dur;

use runner::snapshot::Options;
use runner::sweep;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  collector sweep --problems 'hotel-*' --seeds 3 --jobs 2 --duration 5m --out out/sweep"
)]
pub struct Args {
    /// Problem ids or glob patterns, comma-separated (`hotel-*,astro-ad-*`).
    #[arg(long)]
    pub problems: String,
    /// Seeds 1..=N for every problem.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub seeds: u64,
    /// Runs in parallel (default: the number of CPUs).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Length of each run (default: each problem's own).
    #[arg(long)]
    pub duration: Option<Dur>,
    /// Output directory: OUT/<problem>/seed-<n>/ per run and OUT/index.json.
    #[arg(long, value_parser = schemas::paths::output_dir)]
    pub out: PathBuf,
    /// Also load specs from this catalog directory.
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Run without noise.
    #[arg(long)]
    pub no_noise: bool,
    /// Print the index as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let catalog = super::snapshot::load_catalog(args.catalog.as_deref())?;
    let selected = catalog
        .problems_matching(&args.problems)
        .map_err(anyhow::Error::msg)?;
    if selected.is_empty() {
        anyhow::bail!(
            "--problems {:?} matches no problem (see `collector problems list`)",
            args.problems
        );
    }
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    let base = Options {
        seed: 1,
        duration: args.duration,
        no_noise: args.no_noise,
        ..Options::default()
    };
    let total = selected.len() as u64 * args.seeds;
    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{bar:30}] {pos}/{len} runs ({elapsed}, eta {eta}) {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let index = sweep::sweep(
        &catalog,
        &selected,
        args.seeds,
        jobs,
        &base,
        &args.out,
        &|e| {
            bar.set_message(format!("{} seed {}", e.problem, e.seed));
            bar.inc(1);
            if !e.ok {
                bar.println(format!(
                    "failed: {} seed {}: {}",
                    e.problem,
                    e.seed,
                    e.error.as_deref().unwrap_or("")
                ));
            }
        },
    )?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&index)?);
    } else {
        println!(
            "sweep of {} runs into {}",
            index.runs.len(),
            args.out.display()
        );
        println!("  ok            {}", index.runs.len() - index.failed);
        println!("  failed        {}", index.failed);
        println!("  with checks not seen  {}", index.checks_failed);
        for r in index
            .runs
            .iter()
            .filter(|r| r.ok && r.checks_passed < r.checks_total)
        {
            println!(
                "    {} seed {}: {}/{} checks",
                r.problem, r.seed, r.checks_passed, r.checks_total
            );
        }
        println!("  index         {}", args.out.join("index.json").display());
    }
    Ok(if index.failed > 0 {
        ExitCode::from(crate::EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}
