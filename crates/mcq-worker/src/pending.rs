//! Finished tasks not yet recorded, owned by the worker's loop alone.
//!
//! The loop records them in batches ([`crate::policy`] says when), or sends
//! the computed ones along with a claim. A call that fails puts what it
//! took back in front, with the times they finished, so the batching rule
//! still counts from the oldest, and with their urgency.

use std::collections::VecDeque;

use mcq_queue::{TaskDone, TaskOutput};
use tokio::time::Instant;

use crate::compute::{Finished, Outcome};

/// Results waiting, oldest first, each with how long it has waited.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    items: VecDeque<(Finished, Waiting)>,
}

/// How a result waits here: since when, and whether it should be recorded
/// at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waiting {
    /// When the loop received it.
    pub(crate) since: Instant,
    /// It is the result of a job of its own (no batch): someone is likely
    /// waiting on that one job, so it does not wait for others to join it.
    pub(crate) urgent: bool,
}

/// A batch taken for recording, split by what each outcome needs.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Computed: to be completed.
    pub(crate) done: Vec<(TaskDone, Waiting)>,
    /// Refused by the kernel or panicked: to be recorded as failed attempts.
    pub(crate) failed: Vec<(Failed, Waiting)>,
    /// Stopped by their cancel flag: to be handed back.
    pub(crate) cancelled: Vec<(Finished, Waiting)>,
}

impl Batch {
    /// The leases of every task in the batch.
    pub(crate) fn leases(&self) -> Vec<crate::held::LeaseKey> {
        let done = self.done.iter().map(|(d, _)| (d.task_id, d.lease_token));
        let failed = self.failed.iter().map(|(f, _)| (f.task_id, f.lease_token));
        let cancelled = self
            .cancelled
            .iter()
            .map(|(f, _)| (f.task_id, f.lease_token));
        done.chain(failed).chain(cancelled).collect()
    }
}

/// A failed attempt waiting to be recorded.
#[derive(Debug, Clone)]
pub(crate) struct Failed {
    pub(crate) task_id: i64,
    pub(crate) lease_token: uuid::Uuid,
    pub(crate) error: String,
    pub(crate) panicked: bool,
}

impl Pending {
    /// Adds a result received `at`; a whole job's result of a job without
    /// a batch is urgent.
    pub(crate) fn push(&mut self, finished: Finished, at: Instant) {
        let urgent = finished.lone
            && matches!(&finished.outcome, Outcome::Done(output) if matches!(**output, TaskOutput::Result(_)));
        self.items
            .push_back((finished, Waiting { since: at, urgent }));
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// When the oldest result was received.
    pub(crate) fn first_at(&self) -> Option<Instant> {
        self.items.iter().map(|(_, w)| w.since).min()
    }

    /// Whether an urgent result waits.
    pub(crate) fn urgent(&self) -> bool {
        self.items.iter().any(|(_, w)| w.urgent)
    }

    /// Takes up to `max` computed results, oldest first, leaving failed
    /// and cancelled ones (a claim carries completions only).
    pub(crate) fn take_done(&mut self, max: usize) -> Vec<(TaskDone, Waiting)> {
        let mut done = Vec::new();
        let mut kept = VecDeque::with_capacity(self.items.len());
        for (finished, at) in self.items.drain(..) {
            match finished.outcome {
                Outcome::Done(output) if done.len() < max => done.push((
                    TaskDone {
                        task_id: finished.task_id,
                        lease_token: finished.lease_token,
                        output: *output,
                        compute_ms: finished.compute_ms,
                        compute_span: finished.compute_span,
                    },
                    at,
                )),
                outcome => kept.push_back((
                    Finished {
                        outcome,
                        ..finished
                    },
                    at,
                )),
            }
        }
        self.items = kept;
        done
    }

    /// Takes up to `max` results of every kind, oldest first.
    pub(crate) fn take(&mut self, max: usize) -> Batch {
        let n = self.items.len().min(max);
        let mut batch = Batch::default();
        for (finished, at) in self.items.drain(..n) {
            match finished.outcome {
                Outcome::Done(output) => batch.done.push((
                    TaskDone {
                        task_id: finished.task_id,
                        lease_token: finished.lease_token,
                        output: *output,
                        compute_ms: finished.compute_ms,
                        compute_span: finished.compute_span,
                    },
                    at,
                )),
                Outcome::Failed { error, panicked } => batch.failed.push((
                    Failed {
                        task_id: finished.task_id,
                        lease_token: finished.lease_token,
                        error,
                        panicked,
                    },
                    at,
                )),
                Outcome::Cancelled => batch.cancelled.push((finished, at)),
            }
        }
        batch
    }

    /// Returns completions that could not be sent.
    pub(crate) fn put_back_done(&mut self, done: Vec<(TaskDone, Waiting)>) {
        for (d, at) in done.into_iter().rev() {
            let finished = Finished {
                task_id: d.task_id,
                lease_token: d.lease_token,
                outcome: Outcome::Done(Box::new(d.output)),
                compute_ms: d.compute_ms,
                compute_span: d.compute_span,
                lone: at.urgent,
            };
            self.items.push_front((finished, at));
        }
    }

    /// Returns failures that could not be recorded.
    pub(crate) fn put_back_failed(&mut self, failed: Vec<(Failed, Waiting)>) {
        for (f, at) in failed.into_iter().rev() {
            let finished = Finished {
                task_id: f.task_id,
                lease_token: f.lease_token,
                outcome: Outcome::Failed {
                    error: f.error,
                    panicked: f.panicked,
                },
                compute_ms: 0.0,
                compute_span: None,
                lone: false,
            };
            self.items.push_front((finished, at));
        }
    }

    /// Returns cancelled tasks that could not be handed back.
    pub(crate) fn put_back_cancelled(&mut self, cancelled: Vec<(Finished, Waiting)>) {
        for item in cancelled.into_iter().rev() {
            self.items.push_front(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use mcq_kernel::Spec;
    use uuid::Uuid;

    use super::*;

    fn finished(task_id: i64, outcome: Outcome) -> Finished {
        Finished {
            task_id,
            lease_token: Uuid::nil(),
            outcome,
            compute_ms: 2.0,
            compute_span: None,
            lone: false,
        }
    }

    fn computed() -> Outcome {
        let result = Spec {
            runs: Some(100),
            seed: Some(1),
            ..Spec::default()
        }
        .validate()
        .expect("valid")
        .price(&AtomicBool::new(false))
        .expect("not cancelled");
        Outcome::Done(Box::new(TaskOutput::Result(result)))
    }

    #[test]
    fn a_claim_takes_computed_results_and_can_give_them_back_in_front() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut pending = Pending::default();
        pending.push(finished(1, computed()), at(1));
        pending.push(finished(2, Outcome::Cancelled), at(2));
        pending.push(finished(3, computed()), at(3));
        pending.push(finished(4, computed()), at(4));
        assert_eq!(pending.first_at(), Some(at(1)));

        let taken = pending.take_done(2);
        let ids: Vec<i64> = taken.iter().map(|(d, _)| d.task_id).collect();
        assert_eq!(ids, vec![1, 3], "computed ones, oldest first, at most 2");
        assert_eq!(pending.len(), 2, "the cancelled task and task 4 stay");
        assert_eq!(pending.first_at(), Some(at(2)));

        // The call failed: they wait again, first in line, with their times.
        pending.put_back_done(taken);
        assert_eq!(pending.first_at(), Some(at(1)));
        let batch = pending.take(10);
        let done: Vec<i64> = batch.done.iter().map(|(d, _)| d.task_id).collect();
        assert_eq!(done, vec![1, 3, 4]);
        assert_eq!(batch.cancelled.len(), 1);
        assert_eq!(pending.len(), 0);
    }

    #[test]
    fn a_lone_jobs_result_is_urgent_and_stays_so_when_given_back() {
        let now = Instant::now();
        let lone = |task_id, outcome| Finished {
            lone: true,
            ..finished(task_id, outcome)
        };
        let mut pending = Pending::default();
        pending.push(finished(1, computed()), now);
        pending.push(lone(2, Outcome::Cancelled), now);
        assert!(!pending.urgent(), "a batch's result, a cancelled task");
        pending.push(lone(3, computed()), now);
        assert!(pending.urgent(), "a lone job's result");

        let taken = pending.take_done(10);
        assert!(!pending.urgent(), "taken by a claim");
        pending.put_back_done(taken);
        assert!(pending.urgent(), "the claim failed: urgent again");
        let batch = pending.take(10);
        pending.put_back_done(batch.done);
        assert!(pending.urgent(), "the flush failed: urgent again");
    }

    #[test]
    fn a_flush_takes_every_kind_up_to_its_batch() {
        let now = Instant::now();
        let mut pending = Pending::default();
        let failed = Outcome::Failed {
            error: "boom".into(),
            panicked: true,
        };
        pending.push(finished(1, failed), now);
        pending.push(finished(2, computed()), now);
        pending.push(finished(3, computed()), now);
        let batch = pending.take(2);
        assert_eq!(batch.failed.len(), 1);
        assert!(batch.failed[0].0.panicked);
        assert_eq!(batch.done.len(), 1);
        assert_eq!(pending.len(), 1, "the third waits for the next batch");
        pending.put_back_failed(batch.failed);
        pending.put_back_cancelled(Vec::new());
        assert_eq!(pending.len(), 2);
    }
}
