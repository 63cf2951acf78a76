//! SIGSTOP of a worker in the middle of a batch of split jobs, for longer
//! than its lease: the other worker keeps completing jobs while it is
//! frozen (the frozen worker's sessions hold no lock beyond the bounds of
//! `mcq_queue`'s connections, and its expired leases are rescued), and
//! after SIGCONT its late completions are refused (or its tasks stopped
//! by the heartbeat that finds their leases taken over) and counted, so
//! every job has exactly one result, the local one.
//!
//! A freeze can catch the victim with a completion already sent: the
//! database commits it while the victim sleeps, and nothing is taken over.
//! Such a round proves nothing about late completions, so the test
//! freezes again on a fresh batch, a few times at most.

use std::time::{Duration, Instant};

use mcq_queue::Store;
use mcq_tests::{McqProcess, TempDir};
use uuid::Uuid;

use super::batch;

const LEASE_SECS: u64 = 2;
/// How long the victim stays frozen: well past its lease and the bounds.
const FROZEN: Duration = Duration::from_secs(3 * LEASE_SECS);

/// Freezes before giving up on catching the victim without a completion
/// in flight. Tasks of 12 chunks take tens of milliseconds, against a
/// round trip of one or two, so one round nearly always does.
const ROUNDS: u64 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_does_not_stall_the_others() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-process-freeze")?;
    // Jobs of 48 chunks in tasks of 12: split jobs, whose completions
    // merge partials under row locks of the job.
    let store = batch::store(&db.url, 12).await?;
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
    let mut victim = McqProcess::worker("victim", &db.url, &args, logs.path())?;
    let survivor = McqProcess::worker("survivor", &db.url, &args, logs.path())?;
    let mut rescued = 0;
    for round in 0..ROUNDS {
        let specs: Vec<_> = (0..48)
            .map(|i| batch::spec(48, 5000 + 100 * round + i))
            .collect();
        rescued = freeze_once(&db.url, &store, &victim, &survivor, &specs).await?;
        if rescued > 0 {
            break;
        }
        eprintln!("freeze round {round}: the victim's completion was in flight; freezing again");
    }
    assert!(
        rescued > 0,
        "in {ROUNDS} freezes the frozen worker's tasks were never rescued by the survivor\n{}",
        survivor.logs()
    );

    // The frozen worker's late work is refused, or stopped by the
    // heartbeat that found its leases taken over, and either is counted.
    let (refused, cancelled) = late_work(&mut victim)?;
    assert!(
        refused + cancelled > 0,
        "the frozen worker's lost leases are refused or stopped, and counted\n{}",
        victim.logs()
    );
    eprintln!(
        "freeze: {rescued} jobs rescued; the thawed worker had {refused} completions refused, \
         {cancelled} tasks stopped"
    );
    Ok(())
}

/// Stops a thawed worker with SIGTERM and reads from its exit line how
/// many of its completions were refused and how many of its tasks were
/// stopped (the late work of a worker whose leases were taken over).
pub(crate) fn late_work(victim: &mut McqProcess) -> anyhow::Result<(u64, u64)> {
    victim.terminate()?;
    let status = victim.wait_timeout(Duration::from_secs(60))?;
    assert!(status.success(), "{status:?}\n{}", victim.logs());
    let count = |field| {
        victim
            .exit_count(field)
            .unwrap_or_else(|| panic!("the exit line counts {field}\n{}", victim.logs()))
    };
    Ok((count("refused"), count("cancelled")))
}

/// One batch with one freeze of the victim past its lease: the survivor
/// keeps finishing jobs meanwhile, and the batch ends with the local
/// results. Returns how many jobs had a task rescued from the victim.
async fn freeze_once(
    url: &str,
    store: &Store,
    victim: &McqProcess,
    survivor: &McqProcess,
    specs: &[mcq_kernel::Spec],
) -> anyhow::Result<usize> {
    let batch_id = batch::submit(store, specs.to_vec()).await?;
    let held_by = |worker: Uuid| {
        format!("SELECT count(*) FROM tasks WHERE state = 'running' AND worker_id = '{worker}'")
    };
    // Freeze the victim while it holds tasks.
    let start = Instant::now();
    let victim_id = loop {
        let listed = store.workers().await?;
        if let Some(w) = listed.iter().find(|w| w.pid == victim.pid())
            && mcq_testdb::query_i64(url, &held_by(w.id)).await? > 0
        {
            victim.freeze()?;
            break w.id;
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(60),
            "the victim never held a task\n{}",
            victim.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let frozen_at = Instant::now();
    let before = batch::view(store, batch_id).await?;
    anyhow::ensure!(
        !before.done,
        "the batch outlives the freeze: make it larger"
    );
    let held = mcq_testdb::query_i64(url, &held_by(victim_id)).await?;

    // While the victim is frozen, past its lease, the survivor keeps going
    // and takes over the victim's tasks. Thaw only once it has, however
    // long a loaded machine makes that: the late completions after the
    // thaw are what is being tested.
    tokio::time::sleep(FROZEN.saturating_sub(frozen_at.elapsed())).await;
    loop {
        let still_held = mcq_testdb::query_i64(url, &held_by(victim_id)).await?;
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
    let during = batch::view(store, batch_id).await?;
    victim.thaw()?;
    assert!(
        during.counts.succeeded > before.counts.succeeded || during.done,
        "no job finished in {FROZEN:?} with one of two workers frozen \
         (holding {held} tasks): {before:?} then {during:?}\n{}",
        survivor.logs()
    );
    let jobs = batch::finish_and_check(store, batch_id, &[victim, survivor], specs).await?;
    // A job tried twice had a task rescued from the frozen worker once
    // its lease ran out.
    Ok(jobs.iter().filter(|j| j.attempts >= 2).count())
}
