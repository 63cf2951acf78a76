//! What this store's completions recorded for each of its workers and has
//! not yet written to the worker's row.
//!
//! `mcq_record` (the completion of tasks that bring results) leaves the
//! worker's row alone: rewriting it on every completion cost about a
//! tenth of a task's database time. The store counts here instead, and
//! the worker's next heartbeat or idle mark, which writes the row anyway,
//! adds the counts to `tasks_done` and `jobs_done`. The worker list is
//! then behind by at most one heartbeat interval while a worker is busy,
//! and exact once it is idle. Completions through `mcq_complete` (calls
//! with partials, and large ones) still count on the row themselves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use uuid::Uuid;

/// Tasks and jobs recorded for one worker and not yet on its row.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counts {
    /// Accepted tasks.
    pub(super) tasks: i64,
    /// Jobs those tasks finished.
    pub(super) jobs: i64,
}

/// The counts of every worker of one store.
#[derive(Debug, Default, Clone)]
pub(super) struct Tally(Arc<Mutex<HashMap<Uuid, Counts>>>);

impl Tally {
    /// Adds what one completion recorded for `worker`.
    pub(super) fn add(&self, worker: Uuid, counts: Counts) {
        if counts == Counts::default() {
            return;
        }
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = all.entry(worker).or_default();
        entry.tasks += counts.tasks;
        entry.jobs += counts.jobs;
    }

    /// Takes `worker`'s counts, to be written by a statement that
    /// [`Tally::add`]s them back if it fails.
    pub(super) fn take(&self, worker: Uuid) -> Counts {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&worker)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_per_worker_until_taken() {
        let tally = Tally::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        tally.add(a, Counts { tasks: 2, jobs: 1 });
        tally.add(a, Counts { tasks: 3, jobs: 3 });
        tally.add(b, Counts { tasks: 1, jobs: 0 });
        assert_eq!(tally.take(a), Counts { tasks: 5, jobs: 4 });
        assert_eq!(tally.take(a), Counts::default(), "taken once");
        // A write that failed puts its counts back.
        tally.add(b, Counts { tasks: 1, jobs: 0 });
        assert_eq!(tally.take(b), Counts { tasks: 2, jobs: 0 });
    }
}
