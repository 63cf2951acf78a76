//! Per-job time breakdown of the service path, from the server's timestamps
//! and the client's polls.
//!
//! A job's life is submitted → started → finished → seen. The server records
//! the first three, and the phases of the work that succeeded: queued
//! (submitted) → claimed → compute started → compute finished → recorded
//! (finished). "Seen" is when the client learnt of the result, which we
//! reconstruct from the batch polls: each poll reports how many jobs had
//! finished, so the k-th job to finish was seen by the first poll that
//! counted at least k finished jobs and was answered after it finished.

use chrono::{DateTime, Utc};

/// One `GET /v1/batches/{id}` made while waiting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Poll {
    /// When the client received the answer.
    pub received: DateTime<Utc>,
    /// Jobs finished (succeeded, failed or cancelled) according to it.
    pub finished: u64,
}

/// The server's record of one job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerTimes {
    /// Enqueued.
    pub submitted_at: DateTime<Utc>,
    /// First claim.
    pub started_at: DateTime<Utc>,
    /// Result written.
    pub finished_at: DateTime<Utc>,
    /// Kernel time the worker reported, in milliseconds.
    pub compute_ms: f64,
    /// The server's own `queue_wait_ms`, kept to check it against the timestamps.
    pub queue_wait_ms: Option<f64>,
    /// The phases of the work that succeeded, when the server records them.
    pub phases: Option<ServerPhases>,
}

/// The phases a server records for a succeeded job (`recorded` is its
/// `finished_at`, `queued` its `submitted_at`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerPhases {
    /// The claim of the work that succeeded.
    pub claimed_at: DateTime<Utc>,
    /// The worker started computing.
    pub compute_started_at: DateTime<Utc>,
    /// The worker finished computing.
    pub compute_finished_at: DateTime<Utc>,
}

/// A job's life as offsets (ms) from the trial start, and its parts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Breakdown {
    /// Submitted, from the trial start.
    pub submitted_ms: f64,
    /// Started, from the trial start.
    pub started_ms: f64,
    /// Finished, from the trial start.
    pub finished_ms: f64,
    /// Seen by the client, from the trial start.
    pub seen_ms: f64,
    /// Started − submitted.
    pub queue_wait_ms: f64,
    /// Kernel time.
    pub compute_ms: f64,
    /// Finished − started − compute.
    pub dispatch_ms: f64,
    /// Seen − finished.
    pub result_latency_ms: f64,
    /// Seen − submitted.
    pub end_to_end_ms: f64,
    /// The queue wait the server reported (service only).
    pub server_queue_wait_ms: Option<f64>,
    /// The measured phases, from the trial start.
    pub phases: Phases,
}

/// Where a job's time went, measured: offsets (ms) from the trial start of
/// the claim of the work that succeeded, the compute's start and finish,
/// and the recording of the result. Locally the claim and the record are
/// the compute's start and end: nothing stands between them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phases {
    /// Claimed.
    pub claimed_ms: f64,
    /// Compute started.
    pub compute_started_ms: f64,
    /// Compute finished.
    pub compute_finished_ms: f64,
    /// Result recorded.
    pub recorded_ms: f64,
    /// False when the server records no phases: the claim is then the first
    /// claim, the compute is placed right after it for its kernel time, and
    /// the record takes the rest until the finish (an assumed order).
    pub measured: bool,
}

impl Phases {
    /// Compute started − claimed: the claim's answer reaching the worker and
    /// the task waiting there for a free slot.
    pub fn claim_ms(&self) -> f64 {
        self.compute_started_ms - self.claimed_ms
    }

    /// Compute finished − compute started: the compute's span (for a job of
    /// several tasks, from the first start to the last finish).
    pub fn compute_span_ms(&self) -> f64 {
        self.compute_finished_ms - self.compute_started_ms
    }

    /// Recorded − compute finished: the completion waiting in the worker
    /// for its batch and its round trip to the database.
    pub fn record_ms(&self) -> f64 {
        self.recorded_ms - self.compute_finished_ms
    }
}

impl Breakdown {
    /// Sum of the parts, which equals `end_to_end_ms` up to rounding.
    pub fn parts_sum(&self) -> f64 {
        self.queue_wait_ms + self.dispatch_ms + self.compute_ms + self.result_latency_ms
    }
}

/// Milliseconds from `origin` to `t` (negative when `t` is earlier).
pub(crate) fn offset_ms(origin: DateTime<Utc>, t: DateTime<Utc>) -> f64 {
    let delta = t.signed_duration_since(origin);
    // Microsecond resolution is what both databases store.
    delta
        .num_microseconds()
        .map_or(f64::NAN, |us| us as f64 / 1000.0)
}

/// Breaks down every job. `origin` is the client's time just before it
/// submitted; `polls` are in the order they were made. The result is in the
/// order of `jobs`.
pub fn break_down(origin: DateTime<Utc>, jobs: &[ServerTimes], polls: &[Poll]) -> Vec<Breakdown> {
    let mut by_finish: Vec<usize> = (0..jobs.len()).collect();
    by_finish.sort_by_key(|&i| jobs[i].finished_at);
    let mut seen = vec![None; jobs.len()];
    for (rank, &i) in by_finish.iter().enumerate() {
        let wanted = rank as u64 + 1;
        let first = polls
            .iter()
            .find(|p| p.finished >= wanted && p.received >= jobs[i].finished_at);
        // The final poll reported the batch done, so it saw everything; a
        // job missing from every poll can only come from a clock that
        // moved backwards, and then "seen when finished" is the honest floor.
        seen[i] = Some(first.map_or(jobs[i].finished_at, |p| p.received));
    }
    jobs.iter()
        .zip(seen)
        .map(|(job, seen)| {
            let seen = seen.unwrap_or(job.finished_at);
            let submitted_ms = offset_ms(origin, job.submitted_at);
            let started_ms = offset_ms(origin, job.started_at);
            let finished_ms = offset_ms(origin, job.finished_at);
            let seen_ms = offset_ms(origin, seen);
            let phases = match job.phases {
                Some(p) => Phases {
                    claimed_ms: offset_ms(origin, p.claimed_at),
                    compute_started_ms: offset_ms(origin, p.compute_started_at),
                    compute_finished_ms: offset_ms(origin, p.compute_finished_at),
                    recorded_ms: finished_ms,
                    measured: true,
                },
                None => Phases {
                    claimed_ms: started_ms,
                    compute_started_ms: started_ms,
                    compute_finished_ms: (started_ms + job.compute_ms).min(finished_ms),
                    recorded_ms: finished_ms,
                    measured: false,
                },
            };
            Breakdown {
                submitted_ms,
                started_ms,
                finished_ms,
                seen_ms,
                queue_wait_ms: started_ms - submitted_ms,
                compute_ms: job.compute_ms,
                dispatch_ms: finished_ms - started_ms - job.compute_ms,
                result_latency_ms: seen_ms - finished_ms,
                end_to_end_ms: seen_ms - submitted_ms,
                server_queue_wait_ms: job.queue_wait_ms,
                phases,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn at(origin: DateTime<Utc>, us: i64) -> DateTime<Utc> {
        origin + TimeDelta::microseconds(us)
    }

    #[test]
    fn polls_assign_seen_times_by_finish_rank() {
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let jobs = [
            // Finishes second.
            ServerTimes {
                submitted_at: at(t0, 500),
                started_at: at(t0, 1_500),
                finished_at: at(t0, 9_000),
                compute_ms: 7.0,
                queue_wait_ms: Some(1.0),
                phases: Some(ServerPhases {
                    claimed_at: at(t0, 1_500),
                    compute_started_at: at(t0, 1_700),
                    compute_finished_at: at(t0, 8_700),
                }),
            },
            // Finishes first.
            ServerTimes {
                submitted_at: at(t0, 500),
                started_at: at(t0, 1_000),
                finished_at: at(t0, 4_000),
                compute_ms: 2.5,
                queue_wait_ms: Some(0.5),
                phases: None,
            },
        ];
        let polls = [
            Poll {
                received: at(t0, 3_000),
                finished: 0,
            },
            Poll {
                received: at(t0, 6_000),
                finished: 1,
            },
            Poll {
                received: at(t0, 12_000),
                finished: 2,
            },
        ];
        let parts = break_down(t0, &jobs, &polls);
        assert_eq!(parts[1].seen_ms, 6.0);
        assert_eq!(parts[0].seen_ms, 12.0);
        assert_eq!(parts[0].queue_wait_ms, 1.0);
        assert_eq!(parts[0].dispatch_ms, 0.5);
        assert_eq!(parts[0].result_latency_ms, 3.0);
        assert_eq!(parts[1].queue_wait_ms, 0.5);
        assert_eq!(parts[1].dispatch_ms, 0.5);
        assert_eq!(parts[1].result_latency_ms, 2.0);
        for p in &parts {
            assert!((p.parts_sum() - p.end_to_end_ms).abs() < 1e-9, "{p:?}");
        }
        // Measured: the claim and the record are what the server says.
        let close = |p: &Phases, want: [f64; 3]| {
            let got = [p.claim_ms(), p.compute_span_ms(), p.record_ms()];
            got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9)
        };
        let measured = parts[0].phases;
        assert!(
            measured.measured && close(&measured, [0.2, 7.0, 0.3]),
            "{measured:?}"
        );
        // Not measured: the compute right after the first claim.
        let assumed = parts[1].phases;
        assert!(
            !assumed.measured && close(&assumed, [0.0, 2.5, 0.5]),
            "{assumed:?}"
        );
    }

    #[test]
    fn a_poll_answered_before_the_finish_does_not_count() {
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let jobs = [ServerTimes {
            submitted_at: t0,
            started_at: at(t0, 10),
            finished_at: at(t0, 5_000),
            compute_ms: 4.0,
            queue_wait_ms: None,
            phases: None,
        }];
        // The count says 1 already at 4 ms (another clock's rounding), but
        // the job had not finished then: the next poll is the one that saw it.
        let polls = [
            Poll {
                received: at(t0, 4_000),
                finished: 1,
            },
            Poll {
                received: at(t0, 7_000),
                finished: 1,
            },
        ];
        let parts = break_down(t0, &jobs, &polls);
        assert_eq!(parts[0].result_latency_ms, 2.0);
        assert!(parts[0].result_latency_ms >= 0.0);
    }
}
