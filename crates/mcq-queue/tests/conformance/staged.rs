//! PostgreSQL only: how a staged batch is stored and
//! materialised. What it means for clients is the whole conformance suite,
//! run a third time with every batch staged (`postgres_staged` in main.rs);
//! these tests check that the representation is really used: rows of 5,000
//! jobs, claims that write jobs and tasks out as running, a job read or
//! cancelled while staged, pages across the boundary, and batches that are
//! not staged.

use mcq_api_types::JobState;
use mcq_kernel::CHUNK_PATHS;
use mcq_queue::Scope;
use mcq_queue::{QueueConfig, Submission};
use uuid::Uuid;

use crate::harness::{Db, batch, compute, drain, job, orphans, spec, submit, worker};

/// Rows of `staged`, and of jobs and tasks, straight from the database.
async fn rows(db: &Db) -> (i64, i64, i64) {
    let pool = sqlx::PgPool::connect(&db.url()).await.expect("connect");
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM staged), (SELECT count(*) FROM jobs),
                (SELECT count(*) FROM tasks)",
    )
    .fetch_one(&pool)
    .await
    .expect("count rows")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_batch_is_staged_and_claimed_in_order() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let store = db.default_store().await;
    let submitted = submit(&store, batch(12_000)).await;
    let ids = &submitted.job_ids;
    let batch_id = submitted.batch_id.expect("a batch");
    assert_eq!(
        rows(&db).await,
        (3, 0, 0),
        "three staged rows, nothing else"
    );

    // A staged job reads as queued, with its spec.
    let last = store
        .job(ids[11_999], Scope::All)
        .await
        .expect("read")
        .expect("job");
    assert_eq!((last.state, last.attempts), (JobState::Queued, 0));
    assert_eq!(last.spec, spec(1000, 12_000));
    assert_eq!(last.batch_id, Some(batch_id));

    // Claims take staged jobs in submission order, written out running.
    let w = worker(&store).await;
    let first = store.claim(w, 3000).await.expect("claim");
    let claimed: Vec<Uuid> = first.iter().map(|t| t.job_id).collect();
    assert_eq!(claimed, ids[..3000]);
    assert!(
        first
            .iter()
            .all(|t| t.attempt == 1 && t.spec.seed.is_some())
    );
    assert_eq!(rows(&db).await, (3, 3000, 3000));
    let running = store
        .job(ids[2999], Scope::All)
        .await
        .expect("read")
        .expect("job");
    assert_eq!((running.state, running.attempts), (JobState::Running, 1));
    assert!(running.timings.started_at.is_some());

    // A page across the boundary: one written-out job, then staged ones.
    let page = store
        .batch_jobs(batch_id, Scope::All, Some(ids[2998]), 4)
        .await
        .expect("read")
        .expect("batch");
    let states: Vec<(Uuid, JobState)> = page.iter().map(|j| (j.id, j.state)).collect();
    assert_eq!(
        states,
        vec![
            (ids[2999], JobState::Running),
            (ids[3000], JobState::Queued),
            (ids[3001], JobState::Queued),
            (ids[3002], JobState::Queued),
        ]
    );
    // From a staged job as the cursor, too.
    let page = store
        .batch_jobs(batch_id, Scope::All, Some(ids[7000]), 2)
        .await
        .expect("read")
        .expect("batch");
    assert_eq!(
        page.iter().map(|j| j.id).collect::<Vec<_>>(),
        ids[7001..7003]
    );

    // Cancelling a staged job writes its staged row out, then cancels it.
    assert_eq!(
        store
            .cancel_job(ids[4000], Scope::All)
            .await
            .expect("cancel"),
        Some(JobState::Cancelled)
    );
    assert_eq!(rows(&db).await, (2, 5000, 5000));
    let view = store
        .batch(batch_id, Scope::All)
        .await
        .expect("read")
        .expect("batch");
    assert_eq!(
        (
            view.counts.running,
            view.counts.cancelled,
            view.counts.queued
        ),
        (3000, 1, 8999)
    );

    // Everything else runs; nothing is left staged or orphaned.
    let done = first.iter().map(compute).collect();
    assert!(store.complete(w, done).await.expect("complete").is_empty());
    let rest = drain(&store, w).await;
    assert_eq!(rest.len(), 8999);
    let view = store
        .batch(batch_id, Scope::All)
        .await
        .expect("read")
        .expect("batch");
    assert_eq!(
        (view.counts.succeeded, view.counts.cancelled, view.done),
        (11_999, 1, true)
    );
    assert_eq!(rows(&db).await.0, 0);
    assert_eq!(orphans(&db).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_batches_split_jobs_and_single_jobs_are_written_out() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let config = QueueConfig {
        stage_from: 10,
        chunks_per_task: 1,
        ..QueueConfig::default()
    };
    let store = db.store(config).await;
    submit(&store, batch(9)).await;
    assert_eq!(rows(&db).await, (0, 9, 9), "under the threshold");
    let mut jobs: Vec<_> = (1..=10).map(|s| job(1000, s)).collect();
    jobs.push(job(3 * CHUNK_PATHS, 7)); // three tasks of one chunk
    submit(
        &store,
        Submission {
            tenant: mcq_queue::DEFAULT_TENANT,
            priority: 0,
            as_batch: true,
            grid: None,
            label: None,
            jobs,
            idempotency: None,
        },
    )
    .await;
    let (staged, written, tasks) = rows(&db).await;
    assert_eq!(
        (staged, written),
        (0, 20),
        "a split job keeps its batch written out"
    );
    assert_eq!(tasks, 9 + 10 + 3);
    let single = Submission {
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        as_batch: false,
        grid: None,
        label: None,
        jobs: (1..=12).map(|s| job(1000, s)).collect(),
        idempotency: None,
    };
    submit(&store, single).await;
    assert_eq!(
        rows(&db).await.0,
        0,
        "jobs submitted one by one are not a batch"
    );
    submit(&store, batch(10)).await;
    assert_eq!(rows(&db).await.0, 1, "at the threshold");
}

/// Queued tasks in the database (written out, not yet claimed).
async fn queued(db: &Db) -> i64 {
    let pool = sqlx::PgPool::connect(&db.url()).await.expect("connect");
    sqlx::query_scalar("SELECT count(*) FROM tasks WHERE state = 'queued'")
        .fetch_one(&pool)
        .await
        .expect("count queued tasks")
}

/// A staged row is taken by one claim at a time. A small claim that opens
/// it writes 256 of its jobs out (those it does not take as queued tasks,
/// in batch order), so the claims behind it find queued work; a claim that
/// finds the row held and nothing else says so; a large claim takes only
/// what it asks for. The test holds the row itself, as a claim in flight
/// would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_claim_writes_out_a_share_and_a_held_row_is_reported() {
    use sqlx::Connection as _;
    let Some(db) = Db::postgres().await else {
        return;
    };
    let store = db.default_store().await;
    let submitted = submit(&store, batch(2000)).await;
    let ids = &submitted.job_ids;
    let w = worker(&store).await;
    let mut holder = sqlx::PgConnection::connect(&db.url())
        .await
        .expect("connect");
    let claim = |max: u32| {
        let store = store.clone();
        async move {
            let reply = store
                .complete_and_claim(w, Vec::new(), max)
                .await
                .expect("claim");
            let jobs: Vec<Uuid> = reply
                .claimed
                .expect("the claim ran")
                .iter()
                .map(|t| t.job_id)
                .collect();
            (jobs, reply.contended)
        }
    };

    // The row held, nothing queued: an empty claim that says why.
    let mut hold = holder.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM staged FOR UPDATE")
        .execute(&mut *hold)
        .await
        .expect("hold the staged row");
    assert_eq!(claim(1).await, (vec![], true));
    assert!(store.claim(w, 1).await.expect("claim").is_empty());
    hold.rollback().await.expect("let go");

    // One task taken, 255 jobs written out behind it.
    assert_eq!(claim(1).await, (ids[..1].to_vec(), false));
    assert_eq!(rows(&db).await, (1, 256, 256));
    assert_eq!(queued(&db).await, 255);

    // With the row held, the claims behind take those queued tasks.
    let mut hold = holder.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM staged FOR UPDATE")
        .execute(&mut *hold)
        .await
        .expect("hold the staged row");
    assert_eq!(claim(5).await, (ids[1..6].to_vec(), false));
    // A claim that empties them and finds the row held is told so.
    let (jobs, contended) = claim(300).await;
    assert_eq!((jobs.as_slice(), contended), (&ids[6..256], true));
    hold.rollback().await.expect("let go");

    // A large claim takes what it asks for and writes nothing out.
    assert_eq!(claim(300).await, (ids[256..556].to_vec(), false));
    assert_eq!(rows(&db).await, (1, 556, 556));
    assert_eq!(queued(&db).await, 0);

    // A cancel waiting for the held row does not hold up a claim, which
    // reports the row held; then the cancel goes through.
    let mut hold = holder.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM staged FOR UPDATE")
        .execute(&mut *hold)
        .await
        .expect("hold the staged row");
    let batch_id = submitted.batch_id.expect("a batch");
    let canceller = store.clone();
    let cancel = tokio::spawn(async move { canceller.cancel_batch(batch_id, Scope::All).await });
    let watcher = sqlx::PgPool::connect(&db.url()).await.expect("connect");
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&watcher)
        .await
        .expect("read activity");
        if waiting >= 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(claim(2).await, (vec![], true));
    hold.rollback().await.expect("let go");
    let cancelled = cancel.await.expect("cancel task").expect("cancel");
    assert_eq!(
        cancelled,
        Some(2000),
        "every unfinished job, running or not"
    );
    assert_eq!(rows(&db).await.0, 0);
    assert_eq!(orphans(&db).await, 0);
}

/// One-slot claims, one after another, as a fleet makes them: the queued
/// tasks of a staged batch never run dry while jobs are still staged (a
/// claim that leaves 64 or fewer writes the next 256 out), and the jobs
/// still come in batch order. When they ran dry every 256 jobs, each claim
/// behind the one writing out found nothing and was sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_claims_write_jobs_out_before_the_queued_ones_run_out() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let store = db.default_store().await;
    let submitted = submit(&store, batch(2000)).await;
    let ids = &submitted.job_ids;
    let w = worker(&store).await;
    let pool = sqlx::PgPool::connect(&db.url()).await.expect("connect");
    let mut claimed = Vec::new();
    let mut fewest = i64::MAX;
    for _ in 0..700 {
        let tasks = store.claim(w, 1).await.expect("claim");
        assert_eq!(tasks.len(), 1, "a staged batch has work for every claim");
        claimed.push(tasks[0].job_id);
        let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE state = 'queued'")
            .fetch_one(&pool)
            .await
            .expect("count queued tasks");
        fewest = fewest.min(queued);
    }
    assert_eq!(claimed, ids[..700], "claimed in batch order");
    assert!(
        fewest >= 32,
        "the queued tasks fell to {fewest} with jobs still staged"
    );
    assert_eq!(rows(&db).await.0, 1, "jobs are still staged");
}

/// The call of a one-slot worker that records its result and claims its
/// next task writes no staged jobs out in its own transaction, where the
/// few milliseconds 256 jobs take held the results back from their
/// readers: when the tenant's due queued tasks run low, it names the
/// tenant in a row with only `attempt` set, and the store writes the jobs
/// out after the commit. The ten-argument call of earlier workers, and a
/// claim alone, still write them out themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_call_leaves_writing_jobs_out_to_after_its_commit() {
    use sqlx::{Connection as _, Row as _};
    let Some(db) = Db::postgres().await else {
        return;
    };
    let store = db.default_store().await;
    submit(&store, batch(2000)).await;
    let w = worker(&store).await;
    // The first small claim writes 256 jobs out and takes one of them.
    let first = store.claim(w, 1).await.expect("claim");
    assert_eq!((first.len(), queued(&db).await), (1, 255));
    // All but five of the queued tasks are due only later, so the next
    // claim leaves the tenant's due queued tasks low.
    let mut conn = sqlx::PgConnection::connect(&db.url())
        .await
        .expect("connect");
    sqlx::query(
        "UPDATE tasks SET run_at = now() + interval '1 hour' WHERE id IN (
             SELECT id FROM tasks WHERE state = 'queued' ORDER BY id DESC LIMIT 250)",
    )
    .execute(&mut conn)
    .await
    .expect("delay queued tasks");
    let tenant: i32 = sqlx::query_scalar("SELECT tenant_id FROM staged LIMIT 1")
        .fetch_one(&mut conn)
        .await
        .expect("the staged row's tenant");

    let call = |later: &str| {
        format!(
            "SELECT id, job_id, attempt FROM mcq_record_and_claim($1, '{{}}', '{{}}', '{{}}', \
             '{{}}', '{{}}', '{{}}', '{{}}', 1, 30{later})"
        )
    };
    for (args, writes_out) in [(", true", false), (", false", true), ("", true)] {
        let mut tx = conn.begin().await.expect("begin");
        let rows = sqlx::query(sqlx::AssertSqlSafe(call(args)))
            .bind(w)
            .fetch_all(&mut *tx)
            .await
            .expect("record and claim");
        let named: Vec<i32> = rows
            .iter()
            .filter(|r| r.get::<Option<i64>, _>("id").is_none())
            .filter(|r| r.get::<Option<Uuid>, _>("job_id").is_none())
            .filter_map(|r| r.get::<Option<i32>, _>("attempt"))
            .collect();
        let claimed = rows
            .iter()
            .filter(|r| r.get::<Option<i64>, _>("id").is_some())
            .count();
        let now_queued: i64 =
            sqlx::query_scalar("SELECT count(*) FROM tasks WHERE state = 'queued'")
                .fetch_one(&mut *tx)
                .await
                .expect("count queued tasks");
        tx.rollback().await.expect("rollback");
        assert_eq!(claimed, 1, "{args:?}: one task claimed");
        if writes_out {
            assert_eq!((named, now_queued), (vec![], 254 + 256), "{args:?}");
        } else {
            assert_eq!((named, now_queued), (vec![tenant], 254), "{args:?}");
        }
    }

    // The store sends the eleven-argument call with a result, and writes
    // the jobs out after it.
    let done = vec![compute(&first[0])];
    let reply = store
        .complete_and_claim(w, done, 1)
        .await
        .expect("complete and claim");
    assert!(reply.refused.is_empty() && !reply.contended);
    assert_eq!(reply.claimed.expect("claimed").len(), 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let now = queued(&db).await;
        if now == 254 + 256 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the staged jobs were not written out after the call: {now} queued"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(orphans(&db).await, 0);
}
