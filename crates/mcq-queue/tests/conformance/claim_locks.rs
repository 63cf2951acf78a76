//! PostgreSQL only: which task rows a claim locks.
//!
//! A claim's walk sees the queue as its statement's snapshot found it. A
//! task that another claim has taken since (or holds, uncommitted) still
//! looks queued there; under READ COMMITTED, locking such a row locks its
//! newest version, the running task, which the walk then passes over
//! while keeping the lock until its commit, and the worker running that
//! task waits on it to record its result. A claim passes over tasks that
//! another transaction has marked (`xmax`) unless that transaction wrote
//! the row (a reap) or had ended before the claim's snapshot (a claim
//! that rolled back).
//!
//! The race is made certain with a snapshot taken before the other claim:
//! under REPEATABLE READ PostgreSQL refuses to lock a row updated since the
//! snapshot (a serialization error) where READ COMMITTED would take the
//! stray lock, so a claim that tries to lock a taken task fails here.

use std::time::{Duration, Instant};

use mcq_queue::QueueConfig;
use sqlx::Connection as _;

use crate::harness::{Db, batch, quick, submit, worker, written_out};

/// One task of each claim, as `mcq_claim` returns them.
const CLAIM: &str = "SELECT id FROM mcq_claim($1, $2, 30) WHERE id IS NOT NULL";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_passes_over_tasks_taken_since_its_snapshot() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let (store, me) = written_out(&db, 4).await;
    let mut late = sqlx::PgConnection::connect(&db.url())
        .await
        .expect("connect");
    let mut tx = late.begin().await.expect("begin");
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *tx)
        .await
        .expect("repeatable read");
    let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE state = 'queued'")
        .fetch_one(&mut *tx)
        .await
        .expect("take the snapshot");
    assert_eq!(queued, 4);

    // Another claim takes the first two tasks and commits.
    let taken: Vec<i64> = store
        .claim(me, 2)
        .await
        .expect("claim")
        .iter()
        .map(|t| t.task_id)
        .collect();
    assert_eq!(taken.len(), 2);

    let mine: Vec<i64> = sqlx::query_scalar(CLAIM)
        .bind(me)
        .bind(2_i64)
        .fetch_all(&mut *tx)
        .await
        .expect("a claim must not lock the tasks taken since its snapshot");
    tx.commit().await.expect("commit");
    assert_eq!(mine.len(), 2, "the two tasks left: {mine:?}");
    assert!(
        mine.iter().all(|id| !taken.contains(id)),
        "{mine:?} against {taken:?}"
    );
}

/// A claim that rolled back leaves its marks on the queued tasks it had
/// locked; a claim takes them once every transaction older than the
/// rollback has ended (other tests' transactions share this cluster, so
/// the test claims again until then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_takes_the_tasks_a_rolled_back_claim_marked() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let (store, me) = written_out(&db, 3).await;
    let mut other = sqlx::PgConnection::connect(&db.url())
        .await
        .expect("connect");
    let mut tx = other.begin().await.expect("begin");
    let marked: Vec<i64> = sqlx::query_scalar(CLAIM)
        .bind(me)
        .bind(1_i64)
        .fetch_all(&mut *tx)
        .await
        .expect("claim one task");
    assert_eq!(marked.len(), 1);
    tx.rollback().await.expect("roll the claim back");

    let mut claimed: Vec<i64> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while claimed.len() < 3 {
        assert!(Instant::now() < deadline, "claimed only {claimed:?}");
        claimed.extend(
            store
                .claim(me, 3)
                .await
                .expect("claim")
                .iter()
                .map(|t| t.task_id),
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(claimed.len(), 3, "every queued task once: {claimed:?}");
    assert!(claimed.contains(&marked[0]), "{claimed:?} has {marked:?}");
}

/// A reaped task is queued again by a transaction that locked its row
/// first, and the lock stays on the new row; it is claimed at once even
/// while another transaction, older than the reap, is still open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requeued_task_is_claimed_while_an_older_transaction_is_open() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let config = QueueConfig {
        stage_from: usize::MAX,
        ..quick(200)
    };
    let store = db.store(config).await;
    submit(&store, batch(1)).await;
    let me = worker(&store).await;
    let first = store.claim(me, 1).await.expect("claim");
    assert_eq!(first.len(), 1);

    let mut open = sqlx::PgConnection::connect(&db.url())
        .await
        .expect("connect");
    let mut older = open.begin().await.expect("begin");
    sqlx::query("SELECT pg_current_xact_id()")
        .execute(&mut *older)
        .await
        .expect("an open transaction with an id");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let reaped = store.reap().await.expect("reap");
    assert_eq!(reaped.requeued, 1, "{reaped:?}");

    let again = store.claim(me, 1).await.expect("claim");
    older.rollback().await.expect("end the older transaction");
    assert_eq!(
        again.iter().map(|t| t.task_id).collect::<Vec<_>>(),
        vec![first[0].task_id],
        "the requeued task"
    );
}
