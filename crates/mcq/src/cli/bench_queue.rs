//! `mcq bench queue`: the queue's numbers against a real database, with
//! real `mcq worker` processes — enqueue rate, burn-down, pickup latency
//! and recovery after SIGKILL.
//!
//! Timings of work done in the database come from the database's own
//! timestamps (submitted, first claimed, last finished), so the benchmark's
//! polling does not blur them.

use mcq_queue::Scope;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use mcq_api_types::BatchView;
use mcq_kernel::{CHUNK_PATHS, Spec, ValidSpec};
use mcq_queue::{FinishedEvents, QueueConfig, Store, Submission};
use uuid::Uuid;

use super::count::count;
use super::exit::Outcome;
use super::logs::LogFlags;
use super::redact::redact;

/// Flags of `mcq bench queue`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Database to measure (e.g. from `deploy/pg-local.sh start`).
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
    /// Jobs in the enqueue and burn-down batch.
    #[arg(long, default_value_t = 100_000, value_parser = count::<u64>(1..=1_000_000))]
    jobs: u64,
    /// Paths per burn-down job (tiny: the queue, not the kernel, is measured).
    #[arg(long, default_value_t = 2, value_parser = count::<u64>(2..=1_000_000))]
    runs: u64,
    /// `mcq worker` processes for the burn-down and latency runs.
    #[arg(long, default_value_t = 2, value_parser = count::<u32>(1..=64))]
    workers: u32,
    /// Single jobs submitted one at a time to an idle fleet.
    #[arg(long, default_value_t = 200, value_parser = count::<u32>(1..=100_000))]
    latency_samples: u32,
    /// Tenants sharing the enqueue and burn-down batch: each submits an
    /// equal part as a batch of its own, so the burn-down goes through the
    /// fair share of claims between them.
    #[arg(long, default_value_t = 1, value_parser = count::<u32>(1..=1000))]
    tenants: u32,
    /// Skip the SIGKILL recovery measurement (it waits out a lease).
    #[arg(long)]
    no_recovery: bool,
    /// Keep the workers' logs in this directory. Without it they go to a
    /// temporary directory that is removed when the benchmark succeeds and
    /// kept (and named) when it fails.
    #[arg(long, value_name = "DIR")]
    logs: Option<PathBuf>,
    #[command(flatten)]
    log: LogFlags,
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    args.log.init("warn");
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(bench(args))?;
    Ok(Outcome::Done)
}

async fn bench(args: Args) -> anyhow::Result<()> {
    let store = Store::connect(&args.database_url, QueueConfig::default())
        .await
        .with_context(|| format!("connecting to {}", redact(&args.database_url)))?;
    store.migrate().await.context("applying migrations")?;
    let keep_logs = args.logs.is_some();
    let logs = args.logs.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("mcq-bench-queue-{}", std::process::id()))
    });
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let outcome = measure(&args, &store, &logs).await;
    match &outcome {
        Ok(()) if !keep_logs => {
            // Nothing to look at: leave no directory behind per run.
            let _ = std::fs::remove_dir_all(&logs);
        }
        Ok(()) => {}
        Err(_) => eprintln!("worker logs kept in {}", logs.display()),
    }
    outcome
}

/// The measurements, in order, with worker logs in `logs`.
async fn measure(args: &Args, store: &Store, logs: &std::path::Path) -> anyhow::Result<()> {
    println!(
        "mcq bench queue on {} ({} cores), worker logs in {}{}",
        redact(&args.database_url),
        cores(),
        logs.display(),
        if args.logs.is_some() {
            ""
        } else {
            " (removed when the benchmark succeeds; keep them with --logs DIR)"
        }
    );

    // Enqueue: one bulk submission, timed around the call.
    // Tiny jobs: the queue's cost dominates, not the kernel's.
    let tiny = job(args.runs, 0)?;
    let tenants = bench_tenants(store, args.tenants).await?;
    let share = args.jobs.div_ceil(u64::from(args.tenants));
    let start = Instant::now();
    let mut batches = Vec::with_capacity(tenants.len());
    for (i, tenant) in tenants.iter().enumerate() {
        let first = i as u64 * share;
        let jobs: Vec<ValidSpec> = (first..(first + share).min(args.jobs))
            .map(|seed| tiny.with_seed(seed))
            .collect();
        if jobs.is_empty() {
            continue;
        }
        let submitted = store
            .submit(Submission {
                tenant: *tenant,
                priority: 0,
                as_batch: true,
                grid: None,
                label: Some("bench queue".into()),
                jobs,
                idempotency: None,
            })
            .await
            .context("enqueueing the batch")?;
        batches.push(
            submitted
                .batch_id
                .context("a batch submission returns a batch id")?,
        );
    }
    let enqueue = start.elapsed();
    println!(
        "enqueue:    {} jobs in {:.1} ms = {:.0} jobs/s ({} Store::submit call{}, {} tenant{})",
        args.jobs,
        ms(enqueue),
        args.jobs as f64 / enqueue.as_secs_f64(),
        batches.len(),
        if batches.len() == 1 { "" } else { "s" },
        tenants.len(),
        if tenants.len() == 1 { "" } else { "s" },
    );

    // Burn-down: start the fleet on the full queue; the database's first
    // claim and last finish bound the work.
    // Subscribed before the fleet starts, so no announcement is missed.
    let mut events: Vec<FinishedEvents> = batches.iter().map(|_| store.finished_events()).collect();
    let mut fleet = Fleet::default();
    let started = Instant::now();
    for i in 0..args.workers {
        fleet.spawn(&args.database_url, &format!("worker{i}"), &[], logs)?;
    }
    // Read rarely: the batch view aggregates every job of the batch, and
    // polling it every second took a tenth of a core from the fleet being
    // measured. The timing comes from database timestamps, not this loop.
    let mut views = Vec::with_capacity(batches.len());
    for (batch, events) in batches.iter().zip(events.drain(..)) {
        views.push(
            wait_done(
                store,
                events,
                *batch,
                Duration::from_secs(600),
                Duration::from_secs(1),
            )
            .await?,
        );
    }
    let wall = started.elapsed();
    let first = views
        .iter()
        .filter_map(|v| v.timings.first_started_at)
        .min();
    let last = views
        .iter()
        .filter_map(|v| v.timings.last_finished_at)
        .max();
    let (Some(first), Some(last)) = (first, last) else {
        bail!("the batches finished without timings: {views:?}");
    };
    let succeeded: u64 = views.iter().map(|v| v.counts.succeeded).sum();
    let failed: u64 = views.iter().map(|v| v.counts.failed).sum();
    let span_ms = (last - first).num_microseconds().unwrap_or(0) as f64 / 1e3;
    println!(
        "burn-down:  {} jobs with {} workers: first claim → last finish {:.0} ms = {:.0} jobs/s \
         (wall from spawning workers {:.0} ms = {:.0} jobs/s); succeeded {}, failed {}",
        args.jobs,
        args.workers,
        span_ms,
        args.jobs as f64 / (span_ms / 1e3),
        ms(wall),
        args.jobs as f64 / wall.as_secs_f64(),
        succeeded,
        failed
    );

    // Pickup latency: one job at a time to the now idle fleet.
    let mut waits = Vec::with_capacity(args.latency_samples as usize);
    for i in 0..args.latency_samples {
        // Let the fleet go back to waiting for a notification.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let job = store
            .submit(Submission {
                tenant: mcq_queue::DEFAULT_TENANT,
                priority: 0,
                as_batch: false,
                grid: None,
                label: None,
                jobs: vec![job(2, u64::from(i))?],
                idempotency: None,
            })
            .await
            .context("submitting a latency probe")?;
        let id = job.job_ids[0];
        waits.push(wait_started(store, id).await?);
    }
    waits.sort_by(f64::total_cmp);
    println!(
        "pickup:     {} single jobs to {} idle workers, insert → claimed: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        waits.len(),
        args.workers,
        quantile(&waits, 0.50),
        quantile(&waits, 0.90),
        quantile(&waits, 0.99),
        waits.last().copied().unwrap_or(f64::NAN)
    );
    fleet.stop_all()?;

    if !args.no_recovery {
        recovery(store, &args.database_url, logs).await?;
    }
    Ok(())
}

/// The tenants of the burn-down: the default one alone, or `n` tenants
/// named `bench-1` … (created if new, quotas unchanged).
async fn bench_tenants(store: &Store, n: u32) -> anyhow::Result<Vec<mcq_queue::TenantId>> {
    if n == 1 {
        return Ok(vec![mcq_queue::DEFAULT_TENANT]);
    }
    let existing = store.tenants().await?;
    let mut ids = Vec::with_capacity(n as usize);
    for i in 1..=n {
        let name = format!("bench-{i}");
        let limits = existing
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.limits)
            .unwrap_or_default();
        ids.push(store.set_tenant_limits(&name, limits).await?.id);
    }
    Ok(ids)
}

/// SIGKILL a worker holding two long tasks while another idles; time until
/// both tasks are claimed again (lease expiry plus pickup).
/// Chunks of each task of the recovery batch (one task per job).
const LONG_TASK_CHUNKS: u64 = 20_000;

async fn recovery(store: &Store, url: &str, logs: &std::path::Path) -> anyhow::Result<()> {
    let lease = QueueConfig::default().lease;
    let mut fleet = Fleet::default();
    fleet.spawn(url, "victim", &["--concurrency", "2"], logs)?;
    // Long tasks (20,000 chunks, seconds each on a release build), so they
    // are still running when the victim is killed.
    let long = job(LONG_TASK_CHUNKS * CHUNK_PATHS, 1)?;
    let submitted = QueueConfig {
        chunks_per_task: LONG_TASK_CHUNKS,
        ..QueueConfig::default()
    };
    let submitter = Store::connect(url, submitted)
        .await
        .context("connecting the submitter")?;
    let batch = submitter
        .submit(Submission {
            tenant: mcq_queue::DEFAULT_TENANT,
            priority: 0,
            as_batch: true,
            grid: None,
            label: Some("bench recovery".into()),
            jobs: vec![long.clone(), long.with_seed(2)],
            idempotency: None,
        })
        .await
        .context("submitting the recovery batch")?;
    let batch_id = batch.batch_id.context("a batch id")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while store
        .batch(batch_id, Scope::All)
        .await?
        .is_none_or(|v| v.counts.running < 2)
    {
        if Instant::now() > deadline {
            bail!("the victim never held both tasks");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    fleet.spawn(url, "rescuer", &["--concurrency", "2"], logs)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    fleet.kill_first()?;
    let killed = Instant::now();
    // Attempts go from 1 to 2 when the rescuer claims a task again.
    loop {
        let mut rescued = 0;
        for id in &batch.job_ids {
            if store
                .job(*id, Scope::All)
                .await?
                .is_some_and(|j| j.attempts >= 2)
            {
                rescued += 1;
            }
        }
        if rescued == batch.job_ids.len() {
            break;
        }
        if killed.elapsed() > lease + Duration::from_secs(60) {
            bail!("tasks were not rescued within the lease + 60 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "recovery:   SIGKILL of a worker holding 2 tasks → both claimed again after {:.0} ms (lease {:.1} s, default settings)",
        ms(killed.elapsed()),
        lease.as_secs_f64()
    );
    store
        .cancel_batch(batch_id, Scope::All)
        .await
        .context("cancelling the recovery batch")?;
    fleet.stop_all()
}

/// Worker processes of this benchmark; killed if still running when dropped.
/// Each reads its standard input from a pipe this process holds
/// (`--stop-on-stdin-close`), so that a benchmark stopped in any way,
/// SIGKILL included, leaves no worker behind to join a later run.
#[derive(Debug, Default)]
struct Fleet(Vec<Child>);

impl Fleet {
    fn spawn(
        &mut self,
        url: &str,
        name: &str,
        extra: &[&str],
        logs: &std::path::Path,
    ) -> anyhow::Result<()> {
        let exe: PathBuf = std::env::current_exe().context("locating the mcq binary")?;
        let log = std::fs::File::create(logs.join(format!("{name}.log")))
            .context("creating a worker log")?;
        let child = Command::new(exe)
            .args(["worker", "--database-url", url, "--stop-on-stdin-close"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting mcq worker")?;
        self.0.push(child);
        Ok(())
    }

    fn kill_first(&mut self) -> anyhow::Result<()> {
        let mut victim = self.0.remove(0);
        // Reap the child even when the kill fails (it may have exited already).
        let killed = victim.kill();
        victim.wait().context("reaping the killed worker")?;
        killed.context("SIGKILL")
    }

    /// Closes every worker's standard input, which stops it as SIGTERM
    /// does, then waits for their exit.
    fn stop_all(&mut self) -> anyhow::Result<()> {
        for child in &mut self.0 {
            drop(child.stdin.take());
        }
        for mut child in self.0.drain(..) {
            let status = child.wait().context("waiting for a worker")?;
            if !status.success() {
                eprintln!("warning: a worker exited with {status}");
            }
        }
        Ok(())
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A Monte Carlo job of `runs` paths at the sample's defaults, validated
/// before any timing starts.
fn job(runs: u64, seed: u64) -> anyhow::Result<ValidSpec> {
    Spec {
        runs: Some(runs),
        seed: Some(seed),
        ..Spec::default()
    }
    .validate()
    .map_err(|errors| {
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("benchmark spec rejected: {}", text.join("; "))
    })
}

/// Reads the batch until it is done. Reading the view of a 100,000-job
/// batch costs the database 0.1–0.2 s of CPU, taken from the fleet being
/// measured, so between reads this waits for the announcements that the
/// rest of the batch finished (PostgreSQL: one more read at the end), and
/// otherwise (SQLite: workers in other processes announce nothing here)
/// pauses at least `every` and ten times the last read: at most a tenth of
/// one core. `events` must be subscribed before the work starts. The times
/// reported come from the database, so a later look changes nothing.
async fn wait_done(
    store: &Store,
    mut events: FinishedEvents,
    batch: Uuid,
    timeout: Duration,
    every: Duration,
) -> anyhow::Result<BatchView> {
    let start = Instant::now();
    loop {
        let read = Instant::now();
        let view = store
            .batch(batch, Scope::All)
            .await?
            .context("the batch exists")?;
        if view.done {
            return Ok(view);
        }
        if start.elapsed() > timeout {
            bail!("the batch did not finish within {timeout:?}: {view:?}");
        }
        let pause = every.max(read.elapsed() * 10);
        if events.covers_every_process() {
            let c = &view.counts;
            let remaining = c.queued + c.running;
            // Announcements are hints: if one is missed, re-read anyway.
            events.wait_for(batch, remaining, pause * 10).await;
        } else {
            tokio::time::sleep(pause).await;
        }
    }
}

/// Insert → first claim of one job, in milliseconds, from database timestamps.
async fn wait_started(store: &Store, id: Uuid) -> anyhow::Result<f64> {
    let start = Instant::now();
    loop {
        let job = store
            .job(id, Scope::All)
            .await?
            .context("the probe job exists")?;
        if let Some(wait) = job.timings.queue_wait_ms {
            return Ok(wait);
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!("probe job {id} was not claimed within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Nearest-rank quantile of sorted values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert_eq!(quantile(&[3.0], 0.5), 3.0);
        assert!(quantile(&[], 0.5).is_nan());
    }
}
