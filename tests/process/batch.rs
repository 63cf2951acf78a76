//! Submitting batches and waiting for them, and the in-process oracle the
//! workers' results must equal to the bit.

use mcq_queue::Scope;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use mcq_api_types::{BatchView, JobState, JobView};
use mcq_kernel::{CHUNK_PATHS, PriceResult, Spec};
use mcq_queue::{QueueConfig, Store, Submission};
use mcq_tests::McqProcess;
use uuid::Uuid;

/// A store for submitting, whose jobs split into tasks of `chunks_per_task`
/// chunks. A batch of single-task jobs is staged however small
/// (`stage_from: 1`), so the workers here materialise it by claiming, as
/// they would a large one, before they are killed, stopped or cut off.
pub(crate) async fn store(url: &str, chunks_per_task: u64) -> anyhow::Result<Store> {
    let config = QueueConfig {
        chunks_per_task,
        stage_from: 1,
        ..QueueConfig::default()
    };
    let store = Store::connect(url, config)
        .await
        .context("connecting the test store")?;
    store.migrate().await.context("migrating")?;
    Ok(store)
}

/// A Monte Carlo spec of `chunks` whole kernel chunks with a fixed seed.
pub(crate) fn spec(chunks: u64, seed: u64) -> Spec {
    Spec {
        runs: Some(chunks * CHUNK_PATHS),
        seed: Some(seed),
        ..Spec::default()
    }
}

/// Submits `specs` as one batch; returns its id.
pub(crate) async fn submit(store: &Store, specs: Vec<Spec>) -> anyhow::Result<Uuid> {
    let jobs = specs
        .iter()
        .map(|spec| {
            spec.validate()
                .map_err(|errors| anyhow::anyhow!("invalid test spec: {errors:?}"))
        })
        .collect::<anyhow::Result<_>>()?;
    let submitted = store
        .submit(Submission {
            tenant: mcq_queue::DEFAULT_TENANT,
            priority: 0,
            as_batch: true,
            grid: None,
            label: Some("process test".into()),
            jobs,
            idempotency: None,
        })
        .await
        .context("submitting")?;
    submitted
        .batch_id
        .context("a batch submission returns a batch id")
}

/// The batch now. Database errors are returned, not retried.
pub(crate) async fn view(store: &Store, batch: Uuid) -> anyhow::Result<BatchView> {
    store
        .batch(batch, Scope::All)
        .await
        .context("reading the batch")?
        .context("the batch exists")
}

/// Polls until `done(view)` holds, tolerating database errors (a test may
/// be restarting the server); fails after `timeout` with the workers' logs.
pub(crate) async fn wait_until(
    store: &Store,
    batch: Uuid,
    timeout: Duration,
    workers: &[&McqProcess],
    what: &str,
    done: impl Fn(&BatchView) -> bool,
) -> anyhow::Result<BatchView> {
    let start = Instant::now();
    let mut last = None;
    loop {
        match store.batch(batch, Scope::All).await {
            Ok(Some(view)) if done(&view) => return Ok(view),
            Ok(view) => last = view,
            Err(_) => {}
        }
        if start.elapsed() > timeout {
            let logs: Vec<String> = workers.iter().map(|w| w.logs()).collect();
            bail!(
                "timed out after {timeout:?} waiting for {what}; last view: {last:?}\n{}",
                logs.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Every job of the batch, in submission order.
pub(crate) async fn jobs(store: &Store, batch: Uuid) -> anyhow::Result<Vec<JobView>> {
    let mut all: Vec<JobView> = Vec::new();
    loop {
        let page = store
            .batch_jobs(batch, Scope::All, all.last().map(|j| j.id), 500)
            .await
            .context("listing jobs")?
            .context("the batch exists")?;
        if page.is_empty() {
            return Ok(all);
        }
        all.extend(page);
    }
}

/// Waits up to two minutes for the batch to finish (failing early with the
/// logs of `workers` if one dies), checks that every job succeeded and that
/// each result equals the local kernel's bit for bit, and returns the jobs.
pub(crate) async fn finish_and_check(
    store: &Store,
    batch: Uuid,
    workers: &[&McqProcess],
    specs: &[Spec],
) -> anyhow::Result<Vec<JobView>> {
    let view = wait_until(
        store,
        batch,
        Duration::from_secs(120),
        workers,
        "the batch to finish",
        |v| v.done,
    )
    .await?;
    assert_eq!(
        view.counts.succeeded,
        specs.len() as u64,
        "every job succeeded: {view:?}"
    );
    let jobs = jobs(store, batch).await?;
    assert_all_match_local(&jobs, specs);
    Ok(jobs)
}

/// The same spec priced in this process.
pub(crate) fn local_price(spec: &Spec) -> PriceResult {
    let valid = spec.validate().expect("test specs are valid");
    valid.price(&AtomicBool::new(false)).expect("not cancelled")
}

/// Asserts every job succeeded with exactly the in-process result.
pub(crate) fn assert_all_match_local(jobs: &[JobView], specs: &[Spec]) {
    assert_eq!(jobs.len(), specs.len(), "one job per submitted spec");
    for (job, spec) in jobs.iter().zip(specs) {
        assert_eq!(
            job.state,
            JobState::Succeeded,
            "job {} did not succeed: {:?}",
            job.id,
            job.error
        );
        let got = job
            .result
            .as_ref()
            .unwrap_or_else(|| panic!("job {} succeeded without a result", job.id));
        let want = local_price(spec);
        assert_eq!(got.paths, want.paths, "paths of job {}", job.id);
        assert_eq!(
            got.price.to_bits(),
            want.price.to_bits(),
            "price of job {}: {} vs {}",
            job.id,
            got.price,
            want.price
        );
        assert_eq!(
            got.std_error.to_bits(),
            want.std_error.to_bits(),
            "std_error of job {}",
            job.id
        );
        assert_eq!(
            got.ci95.map(f64::to_bits),
            want.ci95.map(f64::to_bits),
            "ci95 of job {}",
            job.id
        );
        assert_eq!(
            (
                got.delta.map(f64::to_bits),
                got.delta_std_error.map(f64::to_bits)
            ),
            (
                want.delta.map(f64::to_bits),
                want.delta_std_error.map(f64::to_bits)
            ),
            "delta of job {}",
            job.id
        );
    }
}

/// Milliseconds since the Unix epoch now, comparable with the database's
/// timestamps (same machine, same clock).
pub(crate) fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since.as_millis()).expect("a sane clock")
}
