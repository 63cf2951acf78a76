//! How many tasks to claim ahead of the free compute slots, from how long
//! recent tasks took.
//!
//! Claiming only free slots costs one round trip per `concurrency` tasks:
//! fine for tasks of a second, ruinous for tasks of ten microseconds. So the
//! claimer keeps a local queue of about `prefetch_window` worth of work.
//! Until a task has finished we know nothing and claim free slots only, so
//! a fleet never hoards long tasks it cannot start.

use std::sync::atomic::{AtomicU64, Ordering};

/// Moving average of task compute time, shared between threads.
#[derive(Debug)]
pub(crate) struct Pace {
    /// `f64` bits of the average in milliseconds; NaN until the first sample.
    average_ms: AtomicU64,
}

/// Weight of the newest sample: the average follows a change of job shape
/// within a few dozen tasks.
const WEIGHT: f64 = 0.1;
/// Durations below this are treated as this, so that the prefetch target
/// stays finite for no-op tasks.
const FLOOR_MS: f64 = 0.001;

impl Pace {
    pub(crate) fn new() -> Self {
        Pace {
            average_ms: AtomicU64::new(f64::NAN.to_bits()),
        }
    }

    /// Adds one task's compute time. Only the completer writes, so a plain
    /// load-then-store cannot lose updates.
    pub(crate) fn record(&self, compute_ms: f64) {
        let old = f64::from_bits(self.average_ms.load(Ordering::Relaxed));
        let new = if old.is_nan() {
            compute_ms
        } else {
            old + WEIGHT * (compute_ms - old)
        };
        self.average_ms.store(new.to_bits(), Ordering::Relaxed);
    }

    /// Forgets the average: the next tasks may be of another shape. Called
    /// when the worker has run out of work, so that the first claim of the
    /// next batch takes only free slots, as at start-up. Without it, in two
    /// of five trials of 100 tasks of 1 ms (`mcq bench compare
    /// --sweep-runs`, after a level of shorter tasks) one worker claimed
    /// all 100 tasks at once and the other sat idle.
    pub(crate) fn reset(&self) {
        self.average_ms.store(f64::NAN.to_bits(), Ordering::Relaxed);
    }

    /// The average task time in milliseconds, if a task has finished
    /// since the last reset.
    pub(crate) fn average_ms(&self) -> Option<f64> {
        let average = f64::from_bits(self.average_ms.load(Ordering::Relaxed));
        (!average.is_nan()).then_some(average)
    }

    /// Tasks worth holding locally beyond the free slots: enough to keep
    /// `concurrency` slots busy for `window_ms`, at most `cap`.
    pub(crate) fn prefetch(&self, concurrency: usize, window_ms: f64, cap: usize) -> usize {
        let Some(average) = self.average_ms() else {
            return 0;
        };
        let tasks = window_ms / average.max(FLOOR_MS) * concurrency as f64;
        if tasks >= cap as f64 {
            cap
        } else {
            tasks as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_prefetch_until_a_task_finished() {
        assert_eq!(Pace::new().prefetch(4, 50.0, 1000), 0);
    }

    #[test]
    fn tiny_tasks_fill_the_cap_long_tasks_prefetch_nothing() {
        let pace = Pace::new();
        pace.record(0.0);
        assert_eq!(pace.prefetch(2, 50.0, 1000), 1000);
        let slow = Pace::new();
        slow.record(500.0);
        assert_eq!(slow.prefetch(2, 50.0, 1000), 0);
        let medium = Pace::new();
        medium.record(10.0);
        assert_eq!(medium.prefetch(2, 50.0, 1000), 10);
    }

    #[test]
    fn reset_forgets_the_pace() {
        let pace = Pace::new();
        pace.record(0.1);
        assert_eq!(pace.prefetch(2, 50.0, 1000), 1000);
        pace.reset();
        assert_eq!(pace.prefetch(2, 50.0, 1000), 0);
        pace.record(10.0);
        assert_eq!(pace.prefetch(2, 50.0, 1000), 10);
    }

    #[test]
    fn average_moves_towards_new_samples() {
        let pace = Pace::new();
        pace.record(100.0);
        for _ in 0..100 {
            pace.record(1.0);
        }
        assert_eq!(pace.prefetch(1, 50.0, 1000), 49);
    }
}
