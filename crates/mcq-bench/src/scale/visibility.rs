//! Result visibility: how soon a reader waiting on a job sees its result
//! after the worker has recorded it, while the fleet works through the
//! batch.
//!
//! A probe submits one single-task job at a time, at a higher priority
//! than the batch (so the next claim takes it), and waits on it as a long
//! poll does: until the job's finished-work announcement, then a read of
//! the job. Its visibility is the time from the job's `finished_at` (the
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
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::single;

/// Priority of the probe's jobs: above the batch's (0).
const PRIORITY: i16 = 1;

/// Longest wait for one probe job before the probe gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// How many probe jobs a batch of `tasks` gets: one per 32 tasks, at least
/// 2 and at most 1,000, so that probes take at most a thirty-second of the
/// fleet's slots. A 99th percentile needs a hundred probes or more to be
/// more than the largest of them: a batch of 3,200 tasks or more (e.g.
/// `--rounds 3200` at one worker) has them.
pub(crate) fn probes_for(tasks: u64) -> usize {
    usize::try_from((tasks / 32).clamp(2, 1_000)).unwrap_or(1_000)
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
        let mut events = control.finished_events();
        for k in 0..count {
            if k > 0 {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = stop.cancelled() => break,
                }
            }
            let (view, read) = single::submit_and_wait(
                &control,
                &mut events,
                (spec.with_seed(seed + k as u64), PRIORITY),
                PATIENCE,
            )
            .await
            .context("a probe job")?;
            let finished = view.timings.finished_at.context("a finished job")?;
            let ms = (read - finished).num_microseconds().unwrap_or(0) as f64 / 1e3;
            seen.lock().expect("the probe's samples").push(ms);
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
