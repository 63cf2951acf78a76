//! The worker's loop: one task that owns the local queue's filling, the
//! finished results and every database call for claims and completions.
//!
//! Each turn it takes in the slots' reports, starts slots for waiting
//! tasks, asks [`policy::decide`] what to do, and does it: start a claim
//! (carrying the computed results) or a flush, hand off, announce, or
//! wait for the next event. A claim and a flush may be in flight at once,
//! as futures this loop polls while it waits; their answers come back to
//! it as events. A failed call is not retried in place: the loop backs off
//! through the policy's `retry_at`, so it keeps taking reports and sees
//! shutdown while the database is away.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use mcq_queue::{ClaimedTask, IdleWorkers, Store, StoreError, TaskOutput, WorkEvents};
use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::backoff::{Backoff, persist};
use crate::calls::{self, Call, Claimed, Flushed, finish, settle};
use crate::compute::{Outcome, Specs};
use crate::contention::Contention;
use crate::counters::{Counters, add, seconds_since, submitted_at};
use crate::held::{Held, LeaseKey};
use crate::hold::Hold;
use crate::pace::Pace;
use crate::pending::Pending;
use crate::policy::{self, Decision, Rules, State, Stopping};
use crate::slots::{self, LocalQueue, Report};
use crate::trail::Trail;

/// Weight of the newest claim's round trip in its moving average.
const CLAIM_WEIGHT: f64 = 0.2;

/// Everything the loop owns or shares.
pub(crate) struct Driver {
    pub(crate) store: Store,
    pub(crate) worker: Uuid,
    pub(crate) rules: Rules,
    pub(crate) poll_interval: Duration,
    pub(crate) shutdown_timeout: Duration,
    pub(crate) held: Arc<Held>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) pool: rayon::ThreadPool,
    pub(crate) specs: Arc<Specs>,
    /// Benchmark only: how long each task holds its slot first.
    pub(crate) hold: Option<Hold>,
    pub(crate) local: Arc<LocalQueue>,
    pub(crate) reports_tx: UnboundedSender<Report>,
    pub(crate) reports: UnboundedReceiver<Report>,
    pub(crate) idle_workers: IdleWorkers,
    /// Signals that work may be waiting, subscribed before the first
    /// claim so that none sent while this worker is busy is missed.
    pub(crate) work: WorkEvents,
    /// Cancelled when the worker must stop retrying a database that is
    /// gone (past the shutdown deadline and its grace).
    pub(crate) give_up: CancellationToken,
    pub(crate) pending: Pending,
    pub(crate) running: usize,
    pub(crate) pace: Pace,
    pub(crate) claim_ms: f64,
    pub(crate) drained_until: Option<Instant>,
    pub(crate) claimed_none: bool,
    /// The last claim passed over work other claims held.
    pub(crate) contended: bool,
    pub(crate) contention: Contention,
    pub(crate) handed_off: bool,
    pub(crate) peer_idle: bool,
    pub(crate) announced_idle: bool,
    pub(crate) backoff: Backoff,
    pub(crate) retry_at: Option<Instant>,
    /// When the local queue was first seen low since the last claim began.
    pub(crate) low_since: Option<Instant>,
    /// This worker's share of the spread of its next claim ahead
    /// (`Rules::spread`): workers of tasks of one length that started
    /// together otherwise claim in step, every one of them in the same
    /// few milliseconds.
    pub(crate) spread: f64,
    /// Where each claim draws the next share, seeded by the worker's id so
    /// that workers draw apart.
    pub(crate) spreads: Xoshiro256PlusPlus,
    pub(crate) stop: Option<Stopping>,
    pub(crate) claim: Option<Call<Claimed>>,
    pub(crate) flush: Option<Call<Flushed>>,
}

impl Driver {
    /// Runs until shutdown is complete: after `shutdown`, no claims, the
    /// unstarted tasks handed back, the running ones finished or cancelled,
    /// their results recorded (or given up on).
    pub(crate) async fn run(&mut self, shutdown: &CancellationToken) {
        loop {
            self.take_reports();
            if shutdown.is_cancelled() && self.stop.is_none() {
                self.begin_stop().await;
            }
            self.dispatch();
            add(&self.counters.loop_turns, 1);
            let mut state = self.state();
            self.low_since = if self.rules.low(&state) {
                self.low_since.or(Some(state.now))
            } else {
                None
            };
            state.low_since = self.low_since;
            let decision = policy::decide(&state, &self.rules);
            // An announcement counts for the decision just made only.
            self.peer_idle = false;
            match decision {
                Decision::Claim(n) => self.start_claim(n),
                Decision::Flush => self.start_flush(),
                Decision::HandOff(n) => self.hand_off(n).await,
                Decision::AnnounceIdle => self.announce_idle().await,
                Decision::CancelRunning => {
                    tracing::warn!("shutdown timeout reached; cancelling running tasks");
                    self.held.cancel_everything();
                    if let Some(stop) = &mut self.stop {
                        stop.cancelled = true;
                    }
                }
                Decision::Wait { until, work } => self.wait(until, work, shutdown).await,
                Decision::Stop => {
                    if self.running > 0 {
                        tracing::warn!(
                            running = self.running,
                            "some tasks did not stop at a chunk boundary; leaving them"
                        );
                    }
                    if self.pending.len() > 0 {
                        tracing::warn!(
                            count = self.pending.len(),
                            "results not recorded before the deadline; abandoning them"
                        );
                    }
                    return;
                }
            }
        }
    }

    /// What the policy needs to know, as of now.
    fn state(&self) -> State {
        State {
            now: Instant::now(),
            running: self.running,
            local: self.local.len(),
            held: self.held.len(),
            pending: self.pending.len(),
            first_pending: self.pending.first_at(),
            urgent: self.pending.urgent(),
            task_ms: self.pace.average_ms(),
            claim_ms: self.claim_ms,
            drained_until: self.drained_until,
            claimed_none: self.claimed_none,
            contended: self.contended,
            handed_off: self.handed_off,
            peer_idle: self.peer_idle,
            announced_idle: self.announced_idle,
            low_since: self.low_since,
            spread: self.spread,
            retry_at: self.retry_at,
            claiming: self.claim.is_some(),
            flushing: self.flush.is_some(),
            stop: self.stop,
        }
    }

    /// Takes in every report waiting, without waiting.
    fn take_reports(&mut self) {
        while let Ok(report) = self.reports.try_recv() {
            self.receive(report);
        }
    }

    fn receive(&mut self, report: Report) {
        if report.slot_free {
            self.running -= 1;
        }
        match &report.finished.outcome {
            Outcome::Done(output) => {
                self.pace.record(report.finished.compute_ms);
                add(&self.counters.paths, paths(output));
                self.counters
                    .compute
                    .record(report.finished.compute_ms / 1e3);
            }
            Outcome::Failed { .. } => {}
            Outcome::Cancelled => add(&self.counters.cancelled, 1),
        }
        self.pending.push(report.finished, Instant::now());
    }

    /// Starts a slot for each waiting task while slots are free.
    fn dispatch(&mut self) {
        while self.running < self.rules.slots {
            let Some(first) = self.local.take() else {
                return;
            };
            slots::spawn(
                &self.pool,
                first,
                self.specs.clone(),
                self.hold.clone(),
                self.local.clone(),
                self.reports_tx.clone(),
            );
            self.running += 1;
        }
    }

    /// Waits for the next event that can change the decision.
    async fn wait(&mut self, until: Option<Instant>, work: bool, shutdown: &CancellationToken) {
        let timer = async {
            match until {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let events = &mut self.work;
        let poll = self.poll_interval;
        let announced = async {
            if work {
                events.wait(poll).await
            } else {
                std::future::pending::<bool>().await
            }
        };
        let stopping = self.stop.is_some();
        tokio::select! {
            claimed = finish(&mut self.claim) => self.claimed(claimed),
            flushed = finish(&mut self.flush) => self.flushed(flushed),
            // The loop holds a sender itself, so the channel never closes.
            Some(report) = self.reports.recv() => self.receive(report),
            () = timer => {}
            signalled = announced => {
                self.drained_until = None;
                // An announcement may have taken this worker's idle mark
                // to wake it (`mcq_wake`): should its claim find nothing,
                // it marks itself idle again, to be named next time.
                if signalled {
                    self.announced_idle = false;
                }
            }
            idle = self.idle_workers.next() => self.peer_idle = idle != self.worker,
            () = shutdown.cancelled(), if !stopping => {}
        }
    }

    /// Starts a claim of up to `n` tasks, sending the computed results along.
    fn start_claim(&mut self, n: usize) {
        let ahead = self.rules.ahead(&self.state(), n);
        let done = self.pending.take_done(self.rules.complete_batch);
        self.held
            .telling(done.iter().map(|(d, _)| (d.task_id, d.lease_token)));
        let (store, worker) = (self.store.clone(), self.worker);
        self.claim = Some(calls::spawn(calls::claim(store, worker, done, n, ahead)));
        self.low_since = None;
        self.spread = self.spreads.random_range(0.0..1.0);
    }

    /// A claim answered.
    fn claimed(&mut self, claimed: Claimed) {
        let Claimed {
            asked,
            done,
            took,
            reply,
        } = claimed;
        let (tasks, contended) = match reply {
            Ok(reply) => {
                if !done.is_empty() {
                    let leases = done.iter().map(|(d, _)| (d.task_id, d.lease_token));
                    settle(&self.counters, &self.held, leases.collect(), &reply.refused);
                }
                (reply.claimed, reply.contended)
            }
            Err(err) => {
                self.pending.put_back_done(done);
                (Err(err), false)
            }
        };
        match tasks {
            Ok(tasks) => {
                let took_ms = took.as_secs_f64() * 1e3;
                self.claim_ms += CLAIM_WEIGHT * (took_ms - self.claim_ms);
                self.succeeded();
                self.take_in(tasks, asked, contended);
            }
            Err(err) => self.failed("claim", &err),
        }
    }

    /// Puts claimed tasks in the local queue and under lease. A short
    /// claim holds off the next one until work is announced or the poll
    /// comes round; one that passed over work other claims held, only for
    /// a short, growing, jittered delay, since that work is announced by
    /// no one.
    fn take_in(&mut self, tasks: Vec<ClaimedTask>, asked: usize, contended: bool) {
        let got = tasks.len();
        add(&self.counters.claimed, got);
        self.handed_off = false;
        if !contended {
            self.contention.reset();
        }
        if got < asked {
            let delay = if contended {
                add(&self.counters.contended, 1);
                self.contention.next_delay().min(self.poll_interval)
            } else {
                self.poll_interval
            };
            self.drained_until = Some(Instant::now() + delay);
        }
        self.contended = contended;
        self.claimed_none = got == 0;
        if got > 0 {
            self.announced_idle = false;
            tracing::debug!(
                tasks = ?tasks.iter().map(|t| (t.task_id, t.attempt)).collect::<Vec<_>>(),
                "claimed"
            );
        }
        let now = SystemTime::now();
        for task in tasks {
            self.pace.claimed(&task);
            let submitted = submitted_at(task.job_id);
            if task.attempt > 1 {
                add(&self.counters.retried, 1);
            } else if let Some(at) = submitted {
                self.counters.pickup.record(seconds_since(at, now));
            }
            let trail = Trail::new(&task);
            if tracing::enabled!(tracing::Level::TRACE) {
                trail
                    .span()
                    .in_scope(|| tracing::trace!(chunks = ?task.chunks, "claimed"));
            }
            let ticket = self
                .held
                .insert(task.task_id, task.lease_token, trail, submitted);
            self.local.push(task, ticket);
        }
    }

    /// Starts recording a batch of waiting results.
    fn start_flush(&mut self) {
        let batch = self.pending.take(self.rules.complete_batch);
        self.held.telling(batch.leases());
        let (store, worker) = (self.store.clone(), self.worker);
        let (held, counters) = (self.held.clone(), self.counters.clone());
        self.flush = Some(calls::spawn(calls::record(
            store, worker, held, counters, batch,
        )));
    }

    /// A flush ended: what it could not record waits again.
    fn flushed(&mut self, flushed: Flushed) {
        let Flushed { unrecorded, error } = flushed;
        self.pending.put_back_cancelled(unrecorded.cancelled);
        self.pending.put_back_failed(unrecorded.failed);
        self.pending.put_back_done(unrecorded.done);
        match error {
            Some((what, err)) => self.failed(what, &err),
            None => self.succeeded(),
        }
    }

    /// Another worker is idle: hands it the last `n` unstarted tasks
    /// through the queue. Until the local queue is empty this worker
    /// claims nothing more, or it would take them back.
    async fn hand_off(&mut self, n: usize) {
        let tasks = self.local.take_back(n);
        let leases: Vec<LeaseKey> = tasks
            .iter()
            .map(|(t, _)| (t.task_id, t.lease_token))
            .collect();
        self.held.telling(leases.iter().copied());
        match self.store.release(self.worker, &leases).await {
            Ok(()) => {
                self.handed_off = true;
                add(&self.counters.handed_off, leases.len());
                self.held.remove_all(leases);
                tracing::debug!(tasks = n, "handed tasks back for an idle worker");
            }
            Err(err) => {
                // Still ours: they wait here as before.
                for (task, ticket) in tasks {
                    self.local.push(task, ticket);
                }
                tracing::warn!(error = %err, "could not hand tasks back for an idle worker");
            }
        }
    }

    /// Tells the other workers, once per time this worker runs out of
    /// work, so that one holding unstarted tasks can hand some over; and
    /// forgets the pace, since the next work may be of another size.
    async fn announce_idle(&mut self) {
        self.announced_idle = true;
        self.pace.rest();
        if let Err(err) = self.store.announce_idle(self.worker).await {
            // A hint: without it the work stays where it is.
            tracing::debug!(error = %err, "could not announce that this worker is idle");
        }
    }

    /// Shutdown begins: no more claims; the tasks that never started go
    /// back to the queue at once.
    async fn begin_stop(&mut self) {
        let deadline = Instant::now() + self.shutdown_timeout;
        self.stop = Some(Stopping {
            deadline,
            cancelled: false,
        });
        tracing::info!(held = self.held.len(), "shutting down: no more claims");
        let unstarted: Vec<LeaseKey> = self
            .local
            .close()
            .into_iter()
            .map(|(t, _)| (t.task_id, t.lease_token))
            .collect();
        if unstarted.is_empty() {
            return;
        }
        self.held.telling(unstarted.iter().copied());
        let (store, worker) = (&self.store, self.worker);
        if persist("release", &self.give_up, || {
            store.release(worker, &unstarted)
        })
        .await
        .is_some()
        {
            add(&self.counters.released, unstarted.len());
            tracing::info!(
                count = unstarted.len(),
                "handed back tasks that had not started"
            );
        }
        self.held.remove_all(unstarted);
    }

    fn succeeded(&mut self) {
        if self.backoff.failures() > 0 {
            tracing::info!(
                failures = self.backoff.failures(),
                "database reachable again"
            );
        }
        self.backoff.reset();
        self.retry_at = None;
    }

    fn failed(&mut self, what: &str, err: &StoreError) {
        let delay = self.backoff.next_delay();
        tracing::warn!(what, error = %err, retry_in_ms = delay.as_millis() as u64, "database call failed");
        self.retry_at = Some(Instant::now() + delay);
    }
}

/// Paths a task's output simulated (for the paths-per-second count).
fn paths(output: &TaskOutput) -> usize {
    let paths = match output {
        TaskOutput::Partial(partial) => partial.paths,
        TaskOutput::Result(result) => result.paths,
    };
    usize::try_from(paths).unwrap_or(usize::MAX)
}
