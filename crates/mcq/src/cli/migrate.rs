//! `mcq migrate`: applies the queue's schema migrations and exits. For
//! PostgreSQL deployments that run `mcq serve --no-migrate` and workers
//! that never migrate, this is the one step that changes the schema.

use anyhow::Context as _;
use mcq_queue::{QueueConfig, Store};

use super::exit::Outcome;

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
    let shown = without_password(&args.database_url);
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

/// The URL with any password replaced, for messages and logs.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, None), |(a, p)| (a, Some(p)));
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    let masked = if user.len() < userinfo.len() {
        format!("{user}:***")
    } else {
        user.to_owned()
    };
    match path {
        Some(path) => format!("{scheme}://{masked}@{host}/{path}"),
        None => format!("{scheme}://{masked}@{host}"),
    }
}

#[cfg(test)]
mod tests {
    use super::without_password;

    #[test]
    fn passwords_are_masked_and_the_rest_kept() {
        assert_eq!(
            without_password("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(without_password("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(without_password("postgres://h/db"), "postgres://h/db");
        assert_eq!(without_password("sqlite:mcq.sqlite"), "sqlite:mcq.sqlite");
    }
}
