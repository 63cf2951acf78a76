//! `mcq keys` and `mcq tenants`: API keys and tenant quotas, written
//! straight into the database (as `mcq migrate` does), so that an operator
//! can make the first key before any server accepts one.

use anyhow::Context as _;
use mcq_queue::{KeyRecord, NewKey, QueueConfig, Role, Store, Tenant, TenantLimits};

use super::count::count;
use super::exit::{Outcome, bad_input};
use super::redact::redact;

/// Where the keys live.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DatabaseFlag {
    /// `postgres://…` or `sqlite:FILE`: the database of the servers the keys
    /// are for (migrated first if needed).
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite:mcq.sqlite")]
    database_url: String,
}

/// `mcq keys …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum KeysCommand {
    /// Make a key for a tenant (created if new) and print it: it is shown
    /// only this once; the database keeps only its hash.
    Create {
        /// The tenant the key acts for: 1 to 64 letters, digits, `.`, `_` or `-`.
        #[arg(long, value_parser = tenant_name)]
        tenant: String,
        /// `read` sees the tenant's work; `submit` also submits and cancels;
        /// `admin` sees and cancels every tenant's work, and the workers.
        #[arg(long, default_value = "submit", value_parser = role)]
        role: Role,
        /// A note for people (who holds the key, what for), up to 200 characters.
        #[arg(long)]
        label: Option<String>,
        /// Print only the key, for scripts: `KEY=$(mcq keys create --tenant t --quiet)`.
        #[arg(long, short)]
        quiet: bool,
        #[command(flatten)]
        db: DatabaseFlag,
    },
    /// List every key: id, tenant, role, label, when made and revoked (never secrets).
    List {
        #[command(flatten)]
        db: DatabaseFlag,
    },
    /// Revoke a key by its id (servers stop accepting it within seconds).
    Revoke {
        /// The key's id, as `mcq keys list` shows it.
        id: String,
        #[command(flatten)]
        db: DatabaseFlag,
    },
}

/// `mcq tenants …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum TenantsCommand {
    /// List the tenants and their quotas.
    List {
        #[command(flatten)]
        db: DatabaseFlag,
    },
    /// Set a tenant's quotas (the tenant is created if new); flags not
    /// given keep their value, `none` removes a limit.
    Set {
        /// The tenant's name.
        #[arg(value_parser = tenant_name)]
        name: String,
        /// Most of its jobs queued or running at once (`none`: no limit);
        /// a submission past it is answered 429.
        #[arg(long, value_parser = limit)]
        max_active_jobs: Option<Limit>,
        /// Most Monte Carlo paths one of its jobs may ask for (`none`: no
        /// limit); a spec past it is answered 422.
        #[arg(long, value_parser = limit)]
        max_paths_per_job: Option<Limit>,
        #[command(flatten)]
        db: DatabaseFlag,
    },
}

/// A limit flag: a count, or no limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit(Option<u64>);

fn limit(text: &str) -> Result<Limit, String> {
    if text.eq_ignore_ascii_case("none") {
        return Ok(Limit(None));
    }
    count::<u64>(1..=i64::MAX as u64)(text).map(|n| Limit(Some(n)))
}

fn role(text: &str) -> Result<Role, String> {
    Role::parse(text).ok_or_else(|| format!("{text:?} is not a role: read, submit or admin"))
}

/// Tenant names appear in logs and URLs of dashboards: keep them plain.
fn tenant_name(text: &str) -> Result<String, String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if (1..=64).contains(&text.len()) && text.chars().all(plain) {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "{text:?}: a tenant name is 1 to 64 letters, digits, '.', '_' or '-'"
        ))
    }
}

/// Most characters of a key's label.
const MAX_LABEL_CHARS: usize = 200;

/// Runs `mcq keys …`.
pub(crate) fn run_keys(command: KeysCommand) -> anyhow::Result<Outcome> {
    match command {
        KeysCommand::Create {
            tenant,
            role,
            label,
            quiet,
            db,
        } => {
            if label
                .as_ref()
                .is_some_and(|l| l.chars().count() > MAX_LABEL_CHARS)
            {
                return Err(bad_input(format!(
                    "--label must be at most {MAX_LABEL_CHARS} characters"
                )));
            }
            let minted = mcq_keys::mint().context("making a key")?;
            let record = with_store(&db, |store| async move {
                store
                    .create_key(NewKey {
                        id: minted.id.clone(),
                        tenant,
                        role,
                        label,
                        secret_hash: minted.secret_hash.clone(),
                    })
                    .await
            })
            .context("storing the key")?;
            if quiet {
                println!("{}", minted.key);
            } else {
                println!(
                    "key {} for tenant {} (role {})",
                    record.id, record.tenant.name, record.role
                );
                println!("{}", minted.key);
                println!(
                    "Keep it now: it is not shown again (the database keeps only its hash). \
                     Send it as `Authorization: Bearer <key>`, or `--api-key` / MCQ_API_KEY."
                );
            }
        }
        KeysCommand::List { db } => {
            let keys = with_store(&db, |store| async move { store.keys().await })?;
            print_keys(&keys);
        }
        KeysCommand::Revoke { id, db } => {
            let revoked = with_store(&db, |store| async move { store.revoke_key(&id).await })?;
            let Some(key) = revoked else {
                return Err(bad_input("no key with this id (see `mcq keys list`)"));
            };
            println!(
                "key {} (tenant {}) revoked; servers refuse it within {} s",
                key.id,
                key.tenant.name,
                mcq_api::KEY_CACHE_TTL.as_secs()
            );
        }
    }
    Ok(Outcome::Done)
}

/// Runs `mcq tenants …`.
pub(crate) fn run_tenants(command: TenantsCommand) -> anyhow::Result<Outcome> {
    match command {
        TenantsCommand::List { db } => {
            let tenants = with_store(&db, |store| async move { store.tenants().await })?;
            print_tenants(&tenants);
        }
        TenantsCommand::Set {
            name,
            max_active_jobs,
            max_paths_per_job,
            db,
        } => {
            let tenant = with_store(&db, |store| async move {
                let current = store
                    .tenants()
                    .await?
                    .into_iter()
                    .find(|t| t.name == name)
                    .map(|t| t.limits)
                    .unwrap_or_default();
                let limits = TenantLimits {
                    max_active_jobs: max_active_jobs.map_or(current.max_active_jobs, |l| l.0),
                    max_paths_per_job: max_paths_per_job.map_or(current.max_paths_per_job, |l| l.0),
                };
                store.set_tenant_limits(&name, limits).await
            })?;
            print_tenants(&[tenant]);
        }
    }
    Ok(Outcome::Done)
}

/// Connects (migrating if needed), runs `work`, closes.
fn with_store<T, F>(db: &DatabaseFlag, work: impl FnOnce(Store) -> F) -> anyhow::Result<T>
where
    F: Future<Output = Result<T, mcq_queue::StoreError>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let shown = redact(&db.database_url);
    runtime.block_on(async {
        let store = Store::connect(&db.database_url, QueueConfig::default())
            .await
            .with_context(|| format!("connecting to {shown}"))?;
        store
            .migrate()
            .await
            .with_context(|| format!("migrating {shown}"))?;
        let out = work(store.clone()).await;
        store.close().await;
        Ok(out?)
    })
}

fn print_keys(keys: &[KeyRecord]) {
    println!(
        "{:<16}  {:<16}  {:<6}  {:<20}  {:<20}  label",
        "id", "tenant", "role", "created", "revoked"
    );
    for key in keys {
        println!(
            "{:<16}  {:<16}  {:<6}  {:<20}  {:<20}  {}",
            key.id,
            key.tenant.name,
            key.role,
            key.created_at.format("%Y-%m-%d %H:%M:%S"),
            key.revoked_at.map_or_else(
                || "-".to_owned(),
                |t| t.format("%Y-%m-%d %H:%M:%S").to_string()
            ),
            key.label.as_deref().unwrap_or("")
        );
    }
}

fn print_tenants(tenants: &[Tenant]) {
    let shown = |limit: Option<u64>| limit.map_or_else(|| "none".to_owned(), |n| n.to_string());
    println!(
        "{:<16}  {:>16}  {:>18}",
        "tenant", "max_active_jobs", "max_paths_per_job"
    );
    for tenant in tenants {
        println!(
            "{:<16}  {:>16}  {:>18}",
            tenant.name,
            shown(tenant.limits.max_active_jobs),
            shown(tenant.limits.max_paths_per_job)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_names_roles_and_limits_parse_strictly() {
        assert!(tenant_name("alice-lab.2").is_ok());
        for bad in ["", "a b", "é", "a/b", &"x".repeat(65)] {
            assert!(tenant_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(role("admin"), Ok(Role::Admin));
        assert!(role("owner").is_err());
        assert_eq!(limit("none").map(|l| l.0), Ok(None));
        assert_eq!(limit("1e3").map(|l| l.0), Ok(Some(1000)));
        assert!(limit("0").is_err());
    }
}
