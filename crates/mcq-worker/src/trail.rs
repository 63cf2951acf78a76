//! The spans that tie a worker's log together: one for the worker, and
//! one per claimed task, inside it, from the claim to the task's end.
//!
//! A task's span carries its job, batch (for a job of a batch), task id
//! and attempt, so every event of its life (claimed, computed, recorded,
//! failed, refused, lease lost) names them: in JSON each event lists its
//! spans, in text they prefix the line. A second attempt of the same task
//! is a new span with the next attempt number and the same job and batch.
//!
//! The routine events of a task are at TRACE level (`RUST_LOG=mcq_worker=
//! trace`): a worker finishing thousands of tasks a second must not write
//! a line for each by default. Losses and failures are warnings.

use mcq_queue::ClaimedTask;
use tracing::Span;
use uuid::Uuid;

/// The span of a worker's whole life once registered.
///
/// At error level, as the tasks', so that a filter keeping only warnings
/// still shows which worker and task each warning is about.
pub(crate) fn worker_span(worker: Uuid) -> Span {
    tracing::error_span!("worker", worker = %worker)
}

/// The span of one claimed task (see the module's documentation).
pub(crate) fn task_span(task: &ClaimedTask) -> Span {
    tracing::error_span!(
        "task",
        job = %task.job_id,
        batch = task.batch_id.map(tracing::field::display),
        task = task.task_id,
        attempt = task.attempt,
    )
}
