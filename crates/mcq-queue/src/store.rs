//! The one storage interface: every method exists for both backends, and
//! dispatches to the module holding that database's SQL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use uuid::Uuid;

use crate::access::Scope;
use crate::outage::read_again_if_dropped;
use crate::postgres::PgQueue;
use crate::schema::SchemaStatus;
use crate::sqlite::SqliteQueue;
use crate::types::*;

/// Errors of the queue.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or answered with an error.
    #[error("database error: {}", said(.0))]
    Database(#[source] sqlx::Error),
    /// Migrations failed.
    #[error("migration error: {}", migration_said(.0))]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The idempotency key was used before with a different request.
    #[error("idempotency key reused with a different request")]
    IdempotencyConflict,
    /// The submission would take its tenant past its quota of queued and
    /// running jobs (see [`Store::submit_within`]); nothing was stored.
    #[error("{active} jobs queued or running and {adding} more would pass the quota of {limit}")]
    QuotaExceeded {
        /// The tenant's `max_active_jobs`.
        limit: u64,
        /// Its jobs queued or running when the submission was counted.
        active: u64,
        /// Jobs in the submission.
        adding: u64,
    },
    /// The database URL is not one we support.
    #[error("unsupported database URL {0:?}: use postgres://… or sqlite:…")]
    UnsupportedUrl(String),
    /// Stored data could not be decoded (a bug or a foreign writer).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// A submission the queue refuses, such as one with no jobs (its specs
    /// are validated before they reach the queue); nothing was stored.
    #[error("job {index}: invalid spec: {message}")]
    InvalidSpec {
        /// Position of the job in the submission.
        index: usize,
        /// Every problem found, joined.
        message: String,
    },
    /// The queue configuration is unusable.
    #[error("invalid queue configuration: {0}")]
    Config(String),
    /// Two open connections reached one PostgreSQL backend: a pooler in
    /// transaction or statement mode is in between, and mcq needs a
    /// session per connection.
    #[error(
        "two open connections reached the same PostgreSQL backend (pid {backend}): a pooler in \
         transaction or statement mode (PgBouncer's pool_mode = transaction) is in between; mcq \
         keeps state in each session (LISTEN, its timeouts, prepared statements), so connect \
         directly or through a pool in session mode (pool_mode = session); through PgBouncer 1.21 \
         or later in transaction mode, start with --db-pool-mode transaction (see \
         deploy/README.md)"
    )]
    TransactionPooler {
        /// The backend both connections reached.
        backend: i32,
    },
    /// The server refused a startup parameter the driver sends: a
    /// PgBouncer whose `ignore_startup_parameters` does not list it.
    #[error(
        "the server refused a startup parameter of the connection ({message}): PgBouncer refuses \
         parameters it does not know, and the driver sends extra_float_digits; set \
         `ignore_startup_parameters = extra_float_digits` in pgbouncer.ini (see deploy/README.md)"
    )]
    StartupParameterRefused {
        /// The server's message, naming the parameter.
        message: String,
    },
    /// In transaction pool mode, statements prepared on one connection
    /// met another's on a shared server connection: the pooler does not
    /// carry prepared statements across server connections.
    #[error(
        "the pooler does not keep each connection's prepared statements apart ({message}): \
         transaction pool mode needs PgBouncer 1.21 or later with max_prepared_statements above \
         0 (see deploy/README.md)"
    )]
    PreparedStatementsShared {
        /// What the server said.
        message: String,
    },
    /// A transaction pool mode with an SQLite URL: the embedded store has
    /// no pooler in front of it.
    #[error(
        "--db-pool-mode transaction is for PostgreSQL behind a pooler in transaction mode; the \
         embedded SQLite store has none: leave the pool mode at session"
    )]
    PoolModeWithoutPostgres,
    /// Migrations need a session of their own, which a transaction-mode
    /// pool does not give.
    #[error(
        "migrations need a PostgreSQL session of their own (the migrator holds a session lock), \
         which a pool in transaction mode does not give: run `mcq migrate` with a direct URL or \
         through a pool in session mode, and start this process with --no-migrate"
    )]
    MigrateThroughTransactionPool,
}

/// A database's error as its reader needs it: PostgreSQL's message, its
/// detail and its hint. sqlx's own text ends with the line of PostgreSQL's
/// C source that raised the error ("at line 374"), which reads like a line
/// of the user's input and is not one.
fn said(err: &sqlx::Error) -> String {
    let sqlx::Error::Database(db) = err else {
        return err.to_string();
    };
    let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() else {
        return err.to_string();
    };
    let mut text = format!("error returned from database: {}", pg.message());
    if let Some(detail) = pg.detail() {
        text.push_str(&format!(" ({detail})"));
    }
    if let Some(hint) = pg.hint() {
        text.push_str(&format!("; hint: {hint}"));
    }
    text
}

/// A failed migration in the words of [`said`].
fn migration_said(err: &sqlx::migrate::MigrateError) -> String {
    use sqlx::migrate::MigrateError;
    match err {
        MigrateError::ExecuteMigration(err, version) => {
            format!("while executing migration {version}: {}", said(err))
        }
        MigrateError::Execute(err) => format!("while executing migrations: {}", said(err)),
        other => other.to_string(),
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> StoreError {
        crate::outage::note(&err);
        StoreError::Database(err)
    }
}

impl StoreError {
    /// True when the database is not there right now — unreachable, shut
    /// down, or out of connections — as opposed to a query it refused or
    /// data it holds. A caller may retry these later; every other error
    /// will happen again.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Database(err) => crate::outage::is_outage(err),
            _ => false,
        }
    }

    /// True when the database URL itself is unusable: it does not parse,
    /// names no database mcq supports, or does not fit the pool mode. A
    /// mistake of configuration, which no retry heals.
    pub fn is_bad_url(&self) -> bool {
        matches!(
            self,
            StoreError::UnsupportedUrl(_)
                | StoreError::PoolModeWithoutPostgres
                | StoreError::Database(sqlx::Error::Configuration(_))
        )
    }
}

/// Knobs of the queue (defaults are what users get without flags).
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// How long a claim is valid without a heartbeat.
    pub lease: Duration,
    /// Attempts per task before its job fails.
    pub max_attempts: u32,
    /// Base of the exponential retry backoff.
    pub retry_backoff: Duration,
    /// Chunks per task when a job is split (see `mcq_kernel::CHUNK_PATHS`).
    pub chunks_per_task: u64,
    /// Finished jobs older than this are pruned.
    pub retention: Duration,
    /// PostgreSQL: a batch of at least this many jobs, each one task, is
    /// stored as rows of 5,000 jobs that claims turn into running jobs and
    /// tasks (the `staged` table and `mcq_claim`); smaller batches
    /// are written out at once. The embedded store always writes at once.
    pub stage_from: usize,
    /// PostgreSQL: most connections the store's pool opens (the embedded
    /// store always has one writer and four readers). A worker uses up to
    /// four at once, a server one per request in flight plus one for long
    /// polls (see deploy/README.md).
    pub pool_size: u32,
    /// PostgreSQL: connections opened at start and kept open (at most
    /// `pool_size`). A server keeps a few, so that it goes on answering
    /// when workers have taken every connection the database allows.
    pub pool_min: u32,
    /// PostgreSQL: a call waiting for a connection gives up as unavailable
    /// once this long passes in which the pool handed out no connection
    /// and took none back while some were free to open: the server is
    /// down or does not answer. A pool with every connection at work is
    /// waited for (up to 5 s). Also the longest restart of the server that
    /// reads ride out.
    pub unreachable_after: Duration,
    /// PostgreSQL: whether each connection is a session of its own (direct,
    /// or a pool in session mode) or shares its server connection with
    /// others between transactions (a pool in transaction mode).
    pub pool_mode: PoolMode,
    /// PostgreSQL: the `application_name` each connection reports, so an
    /// operator tells the processes apart in `pg_stat_activity` and in the
    /// server's log (`%a`), unless the URL (`?application_name=`) or
    /// `PGAPPNAME` names one.
    pub application_name: String,
}

/// How the store's connections reach PostgreSQL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PoolMode {
    /// Each connection is a PostgreSQL session of its own: directly, or
    /// through a pool in session mode. The store `LISTEN`s for wake-ups and
    /// bounds every session (`postgres/session.rs`); a connection that turns
    /// out to share its backend is refused at start.
    #[default]
    Session,
    /// Through a pool in transaction mode (PgBouncer 1.21 or later with
    /// `max_prepared_statements`): no `LISTEN` (workers find work by polling,
    /// long polls re-read on their own schedule), the session bounds come
    /// from the pooler, and migrations are refused (the migrator holds a
    /// session lock).
    Transaction,
}

impl Default for QueueConfig {
    /// Recovery within seconds: a 10 s lease, renewed by heartbeats.
    fn default() -> Self {
        QueueConfig {
            lease: Duration::from_secs(10),
            max_attempts: 3,
            retry_backoff: Duration::from_secs(1),
            chunks_per_task: 16,
            retention: Duration::from_secs(7 * 24 * 3600),
            stage_from: 1000,
            pool_size: 16,
            pool_min: 0,
            unreachable_after: Duration::from_millis(900),
            pool_mode: PoolMode::Session,
            application_name: "mcq".to_owned(),
        }
    }
}

impl QueueConfig {
    /// Rejects settings under which the queue cannot work.
    fn check(&self) -> Result<(), StoreError> {
        if self.lease < Duration::from_millis(10) {
            return Err(StoreError::Config(format!(
                "lease must be at least 10 ms (got {:?})",
                self.lease
            )));
        }
        if self.max_attempts == 0 {
            return Err(StoreError::Config("max_attempts must be at least 1".into()));
        }
        if self.stage_from == 0 {
            return Err(StoreError::Config("stage_from must be at least 1".into()));
        }
        if self.pool_size == 0 {
            return Err(StoreError::Config("pool_size must be at least 1".into()));
        }
        if self.unreachable_after.is_zero() {
            return Err(StoreError::Config(
                "unreachable_after must be above zero".into(),
            ));
        }
        if self.chunks_per_task == 0 {
            return Err(StoreError::Config(
                "chunks_per_task must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// A connection pool to one backend. Cheap to clone: clones share the pool.
///
/// Reads (`job`, `batch`, `batch_jobs`, `workers`, `schema_status`) are
/// tried again (a few times, within about a second) when their connection
/// breaks under them, so a short server restart is a delay to their
/// callers rather than an error.
/// Writes are not: one whose answer was lost may have committed.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) backend: Backend,
    config: Arc<QueueConfig>,
    refused: Arc<AtomicU64>,
}

/// The database behind a [`Store`].
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    Postgres(PgQueue),
    Sqlite(SqliteQueue),
}

/// Runs the same method on whichever backend the store has.
macro_rules! dispatch {
    ($store:expr, $q:ident => $call:expr) => {
        match &$store.backend {
            $crate::store::Backend::Postgres($q) => $call,
            $crate::store::Backend::Sqlite($q) => $call,
        }
    };
}
pub(crate) use dispatch;

impl Store {
    /// Connects to `postgres://…` or `sqlite:…` (file created if missing).
    pub async fn connect(url: &str, config: QueueConfig) -> Result<Store, StoreError> {
        config.check()?;
        let config = Arc::new(config);
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres(PgQueue::connect(url, config.clone()).await?)
        } else if url.starts_with("sqlite:") {
            if config.pool_mode == PoolMode::Transaction {
                return Err(StoreError::PoolModeWithoutPostgres);
            }
            Backend::Sqlite(SqliteQueue::connect(url, config.clone()).await?)
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_owned()));
        };
        Ok(Store {
            backend,
            config,
            refused: Arc::new(AtomicU64::new(0)),
        })
    }
    /// Applies the embedded migrations of this backend.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        dispatch!(self, q => q.migrate().await)
    }
    /// Prepares a reader's statements (a job by id, a batch by id) on
    /// every connection the store keeps open from its start, so that no
    /// long poll pays a new backend's first read on top of its result. On
    /// PostgreSQL that first read costs milliseconds; SQLite prepares in
    /// its own process in microseconds, and nothing is done.
    pub async fn warm_reads(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Postgres(q) => q.warm_reads().await,
            Backend::Sqlite(_) => Ok(()),
        }
    }
    /// Cheap round trip, for readiness checks.
    pub async fn ping(&self) -> Result<(), StoreError> {
        dispatch!(self, q => q.ping().await)
    }
    /// Whether the database holds every migration this binary embeds (a
    /// round trip too, so an answer also means the database is reachable).
    /// Readiness means [`SchemaStatus::Ready`]: on an empty or half-migrated
    /// database every other call fails.
    pub async fn schema_status(&self) -> Result<SchemaStatus, StoreError> {
        read_again_if_dropped(move || async move { dispatch!(self, q => q.schema_status().await) })
            .await
    }
    /// The configuration this store was opened with.
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }
    /// `"postgres"` or `"sqlite"`.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Postgres(_) => "postgres",
            Backend::Sqlite(_) => "sqlite",
        }
    }
    /// Completions, failures and releases refused by fencing (the lease was
    /// lost) through this store since it was opened: late workers.
    pub fn refused_count(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
    /// Closes the pools (waits for connections in use to come back).
    pub async fn close(&self) {
        dispatch!(self, q => q.close().await)
    }

    /// Enqueues a job or a batch in bulk, all or nothing.
    pub async fn submit(&self, submission: Submission) -> Result<Submitted, StoreError> {
        self.submit_within(submission, None).await
    }
    /// Enqueues as [`Store::submit`] does, unless the submission would take
    /// its tenant past `max_active_jobs` jobs queued or running
    /// ([`StoreError::QuotaExceeded`], nothing stored). The count and the
    /// insert are one step for the tenant: submissions racing each other
    /// never pass the quota together. A repeated idempotency key is
    /// answered with what it created, whatever the count.
    pub async fn submit_within(
        &self,
        submission: Submission,
        max_active_jobs: Option<u64>,
    ) -> Result<Submitted, StoreError> {
        dispatch!(self, q => q.submit(submission, max_active_jobs).await)
    }
    /// One job with its result, if it exists within `scope`.
    pub async fn job(&self, id: Uuid, scope: Scope) -> Result<Option<JobView>, StoreError> {
        read_again_if_dropped(move || async move { dispatch!(self, q => q.job(id, scope).await) })
            .await
    }
    /// Counts, statistics and timings of a batch within `scope`, in one query.
    pub async fn batch(&self, id: Uuid, scope: Scope) -> Result<Option<BatchView>, StoreError> {
        read_again_if_dropped(move || async move { dispatch!(self, q => q.batch(id, scope).await) })
            .await
    }
    /// A page of a batch's jobs in submission order, after job `after`
    /// (an `after` that is not in the batch gives an empty page). `limit`
    /// is capped at [`MAX_PAGE`] + 1: a caller serving pages of up to
    /// [`MAX_PAGE`] reads one row more to tell whether another follows.
    /// `None` when the batch does not exist within `scope`.
    pub async fn batch_jobs(
        &self,
        id: Uuid,
        scope: Scope,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Option<Vec<JobView>>, StoreError> {
        let limit = limit.clamp(1, MAX_PAGE + 1);
        read_again_if_dropped(move || async move {
            dispatch!(self, q => q.batch_jobs(id, scope, after, limit).await)
        })
        .await
    }
    /// Cancels a job within `scope` that has not finished; returns its
    /// state afterwards (`None`: no such job within `scope`).
    pub async fn cancel_job(&self, id: Uuid, scope: Scope) -> Result<Option<JobState>, StoreError> {
        dispatch!(self, q => q.cancel_job(id, scope).await)
    }
    /// Cancels every unfinished job of a batch within `scope`; returns how
    /// many were cancelled (`None`: no such batch within `scope`).
    pub async fn cancel_batch(&self, id: Uuid, scope: Scope) -> Result<Option<u64>, StoreError> {
        dispatch!(self, q => q.cancel_batch(id, scope).await)
    }
    /// Batches newest first, filtered as `query` says, at most
    /// `query.limit` (capped at [`MAX_BATCH_PAGE`]). Each view is read as
    /// [`Store::batch`] reads it, so a page costs what its batches' views do.
    /// Only the batches within `scope` are listed.
    pub async fn batches(
        &self,
        query: BatchQuery,
        scope: Scope,
    ) -> Result<Vec<BatchView>, StoreError> {
        let query = BatchQuery {
            limit: query.limit.clamp(1, MAX_BATCH_PAGE),
            ..query
        };
        let query = &query;
        read_again_if_dropped(
            move || async move { dispatch!(self, q => q.batches(query, scope).await) },
        )
        .await
    }
    /// Workers heard from within [`LOST_LISTED`], each with its state
    /// (`lost` once its heartbeat is older than the lease), the tasks it
    /// holds and its recent throughput; oldest first.
    pub async fn workers(&self) -> Result<Vec<WorkerView>, StoreError> {
        read_again_if_dropped(move || async move { dispatch!(self, q => q.workers().await) }).await
    }
    /// Succeeded jobs among the `scan` most recently submitted that
    /// finished within `within`, with their specs and kernel time: how
    /// fast the fleet has been computing. Bounded by `scan` rows of the
    /// primary key, whatever the size of the tables.
    pub async fn recent_compute(
        &self,
        scan: u32,
        within: Duration,
    ) -> Result<Vec<FinishedCompute>, StoreError> {
        read_again_if_dropped(move || async move {
            dispatch!(self, q => q.recent_compute(scan, within).await)
        })
        .await
    }
    /// The queue as a whole: unfinished tasks by state, the age of the
    /// oldest due one, workers by state. A few index reads, whatever the
    /// number of finished jobs.
    pub async fn queue(&self) -> Result<QueueView, StoreError> {
        read_again_if_dropped(move || async move { dispatch!(self, q => q.queue().await) }).await
    }

    /// Registers a worker process.
    pub async fn register_worker(&self, info: WorkerInfo) -> Result<Uuid, StoreError> {
        dispatch!(self, q => q.register_worker(info).await)
    }
    /// Renews the worker's heartbeat and the leases it presents as
    /// `(task id, lease token)` — only those: a task claimed by a round trip
    /// whose answer never arrived is not renewed, so its lease runs out and
    /// the task is rescued. A lease is renewed once past half its length,
    /// so a heartbeat every third of a lease (or more often) keeps it alive
    /// while rewriting only long-running tasks. Reports the presented tasks whose job was
    /// cancelled (once each) and those whose lease is no longer held.
    pub async fn heartbeat(
        &self,
        worker: Uuid,
        held: &[(i64, Uuid)],
    ) -> Result<Heartbeat, StoreError> {
        dispatch!(self, q => q.heartbeat(worker, held, None).await)
    }
    /// [`Store::heartbeat`], also recording what the worker tells of
    /// itself for the worker list (in the same round trip).
    pub async fn heartbeat_reporting(
        &self,
        worker: Uuid,
        held: &[(i64, Uuid)],
        pulse: WorkerPulse,
    ) -> Result<Heartbeat, StoreError> {
        dispatch!(self, q => q.heartbeat(worker, held, Some(pulse)).await)
    }
    /// Ends expired leases: a task with attempts left goes back to the
    /// queue (its worker vanished; any worker may claim it again), and one
    /// on its last allowed attempt fails with its job (each time, the
    /// worker holding it vanished: a task that kills its worker must not
    /// be rescued forever). Workers call this every heartbeat interval, so
    /// claiming never scans running tasks.
    pub async fn reap(&self) -> Result<Reaped, StoreError> {
        dispatch!(self, q => q.reap().await)
    }
    /// Reaps as [`Store::reap`] does, if no one (any worker of the fleet)
    /// reaped in the last `gap`; `None` when it was not this caller's turn.
    /// Workers make the same offer with each heartbeat, with half the
    /// interval ([`WorkerPulse::reaper_gap`](crate::WorkerPulse)): however
    /// many they are, the running tasks are scanned about once an
    /// interval, and a lost lease is ended within its length plus one and
    /// a half intervals.
    pub async fn reap_in_turn(&self, gap: Duration) -> Result<Option<Reaped>, StoreError> {
        if !dispatch!(self, q => q.take_reaper_turn(gap).await)? {
            return Ok(None);
        }
        self.reap().await.map(Some)
    }
    /// Claims up to `max` due queued tasks (expired leases are requeued by [`Store::reap`]).
    pub async fn claim(&self, worker: Uuid, max: u32) -> Result<Vec<ClaimedTask>, StoreError> {
        Ok(self.claim_reporting(worker, max, 0).await?.tasks)
    }
    /// [`Store::claim`], `ahead` of the `max` tasks wanted beyond the
    /// worker's free slots, telling whether it passed over work other
    /// claims held. See [`Store::complete_and_claim_ahead`].
    async fn claim_reporting(
        &self,
        worker: Uuid,
        max: u32,
        ahead: u32,
    ) -> Result<Claim, StoreError> {
        if max == 0 {
            return Ok(Claim::default());
        }
        match &self.backend {
            Backend::Postgres(q) => q.claim(worker, max, ahead).await,
            Backend::Sqlite(q) => Ok(Claim {
                tasks: q.claim(worker, max, ahead).await?,
                contended: false,
            }),
        }
    }
    /// Records finished tasks, fenced by their lease tokens; a job's result
    /// is written in the same transaction as its last task. Returns the ids
    /// of tasks whose completion was refused (lease lost).
    pub async fn complete(
        &self,
        worker: Uuid,
        done: Vec<TaskDone>,
    ) -> Result<Vec<i64>, StoreError> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        let refused = dispatch!(self, q => q.complete(worker, done).await)?;
        self.count_refused(refused.len());
        Ok(refused)
    }
    /// Whether [`Store::complete_and_claim`] saves a call: true on
    /// PostgreSQL (one round trip instead of two), false on SQLite (in
    /// this process, where a call costs no round trip and the two run one
    /// after the other anyway).
    pub fn claims_carry_completions(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }
    /// Records finished tasks as [`Store::complete`] does, then claims up
    /// to `max` tasks as [`Store::claim`] does: on PostgreSQL the results
    /// and the claim in one transaction and one round trip (which commits
    /// only once the results are on disk); partials of split jobs are
    /// recorded by a call before it. A worker about to claim uses it to send the
    /// results it holds along with the claim. On an error nothing was
    /// recorded or claimed; where the two run one after the other, a claim
    /// that fails after the completion was recorded comes back as the
    /// error in [`CompletedAndClaimed::claimed`].
    pub async fn complete_and_claim(
        &self,
        worker: Uuid,
        done: Vec<TaskDone>,
        max: u32,
    ) -> Result<CompletedAndClaimed, StoreError> {
        self.complete_and_claim_ahead(worker, done, max, 0).await
    }
    /// [`Store::complete_and_claim`] for a worker that wants `ahead` of the
    /// `max` tasks beyond its free slots (a prefetch). Those take at most
    /// the worker's share of the work left after the free slots' (due
    /// queued tasks, and staged jobs on PostgreSQL): divided among the
    /// live fleet's workers that do not drain, counted in workers of this
    /// one's slots, at least two, rounded up. A worker that finishes its
    /// first task of a small batch does not take all the rest ahead of the
    /// others, and a fleet nearing the end of its work claims a few tasks
    /// a worker, not whole prefetch windows.
    pub async fn complete_and_claim_ahead(
        &self,
        worker: Uuid,
        done: Vec<TaskDone>,
        max: u32,
        ahead: u32,
    ) -> Result<CompletedAndClaimed, StoreError> {
        if done.is_empty() {
            let claim = self.claim_reporting(worker, max, ahead).await?;
            return Ok(CompletedAndClaimed {
                refused: Vec::new(),
                claimed: Ok(claim.tasks),
                contended: claim.contended,
            });
        }
        if max == 0 {
            let refused = self.complete(worker, done).await?;
            return Ok(CompletedAndClaimed {
                refused,
                claimed: Ok(Vec::new()),
                contended: false,
            });
        }
        if let Backend::Postgres(q) = &self.backend {
            let reply = q.complete_and_claim(worker, done, max, ahead).await?;
            self.count_refused(reply.refused.len());
            return Ok(reply);
        }
        // SQLite, in this process: one after the other.
        let refused = self.complete(worker, done).await?;
        let claimed = self
            .claim_reporting(worker, max, ahead)
            .await
            .map(|claim| claim.tasks);
        Ok(CompletedAndClaimed {
            refused,
            claimed,
            contended: false,
        })
    }
    /// Records a failed attempt (fenced); retried with backoff or fails the job.
    /// Returns false when the lease was already lost.
    pub async fn fail(
        &self,
        worker: Uuid,
        task_id: i64,
        lease_token: Uuid,
        error: &str,
    ) -> Result<bool, StoreError> {
        let accepted = dispatch!(self, q => q.fail(worker, task_id, lease_token, error).await)?;
        self.count_refused(usize::from(!accepted));
        Ok(accepted)
    }
    /// Hands tasks back to the queue without counting an attempt (shutdown).
    /// Tasks whose lease was already lost are left alone.
    pub async fn release(&self, worker: Uuid, tasks: &[(i64, Uuid)]) -> Result<(), StoreError> {
        if tasks.is_empty() {
            return Ok(());
        }
        let released = dispatch!(self, q => q.release(worker, tasks).await)?;
        self.count_refused(tasks.len().saturating_sub(released));
        Ok(())
    }
    /// Removes a worker at shutdown.
    pub async fn deregister(&self, worker: Uuid) -> Result<(), StoreError> {
        dispatch!(self, q => q.deregister(worker).await)
    }
    /// Subscribes to signals that work may be available (NOTIFY from
    /// every process on PostgreSQL, an in-process signal on SQLite); see
    /// [`WorkEvents::wait`](crate::WorkEvents::wait). A wait may return
    /// early without work: callers just claim again.
    pub fn work_events(&self) -> crate::WorkEvents {
        dispatch!(self, q => q.work_events())
    }
    /// Tells the other workers that `worker` ran out of work, so that one
    /// holding claimed tasks it has not started can hand some back (a
    /// `NOTIFY` on PostgreSQL, reaching every process; an in-process signal
    /// on SQLite). A hint: nothing depends on it arriving.
    pub async fn announce_idle(&self, worker: Uuid) -> Result<(), StoreError> {
        dispatch!(self, q => q.announce_idle(worker).await)
    }
    /// Subscribes to idle announcements ([`Store::announce_idle`]),
    /// including the subscriber's own.
    pub fn idle_workers(&self) -> crate::IdleWorkers {
        dispatch!(self, q => q.idle_workers())
    }
    /// Subscribes to announcements that jobs finished (succeeded, failed or
    /// cancelled), keyed by batch id, or job id for a job without a batch;
    /// see [`FinishedEvents::wait_for`](crate::FinishedEvents::wait_for). On PostgreSQL they come from every
    /// process through `NOTIFY` (one `LISTEN` connection per store, opened
    /// on the first subscription); on SQLite from this process only.
    /// Announcements are hints for long polls, never a substitute for
    /// reading the state.
    pub fn finished_events(&self) -> crate::FinishedEvents {
        dispatch!(self, q => q.finished_events())
    }
    /// Deletes finished jobs, results and tasks older than the retention
    /// (and expired idempotency keys), in bounded chunks; returns the number
    /// of jobs deleted.
    pub async fn prune(&self) -> Result<u64, StoreError> {
        dispatch!(self, q => q.prune().await)
    }

    fn count_refused(&self, n: usize) {
        if n > 0 {
            self.refused.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

/// Most jobs one page of [`Store::batch_jobs`] returns.
pub const MAX_PAGE: u32 = 1000;

/// Most batches one page of [`Store::batches`] returns: each is a batch
/// view, whose cost grows with the batch.
pub const MAX_BATCH_PAGE: u32 = 100;

/// How long after its last heartbeat a worker stays in the worker list
/// (as `lost` once its lease has passed), so that a crash shows.
pub const LOST_LISTED: Duration = Duration::from_secs(300);
