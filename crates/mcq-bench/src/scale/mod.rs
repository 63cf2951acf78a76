//! `mcq bench scale`: how far one coordinator (one PostgreSQL) carries a
//! fleet, simulated on one machine.
//!
//! Each size starts that many real worker loops in this process, each
//! with its own store and so its own connections, whose tasks hold their
//! slot for the task time asleep ([`mcq_worker::hold`]) and then price a
//! two-path spec: the queue sees the claims, leases, heartbeats and
//! completions of a fleet of that size while the machine's CPU stays free
//! for the database. The method is in `docs/bench.md`.

mod cpu;
mod fleet;
mod floor;
mod idle;
mod output;
mod pickup;
mod single;
mod visibility;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use mcq_queue::{PoolMode, QueueConfig, Store};
use serde::Serialize;

pub use floor::FloorRow;
pub use output::{SCALE_CHART, SCALE_CPU_CHART, SCALE_CSV, SCALE_JSON};

use crate::environment::{Environment, backend_version};
use crate::link::{LinkProfile, relay_url};

/// Efficiency from which a size counts as keeping up with its ideal.
pub const KEEPS_UP: f64 = 0.9;

/// What to run.
#[derive(Debug, Clone)]
pub struct ScalePlan {
    /// The PostgreSQL database of the queue (migrated by the run).
    pub database_url: String,
    /// Fleet sizes, in the order run.
    pub sizes: Vec<usize>,
    /// Compute slots of each worker.
    pub slots: u32,
    /// How long each task holds its slot.
    pub task: Duration,
    /// Tasks per slot at each size: the batch is `workers × slots × rounds`.
    pub rounds: u32,
    /// Connections of each worker's pool, its `LISTEN` connection
    /// included (at least 2).
    pub pool_size: u32,
    /// Emulated link between the workers and the database.
    pub link_db: LinkProfile,
    /// Seed of the specs and of the link's jitter.
    pub seed: u64,
    /// Where the workers connect, when not to `database_url` itself: a
    /// pooler in front of the same database (PgBouncer), so that the fleet
    /// may hold more connections than the server allows.
    pub fleet_url: Option<String>,
    /// How the workers' connections reach PostgreSQL.
    pub pool_mode: PoolMode,
    /// The workers' longest idle wait for work (what finds new work when
    /// nothing is announced, as through a transaction-mode pool).
    pub poll: Duration,
    /// Each worker's prefetch window, as `mcq worker --prefetch-ms`.
    pub prefetch: Duration,
    /// Whether each size also runs the minimal `SKIP LOCKED` queue
    /// (`floor.rs`) beside mcq's fleet, for the CPU per task to read
    /// mcq's against.
    pub floor: bool,
}

/// The figures of one fleet size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeRow {
    /// Workers (each a loop with its own connections).
    pub workers: usize,
    /// Slots per worker.
    pub slots: u32,
    /// Hold of each task, in milliseconds.
    pub task_ms: f64,
    /// Tasks in the batch.
    pub tasks: u64,
    /// workers × slots / task time, in tasks per second.
    pub ideal_per_s: f64,
    /// Tasks over the time from the first claim to the last result written.
    pub throughput_per_s: f64,
    /// Throughput over ideal.
    pub efficiency: f64,
    /// From the first claim to the last result written, in milliseconds.
    pub span_ms: f64,
    /// Median gap a free slot waited for its next task, in milliseconds.
    pub pickup_p50_ms: Option<f64>,
    /// 90th percentile of that gap.
    pub pickup_p90_ms: Option<f64>,
    /// 99th percentile of that gap.
    pub pickup_p99_ms: Option<f64>,
    /// Gaps measured: one per task of the batch (the probe's included)
    /// after each slot's first.
    pub pickup_samples: usize,
    /// Median time from a probe job's recording to a waiting reader's
    /// read of it, in milliseconds (`visibility.rs`).
    pub visible_p50_ms: Option<f64>,
    /// 99th percentile of that time.
    pub visible_p99_ms: Option<f64>,
    /// Lower end of the 95% interval of that percentile (order
    /// statistics, distribution-free); none without probes.
    pub visible_p99_low_ms: Option<f64>,
    /// Upper end of that interval; none under 368 probes, where the true
    /// 99th percentile may lie above every one of them.
    pub visible_p99_high_ms: Option<f64>,
    /// Probe jobs measured.
    pub visible_samples: usize,
    /// CPU seconds of the database's processes during the batch.
    pub db_cpu_s: Option<f64>,
    /// Of those, microseconds per task (the probe's jobs counted).
    pub db_cpu_per_task_us: Option<f64>,
    /// Database CPU over wall time: the cores it kept busy.
    pub db_cores: Option<f64>,
    /// The same for this process (the simulated fleet and the benchmark).
    pub bench_cores: Option<f64>,
    /// The same for every other process of the machine (its busy CPU in
    /// `/proc/stat` less the database's and this process's): a pooler in
    /// front of the database, or other work sharing the machine.
    pub other_cores: Option<f64>,
    /// Client connections open at the database mid-run.
    pub db_connections: u64,
    /// Database CPU, per worker, of starting the fleet before the clock:
    /// its connections and two rounds of tasks (catalogue caches and the
    /// plans of the queue's functions, per connection), in milliseconds.
    pub warm_up_db_ms_per_worker: Option<f64>,
    /// Single jobs sent, one at a time, to the fleet once every worker had
    /// gone idle (`idle.rs`).
    pub idle_jobs: usize,
    /// Median time such a job waited from its submission to its claim, in
    /// milliseconds.
    pub idle_pickup_p50_ms: Option<f64>,
    /// 99th percentile of that time.
    pub idle_pickup_p99_ms: Option<f64>,
    /// Database CPU per such job, the idle fleet's polling over the same
    /// time included, in milliseconds.
    pub idle_db_ms_per_job: Option<f64>,
    /// Completions refused for a lost lease (a fleet too slow to renew).
    pub refused: u64,
    /// Claims that came back short because the work they passed over was
    /// held by other claims (a staged row), each tried again shortly.
    pub contended: u64,
    /// The minimal queue's throughput at the same size, tasks per second.
    pub floor_per_s: Option<f64>,
    /// The minimal queue's throughput over the same ideal.
    pub floor_efficiency: Option<f64>,
    /// The minimal queue's database CPU per task, in microseconds.
    pub floor_db_cpu_per_task_us: Option<f64>,
    /// The cores the database kept busy for the minimal queue.
    pub floor_db_cores: Option<f64>,
    /// Median time from a minimal-queue probe row's completion to a
    /// waiting reader's read of it, in milliseconds (`floor.rs`).
    pub floor_visible_p50_ms: Option<f64>,
    /// 99th percentile of that time.
    pub floor_visible_p99_ms: Option<f64>,
    /// Lower end of the 95% interval of that percentile.
    pub floor_visible_p99_low_ms: Option<f64>,
    /// Upper end of that interval.
    pub floor_visible_p99_high_ms: Option<f64>,
    /// Minimal-queue probe rows measured.
    pub floor_visible_samples: usize,
    /// mcq's database CPU per task over the minimal queue's.
    pub db_cpu_ratio: Option<f64>,
}

impl SizeRow {
    /// Adds the minimal queue's figures of the same size.
    fn with_floor(mut self, floor: &floor::FloorRow) -> SizeRow {
        self.floor_per_s = Some(floor.throughput_per_s);
        self.floor_efficiency = Some(floor.efficiency);
        self.floor_db_cpu_per_task_us = floor.db_cpu_per_task_us;
        self.floor_db_cores = floor.db_cores;
        self.floor_visible_p50_ms = floor.visible_p50_ms;
        self.floor_visible_p99_ms = floor.visible_p99_ms;
        self.floor_visible_p99_low_ms = floor.visible_p99_low_ms;
        self.floor_visible_p99_high_ms = floor.visible_p99_high_ms;
        self.floor_visible_samples = floor.visible_samples;
        self.db_cpu_ratio = self
            .db_cpu_per_task_us
            .zip(floor.db_cpu_per_task_us)
            .filter(|(_, f)| *f > 0.0)
            .map(|(m, f)| m / f);
        self
    }
}

/// Where the coordinator stops keeping up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Saturation {
    /// Largest size up to which every size kept within 90% of its ideal.
    pub keeps_up_to: Option<usize>,
    /// First size below 90% of its ideal.
    pub first_below: Option<usize>,
    /// Highest throughput measured, tasks per second, and its size.
    pub peak_per_s: f64,
    /// The size of the peak.
    pub peak_at: usize,
    /// What the figures at the first size below say about why.
    pub explanation: String,
}

/// The whole run, as written to `scale.json`.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleSummary {
    /// When it ended.
    pub finished_at: chrono::DateTime<chrono::Utc>,
    /// Machine, build, backend, links, load.
    pub environment: Environment,
    /// Slots per worker, task time, rounds, pool size.
    pub settings: ScaleSettings,
    /// One row per size.
    pub sizes: Vec<SizeRow>,
    /// Where it stops keeping up.
    pub saturation: Saturation,
    /// Warnings (a busy machine).
    pub warnings: Vec<String>,
    /// The files written, read back from the folder.
    pub files: Vec<String>,
}

/// The settings echoed into the summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleSettings {
    /// Fleet sizes.
    pub sizes: Vec<usize>,
    /// Slots per worker.
    pub slots: u32,
    /// Task hold in milliseconds.
    pub task_ms: f64,
    /// Tasks per slot per size.
    pub rounds: u32,
    /// Pool connections per worker.
    pub pool_size: u32,
    /// Seed.
    pub seed: u64,
    /// The workers' pool mode: `session` or `transaction`.
    pub pool_mode: String,
    /// Whether the workers went through a pooler (`fleet_url`) or
    /// connected to the database directly.
    pub through_pooler: bool,
    /// The workers' poll, in milliseconds.
    pub poll_ms: f64,
    /// The workers' prefetch window, in milliseconds.
    pub prefetch_ms: f64,
    /// Whether the minimal queue ran beside mcq at every size.
    pub floor: bool,
}

/// What a finished run produced.
#[derive(Debug, Clone)]
pub struct ScaleReport {
    /// The summary (also in `scale.json`).
    pub summary: ScaleSummary,
    /// The terminal table.
    pub table: String,
    /// Where the files are.
    pub out_dir: PathBuf,
}

/// Runs every size of `plan`, telling `observer` each row as it is
/// measured, and writes the outputs into `out_dir`.
pub fn scale(
    plan: &ScalePlan,
    out_dir: PathBuf,
    observer: &(dyn Fn(&SizeRow) + Sync),
) -> anyhow::Result<ScaleReport> {
    if !plan.database_url.starts_with("postgres") {
        bail!(
            "needs PostgreSQL (a fleet of worker processes cannot share the embedded \
             SQLite store); give --database-url postgres://…"
        );
    }
    if plan.pool_size < 2 {
        bail!("--db-pool-size must be at least 2: one connection is held by LISTEN");
    }
    if plan.sizes.is_empty() || plan.sizes.contains(&0) {
        bail!("--workers needs sizes of at least 1");
    }
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    output::remove_stale(&out_dir)?;
    let mut environment = Environment::current(
        "PostgreSQL".to_owned(),
        backend_version(Some(&plan.database_url)),
        plan.link_db.to_string(),
        "none (no API: the benchmark submits to the store)".to_owned(),
    );
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let rows = runtime.block_on(run_sizes(plan, observer))?;
    drop(runtime);
    environment.load_after = crate::environment::load_average();
    let busiest = [environment.load_before, environment.load_after]
        .into_iter()
        .flatten()
        .map(|l| l[0])
        .fold(0.0, f64::max);
    let saturation = saturation(&rows, environment.cores, busiest);
    // The machine's CPU, where it was read, judges; else the load average.
    let measured = rows.iter().any(|r| r.other_cores.is_some());
    let warnings: Vec<String> = if measured {
        busy_warning(&rows, environment.cores)
    } else {
        environment.busy_warning()
    }
    .into_iter()
    .collect();
    let mut summary = ScaleSummary {
        finished_at: chrono::Utc::now(),
        environment,
        settings: ScaleSettings {
            sizes: plan.sizes.clone(),
            slots: plan.slots,
            task_ms: plan.task.as_secs_f64() * 1e3,
            rounds: plan.rounds,
            pool_size: plan.pool_size,
            seed: plan.seed,
            pool_mode: match plan.pool_mode {
                PoolMode::Session => "session".to_owned(),
                PoolMode::Transaction => "transaction".to_owned(),
            },
            through_pooler: plan.fleet_url.is_some(),
            poll_ms: plan.poll.as_secs_f64() * 1e3,
            prefetch_ms: plan.prefetch.as_secs_f64() * 1e3,
            floor: plan.floor,
        },
        sizes: rows,
        saturation,
        warnings,
        files: Vec::new(),
    };
    output::write(&mut summary, &out_dir)?;
    Ok(ScaleReport {
        table: output::table(&summary),
        summary,
        out_dir,
    })
}

async fn run_sizes(
    plan: &ScalePlan,
    observer: &(dyn Fn(&SizeRow) + Sync),
) -> anyhow::Result<Vec<SizeRow>> {
    let control = Store::connect(&plan.database_url, control_config())
        .await
        .context("connecting to the database")?;
    control.migrate().await.context("applying migrations")?;
    // As a server does before its first request: the probe's first reads
    // then measure a result's visibility, not a new backend's first read.
    control
        .warm_reads()
        .await
        .context("preparing the probe's reads")?;
    // A pooler multiplexes the fleet's connections onto its own: the
    // server's limit is the pooler's concern then.
    if plan.fleet_url.is_none() {
        check_connections(plan).await?;
    }
    let database = fleet::Database::locate(&plan.database_url).await;
    let fleet_url = plan.fleet_url.as_ref().unwrap_or(&plan.database_url);
    // The relay lives as long as the run; without a link the workers
    // connect directly.
    let (_relay, worker_url) = if plan.link_db.is_loopback() {
        (None, fleet_url.clone())
    } else {
        let (relay, url) = relay_url(fleet_url, &plan.link_db, plan.seed)?;
        (Some(relay), url)
    };
    if plan.floor {
        floor::prepare(&plan.database_url).await?;
    }
    let mut rows = Vec::with_capacity(plan.sizes.len());
    for (i, &workers) in plan.sizes.iter().enumerate() {
        let loops = workers * plan.slots as usize;
        let tasks = loops as u64 * u64::from(plan.rounds);
        // The two queues take turns at going first, so that neither
        // always meets the database just after the other's load.
        let floor_first = plan.floor && i % 2 == 1;
        let run_floor = async || {
            floor::run(
                &plan.database_url,
                &worker_url,
                database,
                loops,
                tasks,
                plan.task,
            )
            .await
            .with_context(|| format!("measuring the minimal queue at {workers} workers"))
        };
        let early = if floor_first {
            Some(run_floor().await?)
        } else {
            None
        };
        let mut row = fleet::run_size(plan, &control, &worker_url, database, workers)
            .await
            .with_context(|| format!("measuring {workers} workers"))?;
        let floor = match early {
            Some(floor) => Some(floor),
            None if plan.floor => Some(run_floor().await?),
            None => None,
        };
        if let Some(floor) = &floor {
            row = row.with_floor(floor);
        }
        observer(&row);
        rows.push(row);
    }
    if plan.floor {
        floor::remove(&plan.database_url).await;
    }
    Ok(rows)
}

/// A time difference in milliseconds, to the microsecond.
pub(crate) fn millis(delta: chrono::TimeDelta) -> f64 {
    delta.num_microseconds().unwrap_or(0) as f64 / 1e3
}

/// Connections of the benchmark's own store: one per probe job waited on
/// at once (each reads its job when it hears of it), its `LISTEN`, the
/// batch's waiter and its submissions.
const CONTROL_POOL: u32 = visibility::IN_FLIGHT as u32 + 4;

/// The benchmark's own store plays a server's part for the probe: like
/// `mcq serve`, which keeps a few connections open, it opens all of its
/// connections at once, so that no probe's read waits for a connection
/// to be opened in the middle of a batch.
fn control_config() -> QueueConfig {
    QueueConfig {
        pool_size: CONTROL_POOL,
        pool_min: CONTROL_POOL,
        application_name: "mcq bench".to_owned(),
        ..QueueConfig::default()
    }
}

/// Refuses a plan whose largest fleet would need more connections than
/// the server has left, before any worker starts.
async fn check_connections(plan: &ScalePlan) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&plan.database_url)
        .await
        .context("connecting to the database")?;
    let (max, reserved): (i32, i32) = sqlx::query_as(
        "SELECT current_setting('max_connections')::int, \
                current_setting('superuser_reserved_connections')::int",
    )
    .fetch_one(&mut conn)
    .await?;
    let open: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'",
    )
    .fetch_one(&mut conn)
    .await?;
    let _ = conn.close().await;
    let largest = plan.sizes.iter().copied().max().unwrap_or(0) as u64;
    // The benchmark's own store and its connection count come on top.
    let need = largest * u64::from(plan.pool_size) + u64::from(CONTROL_POOL) + 1;
    let left = u64::try_from(i64::from(max - reserved) - open).unwrap_or(0);
    if need > left {
        bail!(
            "{largest} workers need up to {need} connections ({} each, LISTEN included), but \
             the server has {left} left (max_connections {max}, {reserved} reserved, {open} \
             open): raise max_connections (ALTER SYSTEM SET max_connections = …, then restart \
             the server), lower --workers or --db-pool-size, or put the fleet behind PgBouncer \
             in transaction mode (--fleet-url, --db-pool-mode transaction)",
            plan.pool_size
        );
    }
    Ok(())
}

/// A warning when other processes took more than [`OTHER_SHARE`] of the
/// cores during some size's batch; `None` when they did not or the
/// machine's CPU was not read (the load average decides then). The load
/// average is no judge where it was: hundreds of the run's own database
/// backends raise it.
fn busy_warning(rows: &[SizeRow], cores: usize) -> Option<String> {
    let measured: Vec<(usize, f64)> = rows
        .iter()
        .filter_map(|r| r.other_cores.map(|o| (r.workers, o)))
        .collect();
    if measured.is_empty() {
        return None;
    }
    let (workers, most) = measured.into_iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    (most > OTHER_SHARE * cores as f64).then(|| {
        format!(
            "processes other than the database and this benchmark kept up to {most:.2} of the \
             {cores} cores busy during the batches (at {workers} workers; a pooler in front of \
             the database counts here): the figures include that contention"
        )
    })
}

/// Share of the cores that other processes may take before a size's
/// figures count as measuring contention.
const OTHER_SHARE: f64 = 0.25;

/// Where the rows stop keeping within [`KEEPS_UP`] of their ideal, and
/// why, judged from the CPU of the database, of this process and of every
/// other process at that size (or, where the machine's CPU cannot be
/// read, its 1-minute load, `load`).
pub(crate) fn saturation(rows: &[SizeRow], cores: usize, load: f64) -> Saturation {
    let mut sorted: Vec<&SizeRow> = rows.iter().collect();
    sorted.sort_by_key(|r| r.workers);
    let first_below = sorted.iter().find(|r| r.efficiency < KEEPS_UP).copied();
    let keeps_up_to = sorted
        .iter()
        .take_while(|r| r.efficiency >= KEEPS_UP)
        .last()
        .map(|r| r.workers);
    let peak = sorted
        .iter()
        .max_by(|a, b| a.throughput_per_s.total_cmp(&b.throughput_per_s));
    let explanation = match first_below {
        None => format!(
            "every size kept within {:.0}% of its ideal",
            KEEPS_UP * 100.0
        ),
        Some(row) => explain(row, cores, load),
    };
    Saturation {
        keeps_up_to,
        first_below: first_below.map(|r| r.workers),
        peak_per_s: peak.map_or(0.0, |r| r.throughput_per_s),
        peak_at: peak.map_or(0, |r| r.workers),
        explanation,
    }
}

fn explain(row: &SizeRow, cores: usize, load: f64) -> String {
    let mut text = format!(
        "at {} workers: {:.0} tasks/s, {:.0}% of the ideal {:.0}/s",
        row.workers,
        row.throughput_per_s,
        row.efficiency * 100.0,
        row.ideal_per_s
    );
    if let (Some(db), Some(bench)) = (row.db_cores, row.bench_cores) {
        text.push_str(&format!(
            "; PostgreSQL kept {db:.2} cores busy ({:.0} µs per task) and the simulated \
             fleet {bench:.2}, of the machine's {cores}",
            row.db_cpu_per_task_us.unwrap_or(f64::NAN)
        ));
        if let Some(other) = row.other_cores {
            let machine = cores as f64;
            if other > OTHER_SHARE * machine {
                text.push_str(&format!(
                    ", other processes {other:.2} (a pooler in front of the database counts \
                     here)"
                ));
            }
            if db + bench + other >= 0.8 * machine {
                text.push_str(
                    ": the CPU is spent, so the coordinator's limit here is the machine's, \
                     shared by the database, the fleet and whatever else ran",
                );
            } else {
                text.push_str(
                    ": the CPU is not spent, so the limit is waiting (round trips, commits, \
                     locks)",
                );
            }
        } else if load > cores as f64 {
            text.push_str(&format!(
                ": the machine ran other work too (load {load:.1} on {cores} cores), so these \
                 figures measure that contention, not the coordinator"
            ));
        } else if db + bench >= 0.8 * cores as f64 {
            text.push_str(
                ": the CPU is spent, so the coordinator's limit here is the machine's, \
                 shared by the database and the fleet",
            );
        } else {
            text.push_str(
                ": the CPU is not spent, so the limit is waiting (round trips, commits, locks)",
            );
        }
    }
    if let Some(p50) = row.pickup_p50_ms {
        text.push_str(&format!(
            "; a free slot waited {p50:.1} ms (median) for its next task"
        ));
    }
    text
}

#[cfg(test)]
mod tests;
