//! Running totals of what a worker did, turned into a [`WorkerReport`] at
//! the end (and logged on the way, see `counter_log`) and exported to
//! Prometheus as they grow, and the worker's latency histograms.
//!
//! Every handle is registered once, when the worker starts, so recording
//! is an atomic add (counters) or a lock-free push (histograms): no
//! lookup by name on the hot path. Workers of one process share the
//! series, which are the process's totals.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use mcq_metrics as names;
use uuid::Uuid;

use crate::WorkerReport;

/// One running total: this worker's own count (for its report) and the
/// process's exported counter.
#[derive(Debug)]
pub(crate) struct Tally {
    total: AtomicU64,
    exported: metrics::Counter,
}

impl Tally {
    fn new(name: &'static str) -> Tally {
        Tally {
            total: AtomicU64::new(0),
            exported: metrics::counter!(name),
        }
    }

    /// This worker's count so far.
    pub(crate) fn get(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// Mirror of [`WorkerReport`] shared by the worker's loops, with the
/// series only Prometheus sees.
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) claimed: Tally,
    pub(crate) retried: Tally,
    pub(crate) contended: Tally,
    pub(crate) completed: Tally,
    pub(crate) refused: Tally,
    pub(crate) failed: Tally,
    pub(crate) panicked: Tally,
    pub(crate) cancelled: Tally,
    pub(crate) released: Tally,
    pub(crate) handed_off: Tally,
    pub(crate) paths: Tally,
    pub(crate) loop_turns: Tally,
    /// Expired leases this worker's reaper put back in the queue.
    pub(crate) rescued: metrics::Counter,
    /// Expired leases on their last attempt this worker's reaper failed.
    pub(crate) expired_failed: metrics::Counter,
    /// Submission to first claim, per task.
    pub(crate) pickup: metrics::Histogram,
    /// Kernel time, per computed task.
    pub(crate) compute: metrics::Histogram,
    /// Submission to accepted completion, per task.
    pub(crate) end_to_end: metrics::Histogram,
}

impl Default for Counters {
    /// Registers every series with mcq's recorder (installed first if
    /// needed), so that all of them are exported from the start, at 0.
    fn default() -> Self {
        mcq_metrics::install();
        Counters {
            claimed: Tally::new(names::TASKS_CLAIMED),
            retried: Tally::new(names::TASKS_RETRIED),
            contended: Tally::new(names::CLAIMS_CONTENDED),
            completed: Tally::new(names::TASKS_COMPLETED),
            refused: Tally::new(names::COMPLETIONS_REFUSED),
            failed: Tally::new(names::TASKS_FAILED),
            panicked: Tally::new(names::TASKS_PANICKED),
            cancelled: Tally::new(names::TASKS_CANCELLED),
            released: Tally::new(names::TASKS_RELEASED),
            handed_off: Tally::new(names::TASKS_HANDED_OFF),
            paths: Tally::new(names::PATHS),
            loop_turns: Tally::new(names::WORKER_LOOP_TURNS),
            rescued: metrics::counter!(names::TASKS_RESCUED),
            expired_failed: metrics::counter!(names::TASKS_EXPIRED_FAILED),
            pickup: metrics::histogram!(names::TASK_PICKUP),
            compute: metrics::histogram!(names::TASK_COMPUTE),
            end_to_end: metrics::histogram!(names::TASK_END_TO_END),
        }
    }
}

/// Adds `n` to a running total.
pub(crate) fn add(tally: &Tally, n: usize) {
    tally.total.fetch_add(n as u64, Ordering::Relaxed);
    tally.exported.increment(n as u64);
}

impl Counters {
    pub(crate) fn report(&self) -> WorkerReport {
        WorkerReport {
            claimed: self.claimed.get(),
            retried: self.retried.get(),
            contended: self.contended.get(),
            completed: self.completed.get(),
            refused: self.refused.get(),
            failed: self.failed.get(),
            panicked: self.panicked.get(),
            cancelled: self.cancelled.get(),
            released: self.released.get(),
            handed_off: self.handed_off.get(),
            paths: self.paths.get(),
            loop_turns: self.loop_turns.get(),
        }
    }
}

/// When the job was submitted: job ids are UUIDv7, stamped with the
/// submitting server's clock in milliseconds. `None` for other ids.
pub(crate) fn submitted_at(job_id: Uuid) -> Option<SystemTime> {
    if job_id.get_version_num() != 7 {
        return None;
    }
    let (secs, nanos) = job_id.get_timestamp()?.to_unix();
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

/// Seconds from `since` to `now`; 0 when the clocks disagree so much
/// that `since` lies ahead.
pub(crate) fn seconds_since(since: SystemTime, now: SystemTime) -> f64 {
    now.duration_since(since).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submission_times_come_from_v7_ids_only() {
        let before = SystemTime::now() - Duration::from_millis(1);
        let at = submitted_at(Uuid::now_v7()).expect("a v7 id has a time");
        let after = SystemTime::now();
        assert!(
            before <= at && at <= after,
            "{at:?} not in [{before:?}, {after:?}]"
        );
        assert_eq!(submitted_at(Uuid::new_v4()), None);
        assert_eq!(seconds_since(after, before), 0.0, "never negative");
        assert_eq!(
            seconds_since(before, before + Duration::from_millis(1500)),
            1.5
        );
    }
}
