//! The bridge from the worker's async loop to the kernel on a rayon pool.
//!
//! Claimed tasks wait in a [`LocalQueue`]. A compute slot is one rayon job
//! that takes tasks from it one after the other until it is empty, so a
//! finished task is followed by the next on the same thread without a
//! round through the async runtime. The loop starts a slot only while
//! fewer than `concurrency` run, so the tokio runtime never blocks and the
//! pool never holds more than the slots. Each outcome goes to the loop as
//! a [`Report`]; the last one of a slot says the slot is free.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use mcq_queue::ClaimedTask;
use tokio::sync::mpsc::UnboundedSender;

use crate::compute::{self, Finished, Outcome, Specs};
use crate::held::Ticket;
use crate::hold::Hold;

/// A claimed task with its cancel flag and span.
pub(crate) type Queued = (ClaimedTask, Ticket);

/// What a slot tells the loop after each task.
#[derive(Debug)]
pub(crate) struct Report {
    /// How the task ended.
    pub(crate) finished: Finished,
    /// The slot found the local queue empty (or closed) and has ended.
    pub(crate) slot_free: bool,
}

/// Claimed tasks waiting for a compute slot: filled by the loop, taken by
/// the slots in order, except that the tasks of a job submitted on its own
/// (no batch) go ahead of a batch's: someone is likely waiting on that one
/// job, while a batch's reader waits for all of its jobs.
#[derive(Debug, Default)]
pub(crate) struct LocalQueue {
    state: Mutex<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    tasks: VecDeque<Queued>,
    /// How many tasks at the front are lone jobs' (in claim order).
    lone: usize,
    /// Set at shutdown: slots take nothing more.
    closed: bool,
}

impl LocalQueue {
    /// Adds a claimed task and its ticket: at the back, or, for a lone
    /// job's task, behind the lone jobs' tasks already waiting.
    pub(crate) fn push(&self, task: ClaimedTask, ticket: Ticket) {
        let mut waiting = self.lock();
        if task.batch_id.is_none() {
            let at = waiting.lone;
            waiting.tasks.insert(at, (task, ticket));
            waiting.lone += 1;
        } else {
            waiting.tasks.push_back((task, ticket));
        }
    }

    /// The next task for a slot, if the queue is open and not empty.
    pub(crate) fn take(&self) -> Option<Queued> {
        let mut waiting = self.lock();
        if waiting.closed {
            return None;
        }
        waiting.lone = waiting.lone.saturating_sub(1);
        waiting.tasks.pop_front()
    }

    /// Takes up to `n` tasks from the back (the last claimed), for handing
    /// them to another worker; they come out in queue order.
    pub(crate) fn take_back(&self, n: usize) -> Vec<Queued> {
        let mut waiting = self.lock();
        let keep = waiting.tasks.len().saturating_sub(n);
        waiting.lone = waiting.lone.min(keep);
        waiting.tasks.split_off(keep).into()
    }

    /// Tasks waiting.
    pub(crate) fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    /// Closes the queue and returns what never started.
    pub(crate) fn close(&self) -> Vec<Queued> {
        let mut waiting = self.lock();
        waiting.closed = true;
        waiting.lone = 0;
        waiting.tasks.drain(..).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // No operation can panic between its deque call and its count.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Starts a compute slot on `pool` with `first`, taken from `queue` by
/// the caller: it runs that task, then the tasks of `queue` one after the
/// other, and reports each outcome on `reports`, the last with
/// [`Report::slot_free`] set. A slot always starts with a task, so every
/// slot ends with a report.
pub(crate) fn spawn(
    pool: &rayon::ThreadPool,
    first: Queued,
    specs: Arc<Specs>,
    hold: Option<Hold>,
    queue: Arc<LocalQueue>,
    reports: UnboundedSender<Report>,
) {
    pool.spawn(move || {
        let mut next = Some(first);
        while let Some((task, ticket)) = next {
            let finished = compute::run_one(&specs, &task, &ticket.cancel, hold.as_ref());
            if tracing::enabled!(tracing::Level::TRACE) {
                let outcome = match &finished.outcome {
                    Outcome::Done(_) => "done",
                    Outcome::Failed { .. } => "failed",
                    Outcome::Cancelled => "cancelled",
                };
                ticket.trail.span().in_scope(|| {
                    tracing::trace!(outcome, compute_ms = finished.compute_ms, "computed");
                });
            }
            // Taken before reporting, so that the loop, woken by the
            // report, sees the queue as it is after this slot moved on.
            next = queue.take();
            let report = Report {
                finished,
                slot_free: next.is_none(),
            };
            // The loop outlives every slot unless the worker is being torn
            // down past its deadline; then no one is left to tell.
            let _ = reports.send(report);
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use mcq_kernel::Spec;
    use mcq_queue::TaskOutput;
    use uuid::Uuid;

    use super::*;
    use crate::compute::Outcome;

    fn task(id: i64, seed: u64) -> ClaimedTask {
        ClaimedTask {
            task_id: id,
            job_id: Uuid::now_v7(),
            batch_id: None,
            lease_token: Uuid::new_v4(),
            attempt: 1,
            spec: Spec {
                runs: Some(1000),
                seed: Some(seed),
                ..Spec::default()
            },
            chunks: None,
        }
    }

    #[tokio::test]
    async fn one_slot_runs_every_waiting_task_in_order_then_says_it_is_free() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool");
        let queue = Arc::new(LocalQueue::default());
        for id in 1..=3 {
            queue.push(task(id, id as u64), Ticket::default());
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let first = queue.take().expect("a task");
        spawn(&pool, first, Arc::default(), None, queue.clone(), tx);
        let mut reports = Vec::new();
        while let Some(report) = rx.recv().await {
            reports.push(report);
        }
        assert_eq!(queue.len(), 0);
        let ids: Vec<i64> = reports.iter().map(|r| r.finished.task_id).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        let free: Vec<bool> = reports.iter().map(|r| r.slot_free).collect();
        assert_eq!(
            free,
            vec![false, false, true],
            "the last report frees the slot"
        );
        // Each was computed as `mcq price` would, seed for seed.
        for report in &reports {
            let Outcome::Done(output) = &report.finished.outcome else {
                panic!("computed");
            };
            let TaskOutput::Result(result) = output.as_ref() else {
                panic!("a whole-job task brings its result");
            };
            let id = report.finished.task_id;
            let alone = task(id, id as u64)
                .spec
                .validate()
                .expect("valid")
                .price(&AtomicBool::new(false))
                .expect("not cancelled");
            assert_eq!(result.price.to_bits(), alone.price.to_bits());
        }
    }

    #[test]
    fn a_closed_queue_gives_its_tasks_back_and_no_more_to_slots() {
        let queue = LocalQueue::default();
        queue.push(task(1, 1), Ticket::default());
        queue.push(task(2, 2), Ticket::default());
        assert_eq!(queue.take().map(|(t, _)| t.task_id), Some(1));
        let left: Vec<i64> = queue.close().into_iter().map(|(t, _)| t.task_id).collect();
        assert_eq!(left, vec![2]);
        queue.push(task(3, 3), Ticket::default());
        assert!(queue.take().is_none(), "a closed queue starts nothing");
    }

    #[test]
    fn a_lone_jobs_tasks_go_ahead_of_a_batchs_in_claim_order() {
        let queue = LocalQueue::default();
        let batched = |id| ClaimedTask {
            batch_id: Some(Uuid::nil()),
            ..task(id, id as u64)
        };
        for id in 1..=3 {
            queue.push(batched(id), Ticket::default());
        }
        queue.push(task(4, 4), Ticket::default());
        queue.push(batched(5), Ticket::default());
        queue.push(task(6, 6), Ticket::default());
        let order = |queue: &LocalQueue| {
            std::iter::from_fn(|| queue.take())
                .map(|(t, _)| t.task_id)
                .collect::<Vec<i64>>()
        };
        // Handed off from the back, lone ones included once nothing else is left.
        let back: Vec<i64> = queue.take_back(5).iter().map(|(t, _)| t.task_id).collect();
        assert_eq!(back, [6, 1, 2, 3, 5]);
        queue.push(batched(7), Ticket::default());
        queue.push(task(8, 8), Ticket::default());
        assert_eq!(order(&queue), [4, 8, 7]);
        for id in [9, 10] {
            queue.push(batched(id), Ticket::default());
        }
        queue.push(task(11, 11), Ticket::default());
        queue.push(task(12, 12), Ticket::default());
        assert_eq!(order(&queue), [11, 12, 9, 10]);
    }

    #[test]
    fn a_hand_off_takes_the_last_claimed_in_queue_order() {
        let queue = LocalQueue::default();
        for id in 1..=5 {
            queue.push(task(id, id as u64), Ticket::default());
        }
        let back = queue.take_back(2);
        let ids: Vec<i64> = back.iter().map(|(t, _)| t.task_id).collect();
        assert_eq!(ids, [4, 5]);
        assert_eq!(queue.len(), 3);
        assert_eq!(queue.take_back(10).len(), 3, "at most what waits");
    }
}
