//! Two workers on one store: the first claims half of a batch ahead of
//! its single slot (its long jobs); the second joins late, takes the short
//! rest, runs out first and announces that it is idle, and the first hands
//! it half of what it has not started. On the embedded store, and on
//! PostgreSQL through a transaction-mode pool's settings (no `LISTEN`: the
//! announcement travels by the workers table).

use mcq_queue::{PoolMode, QueueConfig, Scope, Store};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use mcq_api_types::JobState;
use mcq_worker::{Worker, WorkerConfig};
use tokio_util::sync::CancellationToken;

use crate::common;

const JOBS: usize = 24;
/// The first jobs of the batch, long; the rest are an eighth as long.
const LONG: usize = 13;
/// Paths per long job: one task (at most 64 chunks of 2^16 paths, as
/// `common::store` configures), tens of milliseconds of kernel time, far longer than a claim.
const RUNS: u64 = 4_000_000;

fn config(prefetch_window: Duration, heartbeat_interval: Duration) -> WorkerConfig {
    WorkerConfig {
        prefetch_window,
        heartbeat_interval,
        ..common::one_slot()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_is_handed_half_of_what_another_has_not_started() {
    let (store, dir) = common::store("hand-off").await;
    hand_off(&store, WorkerConfig::default().heartbeat_interval).await;
    common::remove(store, dir).await;
}

/// The same on PostgreSQL in transaction pool mode, where no `NOTIFY`
/// reaches anyone: the hoarder's heartbeat learns from the workers table
/// that its peer announced itself idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_notifications_the_heartbeat_tells_of_an_idle_peer() {
    let Some(db) = mcq_testdb::postgres().await else {
        return;
    };
    let session = QueueConfig {
        chunks_per_task: 64,
        ..QueueConfig::default()
    };
    let migrator = Store::connect(&db.url, session.clone())
        .await
        .expect("connect");
    migrator.migrate().await.expect("migrate");
    let pooled = QueueConfig {
        pool_mode: PoolMode::Transaction,
        ..session
    };
    let store = Store::connect(&db.url, pooled).await.expect("connect");
    // The batch lasts about a second: beats well within it, so that the
    // hoarder asks while it still holds unstarted tasks.
    hand_off(&store, Duration::from_millis(100)).await;
}

/// The first worker claims the long half of the batch ahead; the second
/// joins late and runs out first; the first must hand it half of what it
/// has not started, every result exact.
async fn hand_off(store: &Store, heartbeat: Duration) {
    // The batch lasts long enough for the second worker to join.
    let mut specs = common::specs(RUNS, 0..LONG as u64);
    specs.extend(common::specs(RUNS / 8, LONG as u64..JOBS as u64));
    let batch = common::submit_batch(store, specs.clone()).await;

    // The first worker claims as much as a minute of work ahead: after its
    // first task it takes half of the rest (claims ahead of the free slots
    // take at most half of what is queued), which is the long jobs.
    let shutdown = CancellationToken::new();
    let hoarder = tokio::spawn(
        Worker::new(store.clone(), config(Duration::from_secs(60), heartbeat))
            .run(shutdown.clone()),
    );
    // Re-read whenever a job finishes: the claim ahead follows the first
    // task's report.
    let mut finished = store.finished_events();
    let claimed_long = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let view = store
                .batch(batch, Scope::All)
                .await
                .expect("read")
                .expect("batch");
            if view.counts.queued <= (JOBS - LONG) as u64 {
                return view;
            }
            finished.wait_for(batch, 1, Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the first worker claims the long jobs");
    assert_eq!(
        claimed_long.counts.queued,
        (JOBS - LONG) as u64,
        "the first worker took half of what was left after its first task, no more: {:?}",
        claimed_long.counts
    );
    assert!(
        claimed_long.counts.succeeded < LONG as u64 / 2,
        "the first worker was done with half its jobs before the second started: {:?}",
        claimed_long.counts
    );

    let late = tokio::spawn(
        Worker::new(store.clone(), config(Duration::from_millis(50), heartbeat))
            .run(shutdown.clone()),
    );
    let done = common::wait_done(store, batch, Duration::from_secs(120)).await;
    assert_eq!(done.counts.succeeded, JOBS as u64, "{:?}", done.counts);
    shutdown.cancel();
    let hoarder = hoarder.await.expect("join").expect("first worker");
    let late = late.await.expect("join").expect("second worker");

    assert!(
        hoarder.handed_off > 0,
        "the first worker handed nothing over: {hoarder:?}"
    );
    assert!(
        late.completed > 0,
        "the second worker computed nothing: {late:?}"
    );
    assert_eq!(hoarder.completed + late.completed, JOBS as u64);
    assert_eq!(hoarder.refused + late.refused, 0);
    // Hand-offs may also run the other way: when the hoarder finishes its
    // half first, it is the idle one and the late worker hands it part of
    // what it still holds. Either way every task claimed is either computed
    // or handed back, and every hand-back is claimed once more.
    for report in [&hoarder, &late] {
        assert_eq!(
            report.claimed,
            report.completed + report.handed_off,
            "{report:?}"
        );
    }
    assert_eq!(
        hoarder.claimed + late.claimed,
        JOBS as u64 + hoarder.handed_off + late.handed_off,
        "{hoarder:?} {late:?}"
    );

    // Whoever computed a job, its result is the kernel's, bit for bit, and
    // a handed-over task spent no attempt.
    let jobs = store
        .batch_jobs(batch, Scope::All, None, JOBS as u32)
        .await
        .expect("read the jobs")
        .expect("the batch");
    assert_eq!(jobs.len(), JOBS);
    for (job, spec) in jobs.iter().zip(&specs) {
        assert_eq!(job.state, JobState::Succeeded);
        assert_eq!(job.attempts, 1, "job {}", job.id);
        let expected = spec
            .validate()
            .expect("valid")
            .price(&AtomicBool::new(false))
            .expect("not cancelled");
        let got = job.result.as_ref().expect("a result");
        assert_eq!(
            got.price.to_bits(),
            expected.price.to_bits(),
            "job {}",
            job.id
        );
        assert_eq!(got.std_error.to_bits(), expected.std_error.to_bits());
    }
}
