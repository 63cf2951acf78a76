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
//! is within `linger_max`. A completion call costs the database about the same
//! whether it carries one task or three, and on a machine where the
//! database shares the cores with the kernel every call is taken from the
//! computation (docs/worker.md). Results then become visible up to
//! `linger_max` later; with nothing else in flight a task is recorded at
//! once.

use std::sync::Arc;
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

/// Everything the completer needs; runs until its channel closes.
#[derive(Debug)]
pub(crate) struct Completer {
    pub(crate) store: Store,
    pub(crate) worker: Uuid,
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
    /// Drains `finished` until every sender is dropped.
    pub(crate) async fn run(self, mut finished: mpsc::UnboundedReceiver<Finished>) {
        let batch_size = self.batch.max(1);
        let mut batch = Vec::with_capacity(batch_size);
        while let Some(first) = finished.recv().await {
            batch.push(first);
            let deadline = Instant::now() + self.linger();
            while batch.len() < batch_size {
                // Take what is already there before waiting for more.
                match finished.try_recv() {
                    Ok(more) => batch.push(more),
                    Err(mpsc::error::TryRecvError::Disconnected) => break,
                    Err(mpsc::error::TryRecvError::Empty) => {
                        // Nothing else computing or waiting for a slot: no
                        // more is coming soon, so record now. A lone job's
                        // result was seen 2 ms later when the completer
                        // waited out its linger (`mcq bench compare --calls
                        // 1`, docs/worker.md).
                        if self.held.len() <= batch.len() {
                            break;
                        }
                        match tokio::time::timeout_at(deadline, finished.recv()).await {
                            Ok(Some(more)) => batch.push(more),
                            Ok(None) | Err(_) => break,
                        }
                    }
                }
            }
            self.record(std::mem::take(&mut batch)).await;
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
                    self.pace.record(finished.compute_ms);
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
        if let Some(refused) = result {
            tracing::debug!(tasks = ?ids, refused = refused.len(), "completed");
            add(&self.counters.completed, ids.len() - refused.len());
            if !refused.is_empty() {
                add(&self.counters.refused, refused.len());
                tracing::warn!(
                    count = refused.len(),
                    tasks = ?refused,
                    "completions refused: the lease was lost (expired and re-claimed, or the job was cancelled)"
                );
            }
        }
        // Whether accepted, refused or abandoned at the deadline, these
        // tasks are no longer ours to renew.
        self.held.remove_all(leases);
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

/// Wait until `next_ms` (when the next task is expected to finish), but
/// at least `floor`; when the next task is not expected within `max`,
/// waiting for it buys nothing and only `floor` applies.
fn linger_for(next_ms: f64, floor: Duration, max: Duration) -> Duration {
    let next = Duration::try_from_secs_f64(next_ms / 1e3).unwrap_or(Duration::ZERO);
    if next > max { floor } else { next.max(floor) }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use mcq_kernel::Spec;
    use mcq_queue::{JobState, QueueConfig, Submission, TaskOutput, WorkerInfo};

    use super::*;

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
                jobs: vec![spec.clone()],
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
        let completer = Completer {
            store: store.clone(),
            worker,
            held: held.clone(),
            pace: Arc::new(Pace::new()),
            counters: Arc::new(Counters::default()),
            batch: 100,
            linger: Duration::from_secs(3600),
            linger_max: Duration::from_secs(3600),
            concurrency: 1,
            give_up: CancellationToken::new(),
        };
        let (finished, receiver) = mpsc::unbounded_channel();
        let running = tokio::spawn(completer.run(receiver));
        let result = spec
            .validate()
            .expect("valid")
            .price(&AtomicBool::new(false))
            .expect("not cancelled");
        finished
            .send(Finished {
                task_id: task.task_id,
                lease_token: task.lease_token,
                outcome: Outcome::Done(Box::new(TaskOutput::Result(result))),
                compute_ms: 0.1,
            })
            .expect("completer listening");

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
