//! One of three workers frozen (SIGSTOP) past its lease while jobs of
//! several tasks flow: the other two keep their throughput. Those jobs
//! merge their tasks' partials under the job's row lock, so a worker
//! frozen between two statements of such a transaction would stall every
//! worker completing a task of the same job, and the reaper, which skips
//! locked rows, would leave its expired leases alone. Completions are
//! single statements and every session is bounded by a fraction of the
//! lease, so the frozen worker holds no lock for long and its tasks are
//! rescued once its lease runs out.
//!
//! Three phases of `MCQ_CHAOS_FROZEN_SECS` seconds each (8 by default,
//! four leases, to keep CI short; results.md quotes a longer run): all
//! three workers running, one frozen, all three again after SIGCONT. The
//! jobs the two others finish are counted in each phase from the
//! workers' own tallies (`jobs_done`), and their rate while the third is
//! frozen is compared with the mean of the phases around it, so that a
//! steady drift of the machine's load cancels out.
//!
//! The floor is far from both ends. A stalled fleet finishes nothing
//! while the worker is frozen, a ratio of 0. Without a stall the two get
//! the frozen worker's share of the two cores and usually go faster than
//! before (a ratio above 1); what lowers the ratio is a lock wait of at
//! most a quarter of the lease at the freeze, the frozen worker's jobs
//! waiting a lease for their rescue (the backlog keeps the others busy
//! meanwhile), and bursts of other load on a shared machine that the
//! mean does not cancel.
//!
//! After the thaw the frozen worker's late completions are refused, or
//! its tasks stopped by the heartbeat that finds their leases taken
//! over, and counted; every job ends once with the local result.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use mcq_api_types::WorkerView;
use mcq_queue::Store;
use mcq_tests::{McqProcess, TempDir};
use sqlx::Connection as _;
use uuid::Uuid;

use super::backlog::{self, Backlog};
use super::outcome;
use crate::process::{batch, freeze};

/// Lease of every worker, in seconds; the heartbeat comes every 0.3 s.
const LEASE: &str = "2";
/// Jobs of 8 kernel chunks in tasks of 2: four tasks a job, spread over
/// the workers by claims of at most two tasks.
const CHUNKS: u64 = 8;
const CHUNKS_PER_TASK: u64 = 2;
/// Batches of 50 such jobs, 200 kept queued: a few seconds of work, so
/// that the workers never wait for the submitter, and little left to
/// finish once it stops.
const BACKLOG: Backlog = Backlog {
    batch: 50,
    jobs: 200,
    first_seed: 70_000,
};
/// The others' throughput while one worker is frozen, as a share of the
/// mean of the phases around the freeze, below which the test fails.
const FLOOR: f64 = 0.3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_others_keep_their_throughput_while_one_worker_is_frozen() -> anyhow::Result<()> {
    let Some(cluster) = outcome::private_cluster("the_others_keep_their_throughput") else {
        return Ok(());
    };
    let phase = phase_length()?;
    let url = cluster.create_database("mcq_frozen")?;
    let logs = TempDir::new("mcq-chaos-frozen")?;
    let store = batch::store(&url, CHUNKS_PER_TASK).await?;
    let args = [
        "--concurrency",
        "1",
        "--threads",
        "1",
        "--lease",
        LEASE,
        "--heartbeat",
        "0.3",
        "--claim-batch",
        "2",
    ];
    let mut victim = McqProcess::worker("victim", &url, &args, logs.path())?;
    let others = [
        McqProcess::worker("other0", &url, &args, logs.path())?,
        McqProcess::worker("other1", &url, &args, logs.path())?,
    ];
    let everyone: Vec<&McqProcess> = [&victim].into_iter().chain(&others).collect();

    let stop = Arc::new(AtomicBool::new(false));
    let submitter = tokio::spawn(backlog::keep_queued(
        store.clone(),
        stop.clone(),
        BACKLOG,
        |seed| batch::spec(CHUNKS, seed),
    ));
    // Every worker at work before anything is measured.
    let victim_id = each_finished_a_job(&store, &everyone).await?[0];

    let before = measure(&store, victim_id, phase).await?;
    let held = freeze_holding_tasks(&url, &victim, victim_id, &everyone).await?;
    let frozen_at = Instant::now();
    let rescue = tokio::spawn(taken_over(url.clone(), victim_id, frozen_at));
    let frozen = measure(&store, victim_id, phase).await?;
    // Thaw only once its leases were taken over, however long a loaded
    // machine makes that: the late completions after it are tested too.
    let rescued_after = rescue.await??;
    victim.thaw()?;
    let after = measure(&store, victim_id, phase).await?;

    stop.store(true, Ordering::Relaxed);
    let batches = submitter.await??;
    outcome::assert_all_exactly_once(&url, &store, &batches, &everyone).await?;
    let taken = count_taken_over(&url, victim_id, &held).await?;
    let jobs_retried = mcq_testdb::query_i64(
        &url,
        "SELECT count(*) FROM jobs WHERE attempts > task_count",
    )
    .await?;

    // Its lost leases are refused or stopped, and counted.
    let (refused, cancelled) = freeze::late_work(&mut victim)?;
    let rate = |p: &Phase| p.others as f64 / p.took.as_secs_f64();
    let around = (rate(&before) + rate(&after)) / 2.0;
    let ratio = rate(&frozen) / around;
    let figures = format!(
        "{} s phases, 3 workers of one slot, lease {LEASE} s; the other two finished {:.1} \
         jobs/s before, {:.1} while one was frozen ({:.2} of the mean of the phases around \
         it), {:.1} after; the frozen one finished {} while frozen; its leases taken over \
         {:.1} s after the freeze, {taken} of the {} tasks it held; jobs that ran a task again: \
         {jobs_retried}; after the thaw {refused} of its completions refused, {cancelled} tasks \
         stopped",
        phase.as_secs(),
        rate(&before),
        rate(&frozen),
        ratio,
        rate(&after),
        frozen.victim,
        rescued_after.as_secs_f64(),
        held.len(),
    );
    eprintln!("chaos frozen: {figures}");
    // A task whose completion was already sent at the freeze is recorded
    // while the worker sleeps and is not taken over; only tasks taken
    // over must come back as late work.
    assert!(
        taken == 0 || refused + cancelled > 0,
        "{taken} tasks of the frozen worker were taken over, yet none of its \
         completions was refused and no task stopped\n{}",
        victim.logs()
    );
    let everyone: Vec<&McqProcess> = [&victim].into_iter().chain(&others).collect();
    assert!(
        ratio >= FLOOR,
        "the others slowed to {ratio:.2} of their throughput while one worker was frozen \
         (floor {FLOOR}): {figures}\n{}",
        logs_of(&everyone)
    );
    Ok(())
}

/// `MCQ_CHAOS_FROZEN_SECS`, 8 when unset.
fn phase_length() -> anyhow::Result<Duration> {
    let Ok(text) = std::env::var("MCQ_CHAOS_FROZEN_SECS") else {
        return Ok(Duration::from_secs(8));
    };
    let secs: u64 = text
        .parse()
        .with_context(|| format!("MCQ_CHAOS_FROZEN_SECS={text:?} is not whole seconds"))?;
    anyhow::ensure!(secs >= 1, "MCQ_CHAOS_FROZEN_SECS must be at least 1");
    Ok(Duration::from_secs(secs))
}

/// What one phase saw.
#[derive(Debug)]
struct Phase {
    /// Jobs the workers other than the frozen one finished.
    others: u64,
    /// Jobs the frozen one finished (while frozen: completions it had
    /// already sent).
    victim: u64,
    took: Duration,
}

/// Counts the jobs each side finishes during `length`.
async fn measure(store: &Store, victim: Uuid, length: Duration) -> anyhow::Result<Phase> {
    let (others, frozen) = jobs_done(store, victim).await?;
    let start = Instant::now();
    tokio::time::sleep(length).await;
    let (others_then, frozen_then) = jobs_done(store, victim).await?;
    Ok(Phase {
        others: others_then - others,
        victim: frozen_then - frozen,
        took: start.elapsed(),
    })
}

/// Jobs finished so far by the workers other than `victim`, and by it,
/// from the tallies the completions keep (the database holds nothing but
/// this scenario's workers).
async fn jobs_done(store: &Store, victim: Uuid) -> anyhow::Result<(u64, u64)> {
    let workers = store.workers().await.context("listing the workers")?;
    let (theirs, its): (Vec<_>, Vec<_>) = workers.iter().partition(|w| w.id != victim);
    let sum = |ws: &[&WorkerView]| -> u64 { ws.iter().map(|w| w.jobs_done).sum() };
    Ok((sum(&theirs), sum(&its)))
}

/// Waits until every one of `workers` is registered and finished a job;
/// returns their worker ids, in order.
async fn each_finished_a_job(store: &Store, workers: &[&McqProcess]) -> anyhow::Result<Vec<Uuid>> {
    let start = Instant::now();
    loop {
        let listed = store.workers().await.context("listing the workers")?;
        let ids: Option<Vec<Uuid>> = workers
            .iter()
            .map(|p| {
                listed
                    .iter()
                    .find(|w| w.pid == p.pid() && w.jobs_done > 0)
                    .map(|w| w.id)
            })
            .collect();
        if let Some(ids) = ids {
            return Ok(ids);
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(60),
            "not every worker finished a job within a minute: {listed:?}\n{}",
            logs_of(workers)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A task running under the frozen worker's lease when it froze.
#[derive(Debug)]
struct Held {
    id: i64,
    attempt: i32,
    job_id: Uuid,
}

/// The tasks running under `worker`'s leases.
async fn running_under(url: &str, worker: Uuid) -> anyhow::Result<Vec<Held>> {
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let rows: Vec<(i64, i32, Uuid)> = sqlx::query_as(
        "SELECT id, attempt, job_id FROM tasks WHERE state = 'running' AND worker_id = $1",
    )
    .bind(worker)
    .fetch_all(&mut conn)
    .await?;
    conn.close().await?;
    Ok(rows
        .into_iter()
        .map(|(id, attempt, job_id)| Held {
            id,
            attempt,
            job_id,
        })
        .collect())
}

/// Freezes `victim` at a moment it holds tasks; returns the tasks still
/// running under its leases once it is frozen.
async fn freeze_holding_tasks(
    url: &str,
    victim: &McqProcess,
    victim_id: Uuid,
    workers: &[&McqProcess],
) -> anyhow::Result<Vec<Held>> {
    let start = Instant::now();
    while running_under(url, victim_id).await?.is_empty() {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(60),
            "the victim never held a task\n{}",
            logs_of(workers)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    victim.freeze()?;
    running_under(url, victim_id).await
}

/// Waits until no task runs under `victim`'s leases any more, each
/// rescued by the others' reaper (or finished by a completion it sent
/// before it froze); returns how long after `frozen_at` that was.
async fn taken_over(url: String, victim: Uuid, frozen_at: Instant) -> anyhow::Result<Duration> {
    let sql =
        format!("SELECT count(*) FROM tasks WHERE state = 'running' AND worker_id = '{victim}'");
    loop {
        let still = mcq_testdb::query_i64(&url, &sql).await?;
        if still == 0 {
            return Ok(frozen_at.elapsed());
        }
        anyhow::ensure!(
            frozen_at.elapsed() < Duration::from_secs(120),
            "the frozen worker's {still} tasks were never taken over"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Of the tasks `victim` held when it froze, those taken over by another
/// claim, once every job finished: claimed again (a higher attempt), or
/// gone with their job's result recorded by another worker. A task whose
/// completion the frozen worker had already sent keeps its attempt, or is
/// gone with the result recorded by the frozen worker.
async fn count_taken_over(url: &str, victim: Uuid, held: &[Held]) -> anyhow::Result<i64> {
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let taken: i64 = sqlx::query_scalar(
        "SELECT count(*)
         FROM unnest($1::int8[], $2::int4[], $3::uuid[]) AS h(id, attempt, job_id)
         JOIN jobs j ON j.id = h.job_id
         LEFT JOIN tasks t ON t.id = h.id
         WHERE t.attempt > h.attempt OR (t.id IS NULL AND j.worker_id IS DISTINCT FROM $4)",
    )
    .bind(held.iter().map(|h| h.id).collect::<Vec<_>>())
    .bind(held.iter().map(|h| h.attempt).collect::<Vec<_>>())
    .bind(held.iter().map(|h| h.job_id).collect::<Vec<_>>())
    .bind(victim)
    .fetch_one(&mut conn)
    .await?;
    conn.close().await?;
    Ok(taken)
}

/// The logs of `workers`, for a failure message.
fn logs_of(workers: &[&McqProcess]) -> String {
    workers
        .iter()
        .map(|w| w.logs())
        .collect::<Vec<_>>()
        .join("\n")
}
