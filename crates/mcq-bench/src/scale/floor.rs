//! The floor: the least a `SKIP LOCKED` queue can cost the database, run
//! beside mcq's fleet at every size, on the same database and through the
//! same connections' route, so that mcq's database CPU per task can be
//! read against it in one run.
//!
//! The minimal queue is one table of bare rows. Each of its loops (as many
//! as the fleet has slots, each with one connection of its own) claims one
//! row in one autocommitted statement (`FOR UPDATE SKIP LOCKED` in a
//! subquery feeding an `UPDATE … RETURNING`), holds it for the task time,
//! and completes it in a second autocommitted statement. Nothing else:
//! no leases, heartbeats, tenants, batches, results or notifications. Both
//! commits keep the server's default durability.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use sqlx::Connection as _;
use sqlx::postgres::PgConnection;
use tokio::task::JoinSet;

use super::cpu;
use super::fleet::Database;

/// The minimal queue's statements; its table, `mcq_bench_floor`, lives in
/// the benchmark's database for the run. The loops may connect as another
/// role than the one that creates it (a pooler's, through `--fleet-url`),
/// so every role may claim and complete its rows.
const CREATE: &str = "DROP TABLE IF EXISTS mcq_bench_floor;
CREATE TABLE mcq_bench_floor (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    done boolean NOT NULL DEFAULT false, claimed_at timestamptz, finished_at timestamptz);
CREATE INDEX mcq_bench_floor_queued ON mcq_bench_floor (id) WHERE claimed_at IS NULL;
GRANT SELECT, UPDATE ON mcq_bench_floor TO PUBLIC";
const DROP: &str = "DROP TABLE IF EXISTS mcq_bench_floor";
const EMPTY: &str = "TRUNCATE mcq_bench_floor";
const FILL: &str = "INSERT INTO mcq_bench_floor (done) SELECT false FROM generate_series(1, $1)";
// Statistics of a table that was empty would steer the claim to a scan
// of every row.
const ANALYZE: &str = "ANALYZE mcq_bench_floor";
const CLAIM: &str = "UPDATE mcq_bench_floor SET claimed_at = now() WHERE id = (
    SELECT id FROM mcq_bench_floor WHERE claimed_at IS NULL ORDER BY id LIMIT 1
    FOR UPDATE SKIP LOCKED) RETURNING id";
const COMPLETE: &str =
    "UPDATE mcq_bench_floor SET done = true, finished_at = now() WHERE id = $1 AND NOT done";
const LEFT: &str = "SELECT EXISTS (SELECT 1 FROM mcq_bench_floor WHERE claimed_at IS NULL)";
const BACKEND: &str = "SELECT pg_backend_pid()";
const CONNECTED: &str = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)";
const SPAN: &str =
    "SELECT extract(epoch FROM max(finished_at) - min(claimed_at))::float8 FROM mcq_bench_floor";

/// What the minimal queue measured at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloorRow {
    /// Tasks over the time from the first claim to the last completion.
    pub throughput_per_s: f64,
    /// Throughput over the same ideal as mcq's row.
    pub efficiency: f64,
    /// CPU seconds of the database's processes during the run.
    pub db_cpu_s: Option<f64>,
    /// Of those, microseconds per task.
    pub db_cpu_per_task_us: Option<f64>,
    /// Database CPU over wall time.
    pub db_cores: Option<f64>,
    /// The loops' backends still connected when the database's CPU was
    /// read the second time: all of them, so that none of their CPU had
    /// moved from its own nanosecond account to its parent's ticks.
    #[serde(skip)]
    pub backends_at_reading: usize,
}

/// (Re)creates the minimal queue's table, empty.
pub(crate) async fn prepare(url: &str) -> anyhow::Result<()> {
    let mut conn = PgConnection::connect(url)
        .await
        .context("connecting for the minimal queue")?;
    sqlx::raw_sql(CREATE)
        .execute(&mut conn)
        .await
        .context("creating the minimal queue's table")?;
    let _ = conn.close().await;
    Ok(())
}

/// Drops the minimal queue's table.
pub(crate) async fn remove(url: &str) {
    if let Ok(mut conn) = PgConnection::connect(url).await {
        let _ = sqlx::raw_sql(DROP).execute(&mut conn).await;
        let _ = conn.close().await;
    }
}

/// Runs `tasks` rows through `loops` one-slot loops connected to
/// `worker_url`, each row held for `hold`; the rows are written and read
/// back through `control_url`.
pub(crate) async fn run(
    control_url: &str,
    worker_url: &str,
    database: Database,
    loops: usize,
    tasks: u64,
    hold: Duration,
) -> anyhow::Result<FloorRow> {
    let mut control = PgConnection::connect(control_url)
        .await
        .context("connecting for the minimal queue")?;
    sqlx::raw_sql(EMPTY)
        .execute(&mut control)
        .await
        .context("emptying the minimal queue")?;
    sqlx::query(FILL)
        .bind(i64::try_from(tasks).context("too many tasks")?)
        .execute(&mut control)
        .await
        .context("filling the minimal queue")?;
    sqlx::raw_sql(ANALYZE)
        .execute(&mut control)
        .await
        .context("analysing the minimal queue")?;
    // Every loop connects before the clock starts, as mcq's fleet does.
    let mut conns = Vec::with_capacity(loops);
    let mut backends = Vec::with_capacity(loops);
    for i in 0..loops {
        let mut conn = PgConnection::connect(worker_url)
            .await
            .with_context(|| format!("connecting minimal-queue loop {i}"))?;
        let pid: i32 = sqlx::query_scalar(BACKEND)
            .fetch_one(&mut conn)
            .await
            .context("a minimal-queue loop's backend")?;
        backends.push(pid);
        conns.push(conn);
    }
    let db_before = database.cpu_seconds();
    let started = Instant::now();
    let mut set = JoinSet::new();
    for conn in conns {
        set.spawn(run_loop(conn, hold));
    }
    let limit =
        Duration::from_secs_f64(tasks as f64 * hold.as_secs_f64() / loops as f64 * 20.0 + 120.0);
    let mut done = 0u64;
    let mut finished = Vec::with_capacity(loops);
    while let Some(joined) =
        tokio::time::timeout(limit.saturating_sub(started.elapsed()), set.join_next())
            .await
            .context("the minimal queue did not finish in time")?
    {
        let (completed, conn) = joined.context("a minimal-queue loop panicked")??;
        done += completed;
        finished.push(conn);
    }
    let wall = started.elapsed().as_secs_f64();
    // Read while the loops are still connected: a backend that ends moves
    // its CPU to the postmaster's account of reaped children, in 10 ms
    // ticks, and a size of a few dozen tasks could read nothing at all.
    // mcq's fleet is read the same way, before it stops.
    let db_after = database.cpu_seconds();
    let (backends_at_reading,): (i64,) = sqlx::query_as(CONNECTED)
        .bind(&backends)
        .fetch_one(&mut control)
        .await
        .context("counting the minimal queue's backends")?;
    for conn in finished {
        let _ = conn.close().await;
    }
    if done != tasks {
        bail!("the minimal queue completed {done} of {tasks} tasks");
    }
    let (span_s,): (Option<f64>,) = sqlx::query_as(SPAN)
        .fetch_one(&mut control)
        .await
        .context("reading the minimal queue's timings")?;
    let _ = control.close().await;
    let span_s = span_s.filter(|s| *s > 0.0).context("no span measured")?;
    let throughput = tasks as f64 / span_s;
    let ideal = loops as f64 / hold.as_secs_f64();
    let db_cpu_s = cpu::spent(db_before, db_after);
    Ok(FloorRow {
        throughput_per_s: throughput,
        efficiency: throughput / ideal,
        db_cpu_s,
        db_cpu_per_task_us: db_cpu_s.map(|s| s * 1e6 / tasks as f64),
        db_cores: db_cpu_s.map(|s| s / wall),
        backends_at_reading: usize::try_from(backends_at_reading).unwrap_or(0),
    })
}

/// One loop: claim a row, hold it, complete it, until no row is left.
/// Returns how many rows it completed, and its connection, still open.
async fn run_loop(mut conn: PgConnection, hold: Duration) -> anyhow::Result<(u64, PgConnection)> {
    let mut completed = 0;
    loop {
        let claimed: Option<i64> = sqlx::query_scalar(CLAIM)
            .fetch_optional(&mut conn)
            .await
            .context("minimal-queue claim")?;
        let Some(id) = claimed else {
            // Every unclaimed row may be locked by another claim for a
            // moment; only an empty queue ends the loop.
            let any: bool = sqlx::query_scalar(LEFT)
                .fetch_one(&mut conn)
                .await
                .context("minimal-queue check")?;
            if !any {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        };
        tokio::time::sleep(hold).await;
        let updated = sqlx::query(COMPLETE)
            .bind(id)
            .execute(&mut conn)
            .await
            .context("minimal-queue completion")?
            .rows_affected();
        if updated != 1 {
            bail!("the minimal queue's row {id} was completed twice");
        }
        completed += 1;
    }
    Ok((completed, conn))
}

/// PostgreSQL: the minimal queue's CPU is read while its loops are still
/// connected.
#[cfg(test)]
mod on_postgres {
    use std::time::Duration;

    use super::{prepare, remove, run};
    use crate::scale::fleet::Database;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_loops_are_connected_when_their_cpu_is_read() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        prepare(&db.url).await.expect("prepare");
        let database = Database::locate(&db.url).await;
        let row = run(&db.url, &db.url, database, 3, 12, Duration::from_millis(2))
            .await
            .expect("the minimal queue runs");
        remove(&db.url).await;
        assert_eq!(row.backends_at_reading, 3, "{row:?}");
        if database.postmaster.is_some() {
            let cpu = row.db_cpu_s.expect("a reading");
            assert!(cpu > 0.0, "{row:?}");
        }
    }
}
