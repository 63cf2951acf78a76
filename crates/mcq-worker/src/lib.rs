//! Stateless mcq workers: claim tasks, run the kernel on rayon, renew leases,
//! shut down gracefully.
//!
//! A [`Worker`] owns nothing but a [`Store`] handle and its knobs. It
//! registers, then runs four cooperating loops until its shutdown token is
//! cancelled:
//!
//! - the **claimer** (in [`Worker::run`]'s own task) claims tasks in batches
//!   and hands them to a rayon pool, never more at once than `concurrency`;
//! - the kernel runs on that **rayon pool**, so the async runtime is never
//!   blocked; a panic inside the kernel becomes a failed attempt;
//! - the **completer** gathers finished tasks and records them with one fenced
//!   [`Store::complete`] call per batch — the throughput lever;
//! - the **heartbeat** renews every lease the worker holds and raises the
//!   cancel flag of tasks whose job was cancelled; it also prunes old jobs.
//!
//! Database errors never end a worker: every loop logs, backs off and retries.

mod backoff;
mod claimer;
mod completer;
mod compute;
mod counters;
mod heartbeat;
mod held;
mod pace;

use std::time::Duration;

use mcq_queue::Store;
use tokio_util::sync::CancellationToken;

/// Knobs of a worker; [`WorkerConfig::default`] is what `mcq worker` runs
/// without flags.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Tasks computed at once.
    pub concurrency: usize,
    /// Threads of the kernel's rayon pool; 0 means one per core.
    pub threads: usize,
    /// How often leases are renewed. Must be well below the store's lease.
    pub heartbeat_interval: Duration,
    /// Most tasks claimed in one round trip.
    pub claim_batch: usize,
    /// How much work (by recent task durations) is claimed ahead of free
    /// compute slots. Tiny tasks then arrive hundreds per round trip while
    /// long tasks are never hoarded: with tasks slower than this window only
    /// free slots are claimed.
    pub prefetch_window: Duration,
    /// Most finished tasks recorded in one completion call.
    pub complete_batch: usize,
    /// How long the completer waits at least for more finished tasks
    /// before a flush, while other tasks of this worker are still computing
    /// or waiting for a slot (with nothing else in flight it flushes at
    /// once).
    pub complete_linger: Duration,
    /// While tasks take milliseconds the completer waits longer: for the
    /// next task to finish (1.5 task times per slot), if that is expected
    /// within this bound and 30 ms, or (PostgreSQL) for the claim that will
    /// carry the finished tasks, if that is expected within this bound. It
    /// bounds how much later a result becomes visible; longer tasks are
    /// recorded after `complete_linger`.
    pub complete_linger_max: Duration,
    /// Longest idle wait before claiming again even without a wake-up
    /// (the fallback for lost notifications).
    pub poll_interval: Duration,
    /// On shutdown, how long in-flight tasks may run before they are
    /// cancelled and handed back.
    pub shutdown_timeout: Duration,
    /// How often this worker prunes finished jobs past retention; `None`
    /// never (any worker may prune; it is idempotent).
    pub prune_interval: Option<Duration>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            concurrency: std::thread::available_parallelism().map_or(1, usize::from),
            threads: 0,
            heartbeat_interval: Duration::from_secs(1),
            claim_batch: 1000,
            prefetch_window: Duration::from_millis(100),
            complete_batch: 2000,
            complete_linger: Duration::from_millis(1),
            complete_linger_max: Duration::from_millis(200),
            poll_interval: Duration::from_secs(1),
            shutdown_timeout: Duration::from_secs(20),
            prune_interval: Some(Duration::from_secs(60)),
        }
    }
}

/// What a worker did during its life, returned when it stops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Tasks claimed.
    pub claimed: u64,
    /// Completions the store accepted.
    pub completed: u64,
    /// Completions the store refused because the lease had been lost
    /// (expired and re-claimed elsewhere, or the job was cancelled).
    pub refused: u64,
    /// Failed attempts recorded (kernel errors and panics).
    pub failed: u64,
    /// Of those, attempts that panicked inside the kernel.
    pub panicked: u64,
    /// Tasks stopped through their cancel flag (job cancelled, or shutdown).
    pub cancelled: u64,
    /// Tasks handed back to the queue unfinished (cancelled, or at shutdown).
    pub released: u64,
    /// Claimed tasks not yet started that were handed back to the queue
    /// for a worker that had run out of work.
    pub handed_off: u64,
    /// Times the claim loop ran to decide whether to claim: about once per
    /// claim and per compute slot freed. Far more means it is spinning
    /// instead of waiting, stealing a core from the kernels.
    pub claimer_wakeups: u64,
}

/// One worker: register, claim, compute, complete, until shut down.
#[derive(Debug)]
pub struct Worker {
    store: Store,
    config: WorkerConfig,
}

impl Worker {
    /// A worker on `store` with `config`; nothing happens until [`Worker::run`].
    pub fn new(store: Store, config: WorkerConfig) -> Worker {
        Worker { store, config }
    }

    /// Runs until `shutdown` is cancelled, then stops claiming, finishes
    /// in-flight tasks within the shutdown timeout, releases the rest,
    /// deregisters and returns what it did.
    ///
    /// Database outages are waited out (with backoff); an error is returned
    /// only when the kernel's thread pool cannot be built.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<WorkerReport> {
        claimer::run(self.store, self.config, shutdown).await
    }
}
