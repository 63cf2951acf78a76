//! `mcq migrate`: applies the queue's schema migrations and exits. For
//! PostgreSQL deployments that run `mcq serve --no-migrate` and workers
//! that never migrate, this is the one step that changes the schema.

use anyhow::Context as _;
use mcq_queue::{QueueConfig, Store};

use super::exit::Outcome;
use super::redact::redact;

/// Flags of `mcq migrate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// `postgres://…` or `sqlite:FILE` (an SQLite file is created if missing).
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite:mcq.sqlite")]
    database_url: String,
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let shown = redact(&args.database_url);
    runtime.block_on(async {
        let store = Store::connect(&args.database_url, QueueConfig::default())
            .await
            .with_context(|| format!("connecting to {shown}"))?;
        store
            .migrate()
            .await
            .with_context(|| format!("migrating {shown}"))?;
        store.close().await;
        anyhow::Ok(())
    })?;
    println!("mcq: {shown} is migrated");
    Ok(Outcome::Done)
}
