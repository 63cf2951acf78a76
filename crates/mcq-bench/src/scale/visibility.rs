//! Result visibility: how soon a reader waiting on a job sees its result
//! after the worker has recorded it, while the fleet works through the
//! batch.
//!
//! A probe submits single-task jobs on a schedule, at a higher priority
//! than the batch (so the next claim takes each), and waits on each as a
//! long poll does: until the job's finished-work announcement, then a read
//! of the job. It does not wait for one job before it submits the next
//! (up to [`IN_FLIGHT`] at once): a job claimed by a busy worker runs
//! after the work that worker claimed ahead, and probes one at a time
//! would then number a few dozen a size, too few for a 99th percentile.
//!
//! Its visibility is the time from the job's `finished_at` (the
//! database's clock when the completion that recorded it began) to the
//! end of that read (this process's clock). Both clocks are this
//! machine's when the database runs beside the benchmark, as `mcq bench
//! scale` measures it; against a database on another host the figure
//! includes the two clocks' offset.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use mcq_kernel::ValidSpec;
use mcq_queue::Store;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::{millis, single};
use crate::stats::quantile_sorted;

/// Priority of the probe's jobs: above the batch's (0).
const PRIORITY: i16 = 1;

/// Longest wait for one probe job before the probe gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// Most probe jobs waited on at once. Past it the next waits for one to
/// finish: each submission announces new work, and a saturated database
/// (256 workers on two cores) queues the announcements on its
/// notification lock.
pub(crate) const IN_FLIGHT: usize = 8;

/// How many probe jobs a batch of `tasks` gets: one per 32 tasks, at least
/// 2 and at most 1,000, so that probes take at most a thirty-second of the
/// fleet's slots. A 99th percentile needs a hundred probes or more to be
/// more than the largest of them: a batch of 3,200 tasks or more (e.g.
/// `--rounds 3200` at one worker) has them.
pub(crate) fn probes_for(tasks: u64) -> usize {
    usize::try_from((tasks / 32).clamp(2, 1_000)).unwrap_or(1_000)
}

/// The median and the 99th percentile of ascending samples; none of none.
pub(crate) fn p50_p99(sorted: &[f64]) -> (Option<f64>, Option<f64>) {
    if sorted.is_empty() {
        return (None, None);
    }
    (
        Some(quantile_sorted(sorted, 0.5)),
        Some(quantile_sorted(sorted, 0.99)),
    )
}

/// The ends of the 95% interval of the 99th percentile of ascending
/// samples (`interval::quantile_ranks`): a lower end from any probe,
/// an upper one from 368; `None` where the sample is too small for it.
pub(crate) fn p99_interval(sorted: &[f64]) -> (Option<f64>, Option<f64>) {
    crate::interval::quantile_interval_sorted(sorted, 0.99)
}

pub(crate) fn start(
    control: Store,
    spec: ValidSpec,
    seed: u64,
    count: usize,
    every: Duration,
    seen: Arc<Mutex<Vec<f64>>>,
    stop: CancellationToken,
) -> JoinHandle<anyhow::Result<()>> {
    tokio::spawn(async move {
        let mut waiting = JoinSet::new();
        'probes: for k in 0..count {
            if k > 0 {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = stop.cancelled() => break,
                }
            }
            // A probe job that failed ends the probe, saying why.
            while let Some(done) = waiting.try_join_next() {
                done.context("a probe job panicked")??;
            }
            while waiting.len() >= IN_FLIGHT {
                tokio::select! {
                    Some(done) = waiting.join_next() => {
                        done.context("a probe job panicked")??;
                    }
                    () = stop.cancelled() => break 'probes,
                }
            }
            // Subscribed before the submission, so that no announcement
            // of the job can come before its waiter listens.
            let mut events = control.finished_events();
            let (control, seen) = (control.clone(), seen.clone());
            let job = (spec.with_seed(seed + k as u64), PRIORITY);
            waiting.spawn(async move {
                let (view, read) = single::submit_and_wait(&control, &mut events, job, PATIENCE)
                    .await
                    .context("a probe job")?;
                let finished = view.timings.finished_at.context("a finished job")?;
                seen.lock()
                    .expect("the probe's samples")
                    .push(millis(read - finished));
                anyhow::Ok(())
            });
        }
        // The jobs in flight are the fleet's to finish; the fleet still runs.
        while let Some(done) = waiting.join_next().await {
            done.context("a probe job panicked")??;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::probes_for;

    #[test]
    fn probes_are_a_small_share_of_the_batch() {
        assert_eq!(probes_for(40), 2);
        assert_eq!(probes_for(640), 20);
        assert_eq!(probes_for(3_200), 100);
        assert_eq!(probes_for(10_240), 320);
        assert_eq!(probes_for(1_000_000), 1_000);
        for tasks in [40, 80, 640, 5_120, 10_240, 1_000_000] {
            assert!(probes_for(tasks) as u64 * 16 <= tasks, "{tasks}");
        }
    }
}

/// On a real (SQLite) store: the probe's jobs go in on their schedule
/// while the ones before them still wait, up to [`IN_FLIGHT`] at once,
/// and each is measured once a worker has run them.
#[cfg(test)]
mod on_a_store {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use mcq_kernel::Spec;
    use mcq_queue::{QueueConfig, Store};
    use mcq_worker::{Worker, WorkerConfig};
    use tokio_util::sync::CancellationToken;

    use super::IN_FLIGHT;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn probe_jobs_go_in_without_waiting_for_the_ones_before() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("queue.sqlite").display());
        let store = Store::connect(&url, QueueConfig::default()).await.unwrap();
        store.migrate().await.unwrap();
        let spec = Spec {
            runs: Some(2),
            seed: Some(1),
            ..Spec::default()
        }
        .validate()
        .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let count = IN_FLIGHT + 2;
        let probe = super::start(
            store.clone(),
            spec,
            1,
            count,
            Duration::from_millis(1),
            seen.clone(),
            stop.clone(),
        );
        // No worker runs yet, so no job finishes: a probe that waited for
        // each would never queue a second, and one without a bound would
        // queue them all.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let queued = store.queue().await.unwrap().depth.queued;
            if queued >= IN_FLIGHT as u64 {
                break;
            }
            assert!(Instant::now() < deadline, "{queued} probe jobs queued");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let queued = store.queue().await.unwrap().depth.queued;
        assert_eq!(queued, IN_FLIGHT as u64, "probe jobs queued at once");
        let token = CancellationToken::new();
        let worker =
            tokio::spawn(Worker::new(store.clone(), WorkerConfig::default()).run(token.clone()));
        probe.await.unwrap().unwrap();
        token.cancel();
        worker.await.unwrap().unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), count, "{seen:?}");
        assert!(seen.iter().all(|ms| *ms >= 0.0), "{seen:?}");
    }
}
