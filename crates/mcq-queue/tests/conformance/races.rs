//! Cancellations racing completions of the same running batch: every
//! transaction that waits for rows locks tasks in id order, then jobs in
//! id order, so none of them can wait in a cycle, and none fails with a
//! deadlock (PostgreSQL aborts one transaction of a cycle after
//! `deadlock_timeout`).

use std::time::Duration;

use mcq_kernel::CHUNK_PATHS;
use mcq_queue::{ClaimedTask, JobState, QueueConfig, Submission, TaskDone, TaskOutput};
use sqlx::Connection as _;

use crate::harness::{Db, compute, spec, submit, worker};

/// Jobs per round: every third one split into three one-chunk tasks.
const JOBS: u64 = 24;

/// A batch mixing split jobs (three tasks) and single-task jobs, so that
/// one completion carries partials and results of several jobs.
fn mixed_batch(round: u64) -> Submission {
    Submission {
        as_batch: true,
        label: Some("race".into()),
        jobs: (0..JOBS)
            .map(|i| {
                let seed = round * JOBS + i + 1;
                if i % 3 == 0 {
                    spec(3 * CHUNK_PATHS, seed)
                } else {
                    spec(1000, seed)
                }
            })
            .collect(),
        idempotency: None,
    }
}

/// One chunk per task, batches written out (the rows cancellation and
/// completion both lock), and leases long enough to outlive the test.
fn config() -> QueueConfig {
    QueueConfig {
        chunks_per_task: 1,
        stage_from: usize::MAX,
        lease: Duration::from_secs(60),
        ..QueueConfig::default()
    }
}

/// What a worker sends for `tasks`: a result where the task is its whole
/// job, a partial where it is one of three. Partials are computed once and
/// reused: the race is about rows, not prices.
fn outputs(tasks: &[ClaimedTask], partial: &TaskDone) -> Vec<TaskDone> {
    tasks
        .iter()
        .map(|task| {
            let runs = task.spec.runs.unwrap_or_default();
            if runs > CHUNK_PATHS {
                TaskDone {
                    task_id: task.task_id,
                    lease_token: task.lease_token,
                    ..partial.clone()
                }
            } else {
                let mut done = compute(task);
                if let TaskOutput::Partial(p) = &done.output {
                    let valid = task.spec.validate().expect("valid");
                    done.output = TaskOutput::Result(valid.finish(p, done.compute_ms));
                }
                done
            }
        })
        .collect()
}

/// Rounds of: two workers claim a running batch between them; then one
/// completes its tasks, the other completes its tasks with its next claim,
/// and a client cancels the batch, all at once. Nothing may fail, and the
/// batch ends with every job finished.
pub(crate) async fn cancels_race_completions_without_errors(db: &Db) {
    let store = db.store(config()).await;
    let (w1, w2) = (worker(&store).await, worker(&store).await);
    let mut partial = None;
    for round in 0..12 {
        let batch = submit(&store, mixed_batch(round))
            .await
            .batch_id
            .expect("a batch");
        // Interleaved claims: each worker holds tasks of every job kind.
        let (mut mine, mut theirs) = (Vec::new(), Vec::new());
        loop {
            let a = store.claim(w1, 5).await.expect("claim");
            let b = store.claim(w2, 5).await.expect("claim");
            if a.is_empty() && b.is_empty() {
                break;
            }
            mine.extend(a);
            theirs.extend(b);
        }
        let first_split = mine
            .iter()
            .chain(&theirs)
            .find(|t| t.chunks.is_some() && t.spec.runs > Some(CHUNK_PATHS));
        let partial = partial.get_or_insert_with(|| compute(first_split.expect("a split task")));
        let (done1, done2) = (outputs(&mine, partial), outputs(&theirs, partial));
        let (s1, s2, s3) = (store.clone(), store.clone(), store.clone());
        let (completed, carried, cancelled) = tokio::join!(
            async move { s1.complete(w1, done1).await },
            async move { s2.complete_and_claim(w2, done2, 5).await },
            async move { s3.cancel_batch(batch).await },
        );
        completed.expect("completion racing a cancel");
        carried.expect("completion with a claim racing a cancel");
        cancelled
            .expect("cancel racing completions")
            .expect("batch exists");
        let view = store.batch(batch).await.expect("read").expect("batch");
        assert_eq!(
            view.counts.succeeded + view.counts.cancelled,
            JOBS,
            "round {round}: every job ended: {:?}",
            view.counts
        );
    }
}

/// PostgreSQL, the interleaving made certain: a completion carrying a
/// result and a partial, and a cancel of their batch, both wait for the
/// same task row (held by the test), the cancel first. Locking tasks in id
/// order, the completion holds nothing while it waits, and when the row is
/// free both go through; a completion that locked its result task before
/// waiting would close a cycle with the cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_and_a_completion_waiting_for_the_same_task_both_finish() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let store = db.store(config()).await;
    let me = worker(&store).await;
    // Job 0 is split (tasks with the lowest ids), job 1 is one task.
    let submission = Submission {
        jobs: vec![spec(3 * CHUNK_PATHS, 1), spec(1000, 2)],
        ..mixed_batch(0)
    };
    let batch = submit(&store, submission).await.batch_id.expect("a batch");
    let claimed = store.claim(me, 10).await.expect("claim");
    assert_eq!(claimed.len(), 4);
    let split = &claimed[0];
    let whole = &claimed[3];
    let done = {
        let partial = compute(split);
        outputs(std::slice::from_ref(whole), &partial)
            .into_iter()
            .chain([partial])
            .collect::<Vec<_>>()
    };

    let mut holder = sqlx::PgConnection::connect(&db.url())
        .await
        .expect("connect");
    let mut hold = holder.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE")
        .bind(split.task_id)
        .execute(&mut *hold)
        .await
        .expect("hold the split task's row");
    let watcher = sqlx::PgPool::connect(&db.url()).await.expect("connect");

    let canceller = store.clone();
    let cancel = tokio::spawn(async move { canceller.cancel_batch(batch).await });
    waiting_for_locks(&watcher, 1).await;
    let completer = store.clone();
    let complete = tokio::spawn(async move { completer.complete(me, done).await });
    waiting_for_locks(&watcher, 2).await;
    hold.commit().await.expect("let go of the row");

    let cancelled = cancel.await.expect("cancel task");
    let completed = complete.await.expect("complete task");
    assert_eq!(cancelled.expect("the cancel must not deadlock"), Some(2));
    let refused = completed.expect("the completion must not deadlock");
    assert_eq!(refused.len(), 2, "the cancel went first: {refused:?}");
    for id in [split.job_id, whole.job_id] {
        let job = store.job(id).await.expect("read").expect("job");
        assert_eq!(job.state, JobState::Cancelled);
    }
}

/// Waits until `n` sessions of the test's database wait for a lock.
async fn waiting_for_locks(watcher: &sqlx::PgPool, n: i64) {
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(watcher)
        .await
        .expect("read activity");
        if waiting >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
