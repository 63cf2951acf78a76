//! Public data of the queue: what submitters hand in and what workers
//! exchange. What clients read comes back as the API's own views
//! (`mcq_api_types`), into which each backend maps its rows.

use mcq_kernel::{PriceResult, Spec, ValidSpec};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

// The backends' read modules name the views through this module, beside
// the queue's own types.
pub(crate) use mcq_api_types::{
    BatchGrid, BatchTimings, BatchView, JobState, JobTimings, JobView, PriceStats, QueueView,
    StateCounts, TaskCounts, TaskDepth, WorkerCounts, WorkerState, WorkerView,
};

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
    /// The sweep a batch was expanded from, kept with the batch so that
    /// reads can name each job's grid point.
    pub grid: Option<BatchGrid>,
    /// The jobs' specs, validated (defaults filled, seeds drawn); the
    /// queue stores them as they are.
    pub jobs: Vec<ValidSpec>,
    /// Optional idempotency key, unique per tenant.
    pub idempotency: Option<IdempotencyKey>,
    /// The tenant that owns the work ([`crate::DEFAULT_TENANT`] without keys).
    pub tenant: crate::TenantId,
    /// Within its tenant, higher priorities are claimed first (default 0).
    pub priority: i16,
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

/// Which batches [`Store::batches`](crate::Store::batches) lists, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchQuery {
    /// `Some(true)`: only batches with no job queued or running;
    /// `Some(false)`: only those with some; `None`: both.
    pub done: Option<bool>,
    /// Only batches whose label contains this text (case-sensitive).
    pub label: Option<String>,
    /// Cursor: only batches older than this one (the last of the page before).
    pub after: Option<uuid::Uuid>,
    /// Most batches returned (capped at [`MAX_BATCH_PAGE`](crate::MAX_BATCH_PAGE)).
    pub limit: u32,
}

/// What a worker tells of itself with a heartbeat
/// ([`Store::heartbeat_reporting`](crate::Store::heartbeat_reporting)), for the worker list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerPulse {
    /// It is shutting down: it claims nothing more.
    pub draining: bool,
    /// Tasks whose completion the store accepted in the last minute.
    pub tasks_last_minute: u64,
    /// With a gap: the heartbeat also offers to take the fleet's reaper
    /// turn, as [`Store::reap_in_turn`](crate::Store::reap_in_turn) does
    /// (taken when no worker reaped within the gap), in the same round
    /// trip; [`Heartbeat::reaper_turn`] answers.
    pub reaper_gap: Option<std::time::Duration>,
}

/// A task handed to a worker, valid while its lease is.
#[derive(Debug, Clone)]
pub struct ClaimedTask {
    /// Task id.
    pub task_id: i64,
    /// Job the task belongs to.
    pub job_id: Uuid,
    /// Batch of that job; `None` for a job submitted alone.
    pub batch_id: Option<Uuid>,
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
    /// The claim passed over work that other claims held at that moment
    /// (on PostgreSQL, a staged batch row, which one claim takes at a
    /// time): a claim shortly after can find work, whereas waiting for a
    /// work signal would wait out the poll, since none is sent for work
    /// already waiting. Never set on SQLite, whose claims take turns.
    pub contended: bool,
}

/// One claim's answer inside the store: the tasks, and whether it passed
/// over work other claims held ([`CompletedAndClaimed::contended`]).
#[derive(Debug, Default)]
pub(crate) struct Claim {
    pub(crate) tasks: Vec<ClaimedTask>,
    pub(crate) contended: bool,
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
    /// When the computation started and finished on the worker's clock;
    /// `None` from a worker that does not say, whose job then shows no
    /// compute phase.
    pub compute_span: Option<ComputeSpan>,
}

/// When a task's computation ran, by the clock of the worker that ran it.
/// The store keeps it within the task's claim and the recording of its
/// result, so that a worker clock ahead or behind the database's cannot
/// put the phases of a job out of order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComputeSpan {
    /// The computation started.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// It finished (not before `started_at`).
    pub finished_at: chrono::DateTime<chrono::Utc>,
}

impl ComputeSpan {
    /// A computation that started at `started` by the wall clock and ran
    /// for `elapsed` by a monotonic one, so that a clock step during the
    /// computation cannot make it end before it began.
    pub fn measured(started: std::time::SystemTime, elapsed: std::time::Duration) -> ComputeSpan {
        let started_at = chrono::DateTime::<chrono::Utc>::from(started);
        let finished_at = chrono::TimeDelta::from_std(elapsed)
            .ok()
            .and_then(|d| started_at.checked_add_signed(d))
            .unwrap_or(started_at);
        ComputeSpan {
            started_at,
            finished_at,
        }
    }
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
    /// The worker took the fleet's reaper turn ([`WorkerPulse::reaper_gap`]):
    /// it should reap now ([`Store::reap`](crate::Store::reap)).
    pub reaper_turn: bool,
}

impl Heartbeat {
    /// Nothing to stop: every presented lease was renewed.
    pub fn is_clear(&self) -> bool {
        self.cancelled.is_empty() && self.lost.is_empty()
    }
}

/// A recently finished job's kernel time, for predictions of what similar
/// work will take on this fleet.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct FinishedCompute {
    /// The job's spec as stored (JSON, defaults filled, seed drawn).
    pub spec: String,
    /// Kernel time of its tasks, summed, in milliseconds.
    pub compute_ms: f64,
}
