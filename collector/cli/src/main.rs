//! The `collector` binary: a thin shell over the collector library.

use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    collector::init_tracing();
    // kube, reqwest (capture, the judge's LLM client) and the proxies are built on rustls with
    // ring only: it is the process default, for every command.
    judge::llm::install_crypto_provider();
    let cli = collector::Cli::parse();
    match collector::execute(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(collector::EXIT_FAILURE)
        }
    }
}
