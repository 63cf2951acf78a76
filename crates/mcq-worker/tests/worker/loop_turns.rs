//! The worker's loop waits while it has nothing to decide: with its one
//! slot busy and no task time known yet (so nothing to claim ahead), it
//! must wait for the slot's report, not turn round and round, which would
//! take a core from the kernels on a machine with as many cores as slots.

use std::time::Duration;

use mcq_worker::Worker;
use tokio_util::sync::CancellationToken;

use crate::common;

const JOBS: u64 = 6;
/// Paths per job: tens of milliseconds of kernel time each, long enough
/// for a spinning loop to turn hundreds of thousands of times.
const RUNS: u64 = 4_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_waits_while_its_slot_is_busy() {
    let (store, dir) = common::store("turns").await;
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(Worker::new(store.clone(), common::one_slot()).run(shutdown.clone()));

    // Two batches, one after the other, of different sizes: each starts
    // with nothing known of its task times (the worker forgets them when it
    // runs out of work, unless the new tasks have the old ones' shape).
    for round in 0..2 {
        let specs = common::specs(RUNS >> round, round * JOBS..(round + 1) * JOBS);
        let batch = common::submit_batch(&store, specs).await;
        let view = common::wait_done(&store, batch, Duration::from_secs(120)).await;
        assert_eq!(view.counts.succeeded, JOBS, "{:?}", view.counts);
    }
    shutdown.cancel();
    let report = worker.await.expect("join").expect("worker");
    assert_eq!(report.completed, 2 * JOBS, "{report:?}");
    // A few turns per task (its report, a claim, an announcement) are the
    // loop doing its job; a spinning loop makes millions in these batches.
    assert!(
        report.loop_turns <= 20 * 2 * JOBS,
        "the loop turned {} times for {} tasks: it spins instead of waiting",
        report.loop_turns,
        2 * JOBS
    );
    common::remove(store, dir).await;
}
