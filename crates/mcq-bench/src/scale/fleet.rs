//! One size of the scale run: `workers` worker loops in this process, each
//! with its own store (its own connections), holding each task's slot for
//! the task time, on a batch of `workers × slots × rounds` tiny jobs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mcq_api_types::BatchView;
use mcq_kernel::{Spec, ValidSpec};
use mcq_queue::{FinishedEvents, QueueConfig, Store, Submission};
use mcq_worker::hold::{Hold, HoldSpans};
use mcq_worker::{Worker, WorkerConfig, WorkerReport};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{ScalePlan, SizeRow, cpu, idle, pickup, visibility};
use crate::stats::quantile_sorted;

/// Where the database's CPU is read: the postmaster's pid, when it runs here.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Database {
    pub(crate) postmaster: Option<u32>,
}

impl Database {
    /// Finds the postmaster of the database behind `control`.
    pub(crate) async fn locate(url: &str) -> Database {
        use sqlx::Connection;
        let dir: Option<String> = async {
            let mut conn = sqlx::PgConnection::connect(url).await.ok()?;
            let dir = sqlx::query_scalar("SHOW data_directory")
                .fetch_one(&mut conn)
                .await
                .ok();
            let _ = conn.close().await;
            dir
        }
        .await;
        Database {
            postmaster: dir.and_then(|d| cpu::postmaster_pid(&PathBuf::from(d))),
        }
    }

    /// Seconds of CPU of the postmaster and its backends so far.
    pub(crate) fn cpu_seconds(self) -> Option<f64> {
        self.postmaster.and_then(cpu::tree_seconds)
    }
}

/// Paths of each synthetic job: the kernel's share of a task is a few
/// microseconds, next to the hold.
const RUNS: u64 = 2;

/// Runs one size and measures it.
pub(crate) async fn run_size(
    plan: &ScalePlan,
    control: &Store,
    worker_url: &str,
    database: Database,
    workers: usize,
) -> anyhow::Result<SizeRow> {
    let tasks = workers as u64 * u64::from(plan.slots) * u64::from(plan.rounds);
    let tiny = tiny_spec(plan)?;
    let hold = plan.task;
    let shutdown = CancellationToken::new();
    let mut fleet = JoinSet::new();
    let mut holds = Vec::with_capacity(workers);
    // The database's CPU from here to the end of the warm-up is what
    // starting the fleet cost it.
    let start_cpu = database.cpu_seconds();
    let queue = QueueConfig {
        pool_size: plan.pool_size,
        // Every connection opened now, before the clock: a fleet's
        // connections outlive its tasks, as the minimal queue's do.
        pool_min: plan.pool_size,
        pool_mode: plan.pool_mode,
        application_name: "mcq bench worker".to_owned(),
        ..QueueConfig::default()
    };
    for i in 0..workers {
        let store = Store::connect(worker_url, queue.clone())
            .await
            .with_context(|| format!("connecting worker {i}"))?;
        let hold = Hold::new(hold);
        holds.push(hold.spans.clone());
        let config = WorkerConfig {
            concurrency: plan.slots as usize,
            threads: plan.slots as usize,
            // Pruning is the database's housekeeping, not the queue's
            // coordination; a fleet of hundreds would all prune at once.
            prune_interval: None,
            poll_interval: plan.poll,
            prefetch_window: plan.prefetch,
            hold: Some(hold),
            ..WorkerConfig::default()
        };
        let token = shutdown.clone();
        fleet.spawn(async move { Worker::new(store, config).run(token).await });
    }
    let outcome = measure(
        plan,
        control,
        database,
        (workers, start_cpu),
        (tasks, &holds, &tiny),
        &mut fleet,
    )
    .await;
    // The batch's slot gaps, before the idle phase adds its own tasks.
    let mut gaps: Vec<f64> = Vec::new();
    let origin = Instant::now();
    for spans in &holds {
        let spans: Vec<(f64, f64)> = spans
            .take()
            .into_iter()
            .map(|(start, end)| (ms_before(origin, start), ms_before(origin, end)))
            .collect();
        gaps.extend(pickup::gaps(&spans));
    }
    // Then the same fleet at rest, while it still runs.
    let at_rest = if outcome.is_ok() {
        Some(
            idle::run(
                control,
                &plan.database_url,
                database,
                workers,
                &tiny,
                // Seeds past the batch's, the probe's and the warm-up's.
                plan.seed + 4 * tasks + 1_000,
            )
            .await
            .context("sending single jobs to the idle fleet"),
        )
    } else {
        None
    };
    shutdown.cancel();
    let mut reports = WorkerReport::default();
    while let Some(joined) = fleet.join_next().await {
        let report = joined.context("a worker task panicked")??;
        reports.claimed += report.claimed;
        reports.refused += report.refused;
        reports.contended += report.contended;
        reports.failed += report.failed;
    }
    let mut row = outcome?;
    if let Some(at_rest) = at_rest {
        let at_rest = at_rest?;
        row.idle_jobs = at_rest.jobs;
        row.idle_pickup_p50_ms = Some(at_rest.pickup_p50_ms);
        row.idle_pickup_p99_ms = Some(at_rest.pickup_p99_ms);
        row.idle_db_ms_per_job = at_rest.db_ms_per_job;
    }
    if reports.failed > 0 {
        bail!(
            "{} synthetic tasks failed at {workers} workers",
            reports.failed
        );
    }
    row.refused = reports.refused;
    row.contended = reports.contended;
    gaps.sort_by(f64::total_cmp);
    row.pickup_samples = gaps.len();
    if !gaps.is_empty() {
        row.pickup_p50_ms = Some(quantile_sorted(&gaps, 0.5));
        row.pickup_p90_ms = Some(quantile_sorted(&gaps, 0.9));
        row.pickup_p99_ms = Some(quantile_sorted(&gaps, 0.99));
    }
    Ok(row)
}

/// The synthetic jobs' spec: a two-path price, seeded from the plan.
fn tiny_spec(plan: &ScalePlan) -> anyhow::Result<ValidSpec> {
    Spec {
        runs: Some(RUNS),
        seed: Some(plan.seed),
        ..Spec::default()
    }
    .validate()
    .map_err(|e| anyhow::anyhow!("the synthetic spec is invalid: {e:?}"))
}

/// `at` as negative milliseconds before `origin` (only differences matter).
fn ms_before(origin: Instant, at: Instant) -> f64 {
    -(origin.saturating_duration_since(at).as_secs_f64() * 1e3)
}

/// Waits for the fleet to register, warms it up, submits the batch, waits
/// for it to finish and reads the figures. `start_cpu` is the database's
/// CPU before the fleet connected.
async fn measure(
    plan: &ScalePlan,
    control: &Store,
    database: Database,
    (workers, start_cpu): (usize, Option<f64>),
    (tasks, holds, tiny): (u64, &[Arc<HoldSpans>], &ValidSpec),
    fleet: &mut JoinSet<anyhow::Result<WorkerReport>>,
) -> anyhow::Result<SizeRow> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(ended) = fleet.try_join_next() {
            ended.context("a worker task panicked")??;
            bail!("a worker stopped before the batch was submitted");
        }
        if control.workers().await.context("listing workers")?.len() >= workers {
            break;
        }
        if Instant::now() > deadline {
            bail!("{workers} workers did not register within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let jobs: Vec<ValidSpec> = (0..tasks).map(|i| tiny.with_seed(plan.seed + i)).collect();
    let ideal_ms =
        tasks as f64 * plan.task.as_secs_f64() * 1e3 / (workers as f64 * f64::from(plan.slots));
    let probes = visibility::probes_for(tasks);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::with_capacity(probes)));
    let mut events = control.finished_events();
    // Two rounds of the fleet before the clock, with seeds after the
    // probes': every backend has then run a claim and a completion, so the
    // batch measures what a task costs a running fleet, not what starting
    // one costs (its connections, catalogue caches and the plans of the
    // queue's functions), which is measured apart.
    let warm_tasks = workers as u64 * u64::from(plan.slots) * 2;
    let warm_seed = plan.seed + tasks + probes as u64;
    let warm = (0..warm_tasks)
        .map(|i| tiny.with_seed(warm_seed + i))
        .collect();
    let warm_batch = submit(control, format!("bench scale {workers} warm-up"), warm).await?;
    let warm_limit = Duration::from_secs_f64(
        warm_tasks as f64 * plan.task.as_secs_f64() / workers as f64 * 20.0 + 120.0,
    );
    wait_done(
        control,
        &mut events,
        warm_batch,
        (Instant::now(), warm_limit),
        fleet,
        &mut None,
    )
    .await
    .context("warming the fleet up")?;
    // The warm-up's slot spans are not the batch's: a batch's first task
    // would pair with the warm-up's last end as a gap.
    for spans in holds {
        spans.take();
    }
    let db_before = database.cpu_seconds();
    let warm_up_db_ms_per_worker =
        cpu::spent(start_cpu, db_before).map(|s| s * 1e3 / workers as f64);
    let own_before = cpu::own_ticks();
    let machine_before = cpu::machine_busy_ticks();
    let started = Instant::now();
    let batch = submit(control, format!("bench scale {workers}"), jobs).await?;
    // Spread over the batch's ideal length; the probe's jobs come after
    // the batch's in seed order, so no two jobs share a stream.
    let probe_stop = CancellationToken::new();
    // A run that fails stops its probe from sending more jobs.
    let _stop_probe = probe_stop.clone().drop_guard();
    let mut probe = Some(visibility::start(
        control.clone(),
        tiny.clone(),
        plan.seed + tasks,
        probes,
        Duration::from_secs_f64(ideal_ms / 1e3 / (probes as f64 + 1.0)),
        seen.clone(),
        probe_stop.clone(),
    ));
    let limit = Duration::from_secs_f64(ideal_ms / 1e3 * 20.0 + 120.0);
    let view = wait_done(
        control,
        &mut events,
        batch,
        (started, limit),
        fleet,
        &mut probe,
    )
    .await?;
    let wall = started.elapsed().as_secs_f64();
    let db_after = database.cpu_seconds();
    // The job in flight is the fleet's to finish; the fleet still runs.
    probe_stop.cancel();
    if let Some(probe) = probe {
        probe.await.context("the visibility probe panicked")??;
    }
    let mut visible = seen.lock().expect("the probe's samples").clone();
    visible.sort_by(f64::total_cmp);
    // The probe's jobs are tasks the database served too.
    let served = tasks + visible.len() as u64;
    let (visible_p50_ms, visible_p99_ms) = visibility::p50_p99(&visible);
    let (visible_p99_low_ms, visible_p99_high_ms) = visibility::p99_interval(&visible);
    let own_after = cpu::own_ticks();
    let machine_after = cpu::machine_busy_ticks();
    // The pools keep what they opened (idle connections close only after
    // minutes), so the count now is what the run needed.
    let connections = backend_connections(&plan.database_url).await;
    let timings = &view.timings;
    let span_ms = match (timings.first_started_at, timings.last_finished_at) {
        (Some(first), Some(last)) => super::millis(last - first),
        _ => bail!("a finished batch without timings"),
    };
    let ideal_per_s = workers as f64 * f64::from(plan.slots) / plan.task.as_secs_f64();
    let throughput = tasks as f64 / (span_ms / 1e3);
    let tick = cpu::ticks_per_second();
    let db_cpu_s = cpu::spent(db_before, db_after);
    let own_cpu_s = own_before
        .zip(own_after)
        .map(|(b, a)| a.saturating_sub(b) as f64 / tick);
    Ok(SizeRow {
        workers,
        slots: plan.slots,
        task_ms: plan.task.as_secs_f64() * 1e3,
        tasks,
        ideal_per_s,
        throughput_per_s: throughput,
        efficiency: throughput / ideal_per_s,
        span_ms,
        pickup_p50_ms: None,
        pickup_p90_ms: None,
        pickup_p99_ms: None,
        pickup_samples: 0,
        visible_p50_ms,
        visible_p99_ms,
        visible_p99_low_ms,
        visible_p99_high_ms,
        visible_samples: visible.len(),
        db_cpu_s,
        db_cpu_per_task_us: db_cpu_s.map(|s| s * 1e6 / served as f64),
        db_cores: db_cpu_s.map(|s| s / wall),
        bench_cores: own_cpu_s.map(|s| s / wall),
        // Only with the database's CPU known: else its share would count
        // as other processes'.
        other_cores: machine_before
            .zip(machine_after)
            .zip(db_cpu_s.zip(own_cpu_s))
            .map(|((b, a), (db, own))| {
                (a.saturating_sub(b) as f64 / tick - db - own).max(0.0) / wall
            }),
        db_connections: connections,
        warm_up_db_ms_per_worker,
        idle_jobs: 0,
        idle_pickup_p50_ms: None,
        idle_pickup_p99_ms: None,
        idle_db_ms_per_job: None,
        refused: 0,
        contended: 0,
        floor_per_s: None,
        floor_efficiency: None,
        floor_db_cpu_per_task_us: None,
        floor_db_cores: None,
        floor_visible_p50_ms: None,
        floor_visible_p99_ms: None,
        floor_visible_p99_low_ms: None,
        floor_visible_p99_high_ms: None,
        floor_visible_samples: 0,
        db_cpu_ratio: None,
    })
}

/// Submits `jobs` as one batch labelled `label`; returns its id.
async fn submit(control: &Store, label: String, jobs: Vec<ValidSpec>) -> anyhow::Result<Uuid> {
    let submitted = control
        .submit(Submission {
            tenant: mcq_queue::DEFAULT_TENANT,
            priority: 0,
            as_batch: true,
            grid: None,
            label: Some(label),
            jobs,
            idempotency: None,
        })
        .await
        .context("submitting the synthetic batch")?;
    submitted.batch_id.context("a batch has an id")
}

/// Waits until every job of `batch` finished, re-reading it when the
/// announcements say it may be done, within `limit` of `started`; a
/// worker or the visibility probe that ends first ends the wait.
async fn wait_done(
    control: &Store,
    events: &mut FinishedEvents,
    batch: Uuid,
    (started, limit): (Instant, Duration),
    fleet: &mut JoinSet<anyhow::Result<WorkerReport>>,
    probe: &mut Option<JoinHandle<anyhow::Result<()>>>,
) -> anyhow::Result<BatchView> {
    loop {
        let view = control
            .batch(batch, mcq_queue::Scope::All)
            .await
            .context("reading the batch")?
            .context("the batch vanished")?;
        if view.done {
            return Ok(view);
        }
        if started.elapsed() > limit {
            bail!(
                "the fleet did not finish {} tasks within {limit:?}",
                view.total
            );
        }
        if let Some(ended) = fleet.try_join_next() {
            ended.context("a worker task panicked")??;
            bail!("a worker stopped during the run");
        }
        if let Some(done) = probe.take_if(|p| p.is_finished()) {
            // A probe that failed says why.
            done.await.context("the visibility probe panicked")??;
        }
        let left = view.total - view.counts.succeeded;
        events.wait_for(batch, left, Duration::from_secs(1)).await;
    }
}

/// Client connections the database has open now (this one included).
async fn backend_connections(url: &str) -> u64 {
    use sqlx::Connection;
    let Ok(mut conn) = sqlx::PgConnection::connect(url).await else {
        return 0;
    };
    let count: Option<i64> = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'",
    )
    .fetch_one(&mut conn)
    .await
    .ok();
    let _ = conn.close().await;
    count.map_or(0, |c| u64::try_from(c).unwrap_or(0))
}
