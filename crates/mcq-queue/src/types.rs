//! Public data of the queue: what clients see and what workers exchange.
//! Field names of the `*View` types are part of the HTTP API's contract.

use chrono::{DateTime, Utc};
use mcq_kernel::{PriceResult, Spec};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// State of a job (and, with the same names, of a task).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting to be claimed (possibly after a retry backoff).
    Queued,
    /// At least one task is claimed by a worker.
    Running,
    /// Result written.
    Succeeded,
    /// Gave up after the last attempt; `error` says why.
    Failed,
    /// Cancelled by a client before it finished.
    Cancelled,
}

/// Timestamps the server records for a job, and durations derived from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobTimings {
    /// When the job was enqueued.
    pub submitted_at: DateTime<Utc>,
    /// When a worker first claimed one of its tasks.
    pub started_at: Option<DateTime<Utc>>,
    /// When its result (or final failure/cancellation) was written.
    pub finished_at: Option<DateTime<Utc>>,
    /// `started_at - submitted_at` in milliseconds.
    pub queue_wait_ms: Option<f64>,
    /// Kernel time summed over the job's successful tasks, in milliseconds.
    pub compute_ms: Option<f64>,
}

/// A job as clients see it (`GET /v1/jobs/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobView {
    /// Job id.
    pub id: Uuid,
    /// Batch the job was submitted in, if any.
    pub batch_id: Option<Uuid>,
    /// Current state.
    pub state: JobState,
    /// The spec as stored (defaults filled, seed drawn).
    pub spec: Spec,
    /// Present once the job succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<PriceResult>,
    /// Present once the job failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Claims made so far over all of the job's tasks.
    pub attempts: u32,
    /// Timestamps and durations.
    pub timings: JobTimings,
}

/// Number of a batch's jobs in each state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StateCounts {
    /// Jobs waiting.
    pub queued: u64,
    /// Jobs being computed.
    pub running: u64,
    /// Jobs with a result.
    pub succeeded: u64,
    /// Jobs that gave up.
    pub failed: u64,
    /// Jobs cancelled.
    pub cancelled: u64,
}

/// Statistics over the prices of a batch's succeeded jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PriceStats {
    /// Number of prices summarised.
    pub count: u64,
    /// Mean price.
    pub mean: f64,
    /// Smallest price.
    pub min: f64,
    /// Largest price.
    pub max: f64,
    /// Sample standard deviation of the prices (n - 1 denominator).
    pub stddev: f64,
    /// Standard error of the mean price: stddev / sqrt(count).
    pub std_error: f64,
}

/// Timings of a batch as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchTimings {
    /// When the batch was enqueued.
    pub submitted_at: DateTime<Utc>,
    /// First claim of any of its tasks.
    pub first_started_at: Option<DateTime<Utc>>,
    /// Last job finished (only meaningful once `done`).
    pub last_finished_at: Option<DateTime<Utc>>,
    /// `last_finished_at - submitted_at` in milliseconds.
    pub makespan_ms: Option<f64>,
    /// Kernel time summed over all jobs, in milliseconds.
    pub compute_ms_total: f64,
}

/// A batch as clients see it (`GET /v1/batches/{id}`), read in one query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchView {
    /// Batch id.
    pub id: Uuid,
    /// Label given at submission.
    pub label: Option<String>,
    /// Number of jobs in the batch.
    pub total: u64,
    /// Jobs per state.
    pub counts: StateCounts,
    /// True when no job is queued or running.
    pub done: bool,
    /// Statistics over succeeded prices; `None` while none succeeded.
    pub stats: Option<PriceStats>,
    /// Timestamps and durations.
    pub timings: BatchTimings,
}

/// A worker as listed by `GET /v1/workers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerView {
    /// Worker id (new on every start).
    pub id: Uuid,
    /// Host the worker runs on.
    pub hostname: String,
    /// Process id on that host.
    pub pid: u32,
    /// Tasks it computes at once.
    pub concurrency: u32,
    /// When it registered.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub last_heartbeat_at: DateTime<Utc>,
    /// Tasks it completed.
    pub tasks_done: u64,
    /// Jobs whose final task it completed.
    pub jobs_done: u64,
}

/// A client's idempotency key and the fingerprint of the request it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    /// The `Idempotency-Key` header value.
    pub key: String,
    /// A canonical form of the request (route + body); a different
    /// fingerprint under the same key is a conflict.
    pub fingerprint: String,
}

/// What a client submits: one job or a batch of them.
#[derive(Debug, Clone)]
pub struct Submission {
    /// `true` for `POST /v1/batches` (a batch row is created), `false` for a single job.
    pub as_batch: bool,
    /// Batch label.
    pub label: Option<String>,
    /// Validated specs with defaults filled and seeds drawn.
    pub jobs: Vec<Spec>,
    /// Optional idempotency key.
    pub idempotency: Option<IdempotencyKey>,
}

/// What a submission created (or, on an idempotent replay, had created).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    /// Batch id when submitted as a batch.
    pub batch_id: Option<Uuid>,
    /// Job ids in submission order.
    pub job_ids: Vec<Uuid>,
    /// True when this answers a repeated idempotency key.
    pub replayed: bool,
}

/// Description a worker registers with.
#[derive(Debug, Clone)]
pub struct WorkerInfo {
    /// Host name.
    pub hostname: String,
    /// Process id.
    pub pid: u32,
    /// Tasks computed at once.
    pub concurrency: u32,
}

/// A task handed to a worker, valid while its lease is.
#[derive(Debug, Clone)]
pub struct ClaimedTask {
    /// Task id.
    pub task_id: i64,
    /// Job the task belongs to.
    pub job_id: Uuid,
    /// Fencing token: changes on every claim; completion must present it.
    pub lease_token: Uuid,
    /// 1 for the first claim of this task.
    pub attempt: u32,
    /// The job's spec.
    pub spec: Spec,
    /// Chunks of the kernel's stream this task computes (`start..end`),
    /// or `None` when the task is the whole job (exact or target-error mode).
    pub chunks: Option<std::ops::Range<u64>>,
}

/// What [`Store::complete_and_claim`](crate::Store::complete_and_claim) did.
#[derive(Debug)]
pub struct CompletedAndClaimed {
    /// Ids of finished tasks whose completion was refused (lease lost).
    pub refused: Vec<i64>,
    /// Tasks claimed, in task id order; or why the claim failed where it
    /// ran after the completion had been recorded in a transaction of its own.
    pub claimed: Result<Vec<ClaimedTask>, crate::StoreError>,
}

/// What a task produced.
#[derive(Debug, Clone)]
#[expect(
    clippy::large_enum_variant,
    reason = "a partial is the common case and lives briefly on its way to the database; boxing it would only add an allocation"
)]
pub enum TaskOutput {
    /// The merged partial of the task's chunks.
    Partial(mcq_kernel::Partial),
    /// A finished result (whole-job tasks).
    Result(PriceResult),
}

/// A finished task reported by the worker that holds its lease.
#[derive(Debug, Clone)]
pub struct TaskDone {
    /// Task id.
    pub task_id: i64,
    /// Token from the claim.
    pub lease_token: Uuid,
    /// What it computed.
    pub output: TaskOutput,
    /// Kernel time in milliseconds.
    pub compute_ms: f64,
}

/// What [`crate::Store::reap`] did with the leases it found expired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Tasks with attempts left, back in the queue for any worker to claim.
    pub requeued: u64,
    /// Tasks on their last attempt, failed with their jobs.
    pub failed: u64,
}

/// What a heartbeat found out about the leases a worker presented. Both
/// lists are sorted by task id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeat {
    /// Tasks whose job was cancelled (or failed through a sibling): stop
    /// them. Each is reported once; their lease is gone afterwards.
    pub cancelled: Vec<i64>,
    /// Tasks no longer held under the presented token: finished already,
    /// or expired and claimed again elsewhere. Computing them further is
    /// wasted work, and their completion will be refused.
    pub lost: Vec<i64>,
}

impl Heartbeat {
    /// Nothing to stop: every presented lease was renewed.
    pub fn is_clear(&self) -> bool {
        self.cancelled.is_empty() && self.lost.is_empty()
    }
}
