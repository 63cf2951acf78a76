//! A fleet of one-slot workers on PostgreSQL, on a batch large enough to be
//! staged: every worker takes work while the batch lasts. The workers' poll
//! is an hour, so one that waited for it after an empty claim would take
//! nothing before the batch is done; a claim that finds the staged row
//! held by another must lead to a claim again shortly instead.

use std::time::{Duration, Instant};

use mcq_queue::{QueueConfig, Store};
use mcq_worker::hold::Hold;
use mcq_worker::{Worker, WorkerConfig};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::common;

const WORKERS: usize = 16;
/// Staged (1,000 jobs or more), and about 90 tasks per worker.
const JOBS: u64 = 1500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_worker_of_a_fleet_takes_work_from_a_staged_batch_without_the_poll() {
    let Some(db) = mcq_testdb::postgres().await else {
        return;
    };
    // Two connections per store, as `mcq bench scale` runs its fleet.
    let queue = QueueConfig {
        pool_size: 2,
        ..QueueConfig::default()
    };
    let control = Store::connect(&db.url, queue.clone())
        .await
        .expect("connect");
    control.migrate().await.expect("migrate");
    let shutdown = CancellationToken::new();
    let mut fleet = JoinSet::new();
    for _ in 0..WORKERS {
        let store = Store::connect(&db.url, queue.clone())
            .await
            .expect("connect");
        let config = WorkerConfig {
            poll_interval: Duration::from_secs(3600),
            prune_interval: None,
            hold: Some(Hold::new(Duration::from_millis(10))),
            ..common::one_slot()
        };
        fleet.spawn(Worker::new(store, config).run(shutdown.clone()));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while control.workers().await.expect("list workers").len() < WORKERS {
        assert!(Instant::now() < deadline, "the fleet registers within 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let batch = common::submit_batch(&control, common::specs(2, 0..JOBS)).await;
    let view = common::wait_done(&control, batch, Duration::from_secs(180)).await;
    assert_eq!(view.counts.succeeded, JOBS);
    shutdown.cancel();
    let mut reports = Vec::with_capacity(WORKERS);
    while let Some(joined) = fleet.join_next().await {
        reports.push(joined.expect("worker task").expect("worker"));
    }
    let claimed: Vec<u64> = reports.iter().map(|r| r.claimed).collect();
    // A task handed to an idle worker, or handed back, is claimed again.
    let returned: u64 = reports.iter().map(|r| r.handed_off + r.released).sum();
    assert_eq!(
        claimed.iter().sum::<u64>(),
        JOBS + returned,
        "each job claimed once, plus once more per task handed off or back"
    );
    assert!(
        claimed.iter().all(|&n| n > 0),
        "every worker took work while the batch lasted; tasks per worker: {claimed:?}, \
         contended claims: {:?}",
        reports.iter().map(|r| r.contended).collect::<Vec<_>>()
    );
    control.close().await;
}
