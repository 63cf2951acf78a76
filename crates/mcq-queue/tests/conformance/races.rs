//! Cancellations racing completions of the same running batch: every
//! transaction that waits for rows locks tasks in id order, then jobs in
//! id order, so none of them can wait in a cycle, and none fails with a
//! deadlock (PostgreSQL aborts one transaction of a cycle after
//! `deadlock_timeout`).

use mcq_queue::Scope;
use std::time::Duration;

use mcq_api_types::JobState;
use mcq_kernel::CHUNK_PATHS;
use mcq_queue::{ClaimedTask, QueueConfig, Submission, TaskDone, TaskOutput};
use sqlx::Connection as _;

use crate::harness::{Db, compute, job, submit, worker};

/// Jobs per round: every third one split into three one-chunk tasks.
const JOBS: u64 = 150;

/// A batch mixing split jobs (three tasks) and single-task jobs, so that
/// one completion carries partials and results of several jobs.
fn mixed_batch(round: u64) -> Submission {
    Submission {
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        as_batch: true,
        grid: None,
        label: Some("race".into()),
        jobs: (0..JOBS)
            .map(|i| {
                let seed = round * JOBS + i + 1;
                if i % 3 == 0 {
                    job(3 * CHUNK_PATHS, seed)
                } else {
                    job(1000, seed)
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

/// Rounds of: three workers claim a running batch between them; then each
/// completes its tasks in two calls (one of them carrying its next
/// claim), while a client cancels single jobs and the whole batch, all at
/// once. Nothing may fail, and the batch ends with every job finished.
pub(crate) async fn cancels_race_completions_without_errors(db: &Db) {
    let store = db.store(config()).await;
    let workers = [
        worker(&store).await,
        worker(&store).await,
        worker(&store).await,
    ];
    let mut partial = None;
    for round in 0..16 {
        let submitted = submit(&store, mixed_batch(round)).await;
        let batch = submitted.batch_id.expect("a batch");
        // Interleaved claims: each worker holds tasks of every job kind.
        let mut held: Vec<Vec<ClaimedTask>> = vec![Vec::new(); workers.len()];
        loop {
            let mut any = false;
            for (w, tasks) in workers.iter().zip(&mut held) {
                let claimed = store.claim(*w, 7).await.expect("claim");
                any |= !claimed.is_empty();
                tasks.extend(claimed);
            }
            if !any {
                break;
            }
        }
        let partial = partial.get_or_insert_with(|| {
            let split = held
                .iter()
                .flatten()
                .find(|t| t.spec.runs > Some(CHUNK_PATHS));
            compute(split.expect("a split task"))
        });
        let mut racing = tokio::task::JoinSet::new();
        for (w, tasks) in workers.iter().copied().zip(&held) {
            let done = outputs(tasks, partial);
            let (first, second) = done.split_at(done.len() / 2);
            let (first, second) = (first.to_vec(), second.to_vec());
            let s = store.clone();
            racing.spawn(async move { s.complete(w, first).await.map(drop) });
            let s = store.clone();
            racing.spawn(async move { s.complete_and_claim(w, second, 5).await.map(drop) });
        }
        // Single jobs from the end of the batch, then the batch itself.
        for &job in submitted.job_ids.iter().rev().step_by(5) {
            let s = store.clone();
            racing.spawn(async move { s.cancel_job(job, Scope::All).await.map(drop) });
        }
        let s = store.clone();
        racing.spawn(async move { s.cancel_batch(batch, Scope::All).await.map(drop) });
        while let Some(outcome) = racing.join_next().await {
            outcome
                .expect("no panic")
                .unwrap_or_else(|e| panic!("round {round}: racing calls must not fail: {e}"));
        }
        let view = store
            .batch(batch, Scope::All)
            .await
            .expect("read")
            .expect("batch");
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
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        jobs: vec![job(3 * CHUNK_PATHS, 1), job(1000, 2)],
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
    let cancel = tokio::spawn(async move { canceller.cancel_batch(batch, Scope::All).await });
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
        let job = store.job(id, Scope::All).await.expect("read").expect("job");
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
