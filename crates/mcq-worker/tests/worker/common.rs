//! Shared set-up of the worker tests: an embedded store in a temporary
//! directory, whole-job tasks, a batch submitted and waited for.

use mcq_queue::Scope;
use std::path::PathBuf;
use std::time::Duration;

use mcq_api_types::BatchView;
use mcq_kernel::Spec;
use mcq_queue::{QueueConfig, Store, Submission};
use mcq_worker::WorkerConfig;
use uuid::Uuid;

/// A migrated SQLite store in a new temporary directory (removed by
/// [`remove`]). Jobs stay whole: one task each, for up to 64 chunks of
/// 2^16 paths.
pub(crate) async fn store(name: &str) -> (Store, PathBuf) {
    let dir = std::env::temp_dir().join(format!("mcq-{name}-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let url = format!("sqlite:{}", dir.join("queue.sqlite").display());
    let queue = QueueConfig {
        chunks_per_task: 64,
        ..QueueConfig::default()
    };
    let store = Store::connect(&url, queue).await.expect("connect");
    store.migrate().await.expect("migrate");
    (store, dir)
}

/// Specs of `runs` paths with the given seeds.
pub(crate) fn specs(runs: u64, seeds: impl IntoIterator<Item = u64>) -> Vec<Spec> {
    seeds
        .into_iter()
        .map(|seed| Spec {
            runs: Some(runs),
            seed: Some(seed),
            ..Spec::default()
        })
        .collect()
}

/// A worker of one slot on one thread, otherwise as configured by default.
pub(crate) fn one_slot() -> WorkerConfig {
    WorkerConfig {
        concurrency: 1,
        threads: 1,
        ..WorkerConfig::default()
    }
}

/// Submits `jobs` as one batch; returns its id.
pub(crate) async fn submit_batch(store: &Store, jobs: Vec<Spec>) -> Uuid {
    store
        .submit(Submission {
            tenant: mcq_queue::DEFAULT_TENANT,
            priority: 0,
            as_batch: true,
            grid: None,
            label: None,
            jobs: jobs.iter().map(|s| s.validate().expect("valid")).collect(),
            idempotency: None,
        })
        .await
        .expect("submit")
        .batch_id
        .expect("a batch")
}

/// Waits until the batch is done, re-reading it whenever one of its jobs
/// is announced finished (and at least every second); panics after `limit`.
pub(crate) async fn wait_done(store: &Store, batch: Uuid, limit: Duration) -> BatchView {
    // Subscribed before the first read: no announcement falls in between.
    let mut finished = store.finished_events();
    tokio::time::timeout(limit, async {
        loop {
            let view = store
                .batch(batch, Scope::All)
                .await
                .expect("read")
                .expect("batch");
            if view.done {
                return view;
            }
            finished.wait_for(batch, 1, Duration::from_secs(1)).await;
        }
    })
    .await
    .expect("the batch finishes")
}

/// Closes the store and removes its directory.
pub(crate) async fn remove(store: Store, dir: PathBuf) {
    store.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
