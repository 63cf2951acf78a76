//! `mcq demo`: the original experiment in one command. A server with
//! embedded workers on a fresh SQLite file prices the batch over HTTP, then
//! the same calls run locally in this process, and both times are shown.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use mcq_api::ApiConfig;
use mcq_client::{BatchRequest, Client};
use mcq_kernel::{PriceResult, Spec};

use super::count::count;
use super::exit::Outcome;
use super::logs::LogFlags;
use super::serve::{self, ServeConfig};
use super::status::{print_batch, seconds};
use super::submit::follow_batch;

/// Flags of `mcq demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Pricing calls in the batch (the original experiment: 100).
    #[arg(long, default_value_t = 100, value_parser = count::<usize>(1..=100_000))]
    calls: usize,
    /// Monte Carlo paths per call (the original experiment: 1e6).
    #[arg(long, default_value_t = mcq_kernel::DEFAULT_RUNS, value_parser = count::<u64>(1..=mcq_kernel::MAX_RUNS))]
    runs: u64,
    /// Workers inside the demo server [default: one per core].
    #[arg(long, value_parser = count::<usize>(1..=4096))]
    workers: Option<usize>,
    #[command(flatten)]
    log: LogFlags,
}

/// Removes the demo's directory however the demo ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    args.log.init("warn");
    let dir =
        TempDir(std::env::temp_dir().join(format!("mcq-demo-{}", uuid::Uuid::new_v4().simple())));
    std::fs::create_dir_all(&dir.0).with_context(|| format!("creating {}", dir.0.display()))?;
    let workers = args.workers.unwrap_or_else(serve::cores).max(1);
    let config = ServeConfig {
        listen: "127.0.0.1:0".parse().context("demo address")?,
        database_url: format!("sqlite:{}", dir.0.join("mcq-demo.sqlite").display()),
        migrate: true,
        embedded_workers: workers,
        api: ApiConfig::default(),
        queue: mcq_queue::QueueConfig::default(),
    };
    println!(
        "mcq demo: database in {} (removed at the end)",
        dir.0.display()
    );
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let (service, specs) = runtime.block_on(through_service(config, &args, workers))?;
    let local = price_locally(&specs)?;

    println!();
    println!(
        "local: the same {} calls one after the other in this process, each on all {} cores (rayon)",
        specs.len(),
        serve::cores()
    );
    println!();
    println!(
        "  {:<34}{:>12}",
        "service, submit to last result",
        seconds(service.wall_ms)
    );
    println!("  {:<34}{:>12}", "local loop", seconds(local.wall_ms));
    println!(
        "  {:<34}{:>12.2}",
        "service / local",
        service.wall_ms / local.wall_ms
    );
    let same = service
        .prices
        .iter()
        .zip(&local.results)
        .filter(|(a, b)| a.to_bits() == b.price.to_bits())
        .count();
    println!();
    println!(
        "  same seeds, same prices bit for bit: {same} of {}",
        specs.len()
    );
    Ok(Outcome::from_ok(same == specs.len()))
}

struct ServiceRun {
    wall_ms: f64,
    prices: Vec<f64>,
}

async fn through_service(
    config: ServeConfig,
    args: &Args,
    workers: usize,
) -> anyhow::Result<(ServiceRun, Vec<Spec>)> {
    let running = serve::start(config)
        .await
        .context("starting the demo server")?;
    println!(
        "mcq demo: server on http://{} (SQLite, {workers} embedded workers)",
        running.addr
    );
    let outcome = submit_and_follow(&format!("http://{}", running.addr), args).await;
    running.stop().await.context("stopping the demo server")?;
    outcome
}

async fn submit_and_follow(base: &str, args: &Args) -> anyhow::Result<(ServiceRun, Vec<Spec>)> {
    let client = Client::new(base)?;
    let spec = Spec {
        runs: Some(args.runs),
        ..Spec::default()
    };
    let batch = BatchRequest {
        label: Some("mcq demo".into()),
        priority: None,
        jobs: vec![spec; args.calls],
        ..BatchRequest::default()
    };
    println!(
        "submitting {} calls of {} paths each over HTTP …",
        args.calls, args.runs
    );
    let start = Instant::now();
    let accepted = client
        .submit_batch(&batch, None)
        .await
        .context("submitting the batch")?;
    let view = follow_batch(
        &client,
        accepted.id,
        args.calls,
        true,
        Duration::from_millis(500),
    )
    .await?;
    let wall_ms = start.elapsed().as_secs_f64() * 1000.0;
    print_batch(&view);
    anyhow::ensure!(
        view.counts.succeeded as usize == args.calls,
        "not every call succeeded"
    );
    // The stored specs carry the seeds the server drew: the local run uses
    // them, so both sides compute the very same numbers.
    let jobs = client
        .all_batch_jobs(accepted.id)
        .await
        .context("reading the results")?;
    let prices = jobs
        .iter()
        .map(|j| j.result.as_ref().map_or(f64::NAN, |r| r.price))
        .collect();
    let specs = jobs.into_iter().map(|j| j.spec).collect();
    Ok((ServiceRun { wall_ms, prices }, specs))
}

struct LocalRun {
    wall_ms: f64,
    results: Vec<PriceResult>,
}

fn price_locally(specs: &[Spec]) -> anyhow::Result<LocalRun> {
    println!();
    println!("pricing the same {} calls locally …", specs.len());
    let never = AtomicBool::new(false);
    let start = Instant::now();
    let results = specs
        .iter()
        .map(|spec| {
            let valid = spec
                .validate()
                .map_err(|errors| anyhow::anyhow!("invalid spec: {errors:?}"))?;
            valid
                .price(&never)
                .map_err(|_| anyhow::anyhow!("local pricing was cancelled"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(LocalRun {
        wall_ms: start.elapsed().as_secs_f64() * 1000.0,
        results,
    })
}
