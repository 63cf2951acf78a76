//! Running totals of what a worker did, turned into a [`WorkerReport`] at
//! the end (and logged on the way, see `counter_log`).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::WorkerReport;

/// Atomic mirror of [`WorkerReport`], shared by the worker's loops.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) claimed: AtomicU64,
    pub(crate) retried: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) released: AtomicU64,
    pub(crate) handed_off: AtomicU64,
    pub(crate) paths: AtomicU64,
    pub(crate) loop_turns: AtomicU64,
}

/// Adds `n` to a counter.
pub(crate) fn add(counter: &AtomicU64, n: usize) {
    counter.fetch_add(n as u64, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn report(&self) -> WorkerReport {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WorkerReport {
            claimed: get(&self.claimed),
            retried: get(&self.retried),
            completed: get(&self.completed),
            refused: get(&self.refused),
            failed: get(&self.failed),
            panicked: get(&self.panicked),
            cancelled: get(&self.cancelled),
            released: get(&self.released),
            handed_off: get(&self.handed_off),
            paths: get(&self.paths),
            loop_turns: get(&self.loop_turns),
        }
    }
}
