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
//! no leases, heartbeats, tenants, batches or results. Both commits keep
//! the server's default durability.
//!
//! Its visibility probe is the least a queue can do for a reader waiting
//! on one task: the probe writes a row that the loops' next claim takes
//! first, the loop's completion of that row notifies in the same
//! statement, and the probe, listening, reads the row's `finished_at` as
//! soon as it hears of it. Measured as mcq's probe is (`visibility.rs`),
//! from the completing transaction's start to the end of that read, it
//! is the floor under mcq's visibility on the same machine in the same
//! minutes.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgListener, PgPoolOptions};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::fleet::Database;
use super::{cpu, visibility};

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
/// A probe's row: its id is below zero, so the loops' claim, lowest id
/// first, takes it next, as mcq's probe jobs go first by priority.
const PROBE: &str =
    "INSERT INTO mcq_bench_floor (id, done) OVERRIDING SYSTEM VALUE VALUES ($1, false)";
/// The `application_name` of the minimal queue's connections, unless the
/// URL names one: beside mcq's fleet (`mcq bench worker`) in
/// `pg_stat_activity` and the server's log.
const NAME: &str = "mcq bench floor";

/// Where a probe row's completion is announced.
const CHANNEL: &str = "mcq_bench_floor";
/// A probe row's completion, announced in the same statement and commit.
const COMPLETE_PROBE: &str = "WITH done AS (
    UPDATE mcq_bench_floor SET done = true, finished_at = now() WHERE id = $1 AND NOT done
    RETURNING id)
SELECT pg_notify('mcq_bench_floor', id::text) FROM done";
const FINISHED: &str = "SELECT finished_at FROM mcq_bench_floor WHERE id = $1";
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
    /// Of those, microseconds per task (the probe's rows counted).
    pub db_cpu_per_task_us: Option<f64>,
    /// Database CPU over wall time.
    pub db_cores: Option<f64>,
    /// Median time from a probe row's completion to the probe's read of
    /// it, in milliseconds.
    pub visible_p50_ms: Option<f64>,
    /// 99th percentile of that time.
    pub visible_p99_ms: Option<f64>,
    /// Lower end of the 95% interval of that percentile.
    pub visible_p99_low_ms: Option<f64>,
    /// Upper end of that interval.
    pub visible_p99_high_ms: Option<f64>,
    /// Probe rows measured.
    pub visible_samples: usize,
    /// The loops' backends still connected when the database's CPU was
    /// read the second time: all of them, so that none of their CPU had
    /// moved from its own nanosecond account to its parent's ticks.
    #[serde(skip)]
    pub backends_at_reading: usize,
}

/// The options of `url` under the minimal queue's name, unless it names
/// itself.
fn named(url: &str) -> anyhow::Result<PgConnectOptions> {
    let options: PgConnectOptions = url.parse().context("the database URL")?;
    Ok(if options.get_application_name().is_some() {
        options
    } else {
        options.application_name(NAME)
    })
}

/// A connection of the minimal queue's to `url`.
async fn connect(url: &str) -> anyhow::Result<PgConnection> {
    Ok(PgConnection::connect_with(&named(url)?).await?)
}

/// The probe's listener on `url`, under the minimal queue's name.
async fn listener(url: &str) -> anyhow::Result<PgListener> {
    // As `PgListener::connect` does, but with the options above: a pool
    // of the one connection, which it reopens if it drops.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_with(named(url)?)
        .await?;
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.ignore_pool_close_event(true);
    Ok(listener)
}

/// (Re)creates the minimal queue's table, empty.
pub(crate) async fn prepare(url: &str) -> anyhow::Result<()> {
    let mut conn = connect(url)
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
    if let Ok(mut conn) = connect(url).await {
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
    let mut control = connect(control_url)
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
        let mut conn = connect(worker_url)
            .await
            .with_context(|| format!("connecting minimal-queue loop {i}"))?;
        let pid: i32 = sqlx::query_scalar(BACKEND)
            .fetch_one(&mut conn)
            .await
            .context("a minimal-queue loop's backend")?;
        backends.push(pid);
        conns.push(conn);
    }
    // The probe listens before the clock starts, as mcq's control store does.
    let probes = visibility::probes_for(tasks);
    let mut listener = listener(control_url)
        .await
        .context("connecting the minimal queue's probe")?;
    listener
        .listen(CHANNEL)
        .await
        .context("listening for the minimal queue's probe")?;
    let ideal_s = tasks as f64 * hold.as_secs_f64() / loops as f64;
    let db_before = database.cpu_seconds();
    let started = Instant::now();
    let mut set = JoinSet::new();
    for conn in conns {
        set.spawn(run_loop(conn, hold));
    }
    // Spread over the batch's ideal length, as mcq's probe jobs are.
    let probe_stop = CancellationToken::new();
    // A run that fails stops its probe from writing and listening.
    let _stop_probe = probe_stop.clone().drop_guard();
    let probe = start_probe(
        control,
        listener,
        probes,
        Duration::from_secs_f64(ideal_s / (probes as f64 + 1.0)),
        probe_stop.clone(),
    );
    let limit = Duration::from_secs_f64(ideal_s * 20.0 + 120.0);
    let mut done = Completed::default();
    let mut finished = Vec::with_capacity(loops);
    while let Some(joined) =
        tokio::time::timeout(limit.saturating_sub(started.elapsed()), set.join_next())
            .await
            .context("the minimal queue did not finish in time")?
    {
        let (completed, conn) = joined.context("a minimal-queue loop panicked")??;
        done.tasks += completed.tasks;
        done.probes += completed.probes;
        finished.push(conn);
    }
    let wall = started.elapsed().as_secs_f64();
    // Read while the loops are still connected: a backend that ends moves
    // its CPU to the postmaster's account of reaped children, in 10 ms
    // ticks, and a size of a few dozen tasks could read nothing at all.
    // mcq's fleet is read the same way, before it stops.
    let db_after = database.cpu_seconds();
    // A probe row written after the last loop ended is never claimed.
    probe_stop.cancel();
    let (mut control, mut visible) = probe
        .await
        .context("the minimal queue's probe panicked")??;
    visible.sort_by(f64::total_cmp);
    let (visible_p50_ms, visible_p99_ms) = visibility::p50_p99(&visible);
    let (visible_p99_low_ms, visible_p99_high_ms) = visibility::p99_interval(&visible);
    let (backends_at_reading,): (i64,) = sqlx::query_as(CONNECTED)
        .bind(&backends)
        .fetch_one(&mut control)
        .await
        .context("counting the minimal queue's backends")?;
    for conn in finished {
        let _ = conn.close().await;
    }
    if done.tasks != tasks {
        bail!(
            "the minimal queue completed {} of {tasks} tasks",
            done.tasks
        );
    }
    if done.probes < visible.len() as u64 {
        bail!(
            "the minimal queue's probe read {} rows, but its loops completed {}",
            visible.len(),
            done.probes
        );
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
        db_cpu_per_task_us: db_cpu_s.map(|s| s * 1e6 / (tasks + done.probes) as f64),
        db_cores: db_cpu_s.map(|s| s / wall),
        visible_p50_ms,
        visible_p99_ms,
        visible_p99_low_ms,
        visible_p99_high_ms,
        visible_samples: visible.len(),
        backends_at_reading: usize::try_from(backends_at_reading).unwrap_or(0),
    })
}

/// Rows a loop completed: the batch's, and the probe's.
#[derive(Debug, Default, Clone, Copy)]
struct Completed {
    tasks: u64,
    probes: u64,
}

/// One loop: claim a row, hold it, complete it, until no row is left.
/// Returns how many rows it completed, and its connection, still open.
async fn run_loop(
    mut conn: PgConnection,
    hold: Duration,
) -> anyhow::Result<(Completed, PgConnection)> {
    let mut completed = Completed::default();
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
        let updated = if id < 0 {
            completed.probes += 1;
            sqlx::query(COMPLETE_PROBE)
                .bind(id)
                .fetch_all(&mut conn)
                .await
                .context("minimal-queue completion of a probe row")?
                .len() as u64
        } else {
            completed.tasks += 1;
            sqlx::query(COMPLETE)
                .bind(id)
                .execute(&mut conn)
                .await
                .context("minimal-queue completion")?
                .rows_affected()
        };
        if updated != 1 {
            bail!("the minimal queue's row {id} was completed twice");
        }
    }
    Ok((completed, conn))
}

/// The probe: writes `count` rows `every` apart, without waiting for one
/// before the next (up to `visibility::IN_FLIGHT` at once, as mcq's probe
/// submits its jobs), and times each from
/// its completion to its read once announced. Ends when every row written
/// has been read, or when `stop` is cancelled (the loops have ended, and a
/// row written after them is never claimed); gives back the connection it
/// wrote and read through, and the times in milliseconds.
fn start_probe(
    mut conn: PgConnection,
    mut listener: PgListener,
    count: usize,
    every: Duration,
    stop: CancellationToken,
) -> JoinHandle<anyhow::Result<(PgConnection, Vec<f64>)>> {
    tokio::spawn(async move {
        let mut seen = Vec::with_capacity(count);
        let (mut written, mut outstanding) = (0usize, 0usize);
        let mut next = tokio::time::Instant::now();
        loop {
            let more = written < count;
            if !more && outstanding == 0 {
                break;
            }
            tokio::select! {
                biased;
                note = listener.recv() => {
                    let note = note.context("the minimal queue's listener")?;
                    let Ok(id) = note.payload().parse::<i64>() else {
                        continue;
                    };
                    let finished: Option<DateTime<Utc>> = sqlx::query_scalar(FINISHED)
                        .bind(id)
                        .fetch_one(&mut conn)
                        .await
                        .context("reading a probe row of the minimal queue")?;
                    let read = Utc::now();
                    let finished =
                        finished.context("an announced probe row without its finish")?;
                    seen.push(super::millis(read - finished));
                    outstanding = outstanding.saturating_sub(1);
                }
                () = stop.cancelled() => break,
                () = tokio::time::sleep_until(next), if more && outstanding < visibility::IN_FLIGHT => {
                    let id = -i64::try_from(written + 1).context("too many probe rows")?;
                    sqlx::query(PROBE)
                        .bind(id)
                        .execute(&mut conn)
                        .await
                        .context("writing a probe row of the minimal queue")?;
                    written += 1;
                    outstanding += 1;
                    // After a wait for a free place, the schedule goes on
                    // from now rather than catch up in a burst.
                    next = (next + every).max(tokio::time::Instant::now());
                }
            }
        }
        Ok((conn, seen))
    })
}

/// PostgreSQL: the minimal queue's CPU is read while its loops are still
/// connected, and its probe's rows are claimed and heard.
#[cfg(test)]
mod on_postgres {
    use std::time::{Duration, Instant};

    use sqlx::Connection as _;
    use sqlx::postgres::{PgConnection, PgListener};
    use tokio_util::sync::CancellationToken;

    use super::{
        CHANNEL, COMPLETE_PROBE, NAME, connect, listener, prepare, remove, run, start_probe,
    };
    use crate::scale::fleet::Database;
    use crate::scale::visibility::IN_FLIGHT;

    /// Its connections, the probe's listener among them, report the
    /// minimal queue's name to the server, unless the URL gives another.
    #[tokio::test]
    async fn its_connections_carry_its_name_unless_the_url_names_one() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let name = async |conn: &mut PgConnection| -> String {
            sqlx::query_scalar("SELECT current_setting('application_name')")
                .fetch_one(conn)
                .await
                .expect("the name")
        };
        let mut conn = connect(&db.url).await.expect("connect");
        assert_eq!(name(&mut conn).await, NAME);
        let mut listener = listener(&db.url).await.expect("listener");
        listener.listen(CHANNEL).await.expect("listen");
        let listening: Vec<String> = sqlx::query_scalar(
            "SELECT application_name FROM pg_stat_activity
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
        )
        .fetch_all(&mut conn)
        .await
        .expect("the listener's backend");
        assert_eq!(listening, [NAME], "backends that ran a LISTEN");
        let sep = if db.url.contains('?') { '&' } else { '?' };
        let mut own = connect(&format!("{}{sep}application_name=mine", db.url))
            .await
            .expect("connect with a name");
        assert_eq!(name(&mut own).await, "mine");
        drop(listener);
        let _ = own.close().await;
        let _ = conn.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_probe_writes_its_rows_without_waiting_for_the_ones_before() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        prepare(&db.url).await.expect("prepare");
        let mut listener = PgListener::connect(&db.url).await.expect("listener");
        listener.listen(CHANNEL).await.expect("listen");
        let conn = PgConnection::connect(&db.url).await.expect("connect");
        let count = IN_FLIGHT + 2;
        let probe = start_probe(
            conn,
            listener,
            count,
            Duration::from_millis(1),
            CancellationToken::new(),
        );
        // No loop claims them: a probe that waited for each row before
        // the next would never write a second, and one without a bound
        // would write them all.
        let mut control = PgConnection::connect(&db.url).await.expect("connect");
        let written = async |control: &mut PgConnection| -> i64 {
            sqlx::query_scalar("SELECT count(*) FROM mcq_bench_floor WHERE id < 0")
                .fetch_one(control)
                .await
                .expect("count")
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = written(&mut control).await;
            assert!(now <= IN_FLIGHT as i64, "{now} rows written at once");
            if now == IN_FLIGHT as i64 {
                break;
            }
            assert!(Instant::now() < deadline, "{now} probe rows written");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = written(&mut control).await;
        assert_eq!(now, IN_FLIGHT as i64, "rows written at once");
        // Then every row written is completed, as a loop would, and the
        // probe writes the rest.
        let mut completed = 0;
        while completed < count {
            let now = usize::try_from(written(&mut control).await).expect("a count");
            while completed < now {
                completed += 1;
                let id = -i64::try_from(completed).expect("a row");
                let announced = sqlx::query(COMPLETE_PROBE)
                    .bind(id)
                    .fetch_all(&mut control)
                    .await
                    .expect("complete");
                assert_eq!(announced.len(), 1, "row {id}");
            }
            assert!(
                Instant::now() < deadline,
                "{completed} probe rows completed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (conn, seen) = probe.await.expect("the probe").expect("the probe's rows");
        let _ = conn.close().await;
        let _ = control.close().await;
        remove(&db.url).await;
        assert_eq!(seen.len(), count, "{seen:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_loops_are_connected_when_their_cpu_is_read_and_the_probe_is_heard() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        prepare(&db.url).await.expect("prepare");
        let database = Database::locate(&db.url).await;
        // 60 rows of 2 ms over 3 loops: at least 40 ms of work, so the
        // probe's first row, written as the loops start, is claimed.
        let row = run(&db.url, &db.url, database, 3, 60, Duration::from_millis(2))
            .await
            .expect("the minimal queue runs");
        remove(&db.url).await;
        assert_eq!(row.backends_at_reading, 3, "{row:?}");
        assert!((1..=2).contains(&row.visible_samples), "{row:?}");
        let (p50, p99) = (row.visible_p50_ms.unwrap(), row.visible_p99_ms.unwrap());
        assert!(p50 > 0.0 && p50 <= p99, "{row:?}");
        if database.postmaster.is_some() {
            let cpu = row.db_cpu_s.expect("a reading");
            assert!(cpu > 0.0, "{row:?}");
        }
    }
}
