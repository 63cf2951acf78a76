//! A long transaction elsewhere in the database holds back the xmin
//! horizon while jobs flow: vacuum can then remove none of the row
//! versions the queue leaves behind. Jobs must keep flowing, each ending
//! once with the local result; the throughput against an equal phase
//! without the transaction, and the dead rows vacuum could not remove,
//! are printed for docs/results.md.
//!
//! Three phases of `MCQ_CHAOS_HORIZON_SECS` seconds each (10 by default,
//! to keep CI short; results.md quotes a run of 120): without the
//! transaction, with it, and without it again, so that the phase with it
//! is compared with the mean of the two around it rather than with one
//! that ran earlier on a machine whose load drifts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mcq_kernel::Spec;
use mcq_tests::{McqProcess, TempDir};
use sqlx::Connection as _;

use super::backlog::{self, Backlog};
use super::outcome;
use crate::process::batch;

/// Tiny jobs, in batches of 200, a thousand kept queued.
const BACKLOG: Backlog = Backlog {
    batch: 200,
    jobs: 1000,
    first_seed: 40_000,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_flow_while_a_long_transaction_holds_the_horizon() -> anyhow::Result<()> {
    let Some(cluster) = outcome::private_cluster("jobs_flow_while_a_long_transaction") else {
        return Ok(());
    };
    let phase = Duration::from_secs(
        std::env::var("MCQ_CHAOS_HORIZON_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10),
    );
    let url = cluster.create_database("mcq_horizon")?;
    let logs = TempDir::new("mcq-chaos-horizon")?;
    let store = batch::store(&url, 16).await?;
    let args = ["--concurrency", "1", "--threads", "1"];
    let workers = McqProcess::workers(2, &url, &args, logs.path())?;
    let refs: Vec<&McqProcess> = workers.iter().collect();

    let stop = Arc::new(AtomicBool::new(false));
    let submitter = tokio::spawn(backlog::keep_queued(
        store.clone(),
        stop.clone(),
        BACKLOG,
        |seed| Spec {
            runs: Some(1000),
            seed: Some(seed),
            ..Spec::default()
        },
    ));
    // Jobs flowing before anything is measured.
    wait_for_succeeded(&url, 1, &refs).await?;

    let free = measure(&url, phase).await?;
    let mut holder = sqlx::PgConnection::connect(&url).await?;
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut holder)
        .await?;
    sqlx::query("SELECT count(*) FROM jobs")
        .execute(&mut holder)
        .await?;
    let held = measure(&url, phase).await?;
    sqlx::query("ROLLBACK").execute(&mut holder).await?;
    holder.close().await?;
    let after = measure(&url, phase).await?;

    stop.store(true, Ordering::Relaxed);
    let batches = submitter.await??;
    outcome::assert_all_exactly_once(&url, &store, &batches, &refs).await?;

    assert!(held.jobs > 0, "no job finished while the horizon was held");
    assert!(
        held.dead >= held.jobs,
        "each finished job leaves a dead row version vacuum cannot remove \
         while the horizon is held: {held:?}"
    );
    let rate = |p: &Phase| p.jobs as f64 / p.took.as_secs_f64();
    let without = (rate(&free) + rate(&after)) / 2.0;
    eprintln!(
        "chaos horizon: {} s phases; without the transaction {:.0} jobs/s, dead rows after \
         VACUUM {}; with it {:.0} jobs/s ({:+.0}% against the mean of the phases around it), \
         dead rows after VACUUM {}; after it ends {:.0} jobs/s, dead rows after VACUUM {}",
        phase.as_secs(),
        rate(&free),
        free.dead,
        rate(&held),
        100.0 * (rate(&held) / without - 1.0),
        held.dead,
        rate(&after),
        after.dead
    );
    Ok(())
}

/// What one phase saw.
#[derive(Debug)]
struct Phase {
    /// Jobs that succeeded during it.
    jobs: i64,
    took: Duration,
    /// Dead row versions of the queue's tables left by a VACUUM at its end.
    dead: i64,
}

/// Counts the jobs that succeed during `length`, from a vacuumed start,
/// then vacuums again and reads the dead rows left.
async fn measure(url: &str, length: Duration) -> anyhow::Result<Phase> {
    mcq_testdb::execute(url, "VACUUM tasks, jobs, staged").await?;
    let done = "SELECT count(*) FROM jobs WHERE state = 'succeeded'";
    let (before, start) = (mcq_testdb::query_i64(url, done).await?, Instant::now());
    tokio::time::sleep(length).await;
    let jobs = mcq_testdb::query_i64(url, done).await? - before;
    let took = start.elapsed();
    mcq_testdb::execute(url, "VACUUM tasks, jobs, staged").await?;
    let dead = mcq_testdb::query_i64(
        url,
        "SELECT coalesce(sum(n_dead_tup), 0)::int8 FROM pg_stat_user_tables
         WHERE relname IN ('tasks', 'jobs', 'staged')",
    )
    .await?;
    Ok(Phase { jobs, took, dead })
}

/// Waits until at least `n` jobs succeeded.
async fn wait_for_succeeded(url: &str, n: i64, workers: &[&McqProcess]) -> anyhow::Result<()> {
    let start = Instant::now();
    let sql = "SELECT count(*) FROM jobs WHERE state = 'succeeded'";
    while mcq_testdb::query_i64(url, sql).await? < n {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(60),
            "no job finished in a minute\n{}",
            workers
                .iter()
                .map(|w| w.logs())
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
