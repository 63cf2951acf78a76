//! `mcq serve`: the HTTP API, optionally with workers in the same process.
//! [`start`] is shared with `mcq demo`, which runs the same server in-process.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use mcq_api::{ApiConfig, AppState};
use mcq_queue::{QueueConfig, Store};
use mcq_worker::{Worker, WorkerConfig};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::count::count;
use super::exit::{Outcome, bad_input};
use super::files;
use super::logs::LogFlags;
use super::queue_flags::QueueFlags;
use super::redact::redact;

/// Flags of `mcq serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, env = "MCQ_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// `postgres://…` or `sqlite:FILE` (created and migrated on start).
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite:mcq.sqlite")]
    database_url: String,
    /// Workers inside this process [default: one per core on SQLite, 0 on PostgreSQL].
    #[arg(long, value_parser = count::<usize>(0..=4096))]
    embedded_workers: Option<usize>,
    /// Do not apply migrations at start (PostgreSQL deployments that run `mcq migrate`).
    #[arg(long)]
    no_migrate: bool,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = ApiConfig::default().max_body_bytes, value_parser = count::<usize>(1..=u64::MAX))]
    max_body_bytes: usize,
    /// Most jobs in one batch.
    #[arg(long, default_value_t = ApiConfig::default().max_batch_jobs, value_parser = count::<usize>(1..=u64::MAX))]
    max_batch_jobs: usize,
    /// Seconds a request may take before it is answered with 503.
    #[arg(long, default_value_t = ApiConfig::default().request_timeout.as_secs())]
    request_timeout_secs: u64,
    /// Most connections open at once (lowered to fit the open-file limit).
    #[arg(long, default_value_t = ApiConfig::default().max_connections, value_parser = count::<usize>(1..=1_000_000))]
    max_connections: usize,
    /// Seconds a connection may take to send a request head, after opening
    /// or after its last answer, before it is closed.
    #[arg(long, default_value_t = ApiConfig::default().header_read_timeout.as_secs(), value_parser = count::<u64>(1..=3600))]
    header_read_timeout_secs: u64,
    /// Serve requests without a key on a non-loopback address while the
    /// database holds no API key. Anyone who reaches the port can then
    /// submit, read and cancel everything: only for trusted networks.
    #[arg(long, env = "MCQ_INSECURE_OPEN")]
    insecure_open: bool,
    /// Host names the server answers to, comma-separated (the Host header
    /// without its port; e.g. `mcq.example.org,localhost`). Others get 421,
    /// which stops DNS-rebinding pages. Default: any.
    #[arg(long, env = "MCQ_ALLOWED_HOSTS", value_delimiter = ',')]
    allowed_hosts: Vec<String>,
    /// Shortest time, in seconds, between two reads of the queue-wide
    /// gauges of `/metrics` (depth, oldest wait, workers) from the
    /// database, however often it is scraped; 0 reads on every scrape.
    #[arg(long, env = "MCQ_METRICS_REFRESH_SECS", default_value_t = ApiConfig::default().metrics_refresh.as_secs(), value_parser = clap::value_parser!(u64).range(0..=3600))]
    metrics_refresh_secs: u64,
    /// Stop as on SIGTERM when standard input closes: a parent process
    /// that starts this one with a pipe for its input stops it by exiting,
    /// even when it is killed.
    #[arg(long)]
    stop_on_stdin_close: bool,
    #[command(flatten)]
    queue: QueueFlags,
    #[command(flatten)]
    log: LogFlags,
}

/// Everything [`start`] needs.
#[derive(Debug, Clone)]
pub(crate) struct ServeConfig {
    pub(crate) listen: SocketAddr,
    pub(crate) database_url: String,
    pub(crate) migrate: bool,
    /// Each embedded worker computes `concurrency` tasks at once.
    pub(crate) embedded_workers: usize,
    pub(crate) api: ApiConfig,
    /// The queue's settings for the API and the embedded workers.
    pub(crate) queue: QueueConfig,
}

/// A server running in this process.
#[derive(Debug)]
pub(crate) struct Running {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    shutdown: CancellationToken,
    tasks: JoinSet<anyhow::Result<()>>,
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    args.log.init("info");
    let stop_on_stdin_close = args.stop_on_stdin_close;
    let max_connections = fit_connections(args.max_connections, files::raise_open_file_limit());
    let embedded = args.embedded_workers.unwrap_or_else(|| {
        if args.database_url.starts_with("sqlite:") {
            cores()
        } else {
            0
        }
    });
    let config = ServeConfig {
        listen: args.listen,
        database_url: args.database_url,
        migrate: !args.no_migrate,
        embedded_workers: embedded,
        api: ApiConfig {
            max_body_bytes: args.max_body_bytes,
            max_batch_jobs: args.max_batch_jobs,
            request_timeout: Duration::from_secs(args.request_timeout_secs.max(1)),
            max_connections,
            header_read_timeout: Duration::from_secs(args.header_read_timeout_secs),
            open_without_keys: args.insecure_open || args.listen.ip().is_loopback(),
            allowed_hosts: args
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect(),
            metrics_refresh: Duration::from_secs(args.metrics_refresh_secs),
        },
        queue: server_pool(args.queue.apply(QueueConfig::default())),
    };
    // With embedded workers the kernels keep every core busy, and each
    // wake-up of another thread preempts one: one async thread serves the
    // API, the claims and the completions, as in `mcq worker`.
    let runtime = if embedded > 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Runtime::new()
    }
    .context("starting the async runtime")?;
    runtime.block_on(async {
        let running = start(config).await?;
        // Install the SIGTERM handler before announcing the address: a
        // supervisor may signal as soon as it reads that line, and until a
        // handler exists SIGTERM kills the process without a clean stop.
        let signals = Signals::install().or_stdin_closed(stop_on_stdin_close)?;
        // The one line scripts and tests parse: keep its shape.
        println!("mcq listening on http://{}", running.addr);
        let shutdown = running.shutdown.clone();
        tokio::spawn(async move {
            let why = signals.wait().await;
            tracing::info!("{why}: finishing requests and in-flight tasks, then exiting");
            shutdown.cancel();
        });
        running.wait().await
    })?;
    Ok(Outcome::Done)
}

/// Files kept for everything but client connections: the database pool,
/// the SQLite files and their journals, logs, the listener.
const FILES_RESERVED: u64 = 256;

/// `wanted` connections, or fewer when the open-file limit cannot hold
/// them beside the files the server needs for itself.
fn fit_connections(wanted: usize, open_files: Option<u64>) -> usize {
    let Some(limit) = open_files else {
        return wanted;
    };
    let room = usize::try_from(limit.saturating_sub(FILES_RESERVED).max(16)).unwrap_or(usize::MAX);
    if room < wanted {
        tracing::warn!(
            open_files = limit,
            max_connections = room,
            "the open-file limit holds fewer connections than --max-connections; raise the hard limit (ulimit -Hn) to allow more"
        );
        room
    } else {
        wanted
    }
}

/// Connections the server keeps open from its start, so that workers
/// taking every connection the database allows cannot starve the API.
const SERVER_POOL_MIN: u32 = 4;

/// `queue` with the server's reserve of open connections.
fn server_pool(queue: QueueConfig) -> QueueConfig {
    QueueConfig {
        pool_min: SERVER_POOL_MIN.min(queue.pool_size),
        application_name: "mcq serve".to_owned(),
        ..queue
    }
}

/// Connects (and migrates), binds, and starts serving and the embedded workers.
pub(crate) async fn start(config: ServeConfig) -> anyhow::Result<Running> {
    let store = Store::connect(&config.database_url, config.queue.clone())
        .await
        .with_context(|| format!("connecting to {}", redact(&config.database_url)))?;
    if config.migrate {
        store.migrate().await.context("applying migrations")?;
    }
    if !config.api.open_without_keys && !store.has_keys().await.context("looking for API keys")? {
        return Err(bad_input(format!(
            "refusing to serve {} without API keys: anyone reaching it could submit and cancel \
             work. Create a key first (`mcq keys create --tenant NAME`, with the same \
             --database-url), listen on a loopback address (127.0.0.1), or pass \
             --insecure-open on a trusted network",
            config.listen
        )));
    }
    // Before the first request, so that no long poll pays a new backend's
    // first read. A database not yet migrated says so through readiness.
    if let Err(err) = store.warm_reads().await {
        tracing::warn!(error = %err, "could not prepare the reads on the kept connections");
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let shutdown = CancellationToken::new();
    let mut tasks = JoinSet::new();
    for _ in 0..config.embedded_workers {
        // N embedded workers are N compute slots: one task at a time on one
        // thread each, so the default (one per core) uses each core once.
        let worker_config = WorkerConfig {
            concurrency: 1,
            threads: 1,
            ..WorkerConfig::default()
        };
        let worker = Worker::new(store.clone(), worker_config);
        let token = shutdown.clone();
        tasks.spawn(async move { worker.run(token).await.map(drop).context("embedded worker") });
    }
    let state = AppState {
        store,
        config: config.api,
    };
    let stop = shutdown.clone().cancelled_owned();
    tasks.spawn(async move {
        mcq_api::serve(listener, state, stop)
            .await
            .context("serving HTTP")
    });
    Ok(Running {
        addr,
        shutdown,
        tasks,
    })
}

impl Running {
    /// Asks the server and its workers to stop, and waits until they have.
    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.wait().await
    }

    /// Waits until shutdown (or a failure of the server or a worker, which
    /// stops the rest too).
    pub(crate) async fn wait(mut self) -> anyhow::Result<()> {
        let mut first_error = None;
        while let Some(joined) = self.tasks.join_next().await {
            let outcome = joined.context("a server task panicked").and_then(|r| r);
            if let Err(err) = outcome {
                self.shutdown.cancel();
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Cores of this machine (at least 1).
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// SIGTERM and SIGINT (Ctrl-C), registered up front: a supervisor may
/// signal as soon as the process is up, and a signal arriving before its
/// handler exists would kill the process outright. With
/// [`Signals::or_stdin_closed`], the end of standard input stops the
/// process the same way.
pub(crate) struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    stdin_closed: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Signals {
    /// Registers the handlers; must run inside the runtime.
    pub(crate) fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
                stdin_closed: None,
            }
        }
        #[cfg(not(unix))]
        Signals { stdin_closed: None }
    }

    /// With `watch`, also stops once standard input reaches its end
    /// (`--stop-on-stdin-close`). A parent that keeps the other end of a
    /// pipe open stops its children by exiting, however it exits: the
    /// kernel closes the pipe even after SIGKILL, when no handler of the
    /// parent's runs. A thread blocks on the reads, since the runtime's
    /// own standard input is read on a thread too.
    pub(crate) fn or_stdin_closed(mut self, watch: bool) -> anyhow::Result<Signals> {
        if watch {
            let (closed, rx) = tokio::sync::oneshot::channel();
            std::thread::Builder::new()
                .name("stdin-close".into())
                .spawn(move || {
                    // Whatever arrives is read and dropped; an error ends
                    // the input as its end does.
                    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
                    let _ = closed.send(());
                })
                .context("starting the thread that watches standard input")?;
            self.stdin_closed = Some(rx);
        }
        Ok(self)
    }

    /// Resolves on the first SIGTERM or SIGINT, or on the end of standard
    /// input when watched, and says which.
    pub(crate) async fn wait(self) -> &'static str {
        let stdin_closed = async {
            match self.stdin_closed {
                Some(closed) => {
                    let _ = closed.await;
                }
                None => std::future::pending().await,
            }
        };
        #[cfg(unix)]
        if let (Some(mut term), Some(mut int)) = (self.term, self.int) {
            return tokio::select! {
                _ = term.recv() => "signal received",
                _ = int.recv() => "signal received",
                () = stdin_closed => "standard input closed",
            };
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => "signal received",
            () = stdin_closed => "standard input closed",
        }
    }
}
