//! `collector dataset inspect | validate | export`.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: DatasetCommand,
}

#[derive(Debug, Subcommand)]
pub enum DatasetCommand {}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {}
}
