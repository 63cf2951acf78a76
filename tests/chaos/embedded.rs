//! `mcq serve` on its SQLite default, with embedded workers, SIGKILLed in
//! the middle of a batch and started again on the same file: the file
//! passes `PRAGMA integrity_check`, and the new server resumes the batch
//! (the dead one's tasks come back when their leases run out) to the
//! local results, each job once.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use mcq_tests::{McqProcess, TempDir};
use sqlx::Connection as _;

use super::outcome;
use crate::process::batch;

/// The lease of `mcq serve`'s workers (the queue's default, 10 s), plus
/// the compute left and a loaded machine.
const RESUME_BOUND: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_embedded_server_resumes_on_the_same_file() -> anyhow::Result<()> {
    let dir = TempDir::new("mcq-chaos-embedded")?;
    let url = format!("sqlite:{}", dir.path().join("mcq.sqlite").display());
    let store = batch::store(&url, 16).await?;
    let specs: Vec<_> = (0..60).map(|i| batch::spec(32, 30_000 + i)).collect();
    let batch_id = batch::submit(&store, specs.clone()).await?;
    let serve = ["--embedded-workers", "2"];

    let (mut first, _) = McqProcess::server("server1", &url, &serve, dir.path())?;
    batch::wait_until(
        &store,
        batch_id,
        Duration::from_secs(60),
        &[&first],
        "some jobs to finish, some to run",
        |v| v.counts.succeeded >= 5 && v.counts.running > 0,
    )
    .await?;
    first.kill()?;
    let killed = Instant::now();
    let at_kill = batch::view(&store, batch_id).await?;
    assert_integrity(&url).await?;

    let (mut second, _) = McqProcess::server("server2", &url, &serve, dir.path())?;
    batch::wait_until(
        &store,
        batch_id,
        RESUME_BOUND,
        &[&second],
        "the restarted server to finish the batch",
        |v| v.done,
    )
    .await?;
    let resumed = killed.elapsed();
    outcome::assert_exactly_once(&url, &store, batch_id, &specs, specs.len(), &[&second]).await?;
    second.terminate()?;
    let status = second.wait_timeout(Duration::from_secs(60))?;
    assert!(status.success(), "{status:?}\n{}", second.logs());
    assert_integrity(&url).await?;
    eprintln!(
        "chaos embedded: killed with {} of {} jobs done and {} running; \
         the restarted server finished the batch {:.1} s after the kill",
        at_kill.counts.succeeded,
        specs.len(),
        at_kill.counts.running,
        resumed.as_secs_f64()
    );
    Ok(())
}

/// `PRAGMA integrity_check` answers `ok`.
async fn assert_integrity(url: &str) -> anyhow::Result<()> {
    let mut conn = sqlx::SqliteConnection::connect(url)
        .await
        .with_context(|| format!("opening {url}"))?;
    let answer: Vec<String> = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_all(&mut conn)
        .await?;
    conn.close().await?;
    assert_eq!(answer, ["ok"], "PRAGMA integrity_check of {url}");
    Ok(())
}
