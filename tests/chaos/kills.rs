//! Workers SIGKILLed again and again while a batch runs, each replaced by
//! a fresh one: the dead workers' tasks come back when their leases run
//! out, and every job still ends once, with the local result.

use std::time::{Duration, Instant};

use mcq_tests::{McqProcess, TempDir};

use super::outcome;
use crate::process::batch;

const LEASE_SECS: u64 = 2;
/// Kills at most; fewer if the batch ends first (a fast machine).
const KILLS: usize = 5;
/// Bound on the batch's end after the last kill: the lease, a heartbeat,
/// the compute left and a loaded machine.
const RECOVERY_BOUND: Duration = Duration::from_secs(LEASE_SECS + 90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_again_and_again_lose_and_repeat_nothing() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-chaos-kills")?;
    // Jobs of two tasks of 24 chunks: tens of milliseconds each, so a
    // killed worker is nearly always caught computing.
    let store = batch::store(&db.url, 24).await?;
    let specs: Vec<_> = (0..80).map(|i| batch::spec(48, 11_000 + i)).collect();
    let batch_id = batch::submit(&store, specs.clone()).await?;
    let lease = LEASE_SECS.to_string();
    // One slot and one thread each: the batch lasts about as long on any
    // machine with three cores or more. A task may be caught by every kill
    // (each victim is a worker holding a task, perhaps the one the last
    // victim held): attempts enough that none runs out of them.
    let attempts = (KILLS + 2).to_string();
    let args = [
        "--concurrency",
        "1",
        "--threads",
        "1",
        "--lease",
        &lease,
        "--heartbeat",
        "0.3",
        "--max-attempts",
        &attempts,
    ];
    let spawn = |n: usize| McqProcess::worker(&format!("worker{n}"), &db.url, &args, logs.path());
    let mut workers: Vec<McqProcess> = (0..3).map(spawn).collect::<anyhow::Result<_>>()?;
    let mut spawned = workers.len();

    let (mut kills, mut caught) = (0, 0);
    let mut last_kill = Instant::now();
    while kills < KILLS && !batch::view(&store, batch_id).await?.done {
        // A worker that holds a running task right now.
        let holder = mcq_testdb::query_i64(
            &db.url,
            "SELECT coalesce((SELECT w.pid::int8 FROM tasks t JOIN workers w ON w.id = t.worker_id
                              WHERE t.state = 'running' LIMIT 1), 0)",
        )
        .await?;
        let Some(at) = workers.iter().position(|w| i64::from(w.pid()) == holder) else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let mut victim = workers.swap_remove(at);
        let victim_id = store
            .workers()
            .await?
            .into_iter()
            .find(|w| w.pid == victim.pid())
            .map(|w| w.id);
        victim.kill()?;
        last_kill = Instant::now();
        kills += 1;
        if let Some(id) = victim_id {
            let orphaned = mcq_testdb::query_i64(
                &db.url,
                &format!(
                    "SELECT count(*) FROM tasks WHERE state = 'running' AND worker_id = '{id}'"
                ),
            )
            .await?;
            caught += usize::from(orphaned > 0);
        }
        workers.push(spawn(spawned)?);
        spawned += 1;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    assert!(
        caught > 0,
        "no kill caught a worker holding a task ({kills} kills): make the batch larger"
    );

    let refs: Vec<&McqProcess> = workers.iter().collect();
    let view = batch::wait_until(
        &store,
        batch_id,
        RECOVERY_BOUND,
        &refs,
        "the batch to finish after the last kill",
        |v| v.done,
    )
    .await?;
    let recovered = last_kill.elapsed();
    outcome::assert_exactly_once(&db.url, &store, batch_id, &specs, specs.len(), &refs).await?;
    let retried = batch::jobs(&store, batch_id)
        .await?
        .iter()
        .filter(|j| j.attempts >= 2)
        .count();
    assert!(
        retried > 0,
        "{caught} kills caught tasks, so some task ran twice: {view:?}"
    );
    eprintln!(
        "chaos kills: {kills} SIGKILLs ({caught} caught tasks), {retried} jobs retried, \
         batch done {:.1} s after the last kill",
        recovered.as_secs_f64()
    );
    Ok(())
}
