//! Jobs on the wire: their state, their view with timings, pages of them,
//! and the answer to cancelling one.

use chrono::{DateTime, Utc};
use mcq_kernel::{PriceResult, Spec};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::GridPoint;

/// The body of `POST /v1/jobs`: one pricing spec, omitted fields taking
/// their defaults. An alias so that signatures read as the API does.
pub type JobRequest = Spec;

/// State of a job (and, with the same names, of each of its tasks).
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

impl JobState {
    /// True once the job can change no more: succeeded, failed or cancelled.
    pub fn is_finished(self) -> bool {
        !matches!(self, JobState::Queued | JobState::Running)
    }
}

/// Timestamps the server records for a job, and durations derived from them.
///
/// `submitted_at`, `started_at` and `finished_at` tell the job's whole
/// life. The phases — `queued_at` ≤ `claimed_at` ≤ `compute_started_at` ≤
/// `compute_finished_at` ≤ `recorded_at` — tell where the time of the
/// attempt that succeeded went: queue wait, claim, compute, record. They
/// are null until the job succeeded (and the compute times also when the
/// worker that ran it does not report them). For a job of several tasks,
/// `claimed_at` is its first task's claim, the compute times are the
/// earliest start and the latest finish over its tasks, and `recorded_at`
/// is when its result was written.
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
    // The phases are always sent, null where unknown: required, nullable.
    /// When the job entered the queue: its submission.
    pub queued_at: DateTime<Utc>,
    /// When a worker claimed the work that succeeded (a retried job's last
    /// claim, not `started_at`).
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub claimed_at: Option<DateTime<Utc>>,
    /// When the worker started computing, by its clock, kept within
    /// `claimed_at` … `recorded_at`.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub compute_started_at: Option<DateTime<Utc>>,
    /// When the worker finished computing, by its clock, kept within
    /// `compute_started_at` … `recorded_at`.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub compute_finished_at: Option<DateTime<Utc>>,
    /// When the result was recorded (`finished_at` of a succeeded job).
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub recorded_at: Option<DateTime<Utc>>,
}

/// A job as clients see it (`GET /v1/jobs/{id}`, and the answer of
/// `POST /v1/jobs`).
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<PriceResult>,
    /// Present once the job failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The grid point the job prices, when its batch is a sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub point: Option<GridPoint>,
    /// How many times the job was tried: the highest attempt number among
    /// its tasks (1 for a job none of whose tasks was retried, however
    /// many tasks it has; 0 before its first claim). A task is tried at
    /// most `--max-attempts` times, so this never exceeds it.
    pub attempts: u32,
    /// The job's tasks: how many, how many are done, and their claims.
    pub tasks: TaskCounts,
    /// The worker that recorded the result (for a job of several tasks,
    /// the one that completed its last task); null until the job succeeded.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub worker_id: Option<Uuid>,
    /// Timestamps and durations.
    pub timings: JobTimings,
}

/// The tasks of a job (the units workers claim).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskCounts {
    /// Tasks the job is split into.
    pub total: u32,
    /// Tasks finished with their part of the result.
    pub done: u32,
    /// Claims of its tasks so far, first attempts and retries together
    /// (a claim handed back at a worker's shutdown does not count).
    pub claims: u32,
}

/// One page of a batch's jobs (`GET /v1/batches/{id}/jobs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobPage {
    /// Jobs in submission order.
    pub jobs: Vec<JobView>,
    /// Cursor for the next page (`?after=`); absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

/// Answer of `POST /v1/jobs/{id}/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobCancelled {
    /// The job.
    pub id: Uuid,
    /// Its state afterwards: `cancelled`, or the final state it had already reached.
    pub state: JobState,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_snake_case_on_the_wire() {
        let names: Vec<String> = [
            JobState::Queued,
            JobState::Running,
            JobState::Succeeded,
            JobState::Failed,
            JobState::Cancelled,
        ]
        .iter()
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
        assert_eq!(
            names,
            [
                "\"queued\"",
                "\"running\"",
                "\"succeeded\"",
                "\"failed\"",
                "\"cancelled\""
            ]
        );
    }

    #[test]
    fn only_final_states_are_finished() {
        assert!(!JobState::Queued.is_finished());
        assert!(!JobState::Running.is_finished());
        assert!(JobState::Succeeded.is_finished());
        assert!(JobState::Failed.is_finished());
        assert!(JobState::Cancelled.is_finished());
    }

    #[test]
    fn a_view_without_result_omits_it_and_reads_back() {
        let view = JobView {
            id: Uuid::nil(),
            batch_id: None,
            state: JobState::Queued,
            spec: Spec::default(),
            result: None,
            error: None,
            point: None,
            attempts: 0,
            tasks: TaskCounts::default(),
            worker_id: None,
            timings: JobTimings {
                submitted_at: DateTime::<Utc>::UNIX_EPOCH,
                started_at: None,
                finished_at: None,
                queue_wait_ms: None,
                compute_ms: None,
                queued_at: DateTime::<Utc>::UNIX_EPOCH,
                claimed_at: None,
                compute_started_at: None,
                compute_finished_at: None,
                recorded_at: None,
            },
        };
        let json = serde_json::to_value(&view).unwrap();
        assert!(json.get("result").is_none() && json.get("error").is_none());
        assert!(json["worker_id"].is_null() && json["timings"]["claimed_at"].is_null());
        assert_eq!(serde_json::from_value::<JobView>(json).unwrap(), view);
    }
}
