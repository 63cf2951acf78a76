//! (Being written; replaced by its owner.)

use std::process::ExitCode;

/// Flags of this subcommand.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let _ = args;
    anyhow::bail!("this command is not available yet")
}
