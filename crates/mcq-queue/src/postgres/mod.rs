//! The PostgreSQL backend: every SQL statement the queue sends to
//! PostgreSQL lives in this module and its children, one small documented
//! function per operation. Times come from the server's `now()`, so
//! workers on machines with skewed clocks agree on leases.

mod access;
mod checkout;
mod complete;
mod functions;
mod herald;
mod holding;
mod listen;
mod overview;
mod pooler;
mod read;
mod session;
mod speed;
mod submit;
mod tally;
mod tasks;
mod tidy;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::Connection as _;
use sqlx::migrate::Migrator;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, Postgres};

use crate::finished::Announcer;
use crate::schema::SchemaStatus;
use crate::store::{PoolMode, QueueConfig, StoreError};

/// `migrations/postgres`, embedded at compile time.
static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/postgres");

/// Channel of the `NOTIFY` sent when work becomes available.
const CHANNEL: &str = "mcq_work";
/// Channel of the `NOTIFY` sent when jobs finish; the payload is the batch
/// id, or the job id for a job without a batch.
const FINISHED_CHANNEL: &str = "mcq_finished";

/// Longest wait for a connection, at start-up and from a busy pool (a
/// server that cannot be reached is given up on sooner: `checkout.rs`).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens `reserve` connections now (the pool keeps them); failing that,
/// says so and goes on, since the pool opens connections on demand too.
async fn open_reserve(pool: &PgPool, reserve: u32) {
    let mut opened = Vec::new();
    if let Err(err) = hold_reserve(pool, reserve, &mut opened).await {
        tracing::warn!(error = %err, opened = opened.len(), reserve, "could not open the reserved connections");
    }
}

/// Takes `reserve` connections of the pool into `held`, all at once, so
/// that each is a connection of its own; stops at the first that fails.
async fn hold_reserve(
    pool: &PgPool,
    reserve: u32,
    held: &mut Vec<PoolConnection<Postgres>>,
) -> Result<(), sqlx::Error> {
    while held.len() < reserve as usize {
        held.push(pool.acquire().await?);
    }
    Ok(())
}

/// A PostgreSQL pool and what the queue needs around it.
#[derive(Debug, Clone)]
pub(crate) struct PgQueue {
    pool: PgPool,
    /// Connections of the pool at work, to tell a busy pool from a dead server.
    checkouts: Arc<checkout::Checkouts>,
    /// Where the pool connects, for connections outside it (migrations).
    options: Arc<PgConnectOptions>,
    config: Arc<QueueConfig>,
    wakeup: Arc<listen::Wakeup>,
    announcer: Announcer,
    /// Notifies, after their commit, of the jobs completions finished.
    herald: herald::Herald,
    /// Completions recorded for each worker and not yet on its row.
    tally: tally::Tally,
    /// The tasks of batches this store holds, and the announcements of
    /// their batches that wait for them.
    holding: Arc<holding::Holding>,
    /// Stops the finished-work listener when the last clone is dropped.
    finished_listener: Arc<OnceLock<tokio::sync::oneshot::Sender<()>>>,
}

impl PgQueue {
    /// Opens a pool; fails now if the server cannot be reached, so a wrong
    /// URL is reported at start-up rather than at the first claim.
    pub(crate) async fn connect(
        url: &str,
        config: Arc<QueueConfig>,
    ) -> Result<PgQueue, StoreError> {
        let mut options: PgConnectOptions = url.parse()?;
        if options.get_application_name().is_none() {
            options = options.application_name(&config.application_name);
        }
        // One connection of our own first: a pool retries a server it cannot
        // reach until its acquire timeout and then says only that it timed
        // out, where one attempt says why (refused, unknown host, bad
        // password, no such database).
        match tokio::time::timeout(ACQUIRE_TIMEOUT, PgConnection::connect_with(&options)).await {
            Ok(Ok(mut probe)) => {
                if config.pool_mode == PoolMode::Transaction {
                    session::warn_unbounded(&mut probe, config.lease).await;
                }
                probe.close().await?;
                match config.pool_mode {
                    PoolMode::Session => pooler::refuse_shared_sessions(&options).await?,
                    PoolMode::Transaction => pooler::refuse_shared_statements(&options).await?,
                }
            }
            Ok(Err(err)) => {
                if let Some(message) = crate::outage::refused_startup_parameter(&err) {
                    return Err(StoreError::StartupParameterRefused {
                        message: message.to_owned(),
                    });
                }
                return Err(err.into());
            }
            Err(_) => {
                return Err(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {} s", ACQUIRE_TIMEOUT.as_secs()),
                ))
                .into());
            }
        }
        let lease = config.lease;
        let checkouts = Arc::<checkout::Checkouts>::default();
        let reserve = config.pool_min.min(config.pool_size);
        let mut pool = PgPoolOptions::new()
            .max_connections(config.pool_size)
            .min_connections(reserve)
            // A dead server must surface as an error within seconds, so the
            // worker's reconnect loop (not a hung await) handles it.
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .test_before_acquire(false)
            .before_acquire({
                let pings = checkouts.pings();
                move |conn, meta| {
                    let pings = pings.clone();
                    Box::pin(
                        async move { Ok(checkout::check_idle(&pings, conn, meta.idle_for).await) },
                    )
                }
            });
        if config.pool_mode == PoolMode::Session {
            // Through a transaction-mode pool the bounds come from the pooler.
            pool = pool.after_connect(move |conn, _meta| Box::pin(session::apply(conn, lease)));
        }
        if reserve > 0 {
            // Reserved connections are never closed for age or idleness:
            // between closing one and opening its replacement, another
            // process may take the database's last free slot.
            pool = pool.idle_timeout(None).max_lifetime(None);
        }
        let pool = pool.connect_lazy_with(options.clone());
        open_reserve(&pool, reserve).await;
        // Through a transaction-mode pool nothing listens: waits then
        // re-read on their own schedule.
        let announcer = Announcer::new(config.pool_mode == PoolMode::Session);
        Ok(PgQueue {
            pool,
            checkouts,
            options: Arc::new(options),
            config,
            wakeup: Arc::new(listen::Wakeup::default()),
            announcer,
            herald: herald::Herald::default(),
            tally: tally::Tally::default(),
            holding: Arc::new(holding::Holding::jittered()),
            finished_listener: Arc::default(),
        })
    }

    /// Applies `migrations/postgres`, on a connection of its own: the
    /// pool's connections carry bounds (`session.rs`) a schema change may
    /// rightly exceed.
    pub(crate) async fn migrate(&self) -> Result<(), StoreError> {
        if self.config.pool_mode == PoolMode::Transaction {
            return Err(StoreError::MigrateThroughTransactionPool);
        }
        let mut conn = PgConnection::connect_with(&self.options).await?;
        let applied = MIGRATOR.run(&mut conn).await;
        // The outcome of the migrations is the answer; a failed goodbye is not.
        let _ = conn.close().await;
        applied?;
        Ok(())
    }

    /// The schema against the migrations this binary embeds, in one round
    /// trip (readiness probes of every process ask it).
    pub(crate) async fn schema_status(&self) -> Result<SchemaStatus, StoreError> {
        let rows =
            sqlx::query_as::<_, (i64, bool)>("SELECT version, success FROM _sqlx_migrations")
                .fetch_all(&mut *self.conn().await?)
                .await;
        let applied = match rows {
            Ok(rows) => Some(rows),
            // undefined_table: nothing was ever migrated here.
            Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("42P01") => None,
            Err(err) => return Err(err.into()),
        };
        Ok(SchemaStatus::compare(
            SchemaStatus::needed(&MIGRATOR),
            applied,
        ))
    }

    /// One round trip.
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&mut *self.conn().await?)
            .await?;
        Ok(())
    }

    /// Closes the pool, once the announcements of finished jobs are out.
    pub(crate) async fn close(&self) {
        self.announced().await;
        self.checkouts.close();
        self.pool.close().await;
    }

    /// Whether this store holds `LISTEN` connections: not through a
    /// transaction-mode pool, whose server connections serve whichever
    /// client runs a transaction (notifications would reach no one).
    fn listens(&self) -> bool {
        self.config.pool_mode == PoolMode::Session
    }

    /// Lease length in seconds, as bound into `make_interval`.
    fn lease_secs(&self) -> f64 {
        self.config.lease.as_secs_f64()
    }
}

/// Tests' view of the server: backends of this database whose last
/// statement was a `LISTEN`.
/// A store on `url` under `config`, its schema migrated.
#[cfg(test)]
async fn migrated(url: &str, config: QueueConfig) -> PgQueue {
    let q = PgQueue::connect(url, std::sync::Arc::new(config))
        .await
        .expect("connect");
    q.migrate().await.expect("migrate");
    q
}

/// For tests: `count` single-task jobs submitted alone (no batch).
#[cfg(test)]
fn single_jobs(count: usize) -> crate::Submission {
    let job = mcq_kernel::Spec {
        runs: Some(1000),
        ..mcq_kernel::Spec::default()
    }
    .validate()
    .expect("valid");
    crate::Submission {
        tenant: crate::DEFAULT_TENANT,
        priority: 0,
        as_batch: false,
        grid: None,
        label: None,
        jobs: vec![job; count],
        idempotency: None,
    }
}

/// For tests: a worker registered on `q`.
#[cfg(test)]
async fn registered_worker(q: &PgQueue) -> uuid::Uuid {
    let info = crate::WorkerInfo {
        hostname: "test-host".into(),
        pid: std::process::id(),
        concurrency: 3,
    };
    q.register_worker(info).await.expect("register")
}

#[cfg(test)]
async fn listening_backends(q: &PgQueue) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND query LIKE 'LISTEN %'",
    )
    .fetch_one(&q.pool)
    .await
    .expect("pg_stat_activity")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `application_name` the store's connections report to the server.
    async fn reported(url: &str, name: &str) -> (String, i64) {
        let config = QueueConfig {
            application_name: name.to_owned(),
            ..QueueConfig::default()
        };
        let q = PgQueue::connect(url, Arc::new(config))
            .await
            .expect("connect");
        let (own, seen): (String, i64) = sqlx::query_as(
            "SELECT current_setting('application_name'),
                    (SELECT count(*) FROM pg_stat_activity
                     WHERE application_name = current_setting('application_name'))",
        )
        .fetch_one(&mut *q.conn().await.expect("a connection"))
        .await
        .expect("read application_name");
        q.close().await;
        (own, seen)
    }

    /// A database's error reads as PostgreSQL's message, detail and hint,
    /// without the line of PostgreSQL's source that raised it.
    #[tokio::test]
    async fn database_errors_say_what_postgres_said_without_its_source_line() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = PgQueue::connect(&db.url, Arc::new(QueueConfig::default()))
            .await
            .expect("connect");
        let failed = |sql: &'static str| {
            let q = q.clone();
            async move {
                sqlx::query(sql)
                    .execute(&mut *q.conn().await.expect("a connection"))
                    .await
                    .expect_err("the statement fails")
            }
        };
        let raw = failed("SELECT 1 / 0").await;
        assert!(raw.to_string().contains(" at line "), "sqlx's text: {raw}");
        let text = StoreError::from(raw).to_string();
        assert_eq!(
            text,
            "database error: error returned from database: division by zero"
        );

        let raw =
            failed("DO $$ BEGIN RAISE EXCEPTION 'no' USING DETAIL = 'why', HINT = 'fix'; END $$")
                .await;
        let migration = sqlx::migrate::MigrateError::ExecuteMigration(raw, 19);
        assert_eq!(
            StoreError::from(migration).to_string(),
            "migration error: while executing migration 19: error returned from database: no \
             (why); hint: fix"
        );
        q.close().await;
    }

    /// An operator tells mcq's processes apart by their connections'
    /// names; one given in the URL (or `PGAPPNAME`) wins.
    #[tokio::test]
    async fn connections_carry_the_configured_name_unless_the_url_names_one() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let (own, seen) = reported(&db.url, "mcq naming test").await;
        let expected = std::env::var("PGAPPNAME").unwrap_or_else(|_| "mcq naming test".into());
        assert_eq!(own, expected);
        assert!(seen >= 1, "pg_stat_activity shows the name");

        let separator = if db.url.contains('?') { '&' } else { '?' };
        let named = format!("{}{separator}application_name=chosen-by-url", db.url);
        let (own, _) = reported(&named, "mcq naming test").await;
        assert_eq!(own, "chosen-by-url");
    }
}
