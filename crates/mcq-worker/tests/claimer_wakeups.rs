//! The claim loop waits while it has nothing to decide: with its one slot
//! busy and no task time known yet (so nothing to claim ahead), it must
//! wait for the slot, not turn round and round. It did, once, for the whole
//! of every batch's first task (docs/worker.md), taking a core from the
//! kernels on a machine with as many cores as slots.

use std::time::Duration;

use mcq_kernel::Spec;
use mcq_queue::{QueueConfig, Store, Submission};
use mcq_worker::{Worker, WorkerConfig};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const JOBS: u64 = 6;
/// Paths per job: tens of milliseconds of kernel time each, long enough
/// for a spinning loop to turn hundreds of thousands of times.
const RUNS: u64 = 4_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_loop_waits_while_its_slot_is_busy() {
    let dir = std::env::temp_dir().join(format!("mcq-wakeups-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let url = format!("sqlite:{}", dir.join("queue.sqlite").display());
    // Jobs stay whole: one task each (at most 64 chunks of 2^16 paths).
    let queue = QueueConfig {
        chunks_per_task: 64,
        ..QueueConfig::default()
    };
    let store = Store::connect(&url, queue).await.expect("connect");
    store.migrate().await.expect("migrate");
    let shutdown = CancellationToken::new();
    let config = WorkerConfig {
        concurrency: 1,
        threads: 1,
        ..WorkerConfig::default()
    };
    let worker = tokio::spawn(Worker::new(store.clone(), config).run(shutdown.clone()));

    // Two batches, one after the other: each starts with nothing known of
    // its task times (the worker forgets them when it runs out of work).
    for round in 0..2 {
        let specs = (0..JOBS)
            .map(|seed| Spec {
                runs: Some(RUNS),
                seed: Some(round * JOBS + seed),
                ..Spec::default()
            })
            .collect();
        let batch = store
            .submit(Submission {
                as_batch: true,
                label: None,
                jobs: specs,
                idempotency: None,
            })
            .await
            .expect("submit")
            .batch_id
            .expect("a batch");
        let view = tokio::time::timeout(Duration::from_secs(120), async {
            loop {
                let view = store.batch(batch).await.expect("read").expect("batch");
                if view.done {
                    return view;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the batch finishes");
        assert_eq!(view.counts.succeeded, JOBS, "{:?}", view.counts);
    }
    shutdown.cancel();
    let report = worker.await.expect("join").expect("worker");
    assert_eq!(report.completed, 2 * JOBS, "{report:?}");
    // A few wake-ups per task (a claim, a slot freed, an idle poll) are the
    // loop doing its job; a spinning loop makes millions in these batches.
    assert!(
        report.claimer_wakeups <= 20 * 2 * JOBS,
        "the claim loop woke {} times for {} tasks: it spins instead of waiting",
        report.claimer_wakeups,
        2 * JOBS
    );
    store.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
