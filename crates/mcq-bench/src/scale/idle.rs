//! The fleet at rest: single jobs, one at a time, into a fleet whose every
//! worker has gone idle, as a shared service's requests arrive.
//!
//! Each job's announcement may wake every idle worker, and every woken
//! worker claims: the database's CPU per job then grows with the fleet
//! even though one worker is enough. This phase measures that CPU per job
//! (the fleet's idle polling over the same time included) and how long each
//! job waited in the queue, from its submission to its claim, both on the
//! database's clock.

use std::time::Duration;

use anyhow::Context;
use mcq_kernel::ValidSpec;
use mcq_queue::Store;
use tokio::time::Instant;

use super::fleet::Database;
use super::{cpu, single};
use crate::stats::quantile_sorted;

/// Single jobs sent to the idle fleet at each size.
pub(crate) const JOBS: usize = 16;

/// Longest wait for the fleet to go idle, or for one job to finish.
const PATIENCE: Duration = Duration::from_secs(60);

/// What the idle fleet's single jobs measured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IdleFigures {
    /// Jobs measured.
    pub(crate) jobs: usize,
    /// Median time from a job's submission to its claim, in milliseconds.
    pub(crate) pickup_p50_ms: f64,
    /// 99th percentile of that time.
    pub(crate) pickup_p99_ms: f64,
    /// Database CPU over the phase, per job, in milliseconds.
    pub(crate) db_ms_per_job: Option<f64>,
}

/// Waits until every one of the `workers` has marked itself idle (or
/// [`PATIENCE`] passed), then sends [`JOBS`] jobs like `spec`, seeds from
/// `seed` on, each after the one before has finished.
pub(crate) async fn run(
    control: &Store,
    database_url: &str,
    database: Database,
    workers: usize,
    spec: &ValidSpec,
    seed: u64,
) -> anyhow::Result<IdleFigures> {
    settle(database_url, workers).await?;
    let mut events = control.finished_events();
    let mut pickups = Vec::with_capacity(JOBS);
    let before = database.cpu_seconds();
    for k in 0..JOBS {
        let (view, _) = single::submit_and_wait(
            control,
            &mut events,
            (spec.with_seed(seed + k as u64), 0),
            PATIENCE,
        )
        .await
        .context("a job sent to the idle fleet")?;
        let claimed = view
            .timings
            .claimed_at
            .context("a finished job has a claim time")?;
        let waited = claimed - view.timings.submitted_at;
        pickups.push(super::millis(waited));
    }
    let after = database.cpu_seconds();
    pickups.sort_by(f64::total_cmp);
    Ok(IdleFigures {
        jobs: pickups.len(),
        pickup_p50_ms: quantile_sorted(&pickups, 0.5),
        pickup_p99_ms: quantile_sorted(&pickups, 0.99),
        db_ms_per_job: cpu::spent(before, after).map(|s| s * 1e3 / pickups.len() as f64),
    })
}

/// Waits until `workers` workers have marked themselves idle.
async fn settle(database_url: &str, workers: usize) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(database_url)
        .await
        .context("connecting to watch the fleet go idle")?;
    let started = Instant::now();
    loop {
        let idle: i64 =
            sqlx::query_scalar("SELECT count(*) FROM workers WHERE idle_since IS NOT NULL")
                .fetch_one(&mut conn)
                .await
                .context("counting idle workers")?;
        if usize::try_from(idle).unwrap_or(0) >= workers || started.elapsed() > PATIENCE {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = conn.close().await;
    Ok(())
}
