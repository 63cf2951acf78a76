//! Reads: batch statistics, paging, the worker list.

use mcq_api_types::JobState;
use mcq_kernel::{Method, OptionKind, PriceResult, VarianceReduction};
use mcq_queue::Scope;
use mcq_queue::{TaskDone, TaskOutput};

use crate::harness::{Db, batch, compute, submit, worker};

/// A finished result carrying a chosen price.
fn result_with_price(price: f64) -> PriceResult {
    PriceResult {
        price,
        std_error: 0.01,
        ci95: [price - 0.02, price + 0.02],
        paths: 1000,
        seed: Some(1),
        method: Method::Mc,
        option: OptionKind::Call,
        variance_reduction: VarianceReduction::None,
        variance_reduction_factor: Some(1.0),
        max_paths_reached: false,
        elapsed_ms: 1.0,
        delta: None,
        delta_std_error: None,
    }
}

pub(crate) async fn batch_aggregates_equal_recomputation(db: &Db) {
    let store = db.default_store().await;
    let submitted = submit(&store, batch(40)).await;
    let batch_id = submitted.batch_id.expect("batch");
    let w = worker(&store).await;
    // 30 succeed with prices around a large offset (a naive Σx² formula
    // would lose the spread), 4 fail once, 1 is cancelled, 5 stay queued.
    let tasks = store.claim(w, 35).await.expect("claim");
    let prices: Vec<f64> = (0..30)
        .map(|i| 1e6 + f64::from(i) * 0.001 + f64::from(i * i % 7) * 1e-4)
        .collect();
    let done = tasks[..30]
        .iter()
        .zip(&prices)
        .map(|(t, &p)| TaskDone {
            task_id: t.task_id,
            lease_token: t.lease_token,
            output: TaskOutput::Result(result_with_price(p)),
            compute_ms: 2.5,
            compute_span: None,
        })
        .collect();
    assert!(store.complete(w, done).await.expect("complete").is_empty());
    // One failed attempt each: back in the queue behind the 1 s default backoff.
    for t in &tasks[30..34] {
        assert!(
            store
                .fail(w, t.task_id, t.lease_token, "nope")
                .await
                .expect("fail")
        );
    }
    store
        .cancel_job(tasks[34].job_id, Scope::All)
        .await
        .expect("cancel");

    let view = store
        .batch(batch_id, Scope::All)
        .await
        .expect("read")
        .expect("batch");
    assert_eq!(view.total, 40);
    assert_eq!(view.counts.succeeded, 30);
    assert_eq!(view.counts.cancelled, 1);
    assert_eq!(
        view.counts.queued, 9,
        "5 never claimed + 4 waiting for a retry"
    );
    assert!(!view.done);
    let stats = view.stats.expect("stats");
    let n = prices.len() as f64;
    let mean = prices.iter().sum::<f64>() / n;
    let var = prices.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / (n - 1.0);
    assert_eq!(stats.count, 30);
    assert!(
        (stats.mean - mean).abs() <= 1e-9 * mean,
        "{} vs {mean}",
        stats.mean
    );
    assert_eq!(stats.min, prices[0]);
    assert_eq!(stats.max, prices[29]);
    assert!(
        (stats.stddev - var.sqrt()).abs() <= 1e-6 * var.sqrt(),
        "{} vs {}",
        stats.stddev,
        var.sqrt()
    );
    assert!((stats.std_error - var.sqrt() / n.sqrt()).abs() <= 1e-6 * var.sqrt());
    assert!((view.timings.compute_ms_total - 75.0).abs() < 1e-9);
    assert!(view.timings.first_started_at.is_some());
    assert!(
        view.timings.makespan_ms.is_none(),
        "no makespan before the batch is done"
    );

    store
        .cancel_batch(batch_id, Scope::All)
        .await
        .expect("cancel");
    let view = store
        .batch(batch_id, Scope::All)
        .await
        .expect("read")
        .expect("batch");
    assert!(view.done);
    assert!(view.timings.makespan_ms.is_some_and(|ms| ms >= 0.0));
}

pub(crate) async fn batch_jobs_pages_in_submission_order(db: &Db) {
    let store = db.default_store().await;
    let submitted = submit(&store, batch(25)).await;
    let batch_id = submitted.batch_id.expect("batch");
    let w = worker(&store).await;
    let first = store.claim(w, 1).await.expect("claim");
    assert!(
        store
            .complete(w, first.iter().map(compute).collect())
            .await
            .expect("complete")
            .is_empty()
    );

    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .batch_jobs(batch_id, Scope::All, after, 10)
            .await
            .expect("read")
            .expect("batch exists");
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 10);
        after = page.last().map(|j| j.id);
        seen.extend(page);
    }
    assert_eq!(
        seen.iter().map(|j| j.id).collect::<Vec<_>>(),
        submitted.job_ids
    );
    assert_eq!(seen[0].state, JobState::Succeeded);
    assert!(seen[0].result.is_some(), "pages carry results");
    assert_eq!(seen[1].state, JobState::Queued);
    assert_eq!(
        store
            .batch_jobs(batch_id, Scope::All, None, 0)
            .await
            .expect("read")
            .expect("exists")
            .len(),
        1,
        "limit at least 1"
    );
    assert_eq!(
        store
            .batch_jobs(batch_id, Scope::All, None, u32::MAX)
            .await
            .expect("read")
            .expect("exists")
            .len(),
        25
    );
    assert!(
        store
            .batch_jobs(uuid::Uuid::new_v4(), Scope::All, None, 10)
            .await
            .expect("read")
            .is_none()
    );
    let foreign = uuid::Uuid::new_v4();
    assert!(
        store
            .batch_jobs(batch_id, Scope::All, Some(foreign), 10)
            .await
            .expect("read")
            .expect("exists")
            .is_empty()
    );
}

/// A worker's counters are exact once it has said it is idle, before its
/// next heartbeat: on PostgreSQL a completion of results leaves the row
/// to the heartbeat and the idle mark, which add what the store recorded.
pub(crate) async fn an_idle_workers_counters_are_exact(db: &Db) {
    let store = db.default_store().await;
    submit(&store, batch(2)).await;
    let w = worker(&store).await;
    let tasks = store.claim(w, 2).await.expect("claim");
    assert_eq!(tasks.len(), 2);
    assert!(
        store
            .complete(w, tasks.iter().map(compute).collect())
            .await
            .expect("complete")
            .is_empty()
    );
    store.announce_idle(w).await.expect("idle mark");
    let listed = store.workers().await.expect("workers");
    let me = listed.iter().find(|v| v.id == w).expect("listed");
    assert_eq!((me.tasks_done, me.jobs_done), (2, 2));
}

pub(crate) async fn workers_are_listed_with_counters_until_deregistered(db: &Db) {
    let store = db.default_store().await;
    submit(&store, batch(3)).await;
    let w = worker(&store).await;
    let other = worker(&store).await;
    let tasks = store.claim(w, 3).await.expect("claim");
    assert!(
        store
            .complete(w, tasks.iter().map(compute).collect())
            .await
            .expect("complete")
            .is_empty()
    );
    assert!(store.heartbeat(w, &[]).await.expect("heartbeat").is_clear());
    let listed = store.workers().await.expect("workers");
    let me = listed.iter().find(|v| v.id == w).expect("listed");
    assert_eq!((me.tasks_done, me.jobs_done), (3, 3));
    assert_eq!(
        (me.hostname.as_str(), me.pid, me.concurrency),
        ("test-host", std::process::id(), 4)
    );
    assert!(me.last_heartbeat_at >= me.started_at);
    assert!(listed.iter().any(|v| v.id == other));
    store.deregister(w).await.expect("deregister");
    let listed = store.workers().await.expect("workers");
    assert!(listed.iter().all(|v| v.id != w));
    assert!(listed.iter().any(|v| v.id == other));
}
