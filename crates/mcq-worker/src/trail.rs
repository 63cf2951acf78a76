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
//!
//! A task's span is opened the first time something is logged about the
//! task, not at its claim: opening one (its fields formatted, its slot
//! taken) cost 4–6 µs on a busy 2-core machine, several per cent of a
//! worker's CPU at 20,000 tasks a second, for a span that stays silent
//! for nearly every task.

use std::sync::{Arc, OnceLock};

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

/// A claimed task's span, opened on first use; clones share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Trail(Arc<Ids>);

/// What a task's span names, and the span once opened.
#[derive(Debug)]
struct Ids {
    /// The worker's span, current at the claim: the task's opens inside it
    /// wherever it is first used (a kernel thread has no span of its own).
    parent: Span,
    job: Uuid,
    batch: Option<Uuid>,
    task: i64,
    attempt: u32,
    span: OnceLock<Span>,
}

impl Default for Ids {
    /// No task (the tests' slots): its span has no parent and nil ids.
    fn default() -> Self {
        Ids {
            parent: Span::none(),
            job: Uuid::nil(),
            batch: None,
            task: 0,
            attempt: 0,
            span: OnceLock::new(),
        }
    }
}

impl Trail {
    /// The trail of a task claimed in the current (the worker's) span.
    pub(crate) fn new(task: &ClaimedTask) -> Trail {
        Trail(Arc::new(Ids {
            parent: Span::current(),
            job: task.job_id,
            batch: task.batch_id,
            task: task.task_id,
            attempt: task.attempt,
            span: OnceLock::new(),
        }))
    }

    /// The task's span (see the module's documentation), opened now if
    /// nothing was logged about the task before.
    pub(crate) fn span(&self) -> Span {
        let ids = &self.0;
        ids.span
            .get_or_init(|| {
                tracing::error_span!(
                    parent: &ids.parent,
                    "task",
                    job = %ids.job,
                    batch = ids.batch.map(tracing::field::display),
                    task = ids.task,
                    attempt = ids.attempt,
                )
            })
            .clone()
    }
}
