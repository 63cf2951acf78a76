//! The worker's main loop: register, claim in batches, dispatch to the
//! kernel pool, and on shutdown hand everything back in order.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use mcq_queue::{ClaimedTask, IdleWorkers, Store, WorkerInfo};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::backoff::{Backoff, persist};
use crate::completer::{self, Completer, Outbox, Reporter};
use crate::compute;
use crate::counters::{Counters, add};
use crate::held::Held;
use crate::pace::Pace;
use crate::{WorkerConfig, WorkerReport, heartbeat};

/// Time after the shutdown timeout for handing back, flushing and
/// deregistering before the worker stops retrying a database that is gone.
const CLEANUP_GRACE: Duration = Duration::from_secs(5);
/// How long cancelled tasks get to reach a chunk boundary at shutdown.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Runs one worker to the end; see [`crate::Worker::run`].
pub(crate) async fn run(
    store: Store,
    config: WorkerConfig,
    shutdown: CancellationToken,
) -> anyhow::Result<WorkerReport> {
    let threads = if config.threads == 0 {
        std::thread::available_parallelism().map_or(1, usize::from)
    } else {
        config.threads
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("mcq-kernel-{i}"))
        .build()
        .context("building the kernel thread pool")?;
    let concurrency = config.concurrency.max(1);
    let info = WorkerInfo {
        hostname: hostname(),
        pid: std::process::id(),
        concurrency: concurrency as u32,
    };
    let Some(worker) = persist("register", &shutdown, || {
        store.register_worker(info.clone())
    })
    .await
    else {
        tracing::info!("shut down before the worker could register");
        return Ok(WorkerReport::default());
    };
    tracing::info!(%worker, concurrency, threads, "worker registered");

    let held = Arc::new(Held::default());
    let counters = Arc::new(Counters::default());
    let pace = Arc::new(Pace::new());
    let give_up = CancellationToken::new();
    let background = CancellationToken::new();
    let tracker = TaskTracker::new();
    tracker.spawn(heartbeat::renew_leases(
        store.clone(),
        worker,
        held.clone(),
        config.heartbeat_interval,
        background.clone(),
    ));
    tracker.spawn(heartbeat::reap(
        store.clone(),
        config.heartbeat_interval,
        shutdown.clone(),
    ));
    if let Some(interval) = config.prune_interval {
        tracker.spawn(heartbeat::prune(store.clone(), interval, shutdown.clone()));
    }
    let outbox = Arc::new(Outbox::new(pace.clone()));
    let (reporter, woken) = Reporter::new(outbox.clone(), held.clone(), config.complete_batch);
    let completer = Completer {
        store: store.clone(),
        worker,
        outbox: outbox.clone(),
        held: held.clone(),
        pace: pace.clone(),
        counters: counters.clone(),
        batch: config.complete_batch,
        linger: config.complete_linger,
        linger_max: config.complete_linger_max,
        concurrency,
        give_up: give_up.clone(),
    };
    let mut completer = tokio::spawn(completer.run(woken));

    let mut claimer = Claimer {
        idle_workers: store.idle_workers(),
        announced_idle: false,
        handed_off: false,
        store: store.clone(),
        worker,
        semaphore: Arc::new(Semaphore::new(concurrency)),
        concurrency,
        config,
        held: held.clone(),
        counters: counters.clone(),
        pace,
        pool,
        specs: Arc::default(),
        outbox,
        finished: Some(reporter),
        local: Arc::default(),
        drained_since: None,
        claim_ms: 1.0,
        backoff: Backoff::new(),
    };
    claimer.work(&shutdown).await;
    // No claim is coming: the completer records what finishes from now on.
    claimer.outbox.expect_claim(None);

    // Shutdown, in order: no new claims; hand back what never started; let
    // running tasks finish until the timeout, then cancel them; flush
    // completions; hand back whatever is left; deregister.
    let deadline = Instant::now() + claimer.config.shutdown_timeout;
    let give_up_timer = {
        let give_up = give_up.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(deadline + CLEANUP_GRACE).await;
            give_up.cancel();
        })
    };
    tracing::info!(held = held.len(), "shutting down: no more claims");
    claimer.release_unstarted(&give_up).await;
    claimer.drain_until(deadline, &held).await;
    drop(claimer.finished.take());
    if tokio::time::timeout_at(deadline + CLEANUP_GRACE, &mut completer)
        .await
        .is_err()
    {
        tracing::warn!("completions not flushed before the deadline; abandoning them");
        completer.abort();
    }
    let leftover = held.snapshot();
    if !leftover.is_empty() {
        tracing::warn!(
            count = leftover.len(),
            "handing back tasks still held at shutdown"
        );
        if persist("release", &give_up, || store.release(worker, &leftover))
            .await
            .is_some()
        {
            add(&counters.released, leftover.len());
        }
    }
    background.cancel();
    tracker.close();
    tracker.wait().await;
    if persist("deregister", &give_up, || store.deregister(worker))
        .await
        .is_none()
    {
        tracing::warn!(
            "could not deregister; the store will forget this worker after its heartbeat ages"
        );
    }
    give_up_timer.abort();
    let report = counters.report();
    tracing::info!(?report, "worker stopped");
    Ok(report)
}

/// State of the claim loop.
#[derive(Debug)]
struct Claimer {
    store: Store,
    worker: Uuid,
    config: WorkerConfig,
    concurrency: usize,
    /// One permit per compute slot; a rayon job holds one while it runs.
    semaphore: Arc<Semaphore>,
    held: Arc<Held>,
    counters: Arc<Counters>,
    pace: Arc<Pace>,
    pool: rayon::ThreadPool,
    /// Kernel tables shared by tasks whose specs differ only in the seed.
    specs: Arc<compute::Specs>,
    /// Finished tasks not yet recorded; a claim takes the computed ones along.
    outbox: Arc<Outbox>,
    /// Dropped at shutdown so the completer ends once every job has reported.
    finished: Option<Reporter>,
    /// Claimed tasks waiting for a slot; the slots take them in order.
    local: Arc<compute::LocalQueue>,
    /// When a claim last found fewer tasks than it asked for.
    drained_since: Option<Instant>,
    /// Moving average of a claim's round trip, in milliseconds.
    claim_ms: f64,
    backoff: Backoff,
    /// Other workers' announcements that they ran out of work.
    idle_workers: IdleWorkers,
    /// Whether this worker announced that it ran out of work since its
    /// last claim that found some.
    announced_idle: bool,
    /// Whether tasks were handed to an idle worker since the local queue
    /// was last empty: until it empties, claiming would only take them back.
    handed_off: bool,
}

/// What ended a wait of the claimer.
enum Woken {
    /// A slot, a shutdown, a timeout.
    Other,
    /// Work was announced (or the wait timed out).
    Work,
    /// A worker announced that it ran out of work.
    Idle(Uuid),
}

impl Claimer {
    /// Claims and dispatches until `shutdown` is cancelled.
    async fn work(&mut self, shutdown: &CancellationToken) {
        loop {
            add(&self.counters.claimer_wakeups, 1);
            self.dispatch();
            if shutdown.is_cancelled() {
                return;
            }
            if self.local.is_empty() {
                self.handed_off = false;
            }
            let free = self.semaphore.available_permits();
            let window_ms = self.config.prefetch_window.as_secs_f64() * 1e3;
            let prefetch = self
                .pace
                .prefetch(self.concurrency, window_ms, self.config.claim_batch);
            // Backpressure: tasks computed but not yet recorded stay leased
            // and are renewed by every heartbeat; when the database records
            // slower than we compute, stop claiming rather than pile up
            // leases that could expire in the backlog.
            let room = self.max_held().saturating_sub(self.held.len());
            if room == 0 {
                // Waiting for completions: the completer must not wait for us.
                self.outbox.expect_claim(None);
                self.wait_for_progress(shutdown).await;
                continue;
            }
            let want = (free + prefetch)
                .saturating_sub(self.local.len())
                .min(self.config.claim_batch.max(1))
                .min(room);
            // Top up only once the local queue ran low, so that a busy
            // worker makes one large claim rather than many small ones.
            let enough = enough_local(
                self.local.len(),
                prefetch,
                self.pace.average_ms(),
                self.concurrency,
                self.claim_ms,
            );
            if want == 0 || enough || self.handed_off {
                if self.store.claims_carry_completions() && !self.handed_off {
                    self.outbox.expect_claim(self.next_claim(prefetch));
                } else {
                    self.outbox.expect_claim(None);
                }
                // `None`: no take can lead to a claim (slots busy and no
                // prefetch yet, or tasks handed off); only a free slot can.
                let wake_at = if self.handed_off {
                    None
                } else {
                    self.claims_at_or_below(free, prefetch, room)
                };
                self.local.wake_at_or_below(wake_at.unwrap_or(0));
                // A slot may have taken a task before the mark was set.
                if wake_at.is_some_and(|mark| self.local.len() <= mark) {
                    continue;
                }
                if let Woken::Idle(worker) = self.wait_for_slot(shutdown).await {
                    self.hand_off(worker).await;
                }
                continue;
            }
            self.outbox.expect_claim(None);
            // The last claim emptied the queue: start what we hold as slots
            // free up, and claim again only when work is announced or the
            // poll interval has passed. Claiming again at every free slot
            // cost one empty claim per task at the end of every batch
            // (100 tiny jobs took 80 ms instead of a few).
            let holding = !self.local.is_empty();
            if let Some(left) = hold_off(self.drained_since, self.config.poll_interval, holding) {
                // Claim again once the local queue is empty.
                self.local.wake_at_or_below(0);
                if self.local.is_empty() {
                    continue;
                }
                match self.wait_for_slot_or_work(shutdown, left).await {
                    Woken::Work => self.drained_since = None,
                    Woken::Idle(worker) => self.hand_off(worker).await,
                    Woken::Other => {}
                }
                continue;
            }
            self.drained_since = None;
            let started = Instant::now();
            let claimed = self.claim_with_completions(want).await;
            match claimed {
                Ok(tasks) => {
                    self.backoff.reset();
                    let took = started.elapsed().as_secs_f64() * 1e3;
                    self.claim_ms += CLAIM_WEIGHT * (took - self.claim_ms);
                    let got = tasks.len();
                    if got < want {
                        self.drained_since = Some(Instant::now());
                    }
                    if got > 0 {
                        self.announced_idle = false;
                    }
                    add(&self.counters.claimed, got);
                    if got > 0 {
                        tracing::debug!(
                            tasks = ?tasks.iter().map(|t| (t.task_id, t.attempt)).collect::<Vec<_>>(),
                            "claimed"
                        );
                    }
                    for task in tasks {
                        let cancel = self.held.insert(task.task_id, task.lease_token);
                        self.local.push(task, cancel);
                    }
                    if got == 0 {
                        if self.local.is_empty() {
                            self.pace.reset();
                            self.announce_idle().await;
                            self.idle(shutdown).await;
                            // Announced while this worker was idle too.
                            self.idle_workers.skip_pending();
                        } else if let Woken::Idle(worker) = self.wait_for_slot(shutdown).await {
                            self.hand_off(worker).await;
                        }
                    }
                }
                Err(err) => {
                    let delay = self.backoff.next_delay();
                    tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "claim failed");
                    tokio::select! {
                        () = shutdown.cancelled() => {}
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    /// The most tasks the local queue may hold for this claimer to claim,
    /// with the slots, pace and room as they are now (`None` if it would not
    /// claim even with none): it needs to hear of a slot taking a task
    /// only from there on.
    fn claims_at_or_below(&self, free: usize, prefetch: usize, room: usize) -> Option<usize> {
        let claims = |local: usize| {
            let want = (free + prefetch)
                .saturating_sub(local)
                .min(self.config.claim_batch.max(1))
                .min(room);
            want > 0
                && !enough_local(
                    local,
                    prefetch,
                    self.pace.average_ms(),
                    self.concurrency,
                    self.claim_ms,
                )
        };
        // Fewer local tasks never make a claim less likely: search the
        // boundary between the counts that claim and those that wait.
        let (mut low, mut high) = (0, self.local.len());
        if !claims(low) {
            return None;
        }
        while low < high {
            let mid = (low + high).div_ceil(2);
            if claims(mid) {
                low = mid
            } else {
                high = mid - 1
            }
        }
        Some(low)
    }

    /// When the local queue is expected to run low enough to claim again:
    /// once the work it holds falls under two claim round trips (see
    /// [`enough_local`]); `None` while task times are unknown.
    fn next_claim(&self, prefetch: usize) -> Option<Instant> {
        let average = self.pace.average_ms()?;
        let per_task = average / self.concurrency.max(1) as f64;
        let local = self.local.len();
        let to_half = local.saturating_sub(prefetch / 2) as f64 * per_task;
        let to_reserve = local as f64 * per_task - claim_reserve_ms(self.claim_ms);
        let eta_ms = to_half.max(to_reserve).max(0.0);
        Some(Instant::now() + Duration::try_from_secs_f64(eta_ms / 1e3).ok()?)
    }

    /// Claims up to `want` tasks, recording in the same call the computed
    /// tasks waiting in the outbox where that saves a call (PostgreSQL).
    /// If the call fails they go back to the completer, which records them
    /// on its own.
    async fn claim_with_completions(
        &mut self,
        want: usize,
    ) -> Result<Vec<ClaimedTask>, mcq_queue::StoreError> {
        let done = if self.store.claims_carry_completions() {
            self.outbox.take_done(self.config.complete_batch.max(1))
        } else {
            Vec::new()
        };
        if done.is_empty() {
            return self.store.claim(self.worker, want as u32).await;
        }
        let leases: Vec<_> = done.iter().map(|d| (d.task_id, d.lease_token)).collect();
        match self
            .store
            .complete_and_claim(self.worker, done.clone(), want as u32)
            .await
        {
            Ok(reply) => {
                completer::settle(&self.counters, &self.held, leases, &reply.refused);
                reply.claimed
            }
            Err(err) => {
                match &self.finished {
                    Some(reporter) => reporter.put_back(done),
                    // The completer flushes the outbox before it ends.
                    None => self.outbox.put_back(done),
                }
                Err(err)
            }
        }
    }

    /// Starts local tasks on the pool while slots are free.
    fn dispatch(&mut self) {
        let Some(finished) = &self.finished else {
            return;
        };
        // A slot runs local tasks until none is left, so one is started per
        // free permit only while tasks wait.
        let mut waiting = self.local.len();
        while waiting > 0 {
            let Ok(permit) = self.semaphore.clone().try_acquire_owned() else {
                return;
            };
            compute::spawn(
                &self.pool,
                self.specs.clone(),
                self.local.clone(),
                permit,
                finished.clone(),
            );
            waiting -= 1;
        }
    }

    /// Waits until a slot comes free or takes a local task (either may
    /// call for a claim), another worker runs out of work while tasks wait
    /// here, or shutdown begins.
    async fn wait_for_slot(&mut self, shutdown: &CancellationToken) -> Woken {
        self.wait(shutdown, None).await
    }

    /// Waits as [`Claimer::wait_for_slot`], and also for work to be
    /// announced or for `timeout` (both [`Woken::Work`]).
    async fn wait_for_slot_or_work(
        &mut self,
        shutdown: &CancellationToken,
        timeout: Duration,
    ) -> Woken {
        self.wait(shutdown, Some(timeout)).await
    }

    async fn wait(&mut self, shutdown: &CancellationToken, work: Option<Duration>) -> Woken {
        let holding = !self.local.is_empty();
        let store = &self.store;
        let work = async {
            match work {
                Some(timeout) => store.wait_for_work(timeout).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => Woken::Other,
            // We never close the semaphore, so this only fails if it were.
            permit = self.semaphore.acquire() => {
                drop(permit);
                Woken::Other
            }
            () = self.local.taken() => Woken::Other,
            () = work => Woken::Work,
            worker = self.idle_workers.next(), if holding => Woken::Idle(worker),
        }
    }

    /// Tells the other workers, once per time this worker runs out of work,
    /// so that one holding tasks it has not started can hand some over.
    async fn announce_idle(&mut self) {
        if self.announced_idle {
            return;
        }
        self.announced_idle = true;
        if let Err(err) = self.store.announce_idle(self.worker).await {
            // A hint: without it the work stays where it is.
            tracing::debug!(error = %err, "could not announce that this worker is idle");
        }
    }

    /// Another worker (`idle`) ran out of work: hands back to the queue the
    /// later half of the tasks waiting here for a slot, for it to claim,
    /// when they are worth moving ([`worth_handing_off`]). Until the local
    /// queue empties this worker claims nothing more, or it would take them
    /// back.
    async fn hand_off(&mut self, idle: Uuid) {
        if idle == self.worker {
            return;
        }
        let Some(average_ms) = self.pace.average_ms() else {
            return;
        };
        let n = self.local.len() / 2;
        if !worth_handing_off(n, average_ms, self.claim_ms) {
            return;
        }
        let tasks = self.local.take_back(n);
        let leases: Vec<(i64, Uuid)> = tasks
            .iter()
            .map(|(t, _)| (t.task_id, t.lease_token))
            .collect();
        match self.store.release(self.worker, &leases).await {
            Ok(()) => {
                self.handed_off = true;
                add(&self.counters.handed_off, leases.len());
                self.held.remove_all(leases);
                tracing::debug!(tasks = n, to = %idle, "handed tasks back for an idle worker");
            }
            Err(err) => {
                // Still ours: they wait here as before.
                for (task, cancel) in tasks {
                    self.local.push(task, cancel);
                }
                tracing::warn!(error = %err, "could not hand tasks back for an idle worker");
            }
        }
    }

    /// Most tasks held at once: a claim batch in hand and a completion
    /// batch in flight, and at least the compute slots.
    fn max_held(&self) -> usize {
        (self.config.claim_batch + self.config.complete_batch).max(self.concurrency + 1)
    }

    async fn wait_for_progress(&self, shutdown: &CancellationToken) {
        // The timeout covers a notification sent just before we started waiting.
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = self.held.progress.notified() => {}
            () = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    }

    async fn idle(&self, shutdown: &CancellationToken) {
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = self.store.wait_for_work(self.config.poll_interval) => {}
        }
    }

    /// Hands back claimed tasks that never started.
    async fn release_unstarted(&mut self, give_up: &CancellationToken) {
        let tasks: Vec<(i64, Uuid)> = self
            .local
            .close()
            .into_iter()
            .map(|(t, _)| (t.task_id, t.lease_token))
            .collect();
        if tasks.is_empty() {
            return;
        }
        let (store, worker) = (&self.store, self.worker);
        if persist("release", give_up, || store.release(worker, &tasks))
            .await
            .is_some()
        {
            add(&self.counters.released, tasks.len());
            tracing::info!(
                count = tasks.len(),
                "handed back tasks that had not started"
            );
        }
        self.held.remove_all(tasks);
    }

    /// Waits for running tasks until `deadline`, then cancels them and
    /// gives them a little longer to stop.
    async fn drain_until(&self, deadline: Instant, held: &Held) {
        let all = self.concurrency as u32;
        let idle = || self.semaphore.acquire_many(all);
        if let Ok(permits) = tokio::time::timeout_at(deadline, idle()).await {
            drop(permits);
            return;
        }
        tracing::warn!("shutdown timeout reached; cancelling running tasks");
        held.cancel_everything();
        if tokio::time::timeout(CANCEL_GRACE, idle()).await.is_err() {
            tracing::warn!("some tasks did not stop at a chunk boundary; leaving them");
        }
    }
}

/// Weight of the newest claim's round trip in `Claimer::claim_ms`.
const CLAIM_WEIGHT: f64 = 0.2;

/// Whether the local queue (`local` claimed tasks not yet started) can wait
/// before it is topped up: while it holds more than half the prefetch
/// target, or, once task times are known, more work than twice a claim's
/// round trip (at least 1 ms) for `concurrency` slots. With tasks of
/// 10 ms the second rule claims when the last local task starts, one claim
/// per `prefetch + 1` tasks, where the first alone claimed every second
/// task (`mcq bench compare`, docs/worker.md); the running task covers the
/// round trip.
fn enough_local(
    local: usize,
    prefetch: usize,
    average_ms: Option<f64>,
    concurrency: usize,
    claim_ms: f64,
) -> bool {
    if local > prefetch / 2 {
        return true;
    }
    average_ms.is_some_and(|average| {
        let work_ms = local as f64 * average / concurrency.max(1) as f64;
        work_ms >= claim_reserve_ms(claim_ms)
    })
}

/// Work the local queue must hold to wait before topping up: two claim
/// round trips (`claim_ms`, a moving average), at least 1 ms.
fn claim_reserve_ms(claim_ms: f64) -> f64 {
    (2.0 * claim_ms).max(1.0)
}

/// Whether `n` tasks of `average_ms` each are worth handing to an idle
/// worker: when they hold more work than two claim round trips (the
/// reserve of [`enough_local`]), so that the idle worker has them before
/// this one could start them. Comparing a single task with a round trip
/// kept 90 tasks of 0.5 ms on one worker while the other sat idle
/// (`mcq bench compare --sweep-runs`, docs/worker.md).
fn worth_handing_off(n: usize, average_ms: f64, claim_ms: f64) -> bool {
    n > 0 && n as f64 * average_ms >= claim_reserve_ms(claim_ms)
}

/// How long to hold off claiming after a claim found the queue drained
/// (`drained_since`): while tasks are still held locally, until the poll
/// interval has passed; `None` means claim now.
fn hold_off(drained_since: Option<Instant>, poll: Duration, holding: bool) -> Option<Duration> {
    let left = poll.checked_sub(drained_since?.elapsed())?;
    (holding && !left.is_zero()).then_some(left)
}

/// This machine's name, for the worker list.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tops_up_when_the_local_queue_runs_low() {
        // Pace unknown: half the prefetch target, as before.
        assert!(enough_local(3, 4, None, 1, 1.0));
        assert!(!enough_local(2, 4, None, 1, 1.0));
        // 10 ms tasks, one slot, 1 ms claims: one local task is enough.
        assert!(enough_local(1, 3, Some(10.0), 1, 1.0));
        assert!(!enough_local(0, 3, Some(10.0), 1, 1.0));
        // Slow claims: the reserve grows with the round trip.
        assert!(!enough_local(1, 3, Some(10.0), 1, 6.0));
        // Tiny tasks: 200 of 10 µs on two slots are 1 ms, under 2 claims.
        assert!(!enough_local(200, 1000, Some(0.01), 2, 1.0));
        assert!(enough_local(501, 1000, Some(0.01), 2, 1.0));
        assert!(enough_local(400, 1000, Some(0.01), 2, 0.5), "at least 1 ms");
    }

    #[test]
    fn hands_off_when_the_tasks_hold_more_than_two_round_trips() {
        // 45 tasks of 0.5 ms: 22 ms of work, against claims of 1 ms.
        assert!(worth_handing_off(45, 0.5, 1.0));
        // Long tasks: one is enough.
        assert!(worth_handing_off(1, 10.0, 1.0));
        // Too little work to be worth a release and a claim.
        assert!(!worth_handing_off(3, 0.5, 1.0));
        assert!(!worth_handing_off(100, 0.005, 1.0));
        assert!(!worth_handing_off(0, 10.0, 1.0), "nothing to hand");
    }

    #[test]
    fn claims_at_once_unless_a_drained_queue_left_local_work() {
        let poll = Duration::from_secs(1);
        assert_eq!(hold_off(None, poll, true), None, "queue not seen empty");
        let now = Instant::now();
        let left = hold_off(Some(now), poll, true).expect("hold off while holding work");
        assert!(
            left <= poll && left > Duration::from_millis(500),
            "{left:?}"
        );
        assert_eq!(
            hold_off(Some(now), poll, false),
            None,
            "nothing held: idle instead"
        );
        let long_ago = now.checked_sub(Duration::from_secs(2)).expect("instant");
        assert_eq!(
            hold_off(Some(long_ago), poll, true),
            None,
            "poll interval passed"
        );
    }
}
