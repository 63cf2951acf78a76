//! `mcq man`: the man page of `mcq` on stdout, or with `--dir` one page per
//! command (`mcq.1`, `mcq-submit.1`, `mcq-bench-compare.1`, …).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::exit::Outcome;

/// Flags of `mcq man`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Write `mcq.1` and a page per command into this directory instead.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Renders the pages of `command` (the whole `mcq` command).
pub(crate) fn run(args: &Args, command: clap::Command) -> anyhow::Result<Outcome> {
    let command = command.disable_help_subcommand(true);
    match &args.dir {
        None => match clap_mangen::Man::new(command).render(&mut std::io::stdout()) {
            // A reader such as `head` may close the pipe early.
            Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other.context("writing the man page")?,
        },
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            write_pages(dir, command)?;
        }
    }
    Ok(Outcome::Done)
}

/// Writes `command`'s page and, recursively, one for each subcommand, named
/// by the path of names (`mcq-bench-kernel.1`) as `man mcq-bench-kernel`
/// expects; clap's build step gives each subcommand that display name.
fn write_pages(dir: &Path, mut command: clap::Command) -> anyhow::Result<()> {
    command.build();
    let name = command
        .get_display_name()
        .unwrap_or(command.get_name())
        .to_owned();
    let path = dir.join(format!("{name}.1"));
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut page)
        .with_context(|| format!("rendering {name}"))?;
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        write_pages(dir, sub.clone())?;
    }
    Ok(())
}
