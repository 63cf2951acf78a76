//! The phases of a job as the store keeps them: when the work that
//! succeeded was claimed, when its compute ran on the worker, and which
//! worker finished it (docs/state-machine.md). Its submission and the
//! recording of its result are the job's own `submitted_at` and
//! `finished_at`.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::types::{ComputeSpan, JobState};

/// A job's recorded phases, as read from its row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Phases {
    /// The earliest claim among its accepted tasks.
    pub(crate) claimed_at: Option<DateTime<Utc>>,
    /// The earliest compute start among its accepted tasks.
    pub(crate) compute_started_at: Option<DateTime<Utc>>,
    /// The latest compute finish among its accepted tasks.
    pub(crate) compute_finished_at: Option<DateTime<Utc>>,
    /// The worker whose completion finished the job.
    pub(crate) worker_id: Option<Uuid>,
}

impl Phases {
    /// What a view shows: the phases of a succeeded job, nothing of
    /// another. A split job still running has the phases of the tasks done
    /// so far, and a failed one those of tasks that succeeded before it
    /// failed: neither describes a job's work that succeeded.
    pub(crate) fn of_state(self, state: JobState) -> Phases {
        if state == JobState::Succeeded {
            self
        } else {
            Phases::default()
        }
    }
}

/// A worker's compute span kept within what the store knows: not before
/// the task's claim, not after `now` (when the store records it), and
/// finishing no earlier than it started. A clock that differs from the
/// database's then bends the phases, but never puts them out of order.
pub(crate) fn clamp(
    span: ComputeSpan,
    claimed_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> ComputeSpan {
    let floor = claimed_at.unwrap_or(DateTime::<Utc>::MIN_UTC);
    let started_at = span.started_at.max(floor).min(now);
    let finished_at = span.finished_at.max(started_at).min(now);
    ComputeSpan {
        started_at,
        finished_at,
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::milliseconds(ms)
    }

    fn span(from: i64, to: i64) -> ComputeSpan {
        ComputeSpan {
            started_at: at(from),
            finished_at: at(to),
        }
    }

    #[test]
    fn a_span_within_claim_and_record_is_kept() {
        assert_eq!(clamp(span(20, 30), Some(at(10)), at(40)), span(20, 30));
        assert_eq!(clamp(span(20, 30), None, at(40)), span(20, 30));
    }

    #[test]
    fn a_skewed_clock_is_kept_in_order() {
        // Behind the database: the compute seems to start before the claim.
        assert_eq!(clamp(span(5, 30), Some(at(10)), at(40)), span(10, 30));
        // Ahead: it seems to finish after the result was recorded.
        assert_eq!(clamp(span(20, 50), Some(at(10)), at(40)), span(20, 40));
        assert_eq!(clamp(span(45, 50), Some(at(10)), at(40)), span(40, 40));
        // Far behind: the whole span before the claim.
        assert_eq!(clamp(span(1, 2), Some(at(10)), at(40)), span(10, 10));
        // A span that ends before it starts finishes when it started.
        assert_eq!(clamp(span(30, 20), Some(at(10)), at(40)), span(30, 30));
    }

    #[test]
    fn only_a_succeeded_job_shows_its_phases() {
        let phases = Phases {
            claimed_at: Some(at(1)),
            compute_started_at: Some(at(2)),
            compute_finished_at: Some(at(3)),
            worker_id: Some(Uuid::nil()),
        };
        assert_eq!(phases.of_state(JobState::Succeeded), phases);
        for state in [
            JobState::Queued,
            JobState::Running,
            JobState::Failed,
            JobState::Cancelled,
        ] {
            assert_eq!(phases.of_state(state), Phases::default());
        }
    }
}
