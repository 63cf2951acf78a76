//! Failures and retries, cancellation, retention.

use mcq_queue::Scope;
use std::time::Duration;

use mcq_api_types::JobState;
use mcq_kernel::CHUNK_PATHS;
use mcq_queue::{Heartbeat, QueueConfig, Submission};

use crate::harness::{Db, batch, compute, drain, job, orphans, single, submit, worker};

pub(crate) async fn failure_retries_after_backoff(db: &Db) {
    let config = QueueConfig {
        retry_backoff: Duration::from_millis(800),
        ..QueueConfig::default()
    };
    let store = db.store(config).await;
    let id = submit(&store, single(1)).await.job_ids[0];
    let w = worker(&store).await;
    let task = store
        .claim(w, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a task");
    assert!(
        store
            .fail(w, task.task_id, task.lease_token, "boom")
            .await
            .expect("fail")
    );
    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!(job.state, JobState::Queued, "a retry waits in the queue");
    assert!(
        store.claim(w, 1).await.expect("claim").is_empty(),
        "not before the backoff"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let retry = store
        .claim(w, 1)
        .await
        .expect("claim")
        .pop()
        .expect("due after the backoff");
    assert_eq!((retry.task_id, retry.attempt), (task.task_id, 2));
    // Second failure: backoff doubles (1.6 s).
    assert!(
        store
            .fail(w, retry.task_id, retry.lease_token, "boom")
            .await
            .expect("fail")
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        store.claim(w, 1).await.expect("claim").is_empty(),
        "the second backoff is twice as long"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    let third = store.claim(w, 1).await.expect("claim").pop().expect("due");
    assert_eq!(third.attempt, 3);
    assert!(
        store
            .complete(w, vec![compute(&third)])
            .await
            .expect("complete")
            .is_empty()
    );
    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!((job.state, job.attempts), (JobState::Succeeded, 3));
}

pub(crate) async fn last_attempt_fails_job_and_cancels_siblings(db: &Db) {
    let config = QueueConfig {
        max_attempts: 2,
        retry_backoff: Duration::ZERO,
        chunks_per_task: 1,
        ..QueueConfig::default()
    };
    let store = db.store(config).await;
    let submission = Submission {
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        as_batch: false,
        grid: None,
        label: None,
        jobs: vec![job(2 * CHUNK_PATHS, 5)],
        idempotency: None,
    };
    let id = submit(&store, submission).await.job_ids[0];
    let (a, b) = (worker(&store).await, worker(&store).await);
    let first = store.claim(a, 1).await.expect("claim").pop().expect("task");
    let sibling = store
        .claim(b, 1)
        .await
        .expect("claim")
        .pop()
        .expect("sibling");
    assert!(
        store
            .fail(a, first.task_id, first.lease_token, "kernel panicked: x")
            .await
            .expect("fail")
    );
    let retry = store
        .claim(a, 1)
        .await
        .expect("claim")
        .pop()
        .expect("retry");
    assert_eq!((retry.task_id, retry.attempt), (first.task_id, 2));
    assert!(
        store
            .fail(a, retry.task_id, retry.lease_token, "kernel panicked: y")
            .await
            .expect("fail")
    );

    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.error.as_deref(), Some("kernel panicked: y"));
    assert!(job.result.is_none() && job.timings.finished_at.is_some());
    assert!(
        store.claim(a, 10).await.expect("claim").is_empty(),
        "nothing of the job is left to claim"
    );
    assert_eq!(
        store
            .heartbeat(b, &[(sibling.task_id, sibling.lease_token)])
            .await
            .expect("heartbeat")
            .cancelled,
        vec![sibling.task_id],
        "running sibling told to stop"
    );
    assert_eq!(
        store
            .complete(b, vec![compute(&sibling)])
            .await
            .expect("complete"),
        vec![sibling.task_id]
    );
    assert_eq!(
        store
            .job(id, Scope::All)
            .await
            .expect("read")
            .expect("job")
            .state,
        JobState::Failed
    );
}

pub(crate) async fn cancel_queued_job_leaves_queue(db: &Db) {
    let store = db.default_store().await;
    let ids = submit(&store, batch(2)).await.job_ids;
    assert_eq!(
        store.cancel_job(ids[0], Scope::All).await.expect("cancel"),
        Some(JobState::Cancelled)
    );
    let w = worker(&store).await;
    let claimed = store.claim(w, 10).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].job_id, ids[1]);
    let job = store
        .job(ids[0], Scope::All)
        .await
        .expect("read")
        .expect("job");
    assert!(job.timings.finished_at.is_some());
    assert_eq!(
        store
            .cancel_job(uuid::Uuid::new_v4(), Scope::All)
            .await
            .expect("cancel"),
        None
    );
}

pub(crate) async fn cancel_running_job_is_reported_by_heartbeat(db: &Db) {
    let store = db.default_store().await;
    let id = submit(&store, single(1)).await.job_ids[0];
    let w = worker(&store).await;
    let task = store
        .claim(w, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a task");
    let held = [(task.task_id, task.lease_token)];
    assert!(
        store
            .heartbeat(w, &held)
            .await
            .expect("heartbeat")
            .is_clear()
    );
    assert_eq!(
        store.cancel_job(id, Scope::All).await.expect("cancel"),
        Some(JobState::Cancelled)
    );
    assert_eq!(
        store.heartbeat(w, &held).await.expect("heartbeat"),
        Heartbeat {
            cancelled: vec![task.task_id],
            lost: vec![],
            reaper_turn: false,
        }
    );
    assert_eq!(
        store.heartbeat(w, &held).await.expect("heartbeat"),
        Heartbeat {
            cancelled: vec![],
            lost: vec![task.task_id],
            reaper_turn: false,
        },
        "told once; afterwards the lease is simply gone"
    );
    assert_eq!(
        store
            .complete(w, vec![compute(&task)])
            .await
            .expect("complete"),
        vec![task.task_id]
    );
    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!(job.state, JobState::Cancelled);
    assert!(job.result.is_none());
}

pub(crate) async fn cancel_finished_job_changes_nothing(db: &Db) {
    let store = db.default_store().await;
    let id = submit(&store, single(1)).await.job_ids[0];
    let w = worker(&store).await;
    drain(&store, w).await;
    assert_eq!(
        store.cancel_job(id, Scope::All).await.expect("cancel"),
        Some(JobState::Succeeded)
    );
    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!(job.state, JobState::Succeeded);
    assert!(job.result.is_some());
}

pub(crate) async fn cancel_batch_counts_unfinished_jobs(db: &Db) {
    let store = db.default_store().await;
    let submitted = submit(&store, batch(5)).await;
    let batch_id = submitted.batch_id.expect("batch");
    let w = worker(&store).await;
    let tasks = store.claim(w, 2).await.expect("claim");
    let done = compute(&tasks[0]);
    assert!(
        store
            .complete(w, vec![done])
            .await
            .expect("complete")
            .is_empty()
    );
    // One succeeded, one running, three queued: four are cancelled.
    assert_eq!(
        store
            .cancel_batch(batch_id, Scope::All)
            .await
            .expect("cancel"),
        Some(4)
    );
    let view = store
        .batch(batch_id, Scope::All)
        .await
        .expect("read")
        .expect("batch");
    assert_eq!(
        (view.counts.succeeded, view.counts.cancelled, view.done),
        (1, 4, true)
    );
    let held: Vec<(i64, uuid::Uuid)> = tasks.iter().map(|t| (t.task_id, t.lease_token)).collect();
    assert_eq!(
        store.heartbeat(w, &held).await.expect("heartbeat"),
        Heartbeat {
            cancelled: vec![tasks[1].task_id],
            lost: vec![tasks[0].task_id],
            reaper_turn: false,
        },
        "the running task is told; the completed one is not held"
    );
    assert!(store.claim(w, 10).await.expect("claim").is_empty());
    assert_eq!(
        store
            .cancel_batch(batch_id, Scope::All)
            .await
            .expect("cancel"),
        Some(0)
    );
    assert_eq!(
        store
            .cancel_batch(uuid::Uuid::new_v4(), Scope::All)
            .await
            .expect("cancel"),
        None
    );
}

pub(crate) async fn retention_prunes_only_old_finished_work(db: &Db) {
    let config = QueueConfig {
        // Long enough that draining and pruning the recent work on a busy
        // machine never outlasts it.
        retention: Duration::from_secs(3),
        ..QueueConfig::default()
    };
    let store = db.store(config).await;
    let old_batch = submit(&store, batch(3)).await;
    let old_single = submit(&store, single(9)).await.job_ids[0];
    let w = worker(&store).await;
    drain(&store, w).await;
    let unfinished = submit(&store, batch(2)).await;
    tokio::time::sleep(Duration::from_millis(3_300)).await;
    let recent = submit(&store, single(10)).await.job_ids[0];
    drain(&store, w).await;

    // Old finished work: the 3 batch jobs and the single job.
    assert_eq!(store.prune().await.expect("prune"), 4);
    assert!(
        store
            .batch(old_batch.batch_id.expect("batch"), Scope::All)
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        store
            .job(old_batch.job_ids[0], Scope::All)
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        store
            .job(old_single, Scope::All)
            .await
            .expect("read")
            .is_none()
    );
    assert_eq!(
        orphans(db).await,
        0,
        "tasks and results went with their jobs"
    );
    // The second batch finished just now (drained after the sleep).
    assert!(
        store
            .batch(unfinished.batch_id.expect("batch"), Scope::All)
            .await
            .expect("read")
            .is_some()
    );
    assert!(store.job(recent, Scope::All).await.expect("read").is_some());
    assert_eq!(
        store.prune().await.expect("prune"),
        0,
        "nothing more to prune"
    );
}
