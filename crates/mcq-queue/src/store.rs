//! The one storage interface: every method exists for both backends.
//! (Signatures are the contract other crates build against; the queue owner
//! fills in the bodies and may add methods, but should not rename these.)

use std::time::Duration;

use uuid::Uuid;

use crate::types::*;

/// Errors of the queue.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or answered with an error.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Migrations failed.
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The idempotency key was used before with a different request.
    #[error("idempotency key reused with a different request")]
    IdempotencyConflict,
    /// The database URL is not one we support.
    #[error("unsupported database URL {0:?}: use postgres://… or sqlite:…")]
    UnsupportedUrl(String),
    /// Stored data could not be decoded (a bug or a foreign writer).
    #[error("corrupt row: {0}")]
    Corrupt(String),
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
}

/// A connection pool to one backend.
#[derive(Debug, Clone)]
pub struct Store {
    _private: (),
}

impl Store {
    /// Connects to `postgres://…` or `sqlite:…` (file created if missing).
    pub async fn connect(url: &str, config: QueueConfig) -> Result<Store, StoreError> {
        let _ = (url, config);
        todo!("queue")
    }
    /// Applies the embedded migrations of this backend.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        todo!("queue")
    }
    /// Cheap round trip, for readiness checks.
    pub async fn ping(&self) -> Result<(), StoreError> {
        todo!("queue")
    }
    /// Enqueues a job or a batch in bulk, all or nothing.
    pub async fn submit(&self, submission: Submission) -> Result<Submitted, StoreError> {
        let _ = submission;
        todo!("queue")
    }
    /// One job with its result, if it exists.
    pub async fn job(&self, id: Uuid) -> Result<Option<JobView>, StoreError> {
        let _ = id;
        todo!("queue")
    }
    /// Counts, statistics and timings of a batch, in one query.
    pub async fn batch(&self, id: Uuid) -> Result<Option<BatchView>, StoreError> {
        let _ = id;
        todo!("queue")
    }
    /// A page of a batch's jobs in submission order, after job `after`.
    /// `None` when the batch does not exist.
    pub async fn batch_jobs(&self, id: Uuid, after: Option<Uuid>, limit: u32) -> Result<Option<Vec<JobView>>, StoreError> {
        let _ = (id, after, limit);
        todo!("queue")
    }
    /// Cancels a job that has not finished; returns its state afterwards.
    pub async fn cancel_job(&self, id: Uuid) -> Result<Option<JobState>, StoreError> {
        let _ = id;
        todo!("queue")
    }
    /// Cancels every unfinished job of a batch; returns how many were cancelled.
    pub async fn cancel_batch(&self, id: Uuid) -> Result<Option<u64>, StoreError> {
        let _ = id;
        todo!("queue")
    }
    /// Workers that sent a heartbeat recently.
    pub async fn workers(&self) -> Result<Vec<WorkerView>, StoreError> {
        todo!("queue")
    }

    /// Registers a worker process.
    pub async fn register_worker(&self, info: WorkerInfo) -> Result<Uuid, StoreError> {
        let _ = info;
        todo!("queue")
    }
    /// Renews the worker's heartbeat and the leases of all tasks it holds;
    /// returns the ids of its tasks whose jobs were cancelled.
    pub async fn heartbeat(&self, worker: Uuid) -> Result<Vec<i64>, StoreError> {
        let _ = worker;
        todo!("queue")
    }
    /// Claims up to `max` runnable tasks (queued, or running with an expired lease).
    pub async fn claim(&self, worker: Uuid, max: u32) -> Result<Vec<ClaimedTask>, StoreError> {
        let _ = (worker, max);
        todo!("queue")
    }
    /// Records finished tasks, fenced by their lease tokens; a job's result
    /// is written in the same transaction as its last task. Returns the ids
    /// of tasks whose completion was refused (lease lost).
    pub async fn complete(&self, worker: Uuid, done: Vec<TaskDone>) -> Result<Vec<i64>, StoreError> {
        let _ = (worker, done);
        todo!("queue")
    }
    /// Records a failed attempt (fenced); retried with backoff or fails the job.
    /// Returns false when the lease was already lost.
    pub async fn fail(&self, worker: Uuid, task_id: i64, lease_token: Uuid, error: &str) -> Result<bool, StoreError> {
        let _ = (worker, task_id, lease_token, error);
        todo!("queue")
    }
    /// Hands tasks back to the queue without counting an attempt (shutdown).
    pub async fn release(&self, worker: Uuid, tasks: &[(i64, Uuid)]) -> Result<(), StoreError> {
        let _ = (worker, tasks);
        todo!("queue")
    }
    /// Removes a worker at shutdown.
    pub async fn deregister(&self, worker: Uuid) -> Result<(), StoreError> {
        let _ = worker;
        todo!("queue")
    }
    /// Waits until work may be available (NOTIFY on PostgreSQL, an
    /// in-process signal on SQLite) or `timeout` passes.
    pub async fn wait_for_work(&self, timeout: Duration) {
        let _ = timeout;
        todo!("queue")
    }
    /// Deletes finished jobs, results and tasks older than the retention.
    pub async fn prune(&self) -> Result<u64, StoreError> {
        todo!("queue")
    }
}
