//! Measures the queue's storage costs: the enqueue rate of one large batch,
//! and the cost of claim + complete round trips per batch size (one
//! claimer, no kernel work: completions carry ready-made results, so only
//! the queue is measured).
//!
//! ```text
//! cargo run --release -p mcq-queue --example queue_perf -- [DATABASE_URL] [JOBS]
//! ```
//!
//! Without a URL it uses a fresh database in the test cluster of
//! `mcq-testdb` (fsync off). Measured figures live in `docs/results.md`.

use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use mcq_kernel::{Method, OptionKind, PriceResult, Spec, VarianceReduction};
use mcq_queue::{ComputeSpan, QueueConfig, Store, Submission, TaskDone, TaskOutput, WorkerInfo};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = match args.next().or_else(|| std::env::var("DATABASE_URL").ok()) {
        Some(url) => url,
        None => {
            mcq_testdb::postgres()
                .await
                .context("no PostgreSQL available")?
                .url
        }
    };
    let jobs: u64 = args
        .next()
        .map(|n| n.parse())
        .transpose()
        .context("JOBS must be a number")?
        .unwrap_or(100_000);
    let store = Store::connect(&url, QueueConfig::default())
        .await
        .context("connect")?;
    store.migrate().await.context("migrate")?;
    println!("backend {}, {jobs} jobs per batch", store.backend_name());

    for round in 1..=3 {
        let submission = batch(jobs, round * 1_000_000);
        let started = Instant::now();
        store.submit(submission).await.context("submit")?;
        let secs = started.elapsed().as_secs_f64();
        println!(
            "enqueue round {round}: {jobs} jobs in {:.3} s = {:.0} jobs/s",
            secs,
            jobs as f64 / secs
        );
    }

    let worker = store
        .register_worker(WorkerInfo {
            hostname: "perf".into(),
            pid: std::process::id(),
            concurrency: 1,
        })
        .await?;
    let result = ready_result();
    for size in [1_u32, 10, 100, 1000] {
        let tasks = (20_000 / u64::from(size)).clamp(200, 20_000) as usize;
        let started = Instant::now();
        let mut done_tasks = 0;
        while done_tasks < tasks {
            let claimed = store.claim(worker, size).await?;
            anyhow::ensure!(!claimed.is_empty(), "ran out of tasks");
            done_tasks += claimed.len();
            let done = claimed
                .iter()
                .map(|t| TaskDone {
                    task_id: t.task_id,
                    lease_token: t.lease_token,
                    output: TaskOutput::Result(result.clone()),
                    compute_ms: 0.0,
                    compute_span: Some(ComputeSpan::measured(SystemTime::now(), Duration::ZERO)),
                })
                .collect();
            let refused = store.complete(worker, done).await?;
            anyhow::ensure!(refused.is_empty(), "fresh leases refused");
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "claim+complete batch {size:>4}: {done_tasks} tasks in {secs:.3} s = {:.0} tasks/s, {:.1} us per task, {:.2} ms per round trip pair",
            done_tasks as f64 / secs,
            secs * 1e6 / done_tasks as f64,
            secs * 1e3 / (done_tasks as f64 / f64::from(size)),
        );
    }
    Ok(())
}

/// A batch of tiny jobs with distinct seeds.
fn batch(n: u64, first_seed: u64) -> Submission {
    let valid = Spec {
        runs: Some(2),
        ..Spec::default()
    }
    .validate()
    .expect("a valid spec");
    let jobs = (0..n).map(|i| valid.with_seed(first_seed + i)).collect();
    Submission {
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        as_batch: true,
        grid: None,
        label: Some("perf".into()),
        jobs,
        idempotency: None,
    }
}

/// The result every completion carries.
fn ready_result() -> PriceResult {
    PriceResult {
        price: 9.53,
        std_error: 0.0165,
        ci95: [9.5, 9.56],
        paths: 2,
        seed: Some(1),
        method: Method::Mc,
        option: OptionKind::Call,
        variance_reduction: VarianceReduction::None,
        variance_reduction_factor: Some(1.0),
        max_paths_reached: false,
        elapsed_ms: 0.0,
        delta: None,
        delta_std_error: None,
    }
}
