//! `mcq worker`: one stateless worker process. Start any number, on any
//! machine that reaches the database; SIGTERM or Ctrl-C stops one gracefully.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use mcq_queue::{QueueConfig, Store};
use mcq_worker::{Worker, WorkerConfig};
use tokio_util::sync::CancellationToken;

use super::count::count;
use super::exit::{Outcome, bad_input};
use super::logs::LogFlags;
use super::metrics_listen;
use super::probes::Probes;
use super::queue_flags::QueueFlags;
use super::redact::redact;
use super::serve::Signals;

/// Flags of `mcq worker`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// `postgres://…` or `sqlite:FILE` (the same default file as `mcq serve`).
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite:mcq.sqlite")]
    database_url: String,
    /// Tasks computed at once [default: number of cores].
    #[arg(long, value_parser = count::<u32>(1..=4096))]
    concurrency: Option<u32>,
    /// Threads of the kernel's pool [default: number of cores].
    #[arg(long, value_parser = count::<u32>(1..=4096))]
    threads: Option<u32>,
    /// Seconds a claim stays valid without a heartbeat [default: the queue's].
    #[arg(long, value_parser = seconds)]
    lease: Option<Duration>,
    /// Seconds between heartbeats (kept below a third of the lease).
    #[arg(long, value_parser = seconds, default_value = "1")]
    heartbeat: Duration,
    /// Seconds in-flight tasks may run after SIGTERM before they are handed back.
    #[arg(long, value_parser = seconds, default_value = "20")]
    shutdown_timeout: Duration,
    /// Most tasks claimed in one round trip.
    #[arg(long, value_parser = count::<u32>(1..=100_000), default_value_t = 1000)]
    claim_batch: u32,
    /// Finished tasks recorded at once when this many wait.
    #[arg(long, value_parser = count::<u32>(1..=100_000), default_value_t = 2000)]
    complete_batch: u32,
    /// Longest wait, in milliseconds, before recording a finished task
    /// while other tasks of this worker still compute or wait: results are
    /// recorded this long after the first of them finished, or earlier
    /// with the next claim, a full `--complete-batch`, or once nothing else
    /// is in flight [default: 200].
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    complete_wait_ms: Option<u32>,
    /// Work claimed ahead of the free slots, in milliseconds of recent task
    /// time per slot: a worker claims again once half of it is left, and
    /// its finished results ride with that claim. Larger windows make
    /// fewer, larger calls (less database CPU per task) and hold more
    /// tasks; while claims are slow (over 20 ms) it stretches to twenty
    /// of their round trips, up to twice this; 0 claims only free
    /// slots [default: 400].
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    prefetch_ms: Option<u32>,
    /// Longest wait for new work while idle, when no announcement comes
    /// first: a number with ms or s (`250ms`, `2s`), 10ms to 60s. Through
    /// a transaction-mode pool (`--db-pool-mode transaction`) nothing is
    /// announced, so this bounds how long queued work waits for an idle
    /// worker; each idle worker claims once per poll.
    #[arg(long, env = "MCQ_POLL", default_value = "1s", value_parser = poll)]
    poll: Duration,
    /// Apply migrations before starting (normally `mcq serve` or `mcq migrate` does).
    #[arg(long)]
    migrate: bool,
    /// Serve `GET /healthz` (alive) and `GET /readyz` (registered, and the
    /// database answers with the schema this binary needs) on this address,
    /// e.g. `0.0.0.0:8080`, for orchestrators' probes; port 0 picks a free
    /// port (logged) [default: no HTTP at all].
    #[arg(long, value_name = "ADDR")]
    http_listen: Option<SocketAddr>,
    /// Seconds between log lines of the worker's counters (claimed,
    /// completed, failed, retried, paths per second…); 0 logs them only
    /// at exit.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = count::<u64>(0..=86_400))]
    counters_interval: u64,
    /// Serve this worker's metrics at `GET /metrics` (Prometheus text
    /// format) on this address, e.g. `0.0.0.0:9464`; port 0 picks a free
    /// port (logged). No key protects it: bind where only Prometheus
    /// reaches [default: not served].
    #[arg(long, value_name = "ADDR", env = "MCQ_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,
    /// Stop as on SIGTERM when standard input closes: a parent process
    /// that starts workers with a pipe for their input stops them by
    /// exiting, even when it is killed.
    #[arg(long)]
    stop_on_stdin_close: bool,
    #[command(flatten)]
    queue: QueueFlags,
    #[command(flatten)]
    log: LogFlags,
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    args.log.init("info");
    let mut queue = args.queue.apply(QueueConfig {
        application_name: "mcq worker".to_owned(),
        ..QueueConfig::default()
    });
    if let Some(lease) = args.lease {
        queue.lease = lease;
    }
    // Two missed heartbeats must not lose a lease.
    let heartbeat = args.heartbeat.min(queue.lease / 3);
    if heartbeat < args.heartbeat {
        tracing::warn!(
            heartbeat_ms = heartbeat.as_millis() as u64,
            "heartbeat shortened to a third of the lease"
        );
    }
    let defaults = WorkerConfig::default();
    let config = WorkerConfig {
        concurrency: args
            .concurrency
            .map_or(defaults.concurrency, |c| c as usize),
        threads: args.threads.map_or(0, |t| t as usize),
        heartbeat_interval: heartbeat,
        shutdown_timeout: args.shutdown_timeout,
        claim_batch: args.claim_batch as usize,
        prefetch_window: args.prefetch_ms.map_or(defaults.prefetch_window, |ms| {
            Duration::from_millis(u64::from(ms))
        }),
        complete_batch: args.complete_batch as usize,
        complete_wait: args.complete_wait_ms.map_or(defaults.complete_wait, |ms| {
            Duration::from_millis(u64::from(ms))
        }),
        poll_interval: args.poll,
        counters_interval: (args.counters_interval > 0)
            .then(|| Duration::from_secs(args.counters_interval)),
        ..defaults
    };
    // One thread is enough for the worker's loop and heartbeats, and
    // waking one thread costs the kernel threads less than waking a pool's.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let shutdown = CancellationToken::new();
        let signals = Signals::install().or_stdin_closed(args.stop_on_stdin_close)?;
        tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                let why = signals.wait().await;
                tracing::info!("{why}: finishing in-flight tasks, then exiting");
                shutdown.cancel();
            }
        });
        // Up before connecting: an orchestrator sees the process alive (and
        // not ready) while it waits for its database. The server ends with
        // the runtime.
        let probes = match args.http_listen {
            Some(addr) => Some(Probes::start(addr).await?),
            None => None,
        };
        if let Some(addr) = args.metrics_listen {
            metrics_listen::start(addr).await?;
        }
        let Some(store) = connect(&args.database_url, queue, &shutdown).await? else {
            return Ok(Outcome::Done);
        };
        if args.migrate {
            store.migrate().await.context("applying migrations")?;
        }
        if let Some(probes) = &probes {
            probes.attach(store.clone());
        }
        // The worker logs its totals as it exits ("worker exited").
        Worker::new(store, config).run(shutdown).await?;
        Ok(Outcome::Done)
    })
}

/// Connects, waiting out a database that is not up yet (a worker started
/// alongside its database must not need a restart). Every other error is
/// returned at once, since waiting does not heal it: a URL that does not
/// parse or names no supported database (bad input, exit 2), an SQLite
/// file that cannot be opened, a password or database the server refuses.
/// `None` when shut down before connecting.
async fn connect(
    url: &str,
    config: QueueConfig,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<Store>> {
    let mut delay = Duration::from_millis(100);
    loop {
        match Store::connect(url, config.clone()).await {
            Ok(store) => return Ok(Some(store)),
            Err(err) if err.is_unavailable() => {
                tracing::warn!(url = %redact(url), error = %err, retry_in_ms = delay.as_millis() as u64, "database unreachable");
            }
            Err(err) if err.is_bad_url() => {
                return Err(bad_input(format!("--database-url {}: {err}", redact(url))));
            }
            Err(err) => return Err(err).with_context(|| format!("connecting to {}", redact(url))),
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Parses a positive number of seconds, such as `15` or `0.5`.
fn seconds(text: &str) -> Result<Duration, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
        return Err(format!(
            "{text:?} must be a number of seconds above 0 and at most 86400"
        ));
    }
    Ok(Duration::from_secs_f64(value))
}

/// Parses `--poll`: `250ms` or `2s` (a bare number is seconds), from 10 ms
/// to 60 s.
pub(crate) fn poll(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3)
    } else {
        (text.strip_suffix('s').unwrap_or(text), 1.0)
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 250ms, 2s)"))?;
    let secs = value * scale;
    if !(secs.is_finite() && (0.01..=60.0).contains(&secs)) {
        return Err(format!("{text:?} is not from 10ms to 60s"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::{poll, seconds};

    #[test]
    fn poll_takes_milliseconds_or_seconds_within_the_range() {
        assert_eq!(poll("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(poll("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(poll("1"), Ok(Duration::from_secs(1)));
        assert_eq!(poll("10ms"), Ok(Duration::from_millis(10)));
        for bad in ["", "9ms", "61s", "-1s", "NaNs", "infms", "1m", "ms"] {
            assert!(poll(bad).is_err(), "{bad:?} was accepted");
        }
    }
    use std::time::Duration;

    #[test]
    fn seconds_accepts_positive_numbers_only() {
        assert_eq!(seconds("15").unwrap(), Duration::from_secs(15));
        assert_eq!(seconds("0.5").unwrap(), Duration::from_millis(500));
        for bad in ["0", "-1", "abc", "NaN", "inf", "1e9", ""] {
            assert!(seconds(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
