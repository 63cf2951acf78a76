//! What a job's `attempts` and `tasks` say: retries of the job, and the
//! claims of its tasks apart.

use std::time::Duration;

use mcq_api_types::{JobState, TaskCounts};
use mcq_queue::{QueueConfig, Scope, Submission};

use crate::harness::{Db, compute, drain, spec, submit, worker};

/// A job of four tasks of one chunk each.
fn four_tasks(seed: u64) -> Submission {
    let valid = spec(4 * mcq_kernel::CHUNK_PATHS, seed)
        .validate()
        .expect("valid");
    Submission {
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        as_batch: false,
        grid: None,
        label: None,
        jobs: vec![valid],
        idempotency: None,
    }
}

pub(crate) async fn split_job_attempts_count_retries_not_claims(db: &Db) {
    let store = db
        .store(QueueConfig {
            chunks_per_task: 1,
            retry_backoff: Duration::from_millis(10),
            ..QueueConfig::default()
        })
        .await;
    let w = worker(&store).await;

    // Never failed: tried once, however many tasks were claimed.
    let clean = submit(&store, four_tasks(1)).await.job_ids[0];
    let fresh = store
        .job(clean, Scope::All)
        .await
        .expect("read")
        .expect("job");
    assert_eq!(fresh.attempts, 0);
    assert_eq!(
        fresh.tasks,
        TaskCounts {
            total: 4,
            done: 0,
            claims: 0
        }
    );
    assert_eq!(drain(&store, w).await.len(), 4);
    let job = store
        .job(clean, Scope::All)
        .await
        .expect("read")
        .expect("job");
    assert_eq!((job.state, job.attempts), (JobState::Succeeded, 1));
    assert_eq!(
        job.tasks,
        TaskCounts {
            total: 4,
            done: 4,
            claims: 4
        }
    );

    // One task fails once: the job was tried twice, its tasks claimed five times.
    let retried = submit(&store, four_tasks(2)).await.job_ids[0];
    let claimed = store.claim(w, 4).await.expect("claim");
    assert_eq!(claimed.len(), 4);
    let (failing, rest) = claimed.split_first().expect("four tasks");
    assert!(
        store
            .fail(w, failing.task_id, failing.lease_token, "boom")
            .await
            .expect("fail")
    );
    let done = rest.iter().map(compute).collect();
    assert!(store.complete(w, done).await.expect("complete").is_empty());
    let job = store
        .job(retried, Scope::All)
        .await
        .expect("read")
        .expect("job");
    assert!(!job.state.is_finished(), "{:?}", job.state);
    assert_eq!(job.attempts, 1, "the failed task is not retried yet");
    assert_eq!((job.tasks.done, job.tasks.claims), (3, 4));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let retry = loop {
        if let Some(task) = store.claim(w, 1).await.expect("claim").pop() {
            break task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the failed task never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!((retry.task_id, retry.attempt), (failing.task_id, 2));
    assert_eq!(
        store
            .job(retried, Scope::All)
            .await
            .expect("read")
            .expect("job")
            .attempts,
        2
    );
    assert!(
        store
            .complete(w, vec![compute(&retry)])
            .await
            .expect("complete")
            .is_empty()
    );
    let job = store
        .job(retried, Scope::All)
        .await
        .expect("read")
        .expect("job");
    assert_eq!((job.state, job.attempts), (JobState::Succeeded, 2));
    assert_eq!(
        job.tasks,
        TaskCounts {
            total: 4,
            done: 4,
            claims: 5
        }
    );
}
