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
    let (argv, concealed) = match collector::conceal::argv() {
        Ok(argv) => argv,
        Err(err) => return failed(err),
    };
    let cli = collector::Cli::parse_from(&argv);
    if cli.starts_agents() && !concealed {
        return failed(collector::conceal::reexec(&argv));
    }
    // `collector problems list | head -1`: a closed stdout ends the command quietly.
    schemas::stdout::run_main(|| match collector::execute(cli) {
        Ok(code) => code,
        Err(err) if err.chain().any(schemas::stdout::is_broken_pipe_error) => ExitCode::SUCCESS,
        Err(err) => failed(err),
    })
}

fn failed(err: anyhow::Error) -> ExitCode {
    eprintln!("error: {err:#}");
    ExitCode::from(collector::exit_code_of(&err))
}
