//! `collector problems list | show | validate | check-fixes | catalog-md`: the problem catalog from the command
//! line. The logic lives in the `problems` crate; this module only parses arguments and prints.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use problems::Catalog;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  collector problems list --pattern 'hotel-*'\n  collector problems validate my-problems/"
)]
pub struct Args {
    #[command(subcommand)]
    pub command: ProblemsCommand,
}

#[derive(Debug, Subcommand)]
pub enum ProblemsCommand {
    /// List problems (id, application, layers, title).
    #[command(after_help = "Example:\n  collector problems list --pattern 'astro-*,*-oom' --json")]
    List {
        /// Comma-separated glob patterns over problem ids.
        #[arg(long, default_value = "*")]
        pattern: String,
        /// Also load specs from this catalog directory (apps/, noise/, problems/ or problem files).
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Show one problem's spec.
    #[command(after_help = "Example:\n  collector problems show hotel-geo-target-port")]
    Show {
        id: String,
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print the parsed spec as JSON instead of its TOML source.
        #[arg(long)]
        json: bool,
    },
    /// Validate the built-in catalog, or a catalog directory laid over it.
    #[command(after_help = "Example:\n  collector problems validate ./my-catalog --json")]
    Validate {
        dir: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Prove that each problem can be mitigated: its reference fix, run with real kubectl against
    /// a live environment, recovers it (graded on a fast-forwarded fork), and the problem left
    /// alone does not recover.
    #[command(
        name = "check-fixes",
        after_help = "Example:\n  collector problems check-fixes --pattern 'hotel-*'\n  collector problems check-fixes --json > proof.json\n\nNeeds kubectl on PATH. Exits 1 when a problem with a fix fails its proof."
    )]
    CheckFixes {
        /// Comma-separated glob patterns over problem ids.
        #[arg(long, default_value = "*")]
        pattern: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run the problems without their noise profiles.
        #[arg(long)]
        no_noise: bool,
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print one JSON object per problem and a summary line.
        #[arg(long)]
        json: bool,
    },
    /// Regenerate problems/CATALOG.md from the specs (or check that it is current).
    #[command(
        name = "catalog-md",
        after_help = "Example:\n  collector problems catalog-md --out problems/CATALOG.md"
    )]
    CatalogMd {
        #[arg(long, default_value = "problems/CATALOG.md")]
        out: PathBuf,
        /// Exit 1 if the file differs instead of writing it.
        #[arg(long)]
        check: bool,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        ProblemsCommand::List { pattern, dir, json } => {
            let catalog = super::snapshot::load_catalog(dir.as_deref())?;
            let found = catalog
                .problems_matching(&pattern)
                .map_err(anyhow::Error::msg)?;
            if json {
                let rows: Vec<_> = found
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "id": p.id,
                            "application": p.application,
                            "title": p.title,
                            "layers": p.layers(),
                            "primitives": p.faults.iter().map(|f| f.primitive.name()).collect::<Vec<_>>(),
                            "compound": p.is_compound(),
                            "decoys": p.decoys.len(),
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for p in &found {
                    let prims: Vec<&str> = p.faults.iter().map(|f| f.primitive.name()).collect();
                    println!(
                        "{:<40} {:<18} {:<40} {}",
                        p.id,
                        p.application,
                        prims.join("+"),
                        p.title
                    );
                }
                eprintln!("{} problem(s)", found.len());
            }
            Ok(ExitCode::SUCCESS)
        }
        ProblemsCommand::Show { id, dir, json } => {
            let catalog = super::snapshot::load_catalog(dir.as_deref())?;
            let Some(p) = catalog.problem(&id) else {
                eprintln!("error: no problem `{id}` (see `collector problems list`)");
                return Ok(ExitCode::from(crate::EXIT_FAILURE));
            };
            if json {
                println!("{}", serde_json::to_string_pretty(p)?);
            } else if let Some(file) = catalog.problem_file(&id) {
                println!("# {}\n{}", file.path, file.text);
            }
            Ok(ExitCode::SUCCESS)
        }
        ProblemsCommand::Validate { dir, json } => {
            let result = match dir.as_deref() {
                Some(d) => Catalog::builtin_with_dir(d),
                None => Catalog::builtin(),
            };
            match result {
                Ok(c) => {
                    if json {
                        println!(
                            "{}",
                            serde_json::json!({"valid": true, "problems": c.problems().count(), "apps": c.apps().count(), "diagnostics": []})
                        );
                    } else {
                        println!(
                            "ok: {} problems, {} applications",
                            c.problems().count(),
                            c.apps().count()
                        );
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    if json {
                        println!(
                            "{}",
                            serde_json::json!({"valid": false, "diagnostics": e.diagnostics})
                        );
                    } else {
                        eprint!("{e}");
                    }
                    Ok(ExitCode::from(crate::EXIT_FAILURE))
                }
            }
        }
        ProblemsCommand::CheckFixes {
            pattern,
            seed,
            no_noise,
            dir,
            json,
        } => {
            let catalog = super::snapshot::load_catalog(dir.as_deref())?;
            let selected: Vec<_> = catalog
                .problems_matching(&pattern)
                .map_err(anyhow::Error::msg)?
                .into_iter()
                .cloned()
                .collect();
            super::check_fixes::run(&catalog, &selected, seed, no_noise, json)
        }
        ProblemsCommand::CatalogMd { out, check } => {
            let catalog = Catalog::builtin()?;
            let text = problems::catalog_md::render(&catalog);
            if check {
                let current = std::fs::read_to_string(&out).unwrap_or_default();
                if current != text {
                    eprintln!(
                        "{} is stale: run `collector problems catalog-md`",
                        out.display()
                    );
                    return Ok(ExitCode::from(crate::EXIT_FAILURE));
                }
                return Ok(ExitCode::SUCCESS);
            }
            datasets::write_atomically(&out, text.as_bytes())
                .with_context(|| format!("writing {}", out.display()))?;
            println!("wrote {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}
