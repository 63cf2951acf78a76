//! SIGTERM: the worker stops claiming, hands back what it cannot finish
//! within its shutdown timeout, deregisters and exits 0.

use mcq_queue::Scope;
use std::time::Duration;

use mcq_tests::{McqProcess, TempDir};

use super::batch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_back_running_tasks_and_exits_zero() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-process-term")?;
    // Tasks of 2,000 chunks take seconds: far beyond the shutdown timeout
    // below, so the worker must cancel them and hand them back.
    let store = batch::store(&db.url, 2000).await?;
    let specs: Vec<_> = (0..4).map(|i| batch::spec(2000, 4000 + i)).collect();
    let batch_id = batch::submit(&store, specs).await?;

    let mut worker = McqProcess::worker(
        "worker",
        &db.url,
        &["--concurrency", "2", "--shutdown-timeout", "0.2"],
        logs.path(),
    )?;
    batch::wait_until(
        &store,
        batch_id,
        Duration::from_secs(60),
        &[&worker],
        "the worker to hold tasks",
        |v| v.counts.running == 2,
    )
    .await?;
    assert_eq!(store.workers().await?.len(), 1, "the worker is registered");

    worker.terminate()?;
    let status = worker.wait_timeout(Duration::from_secs(30))?;
    assert!(
        status.success(),
        "exit status {status:?}\n{}",
        worker.logs()
    );

    let view = batch::view(&store, batch_id).await?;
    assert_eq!(
        view.counts.running,
        0,
        "nothing is left running: {view:?}\n{}",
        worker.logs()
    );
    assert_eq!(
        view.counts.failed, 0,
        "a hand-back is not a failure: {view:?}"
    );
    assert_eq!(
        view.counts.queued + view.counts.succeeded,
        4,
        "every job is back in the queue or done: {view:?}"
    );
    assert!(
        view.counts.queued >= 2,
        "the two running tasks were handed back: {view:?}"
    );
    // A hand-back gives the attempt back: the jobs look never claimed.
    for job in batch::jobs(&store, batch_id).await? {
        if job.state == mcq_api_types::JobState::Queued {
            assert_eq!(job.attempts, 0, "released job {} keeps no attempt", job.id);
        }
    }
    assert!(store.workers().await?.is_empty(), "the worker deregistered");
    store.cancel_batch(batch_id, Scope::All).await?;
    Ok(())
}
