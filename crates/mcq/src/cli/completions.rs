//! `mcq completions SHELL`: a completion script for the shell, on stdout.

use std::io::Write as _;

use anyhow::Context as _;

use super::exit::Outcome;

/// Flags of `mcq completions`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Install, e.g.: mcq completions bash > ~/.local/share/bash-completion/completions/mcq"
)]
pub(crate) struct Args {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Writes the script for `command` (the whole `mcq` command) to stdout.
pub(crate) fn run(args: &Args, mut command: clap::Command) -> anyhow::Result<Outcome> {
    // Rendered first, then written: clap_complete panics on a write error,
    // and a reader such as `head` may close the pipe early.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "mcq", &mut script);
    match std::io::stdout().write_all(&script) {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.context("writing the completion script")?,
    }
    Ok(Outcome::Done)
}
