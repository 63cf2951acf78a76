//! The phases of a job — queued, claimed, compute started, compute
//! finished, recorded — for jobs of one task and of several, for a retried
//! job, for workers that send no compute times and for a worker whose
//! clock is off; and, on PostgreSQL, the completion's older signatures.

use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use mcq_api_types::{JobState, JobView};
use mcq_kernel::CHUNK_PATHS;
use mcq_queue::{ClaimedTask, ComputeSpan, QueueConfig, Scope, Store, Submission, TaskDone};
use uuid::Uuid;

use crate::harness::{Db, batch, compute, job, single, submit, whole, worker};

/// The five phases of a succeeded job, checked present and in order.
fn phases(view: &JobView) -> [DateTime<Utc>; 5] {
    assert_eq!(view.state, JobState::Succeeded, "{view:?}");
    let t = &view.timings;
    let all = [
        Some(t.queued_at),
        t.claimed_at,
        t.compute_started_at,
        t.compute_finished_at,
        t.recorded_at,
    ];
    let all = all.map(|p| p.unwrap_or_else(|| panic!("a phase is missing: {t:?}")));
    assert!(all.is_sorted(), "phases out of order: {t:?}");
    assert_eq!(t.queued_at, t.submitted_at);
    assert_eq!(t.recorded_at, t.finished_at);
    all
}

/// A time as both databases keep it: whole microseconds.
fn stored(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).expect("in range")
}

async fn read(store: &Store, id: Uuid) -> JobView {
    store.job(id, Scope::All).await.expect("read").expect("job")
}

/// `task` computed, with the compute span `span`.
fn computed_with(task: &ClaimedTask, span: Option<ComputeSpan>) -> TaskDone {
    TaskDone {
        compute_span: span,
        ..compute(task)
    }
}

pub(crate) async fn a_single_job_records_its_phases_in_order(db: &Db) {
    let store = db.default_store().await;
    let id = submit(&store, single(1)).await.job_ids[0];
    let queued = read(&store, id).await;
    assert!(
        queued.worker_id.is_none() && queued.timings.claimed_at.is_none(),
        "a queued job has only its queued phase: {queued:?}"
    );
    let w = worker(&store).await;
    let task = store.claim(w, 1).await.expect("claim").pop().expect("task");
    let running = read(&store, id).await;
    assert!(running.timings.compute_started_at.is_none() && running.timings.recorded_at.is_none());
    let done = compute(&task);
    let span = done.compute_span.expect("timed");
    assert!(
        store
            .complete(w, vec![done])
            .await
            .expect("complete")
            .is_empty()
    );
    let view = read(&store, id).await;
    let [_, claimed, started, finished, _] = phases(&view);
    assert_eq!(view.worker_id, Some(w));
    assert_eq!(
        claimed,
        view.timings.started_at.expect("started"),
        "one claim"
    );
    // The worker's times are kept as it sent them (they lie within the
    // claim and the recording: one machine, one clock).
    assert_eq!(
        (started, finished),
        (stored(span.started_at), stored(span.finished_at))
    );
}

pub(crate) async fn a_split_job_spans_its_tasks(db: &Db) {
    let store = db
        .store(QueueConfig {
            chunks_per_task: 1,
            ..QueueConfig::default()
        })
        .await;
    let submission = Submission {
        jobs: vec![job(3 * CHUNK_PATHS, 7)],
        ..single(7)
    };
    let id = submit(&store, submission).await.job_ids[0];
    let (w1, w2) = (worker(&store).await, worker(&store).await);
    let first = store
        .claim(w1, 1)
        .await
        .expect("claim")
        .pop()
        .expect("task");
    let rest = store.claim(w2, 2).await.expect("claim");
    assert_eq!(rest.len(), 2, "three tasks of one chunk each");
    // The second worker computes first; the first worker's task, claimed
    // first, finishes last and completes the job.
    let early: Vec<TaskDone> = rest.iter().map(compute).collect();
    let late = compute(&first);
    let spans: Vec<ComputeSpan> = early
        .iter()
        .chain([&late])
        .map(|d| d.compute_span.expect("timed"))
        .collect();
    assert!(
        store
            .complete(w2, early)
            .await
            .expect("complete")
            .is_empty()
    );
    assert_eq!(read(&store, id).await.state, JobState::Running);
    assert!(
        read(&store, id).await.timings.claimed_at.is_none(),
        "a running job shows no phases of its tasks done so far"
    );
    assert!(
        store
            .complete(w1, vec![late])
            .await
            .expect("complete")
            .is_empty()
    );
    let view = read(&store, id).await;
    let [_, claimed, started, finished, _] = phases(&view);
    assert_eq!(
        claimed,
        view.timings.started_at.expect("started"),
        "the first claim"
    );
    assert_eq!(
        started,
        stored(spans.iter().map(|s| s.started_at).min().expect("spans"))
    );
    assert_eq!(
        finished,
        stored(spans.iter().map(|s| s.finished_at).max().expect("spans"))
    );
    assert_eq!(
        view.worker_id,
        Some(w1),
        "the worker that completed the last task"
    );
}

pub(crate) async fn a_retried_job_shows_the_attempt_that_succeeded(db: &Db) {
    let store = db
        .store(QueueConfig {
            retry_backoff: Duration::from_millis(50),
            ..QueueConfig::default()
        })
        .await;
    let id = submit(&store, single(2)).await.job_ids[0];
    let (w1, w2) = (worker(&store).await, worker(&store).await);
    let first = store
        .claim(w1, 1)
        .await
        .expect("claim")
        .pop()
        .expect("task");
    assert!(
        store
            .fail(w1, first.task_id, first.lease_token, "boom")
            .await
            .expect("fail")
    );
    // Due again after the backoff: poll for it, with a generous deadline.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let retry = loop {
        if let Some(task) = store.claim(w2, 1).await.expect("claim").pop() {
            break task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the retry never came due"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!((retry.task_id, retry.attempt), (first.task_id, 2));
    assert!(
        store
            .complete(w2, vec![compute(&retry)])
            .await
            .expect("complete")
            .is_empty()
    );
    let view = read(&store, id).await;
    let [_, claimed, ..] = phases(&view);
    let first_claim = view.timings.started_at.expect("started");
    assert!(
        claimed > first_claim,
        "the claim of the attempt that succeeded ({claimed}), not the first ({first_claim})"
    );
    assert_eq!(view.worker_id, Some(w2));
}

pub(crate) async fn a_completion_without_compute_times_still_records(db: &Db) {
    let store = db.default_store().await;
    let id = submit(&store, single(3)).await.job_ids[0];
    let w = worker(&store).await;
    let task = store.claim(w, 1).await.expect("claim").pop().expect("task");
    let done = computed_with(&task, None);
    assert!(
        store
            .complete(w, vec![done])
            .await
            .expect("complete")
            .is_empty()
    );
    let view = read(&store, id).await;
    let t = &view.timings;
    assert_eq!(view.state, JobState::Succeeded);
    assert!(t.claimed_at.is_some() && t.recorded_at.is_some(), "{t:?}");
    assert!(
        t.compute_started_at.is_none() && t.compute_finished_at.is_none(),
        "{t:?}"
    );
    assert!(t.claimed_at <= t.recorded_at);
    assert_eq!(view.worker_id, Some(w));
}

pub(crate) async fn a_skewed_worker_clock_cannot_disorder_the_phases(db: &Db) {
    let store = db.default_store().await;
    submit(&store, batch(2)).await;
    let w = worker(&store).await;
    let tasks = store.claim(w, 2).await.expect("claim");
    let hour = Duration::from_secs(3600);
    let behind = ComputeSpan::measured(SystemTime::now() - hour, Duration::from_millis(5));
    let ahead = ComputeSpan::measured(SystemTime::now() + hour, Duration::from_millis(5));
    let done = vec![
        computed_with(&tasks[0], Some(behind)),
        computed_with(&tasks[1], Some(ahead)),
    ];
    assert!(store.complete(w, done).await.expect("complete").is_empty());
    let [_, claimed, started, _, _] = phases(&read(&store, tasks[0].job_id).await);
    assert_eq!(
        started, claimed,
        "a span before the claim starts at the claim"
    );
    let [.., started, finished, recorded] = phases(&read(&store, tasks[1].job_id).await);
    assert_eq!(
        (started, finished),
        (recorded, recorded),
        "a span after the record ends there"
    );
}

/// A whole-job task's result as the completion's SQL takes it: JSON text
/// and price.
fn result_text(task: &ClaimedTask) -> (String, f64) {
    let mcq_queue::TaskOutput::Result(result) = whole(task).output else {
        panic!("a whole-job task brings a result");
    };
    (serde_json::to_string(&result).expect("json"), result.price)
}

/// Workers of an older release call `mcq_complete` and
/// `mcq_complete_and_claim` with the signatures before compute times: both
/// still record (with no compute phase) and stay fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signatures_older_workers_call_still_complete() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let store = db.default_store().await;
    submit(&store, batch(2)).await;
    let w = worker(&store).await;
    let tasks = store.claim(w, 2).await.expect("claim");
    let pool = sqlx::PgPool::connect(&db.url()).await.expect("connect");
    let (text, price) = result_text(&tasks[0]);
    let accepted: Vec<Option<i64>> = sqlx::query_scalar(
        "SELECT accepted FROM mcq_complete($1, $2, $3, $4, $5, $6, NULL, 'mcq_finished')",
    )
    .bind(w)
    .bind(vec![tasks[0].task_id])
    .bind(vec![tasks[0].lease_token])
    .bind(vec![1.5_f64])
    .bind(vec![text.clone()])
    .bind(vec![price])
    .fetch_all(&pool)
    .await
    .expect("the old completion");
    assert_eq!(accepted, [Some(tasks[0].task_id)]);
    // Again, late: refused.
    let again: Vec<Option<i64>> = sqlx::query_scalar(
        "SELECT accepted FROM mcq_complete($1, $2, $3, $4, $5, $6, NULL, 'mcq_finished')",
    )
    .bind(w)
    .bind(vec![tasks[0].task_id])
    .bind(vec![tasks[0].lease_token])
    .bind(vec![1.5_f64])
    .bind(vec![text])
    .bind(vec![price])
    .fetch_all(&pool)
    .await
    .expect("the old completion, late");
    assert!(again.is_empty(), "a late completion is refused");
    let (text, price) = result_text(&tasks[1]);
    let rows: Vec<Option<i64>> = sqlx::query_scalar(
        "SELECT accepted FROM mcq_complete_and_claim($1, $2, $3, $4, $5, $6, 'mcq_finished', 1, 10)",
    )
    .bind(w)
    .bind(vec![tasks[1].task_id])
    .bind(vec![tasks[1].lease_token])
    .bind(vec![1.5_f64])
    .bind(vec![text])
    .bind(vec![price])
    .fetch_all(&pool)
    .await
    .expect("the old completion with a claim");
    assert_eq!(
        rows,
        [Some(tasks[1].task_id)],
        "accepted, and nothing left to claim"
    );
    for id in [tasks[0].job_id, tasks[1].job_id] {
        let view = read(&store, id).await;
        let t = &view.timings;
        assert_eq!(view.state, JobState::Succeeded);
        assert!(
            t.claimed_at.is_some() && t.claimed_at <= t.recorded_at,
            "{t:?}"
        );
        assert!(
            t.compute_started_at.is_none(),
            "no compute times were sent: {t:?}"
        );
    }
}
