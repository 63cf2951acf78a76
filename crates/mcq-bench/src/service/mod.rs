//! The `service` platform: the batch submitted over HTTP, followed with
//! long polls of the batch (or, with no wait, one batch request per poll),
//! and the job timings read page by page at the end.

mod process;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::Utc;
use mcq_client::{BatchAccepted, BatchRequest, BatchView, Client, JobState};
use mcq_kernel::Spec;
use uuid::Uuid;

use crate::breakdown::{Poll, ServerPhases, ServerTimes, break_down};
use crate::trial::{CallOutcome, TrialOutcome};
pub use process::Backend;
use process::ServiceProcesses;

/// How the benchmark reaches a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An already running server at this URL.
    Server(String),
    /// A private server the benchmark starts and stops itself.
    Start(Backend),
}

/// Timing knobs of the service platform.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PollOptions {
    /// Longest a batch request waits on the server for the batch to be done
    /// (`?wait=`, a long poll): the server answers as soon as it is, so
    /// this only bounds how often progress is reported. Zero: plain polls
    /// every `interval`.
    pub wait: Duration,
    /// Pause between plain batch polls (no `wait`). Shorter polls lower
    /// result latency but cost the server (and, on a small machine, the
    /// workers) CPU.
    pub interval: Duration,
    /// Give up on a batch after this long.
    pub timeout: Duration,
}

/// A reachable service, with the processes behind it when we started them.
#[derive(Debug)]
pub(crate) struct Service {
    api: Client,
    runtime: tokio::runtime::Runtime,
    processes: Option<ServiceProcesses>,
    slots: u32,
    /// The relay of `--link-client`, kept alive as long as the client.
    _client_relay: Option<crate::link::Relay>,
}

impl Service {
    /// Connects to (or starts) the service and waits until it is ready and,
    /// when we started it, until its workers have registered. The plan's
    /// `exe` is the `mcq` executable, its `service_dir` holds a started
    /// server's data and logs, and its links are put in place: the
    /// client's in front of the API, the database's between the workers
    /// and PostgreSQL.
    pub(crate) fn connect(target: &Target, plan: &crate::runner::Plan) -> anyhow::Result<Self> {
        let (exe, dir): (&Path, &Path) = (&plan.exe, &plan.service_dir);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("building the async runtime for the HTTP client")?;
        let (processes, url, expected_workers) = match target {
            Target::Server(url) => {
                if !plan.link_db.is_loopback() {
                    bail!(
                        "--link-db needs a service this command starts (--database-url); \
                         the workers of --server {url} are not ours to route"
                    );
                }
                (None, url.clone(), None)
            }
            Target::Start(backend) => {
                let processes =
                    ServiceProcesses::start(exe, backend, dir, &plan.link_db, plan.seed)?;
                let url = processes.url().to_owned();
                let workers = match backend {
                    Backend::Embedded { workers } | Backend::Postgres { workers, .. } => *workers,
                };
                (Some(processes), url, Some(workers))
            }
        };
        let http = reqwest::Client::builder()
            // Loopback measurements must not detour through a proxy from the environment.
            .no_proxy()
            // Room for the longest long poll and then the answer itself.
            .timeout(mcq_client::MAX_WAIT + Duration::from_secs(60))
            // A local trial can leave the connection idle past the server's
            // 10 s idle timeout; dropping it first means a trial never sends
            // on a connection the server is closing.
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .context("building the HTTP client")?;
        let (client_relay, url) = if plan.link_client.is_loopback() {
            (None, url)
        } else {
            let (relay, through) =
                crate::link::relay_url(&url, &plan.link_client, plan.seed ^ 0x636c_6965_6e74)
                    .context("starting the client link's relay")?;
            (Some(relay), through)
        };
        let api = Client::with_http(&url, http).context("the service URL")?;
        let mut service = Self {
            api,
            runtime,
            processes,
            slots: 0,
            _client_relay: client_relay,
        };
        service.wait_ready(expected_workers)?;
        Ok(service)
    }

    /// Computations the service's workers run at once.
    pub(crate) fn slots(&self) -> u32 {
        self.slots
    }

    /// The server's base URL.
    pub(crate) fn url(&self) -> &str {
        self.api.base_url()
    }

    fn wait_ready(&mut self, expected_workers: Option<u32>) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(processes) = &mut self.processes {
                processes.check_alive()?;
            }
            if self.runtime.block_on(self.api.ready()).is_ok() {
                let workers = self
                    .runtime
                    .block_on(self.api.workers())
                    .unwrap_or_default();
                let concurrency: u32 = workers.iter().map(|w| w.concurrency).sum();
                let registered = u32::try_from(workers.len()).unwrap_or(u32::MAX);
                match expected_workers {
                    Some(expected) if registered >= expected => {
                        self.slots = concurrency.max(expected);
                        return Ok(());
                    }
                    None if registered > 0 => {
                        self.slots = concurrency.max(1);
                        return Ok(());
                    }
                    _ => {}
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "the service at {} was not ready with its workers within 60 s",
                    self.api.base_url()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs the batch once: submit, poll the batch until done, then read the
    /// jobs' server-side timestamps. `on_progress` gets the number of
    /// finished jobs after each poll.
    pub(crate) fn run_trial(
        &mut self,
        label: &str,
        specs: &[Spec],
        options: PollOptions,
        on_progress: &dyn Fn(u64),
    ) -> anyhow::Result<TrialOutcome> {
        if let Some(processes) = &mut self.processes {
            processes.check_alive()?;
        }
        let api = &self.api;
        let slots = self.slots;
        self.runtime.block_on(async move {
            // Built before the clock starts: copying the specs is not the service's time.
            let request = BatchRequest {
                label: Some(label.to_owned()),
                priority: None,
                jobs: specs.to_vec(),
                ..BatchRequest::default()
            };
            let origin = Utc::now();
            let start = Instant::now();
            let accepted = submit(api, &request).await?;
            let mut polls = Vec::new();
            loop {
                let view = poll(api, accepted.id, options.wait).await?;
                let finished = view.counts.finished();
                polls.push(Poll {
                    received: Utc::now(),
                    finished,
                });
                on_progress(finished);
                if view.done {
                    break;
                }
                if start.elapsed() > options.timeout {
                    bail!(
                        "batch {} not done after {:?} ({finished} of {} finished)",
                        accepted.id,
                        options.timeout,
                        view.total
                    );
                }
                if options.wait.is_zero() {
                    tokio::time::sleep(options.interval).await;
                }
            }
            let wall_ms = start.elapsed().as_secs_f64() * 1e3;
            let mut jobs = api
                .all_batch_jobs(accepted.id)
                .await
                .context("GET /v1/batches/{id}/jobs")?;
            if jobs.len() != specs.len() {
                bail!(
                    "batch {} lists {} jobs, expected {}",
                    accepted.id,
                    jobs.len(),
                    specs.len()
                );
            }
            // Put the jobs in submission order, whatever order the pages use.
            let position = |id| accepted.job_ids.iter().position(|j| *j == id);
            jobs.sort_by_key(|job| position(job.id));
            let mut times = Vec::with_capacity(jobs.len());
            for (job, expected) in jobs.iter().zip(&accepted.job_ids) {
                if job.id != *expected {
                    bail!(
                        "batch {} returned job {} that it did not accept",
                        accepted.id,
                        job.id
                    );
                }
                if job.state != JobState::Succeeded {
                    bail!(
                        "job {} ended {:?}: {}",
                        job.id,
                        job.state,
                        job.error.as_deref().unwrap_or("no error text")
                    );
                }
                let t = &job.timings;
                let (Some(started_at), Some(finished_at), Some(compute_ms)) =
                    (t.started_at, t.finished_at, t.compute_ms)
                else {
                    bail!(
                        "job {} succeeded without start/finish timestamps and compute time",
                        job.id
                    );
                };
                // A server that records no phases (or a worker that sends no
                // compute times) leaves them out: the breakdown says so.
                let phases = match (t.claimed_at, t.compute_started_at, t.compute_finished_at) {
                    (Some(claimed_at), Some(compute_started_at), Some(compute_finished_at)) => {
                        Some(ServerPhases {
                            claimed_at,
                            compute_started_at,
                            compute_finished_at,
                        })
                    }
                    _ => None,
                };
                times.push(ServerTimes {
                    submitted_at: t.submitted_at,
                    started_at,
                    finished_at,
                    compute_ms,
                    queue_wait_ms: t.queue_wait_ms,
                    phases,
                });
            }
            let parts = break_down(origin, &times, &polls);
            let calls = jobs
                .iter()
                .zip(parts)
                .map(|(job, breakdown)| {
                    let result = job
                        .result
                        .as_ref()
                        .context("a succeeded job without a result")?;
                    Ok(CallOutcome {
                        job_id: Some(job.id),
                        price: result.price,
                        std_error: result.std_error,
                        breakdown,
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(TrialOutcome {
                wall_ms,
                slots,
                calls,
                polls: u32::try_from(polls.len()).unwrap_or(u32::MAX),
            })
        })
    }
}

/// Submits one batch and checks that every job was accepted.
async fn submit(api: &Client, request: &BatchRequest) -> anyhow::Result<BatchAccepted> {
    let accepted = api
        .submit_batch(request, None)
        .await
        .context("POST /v1/batches")?;
    if accepted.job_ids.len() != request.jobs.len() {
        bail!(
            "the server accepted {} jobs for a batch of {}",
            accepted.job_ids.len(),
            request.jobs.len()
        );
    }
    Ok(accepted)
}

/// The batch's counts, statistics and timings (one request); with a
/// non-zero `wait`, a long poll answered once the batch is done or after
/// about `wait`.
async fn poll(api: &Client, id: Uuid, wait: Duration) -> anyhow::Result<BatchView> {
    let view = if wait.is_zero() {
        api.batch(id).await
    } else {
        // The API counts whole milliseconds; a shorter wait is still a wait.
        api.batch_wait(id, wait.max(Duration::from_millis(1))).await
    };
    view.context("GET /v1/batches/{id}")
}
