//! The few calls of the HTTP API the benchmark makes. The types hold only
//! the fields of the API's JSON contract (issue 4) that the benchmark reads,
//! so the benchmark builds without the server's crates and tolerates fields
//! added later.

use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use mcq_kernel::Spec;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Jobs fetched per page when reading a batch's timings.
const PAGE_SIZE: usize = 1000;

/// Body of `POST /v1/batches`.
#[derive(Debug, Serialize)]
struct BatchRequest<'a> {
    label: &'a str,
    jobs: &'a [Spec],
}

/// Answer of `POST /v1/batches`.
#[derive(Debug, Deserialize)]
pub(crate) struct BatchAccepted {
    /// Batch id.
    pub(crate) id: Uuid,
    /// Job ids in submission order.
    pub(crate) job_ids: Vec<Uuid>,
}

/// Jobs of a batch per state (`counts` of `GET /v1/batches/{id}`).
#[derive(Debug, Deserialize)]
pub(crate) struct StateCounts {
    /// Jobs with a result.
    pub(crate) succeeded: u64,
    /// Jobs that gave up.
    pub(crate) failed: u64,
    /// Jobs cancelled.
    pub(crate) cancelled: u64,
}

/// What the benchmark reads of `GET /v1/batches/{id}`.
#[derive(Debug, Deserialize)]
pub(crate) struct BatchView {
    /// Jobs in the batch.
    pub(crate) total: u64,
    /// Jobs per state.
    pub(crate) counts: StateCounts,
    /// No job queued or running.
    pub(crate) done: bool,
}

/// Server-recorded times of a job.
#[derive(Debug, Deserialize)]
pub(crate) struct JobTimings {
    /// Enqueued.
    pub(crate) submitted_at: DateTime<Utc>,
    /// First claim.
    pub(crate) started_at: Option<DateTime<Utc>>,
    /// Result written.
    pub(crate) finished_at: Option<DateTime<Utc>>,
    /// Started − submitted, as the server computed it.
    pub(crate) queue_wait_ms: Option<f64>,
    /// Kernel time over the job's tasks.
    pub(crate) compute_ms: Option<f64>,
}

/// What the benchmark reads of a job's result.
#[derive(Debug, Deserialize)]
pub(crate) struct JobResult {
    /// Price.
    pub(crate) price: f64,
    /// Its standard error.
    pub(crate) std_error: f64,
}

/// What the benchmark reads of a job.
#[derive(Debug, Deserialize)]
pub(crate) struct JobView {
    /// Job id.
    pub(crate) id: Uuid,
    /// `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub(crate) state: String,
    /// Present once succeeded.
    #[serde(default)]
    pub(crate) result: Option<JobResult>,
    /// Present once failed.
    #[serde(default)]
    pub(crate) error: Option<String>,
    /// Timestamps.
    pub(crate) timings: JobTimings,
}

/// What the benchmark reads of a worker.
#[derive(Debug, Deserialize)]
pub(crate) struct WorkerView {
    /// Tasks it computes at once.
    pub(crate) concurrency: u32,
}

/// One page of `GET /v1/batches/{id}/jobs`.
#[derive(Debug, Deserialize)]
struct JobPage {
    jobs: Vec<JobView>,
    #[serde(default)]
    next: Option<Uuid>,
}

/// Answer of `GET /v1/workers`.
#[derive(Debug, Deserialize)]
struct WorkerList {
    workers: Vec<WorkerView>,
}

/// A connection to one mcq server.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    /// A client for the server at `base` (e.g. `http://127.0.0.1:8080`).
    pub(crate) fn new(base: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            // Loopback measurements must not detour through a proxy from the environment.
            .no_proxy()
            .timeout(Duration::from_secs(60))
            .build()
            .context("building the HTTP client")?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
        })
    }

    /// The server's address as given.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// True once `GET /readyz` answers 2xx.
    pub(crate) async fn ready(&self) -> bool {
        match self.http.get(format!("{}/readyz", self.base)).send().await {
            Ok(response) => response.status().is_success(),
            Err(_) => false,
        }
    }

    /// Submits one batch.
    pub(crate) async fn submit(&self, label: &str, jobs: &[Spec]) -> anyhow::Result<BatchAccepted> {
        let request = self
            .http
            .post(format!("{}/v1/batches", self.base))
            .json(&BatchRequest { label, jobs });
        let accepted: BatchAccepted = read(request.send().await, "POST /v1/batches").await?;
        if accepted.job_ids.len() != jobs.len() {
            bail!(
                "the server accepted {} jobs for a batch of {}",
                accepted.job_ids.len(),
                jobs.len()
            );
        }
        Ok(accepted)
    }

    /// The batch's counts, statistics and timings (one request); with a
    /// non-zero `wait`, a long poll answered once the batch is done or
    /// after about `wait`.
    pub(crate) async fn batch(&self, id: Uuid, wait: Duration) -> anyhow::Result<BatchView> {
        let mut url = format!("{}/v1/batches/{id}", self.base);
        if !wait.is_zero() {
            url.push_str(&format!("?wait={}ms", wait.as_millis().max(1)));
        }
        read(self.http.get(url).send().await, "GET /v1/batches/{id}").await
    }

    /// Every job of the batch, page by page.
    pub(crate) async fn jobs(&self, id: Uuid) -> anyhow::Result<Vec<JobView>> {
        let mut all = Vec::new();
        let mut after: Option<Uuid> = None;
        loop {
            let mut url = format!("{}/v1/batches/{id}/jobs?limit={PAGE_SIZE}", self.base);
            if let Some(cursor) = after {
                url.push_str(&format!("&after={cursor}"));
            }
            let page: JobPage =
                read(self.http.get(url).send().await, "GET /v1/batches/{id}/jobs").await?;
            let fetched = page.jobs.len();
            all.extend(page.jobs);
            match page.next {
                // An empty page with a cursor would loop forever.
                Some(next) if fetched > 0 && Some(next) != after => after = Some(next),
                _ => return Ok(all),
            }
        }
    }

    /// Live workers.
    pub(crate) async fn workers(&self) -> anyhow::Result<Vec<WorkerView>> {
        let list: WorkerList = read(
            self.http
                .get(format!("{}/v1/workers", self.base))
                .send()
                .await,
            "GET /v1/workers",
        )
        .await?;
        Ok(list.workers)
    }
}

/// Turns a response into `T`, or an error quoting the server's problem text.
async fn read<T: DeserializeOwned>(
    response: reqwest::Result<reqwest::Response>,
    what: &str,
) -> anyhow::Result<T> {
    let response = response.with_context(|| format!("{what}: no answer from the server"))?;
    let status = response.status();
    let body = response
        .text()
        .await
        .with_context(|| format!("{what}: reading the answer"))?;
    if !status.is_success() {
        let detail: String = body.chars().take(500).collect();
        bail!("{what}: the server answered {status}: {detail}");
    }
    serde_json::from_str(&body).with_context(|| {
        format!(
            "{what}: unexpected answer {:?}",
            body.chars().take(300).collect::<String>()
        )
    })
}
