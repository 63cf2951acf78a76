//! Submission, idempotency and the results of finished jobs.

use mcq_queue::Scope;
use std::sync::atomic::AtomicBool;

use mcq_api_types::JobState;
use mcq_kernel::{CHUNK_PATHS, Greek, Spec};
use mcq_queue::{IdempotencyKey, QueueConfig, StoreError, Submission};

use crate::harness::{Db, batch, compute, drain, single, spec, submit, worker};

pub(crate) async fn submit_creates_queued_jobs_and_tasks(db: &Db) {
    let store = db.default_store().await;
    let submitted = submit(&store, batch(5)).await;
    assert!(!submitted.replayed);
    let batch_id = submitted.batch_id.expect("a batch id");
    assert_eq!(submitted.job_ids.len(), 5);
    for (i, id) in submitted.job_ids.iter().enumerate() {
        let job = store
            .job(*id, Scope::All)
            .await
            .expect("read")
            .expect("job exists");
        assert_eq!(job.state, JobState::Queued);
        assert_eq!(job.batch_id, Some(batch_id));
        assert_eq!(
            job.spec,
            spec(1000, i as u64 + 1),
            "spec stored as submitted"
        );
        assert_eq!(job.attempts, 0);
        assert!(job.result.is_none() && job.error.is_none());
        assert!(job.timings.started_at.is_none() && job.timings.queue_wait_ms.is_none());
    }
    let view = store
        .batch(batch_id, Scope::All)
        .await
        .expect("read")
        .expect("batch exists");
    assert_eq!((view.total, view.counts.queued, view.done), (5, 5, false));
    assert_eq!(view.label.as_deref(), Some("test"));
    assert!(
        store
            .job(uuid::Uuid::new_v4(), Scope::All)
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        store
            .batch(uuid::Uuid::new_v4(), Scope::All)
            .await
            .expect("read")
            .is_none()
    );

    let single = submit(&store, single(9)).await;
    assert_eq!((single.batch_id, single.job_ids.len()), (None, 1));
    // 6 jobs of one task each.
    let w = worker(&store).await;
    assert_eq!(store.claim(w, 100).await.expect("claim").len(), 6);
}

/// A page may hold one job past [`mcq_queue::MAX_PAGE`]: the API serves
/// pages of up to that many and reads one more to tell whether another
/// page follows.
pub(crate) async fn a_page_reads_one_job_past_the_page_size(db: &Db) {
    let store = db.default_store().await;
    let n = u64::from(mcq_queue::MAX_PAGE) + 2;
    let submitted = submit(&store, batch(n)).await;
    let batch_id = submitted.batch_id.expect("a batch id");
    let page = store
        .batch_jobs(batch_id, Scope::All, None, mcq_queue::MAX_PAGE + 1)
        .await
        .expect("read")
        .expect("batch exists");
    let ids: Vec<_> = page.iter().map(|job| job.id).collect();
    assert_eq!(ids, submitted.job_ids[..=mcq_queue::MAX_PAGE as usize]);
    let capped = store
        .batch_jobs(batch_id, Scope::All, None, u32::MAX)
        .await
        .expect("read")
        .expect("batch exists");
    assert_eq!(capped.len(), mcq_queue::MAX_PAGE as usize + 1);
}

pub(crate) async fn empty_submission_is_refused(db: &Db) {
    let store = db.default_store().await;
    let empty = Submission {
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        as_batch: true,
        grid: None,
        label: None,
        jobs: Vec::new(),
        idempotency: None,
    };
    assert!(matches!(
        store.submit(empty).await,
        Err(StoreError::InvalidSpec { .. })
    ));
    let w = worker(&store).await;
    assert!(
        store.claim(w, 10).await.expect("claim").is_empty(),
        "nothing was enqueued"
    );
}

fn keyed(mut submission: Submission, key: &str, fingerprint: &str) -> Submission {
    submission.idempotency = Some(IdempotencyKey {
        key: key.into(),
        fingerprint: fingerprint.into(),
    });
    submission
}

pub(crate) async fn idempotent_submit_replays_and_conflicts(db: &Db) {
    let store = db.default_store().await;
    let first = submit(&store, keyed(single(1), "k1", "f1")).await;
    let again = submit(&store, keyed(single(1), "k1", "f1")).await;
    assert!(!first.replayed && again.replayed);
    assert_eq!(first.job_ids, again.job_ids);
    assert_eq!(again.batch_id, None);
    match store.submit(keyed(single(2), "k1", "f2")).await {
        Err(StoreError::IdempotencyConflict) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    let w = worker(&store).await;
    assert_eq!(
        store.claim(w, 10).await.expect("claim").len(),
        1,
        "replays enqueue nothing"
    );
}

pub(crate) async fn idempotent_batch_replays_in_order(db: &Db) {
    let store = db.default_store().await;
    // Concurrent submits with one key: exactly one creates, the other replays.
    let (a, b) = tokio::join!(
        store.submit(keyed(batch(40), "batch-key", "fp")),
        store.submit(keyed(batch(40), "batch-key", "fp")),
    );
    let (a, b) = (a.expect("submit a"), b.expect("submit b"));
    assert_ne!(a.replayed, b.replayed, "one original, one replay");
    assert_eq!(a.batch_id, b.batch_id);
    assert_eq!(
        a.job_ids, b.job_ids,
        "replay lists the ids in submission order"
    );
    let view = store
        .batch(a.batch_id.expect("batch"), Scope::All)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(view.total, 40);
}

pub(crate) async fn split_job_merges_bit_identical_to_one_process(db: &Db) {
    // 5 chunks, the last one short; once as it is, once asking for delta,
    // whose sums travel in the partials and merge like the price's.
    let plain = spec(5 * CHUNK_PATHS - 123, 42);
    split_job_once(db, plain.clone()).await;
    split_job_once(
        db,
        Spec {
            greeks: vec![Greek::Delta],
            ..plain
        },
    )
    .await;
}

async fn split_job_once(db: &Db, job_spec: Spec) {
    let config = QueueConfig {
        chunks_per_task: 2,
        ..QueueConfig::default()
    };
    let store = db.store(config).await;
    let submission = Submission {
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        as_batch: false,
        grid: None,
        label: None,
        jobs: vec![job_spec.validate().expect("valid")],
        idempotency: None,
    };
    let id = submit(&store, submission).await.job_ids[0];
    let (w1, w2) = (worker(&store).await, worker(&store).await);
    let mut tasks = store.claim(w1, 10).await.expect("claim");
    assert_eq!(tasks.len(), 3, "ceil(5 / 2) tasks");
    let ranges: Vec<_> = tasks
        .iter()
        .map(|t| t.chunks.clone().expect("chunked"))
        .collect();
    assert_eq!(ranges, vec![0..2, 2..4, 4..5]);
    // Finish them out of order, from two workers' point of view: the last
    // one in the middle, the rest together.
    tasks.reverse();
    let last = tasks.remove(1);
    let done: Vec<_> = tasks.iter().map(compute).collect();
    assert!(store.complete(w1, done).await.expect("complete").is_empty());
    assert_eq!(
        store
            .job(id, Scope::All)
            .await
            .expect("read")
            .expect("job")
            .state,
        JobState::Running
    );
    assert!(
        store
            .complete(w2, vec![compute(&last)])
            .await
            .expect("complete")
            .is_empty()
    );

    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!(job.state, JobState::Succeeded);
    let got = job.result.expect("result");
    let local = job_spec
        .validate()
        .expect("valid")
        .price(&AtomicBool::new(false))
        .expect("priced");
    assert_eq!(
        got.price.to_bits(),
        local.price.to_bits(),
        "{} vs {}",
        got.price,
        local.price
    );
    assert_eq!(got.std_error.to_bits(), local.std_error.to_bits());
    assert_eq!(got.delta.map(f64::to_bits), local.delta.map(f64::to_bits));
    assert_eq!(
        got.delta_std_error.map(f64::to_bits),
        local.delta_std_error.map(f64::to_bits)
    );
    assert_eq!(got.delta.is_some(), job_spec.wants_delta());
    assert_eq!(got.paths, local.paths);
    assert_eq!(
        job.timings.compute_ms,
        Some(0.75),
        "kernel time summed over the 3 tasks"
    );
}

pub(crate) async fn single_task_job_result_matches_kernel(db: &Db) {
    let store = db.default_store().await;
    let job_spec = spec(3 * CHUNK_PATHS, 7);
    let submission = Submission {
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        as_batch: false,
        grid: None,
        label: None,
        jobs: vec![job_spec.validate().expect("valid")],
        idempotency: None,
    };
    let id = submit(&store, submission).await.job_ids[0];
    let w = worker(&store).await;
    let claimed = drain(&store, w).await;
    assert_eq!(claimed.len(), 1, "3 chunks fit one task of 16");
    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!(job.state, JobState::Succeeded);
    assert!(job.timings.finished_at.is_some());
    let local = job_spec
        .validate()
        .expect("valid")
        .price(&AtomicBool::new(false))
        .expect("priced");
    assert_eq!(
        job.result.expect("result").price.to_bits(),
        local.price.to_bits()
    );
}
