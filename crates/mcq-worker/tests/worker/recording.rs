//! When finished tasks are recorded: a lone result at once, whatever the
//! wait allowed for batching; with a batch of one, each result on its own.

use mcq_queue::Scope;
use std::time::Duration;

use mcq_api_types::JobState;
use mcq_worker::{Worker, WorkerConfig};
use tokio_util::sync::CancellationToken;

use crate::common;

/// With nothing else in flight the loop records a finished task at once;
/// the wait for more (an hour here) applies only while more is coming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_result_is_recorded_without_waiting_out_the_batching_time() {
    let (store, dir) = common::store("lone").await;
    let shutdown = CancellationToken::new();
    let config = WorkerConfig {
        concurrency: 2,
        threads: 1,
        complete_wait: Duration::from_secs(3600),
        ..WorkerConfig::default()
    };
    let worker = tokio::spawn(Worker::new(store.clone(), config).run(shutdown.clone()));
    for round in 0..3 {
        let batch = common::submit_batch(&store, common::specs(1000, [round])).await;
        let view = common::wait_done(&store, batch, Duration::from_secs(60)).await;
        assert_eq!(view.counts.succeeded, 1, "{:?}", view.counts);
    }
    shutdown.cancel();
    let report = worker.await.expect("join").expect("worker");
    assert_eq!((report.completed, report.refused), (3, 0), "{report:?}");
    common::remove(store, dir).await;
}

/// Results that wait for a batch are all recorded at shutdown, before the
/// worker deregisters, and each job keeps its one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_result_is_recorded_by_the_time_the_worker_stops() {
    let (store, dir) = common::store("flush").await;
    let jobs = 40;
    let batch = common::submit_batch(&store, common::specs(20_000, 0..jobs)).await;
    let shutdown = CancellationToken::new();
    let config = WorkerConfig {
        concurrency: 2,
        threads: 2,
        complete_batch: 7,
        complete_wait: Duration::from_secs(3600),
        ..WorkerConfig::default()
    };
    let worker = tokio::spawn(Worker::new(store.clone(), config).run(shutdown.clone()));
    let view = common::wait_done(&store, batch, Duration::from_secs(60)).await;
    assert_eq!(view.counts.succeeded, jobs);
    shutdown.cancel();
    let report = worker.await.expect("join").expect("worker");
    assert_eq!(report.completed, jobs, "{report:?}");
    let listed = store
        .batch_jobs(batch, Scope::All, None, 100)
        .await
        .expect("read")
        .expect("batch");
    assert!(
        listed
            .iter()
            .all(|j| j.state == JobState::Succeeded && j.attempts == 1)
    );
    assert!(
        store.workers().await.expect("read").is_empty(),
        "deregistered"
    );
    common::remove(store, dir).await;
}
