//! The autoscaling query of deploy/k8s/keda-scaledobject.yaml, run against
//! a real schema: it counts every task not yet finished (queued, running,
//! or still a staged row of a large batch), so KEDA keeps the workers that
//! running work needs and scales to zero only when nothing is left.

use anyhow::Context as _;
use mcq_queue::Scope;
use mcq_queue::{Store, Submission, WorkerInfo};

use super::batch;

/// The trigger's `query`, a folded YAML block (`query: >-`): its lines
/// joined by spaces.
fn keda_query() -> anyhow::Result<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/k8s/keda-scaledobject.yaml"
    );
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let mut lines = text.lines().skip_while(|l| l.trim() != "query: >-");
    let header = lines
        .next()
        .context("no `query: >-` block in the ScaledObject")?;
    let indent = header.len() - header.trim_start().len();
    let body: Vec<&str> = lines
        .take_while(|l| l.len() - l.trim_start().len() > indent)
        .map(str::trim)
        .collect();
    anyhow::ensure!(!body.is_empty(), "the query block is empty");
    Ok(body.join(" "))
}

async fn scaled_on(url: &str, query: &str) -> anyhow::Result<i64> {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(url).await?;
    // KEDA reads one number; count(*) + count(*) + sum() is numeric.
    let value: f64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT ({query})::float8")))
        .fetch_one(&mut conn)
        .await
        .context("running the KEDA query")?;
    Ok(value as i64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_query_counts_queued_running_and_staged_tasks() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let query = keda_query()?;
    // One chunk per task, and every batch staged.
    let store: Store = batch::store(&db.url, 1).await?;
    assert_eq!(
        scaled_on(&db.url, &query).await?,
        0,
        "an empty queue needs no worker"
    );

    let staged = batch::submit(&store, (0..5).map(|i| batch::spec(1, i)).collect()).await?;
    assert_eq!(
        scaled_on(&db.url, &query).await?,
        5,
        "five staged single-task jobs"
    );
    let split = store
        .submit(Submission {
            tenant: mcq_queue::DEFAULT_TENANT,
            priority: 0,
            as_batch: false,
            grid: None,
            label: None,
            jobs: vec![batch::spec(3, 99).validate().expect("a valid spec")],
            idempotency: None,
        })
        .await?
        .job_ids[0];
    assert_eq!(
        scaled_on(&db.url, &query).await?,
        8,
        "plus a job of three tasks"
    );

    let worker = store
        .register_worker(WorkerInfo {
            hostname: "keda-test".into(),
            pid: 1,
            concurrency: 4,
        })
        .await?;
    let claimed = store.claim(worker, 4).await?;
    assert_eq!(claimed.len(), 4);
    assert_eq!(
        scaled_on(&db.url, &query).await?,
        8,
        "running tasks still count: their workers are busy"
    );

    store.cancel_job(split, Scope::All).await?;
    assert_eq!(scaled_on(&db.url, &query).await?, 5);
    store.cancel_batch(staged, Scope::All).await?;
    assert_eq!(
        scaled_on(&db.url, &query).await?,
        0,
        "nothing left: scale to zero"
    );
    Ok(())
}
