//! The SQLite backend: every SQL statement the queue sends to SQLite lives
//! in this module and its children. Same tables, states and guards as the
//! PostgreSQL backend; the dialect differs (see the migration's header).
//!
//! Writes go through a one-connection pool and run as `BEGIN IMMEDIATE`
//! transactions, so writers queue in-process instead of failing with
//! `SQLITE_BUSY`; reads use a separate pool and see WAL snapshots. Other
//! processes on the same file are serialised by SQLite's lock and the busy
//! timeout.

mod access;
mod complete;
mod overview;
mod read;
mod speed;
mod submit;
mod tasks;
mod tidy;

use std::str::FromStr as _;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use uuid::Uuid;

use crate::finished::{Announcer, FinishedEvents};
use crate::idle::{IdleAnnouncer, IdleWorkers};
use crate::schema::SchemaStatus;
use crate::store::{QueueConfig, StoreError};
use crate::work::{WorkEvents, WorkSignal};

/// `migrations/sqlite`, embedded at compile time.
static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/sqlite");

/// An SQLite file and what the queue needs around it.
#[derive(Debug, Clone)]
pub(crate) struct SqliteQueue {
    writer: SqlitePool,
    reader: SqlitePool,
    config: Arc<QueueConfig>,
    /// Wakes embedded workers of this process when work is added.
    work: WorkSignal,
    /// Finished-work announcements, from this process only.
    announcer: Announcer,
    /// Idle workers of this process.
    idle: IdleAnnouncer,
    /// Turns the order in which claims serve tenants (fair share).
    turn: Arc<AtomicU64>,
}

impl SqliteQueue {
    /// Opens (creating if needed) the database file.
    pub(crate) async fn connect(
        url: &str,
        config: Arc<QueueConfig>,
    ) -> Result<SqliteQueue, StoreError> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // WAL + NORMAL: durable across process crashes; a power cut may
            // lose the last commits, never corrupt the file.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            // An in-memory database lives as long as its only connection.
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await?;
        let reader = if in_memory {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(4)
                .connect_with(options)
                .await?
        };
        Ok(SqliteQueue {
            writer,
            reader,
            config,
            work: WorkSignal::default(),
            announcer: Announcer::new(false),
            idle: IdleAnnouncer::default(),
            turn: Arc::default(),
        })
    }

    /// Applies `migrations/sqlite`.
    pub(crate) async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.writer).await?;
        Ok(())
    }

    /// The schema against the migrations this binary embeds.
    pub(crate) async fn schema_status(&self) -> Result<SchemaStatus, StoreError> {
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations')",
        )
        .fetch_one(&self.reader)
        .await?;
        let applied = if exists {
            Some(
                sqlx::query_as::<_, (i64, bool)>("SELECT version, success FROM _sqlx_migrations")
                    .fetch_all(&self.reader)
                    .await?,
            )
        } else {
            None
        };
        Ok(SchemaStatus::compare(
            SchemaStatus::needed(&MIGRATOR),
            applied,
        ))
    }

    /// One round trip.
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.reader).await?;
        Ok(())
    }

    /// Closes both pools.
    pub(crate) async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }

    /// Subscribes to this process's finished-work announcements (they
    /// carry no key: any finish wakes every waiter, which re-reads).
    pub(crate) fn finished_events(&self) -> FinishedEvents {
        self.announcer.subscribe()
    }

    /// Subscribes to the signals that this process added work.
    pub(crate) fn work_events(&self) -> WorkEvents {
        self.work.subscribe()
    }

    /// Idle announcements reach the workers of this process only, as work
    /// announcements do.
    pub(crate) async fn announce_idle(&self, worker: Uuid) -> Result<(), StoreError> {
        self.idle.announce(worker);
        Ok(())
    }

    pub(crate) fn idle_workers(&self) -> IdleWorkers {
        self.idle.subscribe()
    }

    /// Tells this process's workers that work may be waiting.
    fn wake(&self) {
        self.work.wake();
    }

    /// A write transaction that takes the database lock up front, so it
    /// never fails half-way on a lock upgrade.
    async fn write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Lease length in microseconds.
    fn lease_us(&self) -> i64 {
        duration_us(self.config.lease)
    }
}

/// The clock of this machine, which is the database's clock, in
/// microseconds since the Unix epoch (the unit of every time column).
fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// A duration in microseconds, saturating.
fn duration_us(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A time column back as a timestamp.
fn time(us: i64) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
    chrono::DateTime::from_timestamp_micros(us)
        .ok_or_else(|| StoreError::Corrupt(format!("time {us} out of range")))
}
