//! SIGKILL of a worker that holds leases: its tasks come back when the
//! leases expire and another worker finishes them, each job exactly once.

use std::time::Duration;

use mcq_tests::{McqProcess, TempDir};

use super::batch;

/// Short lease so the test waits seconds, not the default ten.
const LEASE_SECS: i64 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_workers_tasks_are_rescued_after_the_lease() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-process-kill")?;
    // One task per job of 48 chunks: long enough (tens to hundreds of ms)
    // to be caught in flight.
    let store = batch::store(&db.url, 48).await?;
    let specs: Vec<_> = (0..8).map(|i| batch::spec(48, 3000 + i)).collect();
    let batch_id = batch::submit(&store, specs.clone()).await?;
    let lease = LEASE_SECS.to_string();
    let args = [
        "--concurrency",
        "2",
        "--lease",
        &lease,
        "--heartbeat",
        "0.3",
    ];

    let mut victim = McqProcess::worker("victim", &db.url, &args, logs.path())?;
    batch::wait_until(
        &store,
        batch_id,
        Duration::from_secs(60),
        &[&victim],
        "the victim to hold tasks",
        |v| v.counts.running > 0,
    )
    .await?;
    victim.kill()?;
    let killed_at = batch::now_ms();
    let after_kill = batch::view(&store, batch_id).await?;
    assert!(
        after_kill.counts.running > 0,
        "the victim died holding tasks: {after_kill:?}"
    );

    let rescuer = McqProcess::worker("rescuer", &db.url, &args, logs.path())?;
    let jobs = batch::finish_and_check(&store, batch_id, &[&rescuer], &specs).await?;
    let rescued: Vec<_> = jobs.iter().filter(|j| j.attempts >= 2).collect();
    assert!(
        !rescued.is_empty(),
        "some task was claimed twice (by the victim, then the rescuer)"
    );
    for job in &rescued {
        let finished = job
            .timings
            .finished_at
            .expect("finished jobs have finished_at")
            .timestamp_millis();
        // Generous bound: lease expiry, a polling interval, the compute time
        // of the rescuer's queue, and a loaded machine.
        let bound_ms = (LEASE_SECS + 30) * 1000;
        assert!(
            finished - killed_at <= bound_ms,
            "job {} finished {} ms after the kill (bound {bound_ms} ms)\n{}",
            job.id,
            finished - killed_at,
            rescuer.logs()
        );
    }
    Ok(())
}
