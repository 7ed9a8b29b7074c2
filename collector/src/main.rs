//! The `collector` binary: a thin shell over the collector library.

use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    collector::cli::init_tracing();
    let cli = collector::cli::Cli::parse();
    match collector::cli::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(collector::cli::EXIT_FAILURE)
        }
    }
}
