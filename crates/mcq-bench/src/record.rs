//! What one trial and one job measured: the rows of `trials.csv` and `jobs.csv`.

use serde::{Deserialize, Serialize};

use crate::platform::Platform;

/// One run of the whole batch on one platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// Where the batch ran.
    pub platform: Platform,
    /// Paths per call.
    pub runs: u64,
    /// 1-based trial number within this platform and `runs`: the round.
    pub trial: u32,
    /// 1-based place of this platform in its round's shuffled order.
    pub position: u32,
    /// True for the first trial, which pays thread-pool start, page faults,
    /// a fresh server's connection set-up and so on.
    pub cold: bool,
    /// Calls in the batch.
    pub calls: u32,
    /// Computations that can run at once: 1 for `local-1`, the pool size for
    /// `local-all`, the workers' summed concurrency for `service`.
    pub slots: u32,
    /// First submit to last result seen by the client, in milliseconds.
    pub wall_ms: f64,
    /// Kernel time summed over the calls, in milliseconds.
    pub compute_ms: f64,
    /// Core time not spent in the kernel, per call:
    /// `(slots × wall − compute) / calls`. With one slot this is exactly
    /// "wall time minus compute, divided by jobs".
    pub overhead_per_job_ms: f64,
    /// Calls that produced a price.
    pub succeeded: u32,
    /// Mean of the prices (a sanity check: all platforms price the same seeds).
    pub mean_price: f64,
    /// Status requests the client made while waiting (0 locally).
    pub polls: u32,
}

impl TrialRecord {
    /// Computes the derived overhead from the measured fields.
    pub fn overhead_per_job(slots: u32, wall_ms: f64, compute_ms: f64, calls: u32) -> f64 {
        (f64::from(slots) * wall_ms - compute_ms) / f64::from(calls.max(1))
    }
}

/// Where one call's time went. Offsets are milliseconds from the trial's
/// first submit on the client's clock; for the service they come from the
/// timestamps the server recorded, which share the clock on one machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Where the call ran.
    pub platform: Platform,
    /// Paths per call.
    pub runs: u64,
    /// Trial number.
    pub trial: u32,
    /// 0-based position of the call in the batch (its seed is `seed + index`).
    pub index: u32,
    /// Server job id (empty locally).
    pub job_id: String,
    /// The computed price.
    pub price: f64,
    /// Its standard error.
    pub std_error: f64,
    /// Submitted (enqueued), from the trial start.
    pub submitted_ms: f64,
    /// Computation started (first claim), from the trial start.
    pub started_ms: f64,
    /// Result written, from the trial start.
    pub finished_ms: f64,
    /// Result seen by the client, from the trial start.
    pub seen_ms: f64,
    /// Started − submitted: waiting for a free worker.
    pub queue_wait_ms: f64,
    /// Kernel time (summed over the job's tasks).
    pub compute_ms: f64,
    /// Finished − started − compute: claiming, bookkeeping and writing the
    /// result. Negative when a job's tasks ran in parallel on several workers.
    pub dispatch_ms: f64,
    /// Seen − finished: until a poll of the client noticed the result.
    pub result_latency_ms: f64,
    /// Seen − submitted.
    pub end_to_end_ms: f64,
    /// The queue wait the server reported, to check against the timestamps
    /// (empty locally).
    pub server_queue_wait_ms: Option<f64>,
    /// The claim of the work that succeeded, from the trial start (locally
    /// the start of the computation).
    pub claimed_ms: f64,
    /// The compute started on the worker, from the trial start.
    pub compute_started_ms: f64,
    /// The compute finished on the worker, from the trial start.
    pub compute_finished_ms: f64,
    /// The result recorded (`finished_ms`), from the trial start.
    pub recorded_ms: f64,
    /// Compute started − claimed: the claim's answer on its way and the
    /// task waiting in the worker for a slot.
    pub claim_ms: f64,
    /// Recorded − compute finished: the completion waiting for its batch
    /// and its round trip.
    pub record_ms: f64,
    /// True when the phases were measured; false when the server records
    /// none, and the compute is assumed to follow the first claim.
    pub phases_measured: bool,
}

#[cfg(test)]
impl TrialRecord {
    /// A trial of 10 calls that held `slots` cores for `wall_ms`, the
    /// first of its platform and level cold: what the analyses' tests
    /// feed in.
    pub(crate) fn timed(
        platform: Platform,
        runs: u64,
        trial: u32,
        slots: u32,
        wall_ms: f64,
    ) -> Self {
        TrialRecord {
            platform,
            runs,
            trial,
            position: 1,
            cold: trial == 1,
            calls: 10,
            slots,
            wall_ms,
            compute_ms: 0.0,
            overhead_per_job_ms: 0.0,
            succeeded: 10,
            mean_price: 9.5,
            polls: 0,
        }
    }
}
