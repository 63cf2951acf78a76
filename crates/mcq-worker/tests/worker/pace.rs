//! A worker that runs out of work forgets its task time, so that long
//! tasks are not claimed ahead on the strength of short ones; new work
//! whose tasks have the shape of the last (the same spec but its seed, the
//! same chunks) brings it back, and the worker claims ahead while the first
//! of them runs.

use std::time::Duration;

use mcq_queue::Scope;
use mcq_worker::Worker;
use tokio_util::sync::CancellationToken;

use crate::common;

const JOBS: u64 = 4;
/// Paths per job: one task, tens of milliseconds of kernel time, far
/// longer than a claim on the embedded store.
const RUNS: u64 = 4_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_of_the_last_shape_is_claimed_ahead_while_its_first_task_runs() {
    let (store, dir) = common::store("pace").await;
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(Worker::new(store.clone(), common::one_slot()).run(shutdown.clone()));

    // When the worker claimed each batch's second job, against when its
    // first job's kernel ended.
    let mut ahead = Vec::new();
    for round in 0..2 {
        let specs = common::specs(RUNS, round * JOBS..(round + 1) * JOBS);
        let batch = common::submit_batch(&store, specs).await;
        let view = common::wait_done(&store, batch, Duration::from_secs(120)).await;
        assert_eq!(view.counts.succeeded, JOBS, "{:?}", view.counts);
        let jobs = store
            .batch_jobs(batch, Scope::All, None, JOBS as u32)
            .await
            .expect("read the jobs")
            .expect("the batch");
        let first_end = jobs[0].timings.compute_finished_at.expect("computed");
        let second_claim = jobs[1].timings.claimed_at.expect("claimed");
        ahead.push(second_claim < first_end);
    }
    shutdown.cancel();
    let report = worker.await.expect("join").expect("worker");
    assert_eq!(report.completed, 2 * JOBS, "{report:?}");
    assert_eq!(
        ahead,
        [false, true],
        "the first batch's second job is claimed with the first one's result, \
         nothing being known of its time; the second batch's while its first runs"
    );
    common::remove(store, dir).await;
}
