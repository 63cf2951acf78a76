//! Stateless mcq workers: claim tasks, run the kernel on rayon, renew leases,
//! shut down gracefully.
//!
//! A [`Worker`] owns nothing but a [`Store`] handle and its knobs. It
//! registers, then runs until its shutdown token is cancelled:
//!
//! - **one loop** (in [`Worker::run`]'s own task) owns every claim and
//!   completion: it asks a pure policy (`policy.rs`) what to do next —
//!   claim n, record the finished results, hand tasks to an idle worker,
//!   wait until t — and does it. Claims carry the finished results
//!   ([`Store::complete_and_claim`]); completions are fenced per task;
//! - the kernel runs in **compute slots** on a rayon pool, never more at
//!   once than `concurrency`, so the async runtime is never blocked; a
//!   panic inside the kernel becomes a failed attempt;
//! - the **heartbeat** renews every lease the worker holds and raises the
//!   cancel flag of tasks whose job was cancelled; other background loops
//!   reap expired leases and prune old jobs.
//!
//! Database errors never end a worker: every loop logs, backs off and retries.

mod backoff;
mod calls;
mod compute;
mod contention;
mod counter_log;
mod counters;
mod driver;
mod heartbeat;
mod held;
pub mod hold;
mod pace;
mod pending;
mod policy;
mod run;
mod slots;
mod trail;

use std::time::Duration;

use mcq_queue::Store;
use tokio_util::sync::CancellationToken;

/// The default [`WorkerConfig::prefetch_window`]: a busy one-slot worker of
/// 50 ms tasks claims four at a time and makes a call per four tasks; the
/// database's CPU per task is about a third below that of a 200 ms window,
/// for a batch's tail a little longer (docs/results.md, "Design decisions").
pub const DEFAULT_PREFETCH_WINDOW: Duration = Duration::from_millis(400);

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
    /// free slots are claimed. The worker claims again once half of it is
    /// left, and its finished results ride with that claim, so a busy
    /// worker makes one call per half window of work.
    pub prefetch_window: Duration,
    /// Finished tasks recorded at once when this many wait (and the most
    /// recorded in one call).
    pub complete_batch: usize,
    /// Longest a finished task waits to be recorded while others of this
    /// worker still compute or wait: it is recorded this long after the
    /// first waiting one, or earlier with a claim, a full batch, or once
    /// nothing else is in flight.
    pub complete_wait: Duration,
    /// Longest idle wait before claiming again even without a wake-up
    /// (the fallback for lost notifications).
    pub poll_interval: Duration,
    /// On shutdown, how long in-flight tasks may run before they are
    /// cancelled and handed back.
    pub shutdown_timeout: Duration,
    /// How often this worker prunes finished jobs past retention; `None`
    /// never (any worker may prune; it is idempotent).
    pub prune_interval: Option<Duration>,
    /// How often the worker logs its counters (claimed, completed, failed,
    /// rates…) as one line of fields; `None` only at exit.
    pub counters_interval: Option<Duration>,
    /// Benchmark only ([`hold`]): every task first keeps its slot this
    /// long without using the CPU. `None` (the default, and the only value
    /// any command but `mcq bench scale` uses) computes at once.
    pub hold: Option<hold::Hold>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            concurrency: std::thread::available_parallelism().map_or(1, usize::from),
            threads: 0,
            heartbeat_interval: Duration::from_secs(1),
            claim_batch: 1000,
            prefetch_window: DEFAULT_PREFETCH_WINDOW,
            complete_batch: 2000,
            complete_wait: Duration::from_millis(200),
            poll_interval: Duration::from_secs(1),
            shutdown_timeout: Duration::from_secs(20),
            prune_interval: Some(Duration::from_secs(60)),
            counters_interval: Some(Duration::from_secs(60)),
            hold: None,
        }
    }
}

/// What a worker did during its life, returned when it stops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Tasks claimed.
    pub claimed: u64,
    /// Of those, tasks on a second or later attempt (an earlier one
    /// failed, lost its lease or was handed back).
    pub retried: u64,
    /// Claims that came back short after passing over work other claims
    /// held; each was tried again after a short delay, not the poll.
    pub contended: u64,
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
    /// Monte Carlo paths of the tasks computed (recorded or not).
    pub paths: u64,
    /// Turns of the worker's loop: about one per finished task, claim and
    /// announcement. Far more means it is spinning instead of waiting,
    /// stealing a core from the kernels.
    pub loop_turns: u64,
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
        run::run(self.store, self.config, shutdown).await
    }
}
