//! A worker's life: register, start the background loops, run the main
//! loop until shutdown is complete, hand back what is left, deregister.

use std::sync::Arc;

use anyhow::Context as _;
use mcq_queue::{Store, WorkerInfo};
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;
use uuid::Uuid;

use crate::backoff::{Backoff, persist};
use crate::contention::Contention;
use crate::counter_log::{log as log_counters, log_every};
use crate::counters::{Counters, add};
use crate::driver::Driver;
use crate::held::Held;
use crate::pace::Pace;
use crate::pending::Pending;
use crate::policy::{CLEANUP_GRACE, Rules};
use crate::{WorkerConfig, WorkerReport, heartbeat, trail};

/// Runs one worker to the end; see [`crate::Worker::run`].
pub(crate) async fn run(
    store: Store,
    config: WorkerConfig,
    shutdown: CancellationToken,
) -> anyhow::Result<WorkerReport> {
    let threads = if config.threads == 0 {
        std::thread::available_parallelism().map_or(1, usize::from)
    } else {
        config.threads
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("mcq-kernel-{i}"))
        .build()
        .context("building the kernel thread pool")?;
    let concurrency = config.concurrency.max(1);
    let info = WorkerInfo {
        hostname: hostname(),
        pid: std::process::id(),
        concurrency: u32::try_from(concurrency).unwrap_or(u32::MAX),
    };
    let Some(worker) = persist("register", &shutdown, || {
        store.register_worker(info.clone())
    })
    .await
    else {
        tracing::info!("shut down before the worker could register");
        return Ok(WorkerReport::default());
    };
    tracing::info!(%worker, concurrency, threads, "worker registered");
    let span = trail::worker_span(worker);
    Ok(work(store, config, shutdown, pool, worker, concurrency)
        .instrument(span)
        .await)
}

/// The life of a registered worker, inside its span.
async fn work(
    store: Store,
    config: WorkerConfig,
    shutdown: CancellationToken,
    pool: rayon::ThreadPool,
    worker: Uuid,
    concurrency: usize,
) -> WorkerReport {
    let started = Instant::now();
    let held = Arc::new(Held::default());
    let counters = Arc::new(Counters::default());
    let background = CancellationToken::new();
    let tracker = TaskTracker::new();
    // The heartbeat takes the fleet's reaper turn; the reaper then reaps.
    let reaper_turn = Arc::new(tokio::sync::Notify::new());
    // Spawned tasks start outside any span: each is given the worker's.
    tracker.spawn(
        heartbeat::renew_leases(
            store.clone(),
            worker,
            held.clone(),
            counters.clone(),
            (config.heartbeat_interval, reaper_turn.clone()),
            shutdown.clone(),
            background.clone(),
        )
        .in_current_span(),
    );
    tracker.spawn(
        heartbeat::reap(
            store.clone(),
            counters.clone(),
            reaper_turn,
            shutdown.clone(),
        )
        .in_current_span(),
    );
    if let Some(interval) = config.prune_interval {
        tracker
            .spawn(heartbeat::prune(store.clone(), interval, shutdown.clone()).in_current_span());
    }
    if let Some(interval) = config.counters_interval {
        tracker.spawn(
            log_every(counters.clone(), held.clone(), interval, background.clone())
                .in_current_span(),
        );
    }
    // Past the shutdown timeout and its grace, retrying a database that is
    // gone only delays the exit: the leases still held then expire.
    let give_up = CancellationToken::new();
    let give_up_timer = tokio::spawn({
        let (shutdown, give_up) = (shutdown.clone(), give_up.clone());
        let after = config.shutdown_timeout + CLEANUP_GRACE;
        async move {
            shutdown.cancelled().await;
            tokio::time::sleep(after).await;
            give_up.cancel();
        }
    });

    let (reports_tx, reports) = tokio::sync::mpsc::unbounded_channel();
    let mut driver = Driver {
        store: store.clone(),
        worker,
        rules: Rules::of(&config, concurrency),
        poll_interval: config.poll_interval,
        shutdown_timeout: config.shutdown_timeout,
        held: held.clone(),
        counters: counters.clone(),
        pool,
        specs: Arc::default(),
        hold: config.hold.clone(),
        local: Arc::default(),
        reports_tx,
        reports,
        idle_workers: store.idle_workers(),
        work: store.work_events(),
        give_up: give_up.clone(),
        pending: Pending::default(),
        running: 0,
        pace: Pace::default(),
        claim_ms: 1.0,
        drained_until: None,
        claimed_none: false,
        contended: false,
        contention: Contention::new(worker.as_u64_pair().0),
        handed_off: false,
        peer_idle: false,
        announced_idle: false,
        backoff: Backoff::new(),
        retry_at: None,
        low_since: None,
        spread: 0.0,
        spreads: Xoshiro256PlusPlus::seed_from_u64(worker.as_u64_pair().1),
        stop: None,
        claim: None,
        flush: None,
    };
    driver.run(&shutdown).await;
    drop(driver);

    let leftover = held.snapshot();
    if !leftover.is_empty() {
        held.telling(leftover.iter().copied());
        tracing::warn!(
            count = leftover.len(),
            "handing back tasks still held at shutdown"
        );
        if persist("release", &give_up, || store.release(worker, &leftover))
            .await
            .is_some()
        {
            add(&counters.released, leftover.len());
        }
    }
    background.cancel();
    tracker.close();
    tracker.wait().await;
    if persist("deregister", &give_up, || store.deregister(worker))
        .await
        .is_none()
    {
        tracing::warn!(
            "could not deregister; the store will forget this worker after its heartbeat ages"
        );
    }
    give_up_timer.abort();
    let report = counters.report();
    let life = started.elapsed().as_secs_f64();
    log_counters(
        "worker exited",
        &report,
        &WorkerReport::default(),
        life,
        held.len(),
    );
    report
}

/// This machine's name, for the worker list.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}
