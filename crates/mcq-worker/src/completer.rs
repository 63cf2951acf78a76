//! Records finished tasks in the store, many per round trip.
//!
//! One commit costs about 0.2 ms of fsync on the machines we measure on, so a
//! worker that commits once per task is capped near 5k tasks/s. The completer
//! instead takes whatever has finished (waiting a little for more while other
//! tasks are still in flight) and sends it in one [`Store::complete`] call.
//! Each task is still fenced individually by its lease token inside that
//! call; refused (late) completions are counted and logged.
//!
//! How long it waits: at least `linger`; and while tasks take milliseconds,
//! long enough for the next one to finish (1.5 task times per slot) if that
//! is within 30 ms and `linger_max`. A completion call costs the database about the same
//! whether it carries one task or three, and on a machine where the
//! database shares the cores with the kernel every call is taken from the
//! computation (docs/worker.md). Where claims carry completions it waits
//! for the claimer's next claim instead, if that is expected within
//! `linger_max`. Results then become visible up to `linger_max` later;
//! with nothing else in flight a task is recorded at once.
//!
//! Finished tasks wait in the [`Outbox`]. A claimer about to claim takes
//! the finished ones from it and sends them with its claim
//! ([`Store::complete_and_claim`]), so that a worker whose local queue
//! runs low records and claims in one call instead of two.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mcq_queue::{Store, TaskDone};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::backoff::persist;
use crate::compute::{Finished, Outcome};
use crate::counters::{Counters, add};
use crate::held::{Held, LeaseKey};
use crate::pace::Pace;

/// Finished computations not yet recorded: put here by the kernel jobs,
/// taken by the completer, or by the claimer to send with a claim.
#[derive(Debug)]
pub(crate) struct Outbox {
    items: Mutex<Vec<Finished>>,
    pace: Arc<Pace>,
    /// When the claimer expects to claim next, if it does.
    next_claim: Mutex<Option<Instant>>,
}

impl Outbox {
    pub(crate) fn new(pace: Arc<Pace>) -> Self {
        Outbox {
            items: Mutex::new(Vec::new()),
            pace,
            next_claim: Mutex::new(None),
        }
    }

    /// The claimer's expectation of its next claim (`None`: not soon, or
    /// it waits for completions to be recorded).
    pub(crate) fn expect_claim(&self, at: Option<Instant>) {
        *self
            .next_claim
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = at;
    }

    fn next_claim(&self) -> Option<Instant> {
        *self
            .next_claim
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a finished task; a computed one's time goes into the pace
    /// (under the lock, so concurrent kernel jobs cannot lose an update).
    /// Adds a finished task; returns how many now wait.
    fn push(&self, finished: Finished) -> usize {
        let mut items = self.lock();
        if matches!(finished.outcome, Outcome::Done(_)) {
            self.pace.record(finished.compute_ms);
        }
        items.push(finished);
        items.len()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Takes up to `max` finished tasks, oldest first.
    fn take(&self, max: usize) -> Vec<Finished> {
        let mut items = self.lock();
        let n = items.len().min(max);
        items.drain(..n).collect()
    }

    /// Takes up to `max` computed tasks as completions, leaving failed and
    /// cancelled ones to the completer.
    pub(crate) fn take_done(&self, max: usize) -> Vec<TaskDone> {
        let mut items = self.lock();
        let mut done = Vec::new();
        let mut kept = Vec::with_capacity(items.len());
        for finished in items.drain(..) {
            match finished.outcome {
                Outcome::Done(output) if done.len() < max => done.push(TaskDone {
                    task_id: finished.task_id,
                    lease_token: finished.lease_token,
                    output: *output,
                    compute_ms: finished.compute_ms,
                }),
                outcome => kept.push(Finished {
                    outcome,
                    ..finished
                }),
            }
        }
        *items = kept;
        done
    }

    /// Returns completions taken with [`Outbox::take_done`] that could not
    /// be sent; the completer records them.
    pub(crate) fn put_back(&self, done: Vec<TaskDone>) {
        let mut items = self.lock();
        let returned = done.into_iter().map(|d| Finished {
            task_id: d.task_id,
            lease_token: d.lease_token,
            outcome: Outcome::Done(Box::new(d.output)),
            compute_ms: d.compute_ms,
        });
        items.splice(0..0, returned);
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Finished>> {
        // Every operation leaves the vector whole: a panic cannot corrupt it.
        self.items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How the kernel jobs (and a claimer returning completions) hand finished
/// tasks over: into the outbox, then a wake-up for the completer. The
/// completer ends once every reporter is dropped and the outbox is empty.
#[derive(Debug, Clone)]
pub(crate) struct Reporter {
    outbox: Arc<Outbox>,
    held: Arc<Held>,
    /// The completer's batch size: it records at once when this many wait.
    flush_at: usize,
    wake: mpsc::UnboundedSender<()>,
}

impl Reporter {
    pub(crate) fn new(
        outbox: Arc<Outbox>,
        held: Arc<Held>,
        flush_at: usize,
    ) -> (Reporter, mpsc::UnboundedReceiver<()>) {
        let (wake, woken) = mpsc::unbounded_channel();
        let reporter = Reporter {
            outbox,
            held,
            flush_at: flush_at.max(1),
            wake,
        };
        (reporter, woken)
    }

    /// Puts a finished task in the outbox, and wakes the completer when
    /// that can change what it does: the outbox was empty (it starts to
    /// linger), holds a full batch, or holds everything this worker has
    /// in flight (nothing more is coming soon). Waking it for every task
    /// preempted a kernel thread each time on a machine whose cores the
    /// kernels keep busy (docs/worker.md).
    pub(crate) fn report(&self, finished: Finished) {
        let waiting = self.outbox.push(finished);
        if waiting == 1 || waiting >= self.flush_at || self.held.len() <= waiting {
            // The completer outlives every reporter unless the worker is
            // being torn down past its deadline; then no one is left to tell.
            let _ = self.wake.send(());
        }
    }

    /// Hands completions the claimer could not send back to the completer.
    pub(crate) fn put_back(&self, done: Vec<TaskDone>) {
        self.outbox.put_back(done);
        let _ = self.wake.send(());
    }
}

/// After the store answered for `leases`: counts, warns of refusals (late
/// completions) and forgets the leases, which are no longer ours to renew.
pub(crate) fn settle(counters: &Counters, held: &Held, leases: Vec<LeaseKey>, refused: &[i64]) {
    tracing::debug!(tasks = leases.len(), refused = refused.len(), "completed");
    add(
        &counters.completed,
        leases.len() - refused.len().min(leases.len()),
    );
    if !refused.is_empty() {
        add(&counters.refused, refused.len());
        tracing::warn!(
            count = refused.len(),
            tasks = ?refused,
            "completions refused: the lease was lost (expired and re-claimed, or the job was cancelled)"
        );
    }
    held.remove_all(leases);
}

/// Everything the completer needs; runs until every reporter is gone.
#[derive(Debug)]
pub(crate) struct Completer {
    pub(crate) store: Store,
    pub(crate) worker: Uuid,
    pub(crate) outbox: Arc<Outbox>,
    pub(crate) held: Arc<Held>,
    pub(crate) pace: Arc<Pace>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) batch: usize,
    pub(crate) linger: Duration,
    pub(crate) linger_max: Duration,
    /// Compute slots of this worker.
    pub(crate) concurrency: usize,
    /// Cancelled when the worker must stop retrying a database that is
    /// gone (shutdown deadline passed).
    pub(crate) give_up: CancellationToken,
}

impl Completer {
    /// Records what reaches the outbox until every reporter is dropped
    /// (each report comes with a wake-up on `woken`) and the outbox is empty.
    pub(crate) async fn run(self, mut woken: mpsc::UnboundedReceiver<()>) {
        let batch_size = self.batch.max(1);
        loop {
            if self.outbox.len() == 0 && woken.recv().await.is_none() && self.outbox.len() == 0 {
                return;
            }
            let now = Instant::now();
            let (lingered, latest) = (now + self.linger(), now + self.linger_max);
            loop {
                // Asked again on every wake-up: the claimer's plan changes
                // as tasks finish and claims return.
                let deadline = wait_for_claim(lingered, self.outbox.next_claim(), latest);
                let waiting = self.outbox.len();
                // Empty: a claimer took them along with its claim.
                if waiting == 0 || waiting >= batch_size {
                    break;
                }
                match woken.try_recv() {
                    Ok(()) => {}
                    Err(mpsc::error::TryRecvError::Disconnected) => break,
                    Err(mpsc::error::TryRecvError::Empty) => {
                        // Nothing else computing or waiting for a slot: no
                        // more is coming soon, so record now. A lone job's
                        // result was seen 2 ms later when the completer
                        // waited out its linger (`mcq bench compare
                        // --calls 1`, docs/worker.md).
                        if self.held.len() <= waiting {
                            break;
                        }
                        match tokio::time::timeout_at(deadline, woken.recv()).await {
                            Ok(Some(())) => {}
                            Ok(None) | Err(_) => break,
                        }
                    }
                }
            }
            let batch = self.outbox.take(batch_size);
            if !batch.is_empty() {
                self.record(batch).await;
            }
        }
    }

    /// How long to wait for more finished tasks (module docs).
    fn linger(&self) -> Duration {
        let next = self
            .pace
            .average_ms()
            .map_or(0.0, |ms| 1.5 * ms / self.concurrency.max(1) as f64);
        linger_for(next, self.linger, self.linger_max)
    }

    async fn record(&self, batch: Vec<Finished>) {
        let mut done = Vec::new();
        let mut cancelled = Vec::new();
        for finished in batch {
            match finished.outcome {
                Outcome::Done(output) => {
                    done.push(TaskDone {
                        task_id: finished.task_id,
                        lease_token: finished.lease_token,
                        output: *output,
                        compute_ms: finished.compute_ms,
                    });
                }
                Outcome::Failed { error, panicked } => {
                    self.fail(finished.task_id, finished.lease_token, &error, panicked)
                        .await;
                }
                Outcome::Cancelled => cancelled.push((finished.task_id, finished.lease_token)),
            }
        }
        if !done.is_empty() {
            self.complete(done).await;
        }
        if !cancelled.is_empty() {
            self.release(cancelled).await;
        }
    }

    async fn complete(&self, done: Vec<TaskDone>) {
        let ids: Vec<i64> = done.iter().map(|d| d.task_id).collect();
        let leases: Vec<LeaseKey> = done.iter().map(|d| (d.task_id, d.lease_token)).collect();
        let result = persist("complete", &self.give_up, || {
            self.store.complete(self.worker, done.clone())
        })
        .await;
        match result {
            Some(refused) => settle(&self.counters, &self.held, leases, &refused),
            // Abandoned at the deadline: no longer ours to renew either.
            None => {
                tracing::warn!(tasks = ?ids, "completions abandoned at the shutdown deadline");
                self.held.remove_all(leases);
            }
        }
    }

    async fn fail(&self, task_id: i64, token: Uuid, error: &str, panicked: bool) {
        if panicked {
            add(&self.counters.panicked, 1);
            tracing::error!(task_id, error, "task panicked; recording a failed attempt");
        } else {
            tracing::warn!(task_id, error, "task failed; recording a failed attempt");
        }
        let accepted = persist("fail", &self.give_up, || {
            self.store.fail(self.worker, task_id, token, error)
        })
        .await;
        match accepted {
            Some(true) => add(&self.counters.failed, 1),
            Some(false) => {
                add(&self.counters.refused, 1);
                tracing::warn!(task_id, "failure refused: the lease was lost");
            }
            None => {}
        }
        self.held.remove_all([(task_id, token)]);
    }

    /// Hands back tasks stopped through their cancel flag. For a cancelled
    /// job the store no longer runs them, so the release is a fenced no-op;
    /// at shutdown it returns them to the queue.
    async fn release(&self, tasks: Vec<(i64, Uuid)>) {
        add(&self.counters.cancelled, tasks.len());
        tracing::info!(
            tasks = ?tasks.iter().map(|(id, _)| id).collect::<Vec<_>>(),
            "handing back tasks stopped by their cancel flag"
        );
        if persist("release", &self.give_up, || {
            self.store.release(self.worker, &tasks)
        })
        .await
        .is_some()
        {
            add(&self.counters.released, tasks.len());
        }
        self.held.remove_all(tasks);
    }
}

/// Until when to wait for more finished tasks: `deadline`, or a little
/// after the claimer's next claim (`claim`) if that is later but no later
/// than `latest`: the claim takes the finished tasks along, and the
/// completer records them only if the claim does not come.
fn wait_for_claim(deadline: Instant, claim: Option<Instant>, latest: Instant) -> Instant {
    match claim {
        Some(at) if at > deadline && at <= latest => at + CLAIM_SLACK,
        _ => deadline,
    }
}

/// Longest wait for the next task to finish. Batching the completions of
/// tasks that take longer saves a call per few tens of milliseconds, too
/// little to hold their results back for.
const NEXT_TASK_WAIT: Duration = Duration::from_millis(30);

/// How long after the expected moment of a claim the completer still
/// leaves its finished tasks to it (about a claim's round trip).
const CLAIM_SLACK: Duration = Duration::from_millis(3);

/// Wait until `next_ms` (when the next task is expected to finish), but
/// at least `floor`; when the next task is not expected within `max` and
/// [`NEXT_TASK_WAIT`], waiting for it buys little and only `floor` applies.
fn linger_for(next_ms: f64, floor: Duration, max: Duration) -> Duration {
    let next = Duration::try_from_secs_f64(next_ms / 1e3).unwrap_or(Duration::ZERO);
    if next > max.min(NEXT_TASK_WAIT) {
        floor
    } else {
        next.max(floor)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use mcq_api_types::JobState;
    use mcq_kernel::Spec;
    use mcq_queue::{QueueConfig, Submission, TaskOutput, WorkerInfo};

    use super::*;

    #[test]
    fn the_completer_is_woken_only_when_its_choice_can_change() {
        let outbox = Arc::new(Outbox::new(Arc::new(Pace::new())));
        let held = Arc::new(Held::default());
        for id in 1..=6 {
            held.insert(id, Uuid::nil());
        }
        let (reporter, mut woken) = Reporter::new(outbox.clone(), held.clone(), 4);
        let report = |task_id| {
            reporter.report(Finished {
                task_id,
                lease_token: Uuid::nil(),
                outcome: Outcome::Cancelled,
                compute_ms: 1.0,
            });
        };
        let mut wakes = || {
            let mut n = 0;
            while woken.try_recv().is_ok() {
                n += 1;
            }
            n
        };
        report(1);
        assert_eq!(wakes(), 1, "the first waiting task starts the linger");
        report(2);
        report(3);
        assert_eq!(wakes(), 0, "more of the same while others compute");
        report(4);
        assert_eq!(wakes(), 1, "a full batch is recorded at once");
        outbox.take(10);
        report(5);
        assert_eq!(wakes(), 1, "empty again: a new linger");
        // Six held, the first four recorded: the sixth is all that is left.
        held.remove_all((1..=4).map(|id| (id, Uuid::nil())));
        report(6);
        assert_eq!(wakes(), 1, "nothing else in flight: record now");
    }

    #[test]
    fn a_claim_takes_computed_tasks_and_can_hand_them_back() {
        let outbox = Outbox::new(Arc::new(Pace::new()));
        let finished = |task_id: i64, outcome: Outcome| Finished {
            task_id,
            lease_token: Uuid::nil(),
            outcome,
            compute_ms: 2.0,
        };
        let result = || {
            Spec {
                runs: Some(100),
                seed: Some(1),
                ..Spec::default()
            }
            .validate()
            .expect("valid")
            .price(&AtomicBool::new(false))
            .expect("not cancelled")
        };
        outbox.push(finished(
            1,
            Outcome::Done(Box::new(TaskOutput::Result(result()))),
        ));
        outbox.push(finished(2, Outcome::Cancelled));
        outbox.push(finished(
            3,
            Outcome::Done(Box::new(TaskOutput::Result(result()))),
        ));
        outbox.push(finished(
            4,
            Outcome::Done(Box::new(TaskOutput::Result(result()))),
        ));
        assert_eq!(
            outbox.pace.average_ms(),
            Some(2.0),
            "computed tasks set the pace"
        );

        let taken = outbox.take_done(2);
        let ids = |done: &[TaskDone]| done.iter().map(|d| d.task_id).collect::<Vec<_>>();
        assert_eq!(
            ids(&taken),
            vec![1, 3],
            "computed ones, oldest first, at most 2"
        );
        assert_eq!(outbox.len(), 2, "the cancelled task and task 4 stay");

        // The call failed: the completer gets them back, first in line.
        outbox.put_back(taken);
        let all: Vec<i64> = outbox.take(10).iter().map(|f| f.task_id).collect();
        assert_eq!(all, vec![1, 3, 2, 4]);
        assert_eq!(outbox.len(), 0);
    }

    #[test]
    fn leaves_finished_tasks_to_a_claim_that_comes_soon() {
        let ms = Duration::from_millis;
        let now = Instant::now();
        let (deadline, latest) = (now + ms(9), now + ms(30));
        assert_eq!(
            wait_for_claim(deadline, None, latest),
            deadline,
            "no claim expected"
        );
        assert_eq!(
            wait_for_claim(deadline, Some(now + ms(20)), latest),
            now + ms(20) + CLAIM_SLACK,
            "the claim in 20 ms carries them"
        );
        assert_eq!(
            wait_for_claim(deadline, Some(now + ms(40)), latest),
            deadline,
            "a claim beyond the longest wait: record on our own"
        );
        assert_eq!(
            wait_for_claim(deadline, Some(now + ms(5)), latest),
            deadline,
            "the claim comes first anyway"
        );
    }

    #[test]
    fn by_default_a_claim_a_prefetch_window_away_carries_the_finished_tasks() {
        // A busy worker claims about once per prefetch window; a shorter
        // bound sent most completions on their own, each a call of its own
        // and a preempted kernel (docs/worker.md).
        let config = crate::WorkerConfig::default();
        let now = Instant::now();
        let claim = now + config.prefetch_window;
        assert_eq!(
            wait_for_claim(
                now + Duration::from_millis(1),
                Some(claim),
                now + config.complete_linger_max
            ),
            claim + CLAIM_SLACK
        );
    }

    #[test]
    fn lingers_for_the_next_task_while_tasks_are_short() {
        let ms = Duration::from_millis;
        let (floor, max) = (ms(1), ms(30));
        assert_eq!(linger_for(0.0, floor, max), floor, "pace unknown");
        assert_eq!(
            linger_for(0.01, floor, max),
            floor,
            "tiny tasks batch anyway"
        );
        assert_eq!(linger_for(15.0, floor, max), ms(15), "the next 10 ms task");
        assert_eq!(linger_for(30.0, floor, max), max, "just within reach");
        assert_eq!(linger_for(300.0, floor, max), floor, "long tasks: no wait");
        assert_eq!(linger_for(f64::NAN, floor, max), floor, "no NaN panics");
        assert_eq!(
            linger_for(45.0, floor, ms(100)),
            floor,
            "tasks of 30 ms per slot: not held back for the next, whatever the bound"
        );
        assert_eq!(linger_for(0.5, ms(10), ms(2)), ms(10), "floor wins");
    }

    /// With nothing else in flight the completer records a finished task at
    /// once; its linger (an hour here) applies only while more is coming.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_finished_task_is_recorded_without_waiting_out_the_linger() {
        let dir = std::env::temp_dir().join(format!("mcq-completer-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let url = format!("sqlite:{}", dir.join("queue.sqlite").display());
        let store = Store::connect(&url, QueueConfig::default())
            .await
            .expect("connect");
        store.migrate().await.expect("migrate");
        let spec = Spec {
            runs: Some(1000),
            seed: Some(7),
            ..Spec::default()
        };
        let job = store
            .submit(Submission {
                as_batch: false,
                label: None,
                jobs: vec![spec.validate().expect("valid")],
                idempotency: None,
            })
            .await
            .expect("submit")
            .job_ids[0];
        let worker = store
            .register_worker(WorkerInfo {
                hostname: "test".into(),
                pid: 1,
                concurrency: 1,
            })
            .await
            .expect("register");
        let task = store
            .claim(worker, 1)
            .await
            .expect("claim")
            .pop()
            .expect("a task");
        let held = Arc::new(Held::default());
        held.insert(task.task_id, task.lease_token);
        let pace = Arc::new(Pace::new());
        let outbox = Arc::new(Outbox::new(pace.clone()));
        let completer = Completer {
            store: store.clone(),
            worker,
            outbox: outbox.clone(),
            held: held.clone(),
            pace,
            counters: Arc::new(Counters::default()),
            batch: 100,
            linger: Duration::from_secs(3600),
            linger_max: Duration::from_secs(3600),
            concurrency: 1,
            give_up: CancellationToken::new(),
        };
        let (finished, woken) = Reporter::new(outbox, held.clone(), 100);
        let running = tokio::spawn(completer.run(woken));
        let result = spec
            .validate()
            .expect("valid")
            .price(&AtomicBool::new(false))
            .expect("not cancelled");
        finished.report(Finished {
            task_id: task.task_id,
            lease_token: task.lease_token,
            outcome: Outcome::Done(Box::new(TaskOutput::Result(result))),
            compute_ms: 0.1,
        });

        let recorded = tokio::time::timeout(Duration::from_secs(60), async {
            while held.len() > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(recorded.is_ok(), "the completer waited out its linger");
        let view = store.job(job).await.expect("read").expect("job");
        assert_eq!(view.state, JobState::Succeeded);
        drop(finished);
        running
            .await
            .expect("completer ends when its channel closes");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
