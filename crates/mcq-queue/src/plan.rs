//! Backend-independent logic around the SQL: how a submission is cut into
//! tasks, how a finished job's task outputs become its result, and the
//! spelling of states in the database.

use std::ops::Range;

use mcq_kernel::{Partial, PriceResult, Spec, ValidSpec};
use uuid::Uuid;

use crate::store::StoreError;
use crate::types::{BatchGrid, JobState, Submission, TaskCounts, WorkerState};

/// One job of a submission, ready to insert.
#[derive(Debug, Clone)]
pub(crate) struct PlannedJob {
    /// New job id (UUIDv7: time-ordered, so the primary key index stays compact).
    pub(crate) id: Uuid,
    /// The spec as stored: defaults filled, seed drawn.
    pub(crate) spec_json: String,
    /// Chunk ranges of its tasks; one `None` for a whole-job task.
    pub(crate) tasks: Vec<Option<Range<u64>>>,
}

/// A submission cut into jobs and tasks.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Batch id when submitted as a batch.
    pub(crate) batch_id: Option<Uuid>,
    /// Jobs in submission order.
    pub(crate) jobs: Vec<PlannedJob>,
}

impl Plan {
    /// Number of tasks over all jobs.
    pub(crate) fn task_count(&self) -> usize {
        self.jobs.iter().map(|j| j.tasks.len()).sum()
    }

    /// Job ids in submission order.
    pub(crate) fn job_ids(&self) -> Vec<Uuid> {
        self.jobs.iter().map(|j| j.id).collect()
    }
}

/// Splits each job of a submission (its specs already validated) into
/// tasks of `chunks_per_task` kernel chunks. Nothing touches the database,
/// so a refused submission stores nothing.
pub(crate) fn plan(submission: &Submission, chunks_per_task: u64) -> Result<Plan, StoreError> {
    if submission.jobs.is_empty() {
        return Err(StoreError::InvalidSpec {
            index: 0,
            message: "a submission needs at least one job".into(),
        });
    }
    let per_task = chunks_per_task.max(1);
    let mut jobs = Vec::with_capacity(submission.jobs.len());
    for valid in &submission.jobs {
        let spec_json =
            serde_json::to_string(valid).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let tasks = match valid.chunk_count() {
            None => vec![None],
            Some(count) => (0..count.div_ceil(per_task).max(1))
                .map(|t| Some(t * per_task..((t + 1) * per_task).min(count)))
                .collect(),
        };
        jobs.push(PlannedJob {
            id: Uuid::now_v7(),
            spec_json,
            tasks,
        });
    }
    let batch_id = submission.as_batch.then(Uuid::now_v7);
    Ok(Plan { batch_id, jobs })
}

/// Parses a stored spec, validating it again, for `finish`.
pub(crate) fn valid_spec(spec_json: &str) -> Result<ValidSpec, StoreError> {
    serde_json::from_str(spec_json).map_err(|e| StoreError::Corrupt(format!("stored spec: {e}")))
}

/// Serialises a task's partial for the `tasks.partial` column.
pub(crate) fn partial_json(partial: &Partial) -> Result<String, StoreError> {
    serde_json::to_string(partial).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Merges the partials of all of a job's tasks and finishes the estimate.
/// The merge is exact, so their order does not matter; `compute_ms` is the
/// kernel time summed over the tasks.
pub(crate) fn finish_from_partials<'a>(
    spec_json: &str,
    partials: impl IntoIterator<Item = &'a str>,
    compute_ms: f64,
) -> Result<PriceResult, StoreError> {
    let valid = valid_spec(spec_json)?;
    let mut merged = Partial::default();
    for text in partials {
        let partial: Partial = serde_json::from_str(text)
            .map_err(|e| StoreError::Corrupt(format!("stored partial: {e}")))?;
        merged.merge(&partial);
    }
    Ok(valid.finish(&merged, compute_ms))
}

/// Serialises a result for the `results.result` column.
pub(crate) fn result_json(result: &PriceResult) -> Result<String, StoreError> {
    serde_json::to_string(result).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Serialises a batch's sweep for the `batches.sweep` column.
pub(crate) fn grid_json(grid: Option<&BatchGrid>) -> Result<Option<String>, StoreError> {
    grid.map(|g| serde_json::to_string(g).map_err(|e| StoreError::Corrupt(e.to_string())))
        .transpose()
}

/// Parses a `batches.sweep` column.
pub(crate) fn parse_grid(text: Option<&str>) -> Result<Option<BatchGrid>, StoreError> {
    text.map(|t| {
        serde_json::from_str(t).map_err(|e| StoreError::Corrupt(format!("stored sweep: {e}")))
    })
    .transpose()
}

/// What a job view says of its tasks and attempts, from the job's task
/// count, finished tasks and claims (`jobs.attempts`, which counts every
/// claim of its tasks) and the attempt numbers of its task rows still
/// present (their greatest and their sum). A task that brings its job's
/// result is deleted with it (PostgreSQL), which can only be the job's
/// last one; the claims its rows no longer account for are that task's
/// attempts.
pub(crate) fn task_counts(
    total: i64,
    done: i64,
    claims: i64,
    max_attempt: i64,
    sum_attempts: i64,
) -> (u32, TaskCounts) {
    let narrow = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
    let attempts = max_attempt.max(claims - sum_attempts);
    (
        narrow(attempts),
        TaskCounts {
            total: narrow(total),
            done: narrow(done),
            claims: narrow(claims),
        },
    )
}

/// Reads a state column.
pub(crate) fn parse_state(text: &str) -> Result<JobState, StoreError> {
    Ok(match text {
        "queued" => JobState::Queued,
        "running" => JobState::Running,
        "succeeded" => JobState::Succeeded,
        "failed" => JobState::Failed,
        "cancelled" => JobState::Cancelled,
        other => return Err(StoreError::Corrupt(format!("unknown state {other:?}"))),
    })
}

/// Reads a worker state as the worker-list statements spell it.
pub(crate) fn parse_worker_state(text: &str) -> Result<WorkerState, StoreError> {
    Ok(match text {
        "active" => WorkerState::Active,
        "draining" => WorkerState::Draining,
        "lost" => WorkerState::Lost,
        other => {
            return Err(StoreError::Corrupt(format!(
                "unknown worker state {other:?}"
            )));
        }
    })
}

/// Parses a stored spec for a view or a claim.
pub(crate) fn parse_spec(text: &str) -> Result<Spec, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("stored spec: {e}")))
}

/// Parses a stored result for a view.
pub(crate) fn parse_result(text: &str) -> Result<PriceResult, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("stored result: {e}")))
}

/// A chunk range from its two nullable columns.
pub(crate) fn chunk_range(start: Option<i64>, end: Option<i64>) -> Option<Range<u64>> {
    match (start, end) {
        (Some(s), Some(e)) => Some(u64::try_from(s).unwrap_or(0)..u64::try_from(e).unwrap_or(0)),
        _ => None,
    }
}
