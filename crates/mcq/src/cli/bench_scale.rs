//! `mcq bench scale`: throughput of one coordinator against fleet size,
//! with simulated workers whose tasks hold their slot without the CPU.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use mcq_bench::LinkProfile;
use mcq_bench::scale::{ScalePlan, SizeRow};

use super::count::count;
use super::exit::Outcome;
use super::logs::LogFlags;
use super::redact::redact;

/// Flags of `mcq bench scale`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// PostgreSQL of the queue (e.g. from `deploy/pg-local.sh start`); a
    /// fresh database per run, since finished jobs stay in it.
    #[arg(long, env = "DATABASE_URL", value_parser = postgres_url)]
    database_url: String,
    /// Fleet sizes, comma-separated, each run once on its own batch.
    #[arg(long, default_value = "1,2,4,8,16,32,64,128,256", value_parser = sizes)]
    workers: Sizes,
    /// Compute slots of each worker.
    #[arg(long, default_value_t = 1, value_parser = count::<u32>(1..=64))]
    slots: u32,
    /// How long each synthetic task holds its slot, in milliseconds.
    #[arg(long, default_value_t = 50, value_parser = count::<u64>(1..=60_000))]
    task_ms: u64,
    /// Tasks per slot at each size (the batch is workers × slots × rounds):
    /// enough that the fleet's waking at the batch's start and its going
    /// idle at the end weigh little on the per-task figures.
    #[arg(long, default_value_t = 160, value_parser = count::<u32>(1..=100_000))]
    rounds: u32,
    /// Connections of each worker's pool, its LISTEN connection included
    /// (so at least 2, as for `mcq worker`).
    #[arg(long, default_value_t = 2, value_parser = count::<u32>(2..=64))]
    db_pool_size: u32,
    /// Where the workers connect instead of --database-url: a pooler in
    /// front of the same database (PgBouncer in transaction mode, with
    /// --db-pool-mode transaction), so that the fleet may open more
    /// connections than the server allows. Migrations, the batch and the
    /// measurements still use --database-url.
    #[arg(long, value_parser = postgres_url)]
    fleet_url: Option<String>,
    /// How the workers' connections reach PostgreSQL: `session` or
    /// `transaction` (as for `mcq worker`).
    #[arg(long, default_value = "session", value_parser = super::queue_flags::pool_mode)]
    db_pool_mode: mcq_queue::PoolMode,
    /// The workers' longest idle wait for work, as `mcq worker --poll`;
    /// through a transaction-mode pool it is what finds the batch.
    #[arg(long, default_value = "1s", value_parser = super::worker::poll)]
    poll: Duration,
    /// The workers' prefetch window in milliseconds, as `mcq worker
    /// --prefetch-ms` (0 to 10000) [default: the worker's, 400].
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    prefetch_ms: Option<u32>,
    /// Emulated link between the workers and the database (a profile or
    /// rtt=…,jitter=…,rate=…,loss=…; see docs/bench.md).
    #[arg(long, value_parser = mcq_bench::parse_link)]
    link_db: Option<LinkProfile>,
    /// Directory for the CSV, JSON, chart and report.
    #[arg(long, default_value = "mcq-scale-out")]
    out: PathBuf,
    /// Seed of the specs and of the link's jitter.
    #[arg(long, default_value_t = 2010)]
    seed: u64,
    /// Skip the minimal SKIP LOCKED queue that otherwise runs beside mcq
    /// at every size, on the same database, as the floor of the database's
    /// CPU per task.
    #[arg(long)]
    no_floor: bool,
    #[command(flatten)]
    log: LogFlags,
}

/// The fleet sizes of `--workers`, in the order given.
#[derive(Debug, Clone)]
struct Sizes(Vec<usize>);

/// Comma-separated fleet sizes of 1 to 4,096 workers, none twice: a size
/// listed twice is a slip of the hand, and would run its batch again.
fn sizes(text: &str) -> Result<Sizes, String> {
    let size = count::<usize>(1..=4096);
    let mut sizes = Vec::new();
    for part in text.split(',') {
        let n = size(part)?;
        if sizes.contains(&n) {
            return Err(format!("{n} is listed twice; give each fleet size once"));
        }
        sizes.push(n);
    }
    Ok(Sizes(sizes))
}

/// A PostgreSQL URL; anything else is refused as bad usage before the run
/// prints anything.
fn postgres_url(text: &str) -> Result<String, String> {
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        Ok(text.to_owned())
    } else {
        Err(
            "needs PostgreSQL (a fleet of worker processes cannot share the embedded \
             SQLite store); give postgres://…"
                .to_owned(),
        )
    }
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    args.log.init("warn");
    let plan = ScalePlan {
        database_url: args.database_url.clone(),
        sizes: args.workers.0,
        slots: args.slots,
        task: Duration::from_millis(args.task_ms),
        rounds: args.rounds,
        pool_size: args.db_pool_size,
        link_db: args.link_db.unwrap_or_else(LinkProfile::loopback),
        seed: args.seed,
        fleet_url: args.fleet_url.clone(),
        pool_mode: args.db_pool_mode,
        poll: args.poll,
        prefetch: args
            .prefetch_ms
            .map_or(mcq_worker::DEFAULT_PREFETCH_WINDOW, |ms| {
                Duration::from_millis(u64::from(ms))
            }),
        floor: !args.no_floor,
    };
    let through = args
        .fleet_url
        .as_deref()
        .map(|url| format!(" (workers through {})", redact(url)))
        .unwrap_or_default();
    println!(
        "mcq bench scale on {}{through}: {:?} workers × {} slot(s), {} ms tasks, {} rounds",
        redact(&args.database_url),
        plan.sizes,
        plan.slots,
        args.task_ms,
        plan.rounds
    );
    let report = mcq_bench::scale::scale(&plan, args.out, &|row: &SizeRow| {
        let floor = match (row.floor_per_s, row.db_cpu_ratio) {
            (Some(per_s), Some(ratio)) => {
                format!("; minimal queue {per_s:.0} tasks/s, DB CPU per task ×{ratio:.2} of its")
            }
            (Some(per_s), None) => format!("; minimal queue {per_s:.0} tasks/s"),
            _ => String::new(),
        };
        println!(
            "{:>5} workers: {:>8.0} tasks/s of {:>8.0} ideal ({:.1}%){floor}",
            row.workers,
            row.throughput_per_s,
            row.ideal_per_s,
            row.efficiency * 100.0
        );
    })
    .context("mcq bench scale")?;
    for warning in &report.summary.warnings {
        println!("WARNING: {warning}");
    }
    println!("\n{}", report.table);
    println!(
        "wrote {} into {}",
        report.summary.files.join(", "),
        report.out_dir.display()
    );
    Ok(Outcome::Done)
}
