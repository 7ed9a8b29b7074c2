//! `judge`: see `judge --help`.

use std::process::ExitCode;

use clap::Parser;
use judge::cli::{self, Cli, Command};

fn main() -> ExitCode {
    judge::llm::install_crypto_provider();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    // `judge report ... | head`: a closed stdout ends the command quietly.
    schemas::stdout::run_main(|| {
        let result = match cli.command {
            Command::Run(args) => tokio::runtime::Runtime::new()
                .map_err(anyhow::Error::from)
                .and_then(|rt| rt.block_on(cli::run(args))),
            Command::Report(args) => cli::report(args),
            Command::Agree(args) => cli::agree(args),
        };
        match result {
            Ok(code) => code,
            Err(e) if e.chain().any(schemas::stdout::is_broken_pipe_error) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        }
    })
}
