//! SIGSTOP of a worker in the middle of a batch of split jobs, for longer
//! than its lease: the other worker keeps completing jobs while it is
//! frozen (the frozen worker's sessions hold no lock beyond the bounds of
//! `mcq_queue`'s connections, and its expired leases are rescued), and
//! after SIGCONT its late completions are refused, so every job has
//! exactly one result, the local one.

use std::time::{Duration, Instant};

use mcq_tests::{McqProcess, TempDir};

use super::batch;

const LEASE_SECS: u64 = 2;
/// How long the victim stays frozen: well past its lease and the bounds.
const FROZEN: Duration = Duration::from_secs(3 * LEASE_SECS);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_does_not_stall_the_others() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-process-freeze")?;
    // Jobs of 12 chunks in tasks of 3: split jobs, whose completions
    // merge partials under row locks of the job.
    let store = batch::store(&db.url, 3).await?;
    let specs: Vec<_> = (0..48).map(|i| batch::spec(12, 5000 + i)).collect();
    let batch_id = batch::submit(&store, specs.clone()).await?;
    let lease = LEASE_SECS.to_string();
    let args = [
        "--concurrency",
        "2",
        "--lease",
        &lease,
        "--heartbeat",
        "0.3",
        "--claim-batch",
        "4",
    ];
    let victim = McqProcess::worker("victim", &db.url, &args, logs.path())?;
    let survivor = McqProcess::worker("survivor", &db.url, &args, logs.path())?;
    let both = [&victim, &survivor];

    // Freeze the victim while it holds tasks.
    let start = Instant::now();
    let victim_id = loop {
        let listed = store.workers().await?;
        if let Some(w) = listed.iter().find(|w| w.pid == victim.pid()) {
            let held = mcq_testdb::query_i64(
                &db.url,
                &format!(
                    "SELECT count(*) FROM tasks WHERE state = 'running' AND worker_id = '{}'",
                    w.id
                ),
            )
            .await?;
            if held > 0 {
                victim.freeze()?;
                break w.id;
            }
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(60),
            "the victim never held a task\n{}",
            victim.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let frozen_at = Instant::now();
    let before = batch::view(&store, batch_id).await?;
    anyhow::ensure!(
        !before.done,
        "the batch outlives the freeze: make it larger"
    );
    let held = mcq_testdb::query_i64(
        &db.url,
        &format!(
            "SELECT count(*) FROM tasks WHERE state = 'running' AND worker_id = '{victim_id}'"
        ),
    )
    .await?;

    // While the victim is frozen, past its lease, the survivor keeps going
    // and takes over the victim's tasks. Thaw only once it has, however
    // long a loaded machine makes that: the late completions after the
    // thaw are what is being tested.
    tokio::time::sleep(FROZEN.saturating_sub(frozen_at.elapsed())).await;
    loop {
        let still_held = mcq_testdb::query_i64(
            &db.url,
            &format!(
                "SELECT count(*) FROM tasks WHERE state = 'running' AND worker_id = '{victim_id}'"
            ),
        )
        .await?;
        if still_held == 0 {
            break;
        }
        anyhow::ensure!(
            frozen_at.elapsed() < Duration::from_secs(120),
            "the frozen worker's {still_held} tasks were never taken over\n{}",
            survivor.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let during = batch::view(&store, batch_id).await?;
    victim.thaw()?;
    assert!(
        during.counts.succeeded > before.counts.succeeded || during.done,
        "no job finished in {FROZEN:?} with one of two workers frozen \
         (holding {held} tasks): {before:?} then {during:?}\n{}",
        survivor.logs()
    );
    let jobs = batch::finish_and_check(&store, batch_id, &both, &specs).await?;
    // Four tasks per job: a job claimed more often had a task rescued
    // from the frozen worker once its lease ran out.
    let rescued = jobs.iter().filter(|j| j.attempts > 4).count();
    assert!(
        rescued > 0,
        "the frozen worker's {held} tasks were rescued by the survivor\n{}",
        survivor.logs()
    );
    Ok(())
}
