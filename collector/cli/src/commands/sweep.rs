//! `collector sweep`: many snapshots in parallel into a results store, sharded and resumable;
//! `collector sweep merge`: the index of what a store holds.

use std::path::PathBuf;
use std::process::ExitCode;

use problems::Dur;

use super::shard::{OUT_HELP, ShardArgs, open_store, progress, retry};
use runner::snapshot::Options;
use runner::sweep::{self, ENTRY_FILE, INDEX_FILE, Index, Sweep};

#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Examples:\n  collector sweep --problems 'hotel-*' --seeds 3 --jobs 2 --duration 5m --out out/sweep\n  collector sweep --problems '*' --seeds 20 --out s3://corpus/v1 --shard-index 0 --shard-count 8\n  collector sweep merge --from s3://corpus/v1\n\n\
Runs land in OUT/<problem>/seed-<n>/ with a sweep.json each; a run already there is not made again, so the same command resumes. \
Run as shards (--shard-index/--shard-count, or JOB_COMPLETION_INDEX in an Indexed Job's pods), each shard makes its share; `collector sweep merge` then writes OUT/index.json. \
Unsharded, the sweep writes it itself.\n\
Exit codes: 0 every run made; 1 some snapshots failed (their sweep.json says why; making them again fails the same way); 75 some runs could not be stored (try again: the runs stored are kept)."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<SweepCommand>,
    /// Problem ids or glob patterns, comma-separated (`hotel-*,astro-ad-*`).
    #[arg(long, required = true)]
    pub problems: Option<String>,
    /// Seeds 1..=N for every problem.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub seeds: u64,
    /// Runs in parallel (default: the number of CPUs).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Length of each run (default: each problem's own).
    #[arg(long)]
    pub duration: Option<Dur>,
    #[arg(long, required = true, help = OUT_HELP)]
    pub out: Option<String>,
    #[command(flatten)]
    pub shard: ShardArgs,
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

#[derive(Debug, clap::Subcommand)]
pub enum SweepCommand {
    /// Write the index of a sweep's store (OUT/index.json) from the runs there, shards still
    /// running or not, and say which runs are missing.
    #[command(after_help = "Example:\n  collector sweep merge --from s3://corpus/v1 --json")]
    Merge(MergeArgs),
}

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The sweep's --out.
    #[arg(long)]
    pub from: String,
    /// Print the index as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(SweepCommand::Merge(m)) = args.command {
        return merge(m);
    }
    let (Some(problems), Some(out)) = (&args.problems, &args.out) else {
        anyhow::bail!("--problems and --out are required");
    };
    let catalog = super::snapshot::load_catalog(args.catalog.as_deref())?;
    let selected = catalog
        .problems_matching(problems)
        .map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        !selected.is_empty(),
        "--problems {problems:?} matches no problem (see `collector problems list`)"
    );
    let shard = args.shard.shard()?;
    let store = open_store(out, ENTRY_FILE)?;
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    let job = Sweep {
        catalog: &catalog,
        problems: selected,
        seeds: args.seeds,
        base: Options {
            seed: 1,
            duration: args.duration,
            no_noise: args.no_noise,
            ..Options::default()
        },
        jobs,
        shard,
    };
    let total = shard.take(0..job.plan().work.len()).len() as u64;
    let bar = progress(args.json, total, "runs");
    let runtime = tokio::runtime::Runtime::new()?;
    let report = job.run(&store, runtime.handle(), &|e| {
        bar.set_message(format!("{} seed {}", e.problem, e.seed));
        bar.inc(1);
        if let Some(err) = &e.error {
            bar.println(format!("failed: {} seed {}: {err}", e.problem, e.seed));
        }
    });
    bar.finish_and_clear();
    let report = report.map_err(|e| retry(e.context(format!("sweep into {out}"))))?;
    for (key, e) in &report.unstored {
        eprintln!("not stored: {key}: {e}");
    }
    let failed = report.made.iter().filter(|e| !e.ok).count();
    eprintln!(
        "{shard}: {} runs: {} made now ({failed} failed), {} there before, {} made first by another writer, {} not stored",
        total,
        report.made.len(),
        report.resumed,
        report.raced,
        report.unstored.len()
    );
    if shard.is_all() {
        let index = write_index(&runtime, &store)?;
        print_index(&index, store.describe(), args.json)?;
    } else {
        eprintln!("when every shard is done: collector sweep merge --from {out}");
    }
    Ok(if !report.unstored.is_empty() {
        ExitCode::from(results::EXIT_RETRY)
    } else if failed > 0 {
        ExitCode::from(crate::EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}

fn merge(args: MergeArgs) -> anyhow::Result<ExitCode> {
    let store = open_store(&args.from, ENTRY_FILE)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let index = write_index(&runtime, &store)?;
    print_index(&index, store.describe(), args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Merges the store's runs into its index and writes it there.
fn write_index(runtime: &tokio::runtime::Runtime, store: &results::Store) -> anyhow::Result<Index> {
    runtime.block_on(async {
        let index = sweep::merge(store).await?;
        store
            .put_file(INDEX_FILE, serde_json::to_vec_pretty(&index)?)
            .await?;
        Ok(index)
    })
}

fn print_index(index: &Index, shown: &str, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(index)?);
        return Ok(());
    }
    let total = index.runs.len() + index.missing.len();
    println!("sweep of {total} runs in {shown}");
    println!("  ok            {}", index.runs.len() - index.failed);
    println!("  failed        {}", index.failed);
    println!("  missing       {}", index.missing.len());
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
    for r in index.runs.iter().filter(|r| !r.ok) {
        println!("    failed {}: {}", r.key, r.error.as_deref().unwrap_or(""));
    }
    println!(
        "  index         {}/{INDEX_FILE}",
        shown.trim_end_matches('/')
    );
    Ok(())
}
