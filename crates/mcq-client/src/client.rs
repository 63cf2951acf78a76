//! The HTTP client proper: one method per endpoint, errors decoded from
//! the server's problem documents.

use std::time::Duration;

use mcq_api_types::{
    BatchAccepted, BatchCancelled, BatchPage, BatchRequest, BatchSummary, BatchView, DryRun,
    FieldProblem, Health, IDEMPOTENCY_KEY, JobCancelled, JobPage, JobView, MAX_WAIT, Problem,
    QueueView, ResultsPage, WorkerList, WorkerView,
};
use mcq_cost::CostModel;
use mcq_kernel::Spec;
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

/// Jobs asked for per page when following a batch's pages to the end.
const PAGE: u32 = 1000;

/// What can go wrong talking to the server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL is not an `http://` URL.
    #[error("invalid server URL {0:?}: expected http://host:port")]
    InvalidUrl(String),
    /// The server could not be reached, or the connection failed.
    #[error("cannot reach the server: {0}")]
    Http(#[from] reqwest::Error),
    /// The server answered with a problem document.
    #[error("{} ({}){}", problem.detail, problem.status, pointers(&problem.errors))]
    Problem {
        /// HTTP status.
        status: StatusCode,
        /// The decoded problem.
        problem: Box<Problem>,
    },
    /// The server answered something that is not the API's JSON.
    #[error("unexpected answer from the server (HTTP {status}): {body}")]
    Unexpected {
        /// HTTP status.
        status: StatusCode,
        /// The start of the body.
        body: String,
    },
}

fn pointers(errors: &[FieldProblem]) -> String {
    errors
        .iter()
        .map(|e| format!("\n  {}: {}", e.pointer, e.detail))
        .collect()
}

impl ClientError {
    /// The HTTP status of a server-side error, if there was an answer.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Problem { status, .. } | ClientError::Unexpected { status, .. } => {
                Some(*status)
            }
            ClientError::Http(err) => err.status(),
            ClientError::InvalidUrl(_) => None,
        }
    }
}

/// A client for one mcq server. Cheap to clone (shares its connection pool).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    /// Sent as `Authorization: Bearer <key>` on every request.
    api_key: Option<String>,
}

impl std::fmt::Debug for Client {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("api_key", &self.api_key.as_ref().map(|_| "(set)"))
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for the server at `base_url`, e.g. `http://127.0.0.1:8080`.
    pub fn new(base_url: &str) -> Result<Client, ClientError> {
        // Idle pooled connections are dropped before the server's default
        // 10 s idle timeout closes them, so a request never races that close.
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120))
            .pool_idle_timeout(Duration::from_secs(5))
            .build()?;
        Client::with_http(base_url, http)
    }

    /// A client for the server at `base_url` over an HTTP client configured
    /// by the caller (timeouts, proxies). Its request timeout should exceed
    /// [`MAX_WAIT`], or long polls end as errors.
    pub fn with_http(base_url: &str, http: reqwest::Client) -> Result<Client, ClientError> {
        let base = base_url.trim_end_matches('/');
        if !base.starts_with("http://") || base.len() <= "http://".len() {
            return Err(ClientError::InvalidUrl(base_url.to_owned()));
        }
        Ok(Client {
            http,
            base: base.to_owned(),
            api_key: None,
        })
    }

    /// This client, sending `key` (from `mcq keys create`) with every
    /// request; `None` sends none, as a server without keys expects.
    pub fn with_api_key(mut self, key: Option<String>) -> Client {
        self.api_key = key.filter(|k| !k.is_empty());
        self
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `POST /v1/jobs`: enqueues one job; returns it as stored (seed drawn).
    pub async fn submit_job(
        &self,
        spec: &Spec,
        idempotency_key: Option<&str>,
    ) -> Result<JobView, ClientError> {
        self.post_json("/v1/jobs", spec, idempotency_key).await
    }

    /// `POST /v1/batches`: enqueues a batch; job ids come back in order.
    pub async fn submit_batch(
        &self,
        batch: &BatchRequest,
        idempotency_key: Option<&str>,
    ) -> Result<BatchAccepted, ClientError> {
        self.post_json("/v1/batches", batch, idempotency_key).await
    }

    /// `POST /v1/jobs?dry_run=true`: what the job would take, validated as
    /// a submission but not queued; with prices, also its cost.
    pub async fn dry_run_job(
        &self,
        spec: &Spec,
        cost: Option<&CostModel>,
    ) -> Result<DryRun, ClientError> {
        self.post_json(&dry_run_path("/v1/jobs", cost), spec, None)
            .await
    }

    /// `POST /v1/batches?dry_run=true`: what the batch would take, validated
    /// as a submission but not queued; with prices, also its cost.
    pub async fn dry_run_batch(
        &self,
        batch: &BatchRequest,
        cost: Option<&CostModel>,
    ) -> Result<DryRun, ClientError> {
        self.post_json(&dry_run_path("/v1/batches", cost), batch, None)
            .await
    }

    /// `GET /v1/jobs/{id}`.
    pub async fn job(&self, id: Uuid) -> Result<JobView, ClientError> {
        self.get(&format!("/v1/jobs/{id}")).await
    }

    /// `GET /v1/jobs/{id}?wait=`: a long poll answered once the job has
    /// finished or after about `wait` (at most [`MAX_WAIT`]; the server may
    /// answer earlier), whichever comes first.
    pub async fn job_wait(&self, id: Uuid, wait: Duration) -> Result<JobView, ClientError> {
        self.get(&format!("/v1/jobs/{id}?wait={}", wait_param(wait)))
            .await
    }

    /// `GET /v1/batches/{id}`: counts, statistics and timings.
    pub async fn batch(&self, id: Uuid) -> Result<BatchView, ClientError> {
        self.get(&format!("/v1/batches/{id}")).await
    }

    /// `GET /v1/batches/{id}?wait=`: a long poll answered once the batch
    /// is done or after about `wait` (at most [`MAX_WAIT`]; the server may
    /// answer earlier), whichever comes first.
    pub async fn batch_wait(&self, id: Uuid, wait: Duration) -> Result<BatchView, ClientError> {
        self.get(&format!("/v1/batches/{id}?wait={}", wait_param(wait)))
            .await
    }

    /// `GET /v1/batches/{id}/jobs`: one page of jobs after the cursor.
    pub async fn batch_jobs(
        &self,
        id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<JobPage, ClientError> {
        let mut path = format!("/v1/batches/{id}/jobs?limit={limit}");
        if let Some(after) = after {
            path.push_str(&format!("&after={after}"));
        }
        self.get(&path).await
    }

    /// `GET /v1/batches/{id}/jobs?wait=`: one page of jobs, answered once
    /// every job on it has finished or after about `wait` (at most
    /// [`MAX_WAIT`]; the server may answer earlier), whichever comes first.
    pub async fn batch_jobs_wait(
        &self,
        id: Uuid,
        after: Option<Uuid>,
        limit: u32,
        wait: Duration,
    ) -> Result<JobPage, ClientError> {
        let mut path = format!(
            "/v1/batches/{id}/jobs?limit={limit}&wait={}",
            wait_param(wait)
        );
        if let Some(after) = after {
            path.push_str(&format!("&after={after}"));
        }
        self.get(&path).await
    }

    /// Every job of a batch, following the cursor page by page.
    pub async fn all_batch_jobs(&self, id: Uuid) -> Result<Vec<JobView>, ClientError> {
        let mut jobs = Vec::new();
        let mut after = None;
        loop {
            let page = self.batch_jobs(id, after, PAGE).await?;
            let fetched = page.jobs.len();
            jobs.extend(page.jobs);
            match page.next {
                // An empty page, or one pointing back at its own cursor,
                // would loop forever.
                Some(next) if fetched > 0 && Some(next) != after => after = Some(next),
                _ => return Ok(jobs),
            }
        }
    }

    /// `GET /v1/batches/{id}/summary`: the batch's jobs grouped by grid point.
    pub async fn batch_summary(&self, id: Uuid) -> Result<BatchSummary, ClientError> {
        self.get(&format!("/v1/batches/{id}/summary")).await
    }

    /// `GET /v1/batches/{id}/results?format=json`: one page of result rows
    /// after the job `after`, with the columns `fields` names
    /// (comma-separated; all when `None`).
    pub async fn batch_results_page(
        &self,
        id: Uuid,
        fields: Option<&str>,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<ResultsPage, ClientError> {
        let mut path = format!("/v1/batches/{id}/results?format=json&limit={limit}");
        if let Some(fields) = fields {
            path.push_str(&format!("&fields={}", encode(fields)));
        }
        if let Some(after) = after {
            path.push_str(&format!("&after={after}"));
        }
        self.get(&path).await
    }

    /// `GET /v1/batches/{id}/results` as `csv` or `jsonl`, copied to `out`
    /// as the server streams it, so that a batch of any size passes
    /// through without being held in memory. Returns the bytes written.
    pub async fn batch_results_to(
        &self,
        id: Uuid,
        format: &str,
        fields: Option<&str>,
        out: &mut impl std::io::Write,
    ) -> Result<u64, ClientError> {
        let mut path = format!("/v1/batches/{id}/results?format={}", encode(format));
        if let Some(fields) = fields {
            path.push_str(&format!("&fields={}", encode(fields)));
        }
        let mut response = self.request(Method::GET, &path).send().await?;
        if !response.status().is_success() {
            return decode::<serde_json::Value>(response).await.map(|_| 0);
        }
        let mut written = 0;
        while let Some(chunk) = response.chunk().await? {
            out.write_all(&chunk)
                .map_err(|err| ClientError::Unexpected {
                    status: StatusCode::OK,
                    body: format!("writing the results: {err}"),
                })?;
            written += chunk.len() as u64;
        }
        Ok(written)
    }

    /// `POST /v1/jobs/{id}/cancel`.
    pub async fn cancel_job(&self, id: Uuid) -> Result<JobCancelled, ClientError> {
        self.send(self.cancel(&format!("/v1/jobs/{id}/cancel")))
            .await
    }

    /// `POST /v1/batches/{id}/cancel`.
    pub async fn cancel_batch(&self, id: Uuid) -> Result<BatchCancelled, ClientError> {
        self.send(self.cancel(&format!("/v1/batches/{id}/cancel")))
            .await
    }

    /// An empty POST declared as JSON: a server without keys refuses
    /// writes of other content types (as a cross-site form would send).
    fn cancel(&self, path: &str) -> RequestBuilder {
        self.request(Method::POST, path)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
    }

    /// `GET /v1/workers`: workers heard from recently, with their state.
    pub async fn workers(&self) -> Result<Vec<WorkerView>, ClientError> {
        let list: WorkerList = self.get("/v1/workers").await?;
        Ok(list.workers)
    }

    /// `GET /v1/queue`: unfinished tasks by state, the oldest wait, workers by state.
    pub async fn queue(&self) -> Result<QueueView, ClientError> {
        self.get("/v1/queue").await
    }

    /// `GET /v1/batches`: one page of batches, newest first; `after` is the
    /// `next` of the page before.
    pub async fn batches(&self, after: Option<Uuid>, limit: u32) -> Result<BatchPage, ClientError> {
        let mut path = format!("/v1/batches?limit={limit}");
        if let Some(after) = after {
            path.push_str(&format!("&after={after}"));
        }
        self.get(&path).await
    }

    /// `GET /readyz`: `Ok` when the server and its database answer.
    pub async fn ready(&self) -> Result<Health, ClientError> {
        self.get("/readyz").await
    }

    /// Follows a batch until it is done with long polls
    /// ([`Client::batch_wait`]), calling `progress` with every view it
    /// reads (the last one too). The server answers as soon as the batch
    /// is done, so `refresh` only says how often `progress` hears of a
    /// batch still running: at least every `refresh` (capped at
    /// [`MAX_WAIT`]).
    pub async fn wait_for_batch(
        &self,
        id: Uuid,
        refresh: Duration,
        mut progress: impl FnMut(&BatchView),
    ) -> Result<BatchView, ClientError> {
        let refresh = refresh.clamp(Duration::from_millis(1), MAX_WAIT);
        loop {
            let asked = tokio::time::Instant::now();
            let view = self.batch_wait(id, refresh).await?;
            progress(&view);
            if view.done {
                return Ok(view);
            }
            // A server that ignores `wait` (older than the long poll)
            // answers at once: pace those polls instead of spinning.
            tokio::time::sleep_until(asked + refresh / 2).await;
        }
    }

    /// Follows a job until it has finished, with long polls of at most
    /// `refresh` each ([`Client::job_wait`]).
    pub async fn wait_for_job(&self, id: Uuid, refresh: Duration) -> Result<JobView, ClientError> {
        let refresh = refresh.clamp(Duration::from_millis(1), MAX_WAIT);
        loop {
            let asked = tokio::time::Instant::now();
            let job = self.job_wait(id, refresh).await?;
            if job.state.is_finished() {
                return Ok(job);
            }
            tokio::time::sleep_until(asked + refresh / 2).await;
        }
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send(self.request(Method::GET, path)).await
    }

    async fn post_json<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        idempotency_key: Option<&str>,
    ) -> Result<T, ClientError> {
        let mut request = self.request(Method::POST, path).json(body);
        if let Some(key) = idempotency_key {
            request = request.header(IDEMPOTENCY_KEY, key);
        }
        self.send(request).await
    }

    async fn send<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, ClientError> {
        decode(request.send().await?).await
    }
}

/// `path?dry_run=true`, with the prices as `cost_local` and `cost_cloud`.
fn dry_run_path(path: &str, cost: Option<&CostModel>) -> String {
    match cost.map(CostModel::flags) {
        Some((local, cloud)) => format!(
            "{path}?dry_run=true&cost_local={}&cost_cloud={}",
            encode(&local),
            encode(&cloud)
        ),
        None => format!("{path}?dry_run=true"),
    }
}

/// A query parameter's value, percent-encoded but for the characters
/// field lists and ids are made of.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b',' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// A wait as the API's query parameter: whole milliseconds, at most [`MAX_WAIT`].
fn wait_param(wait: Duration) -> String {
    format!("{}ms", wait.min(MAX_WAIT).as_millis())
}

/// Turns a response into `T`, or into the problem it carries.
async fn decode<T: DeserializeOwned>(response: Response) -> Result<T, ClientError> {
    let status = response.status();
    let bytes = response.bytes().await?;
    if status.is_success() {
        return serde_json::from_slice(&bytes).map_err(|_| unexpected(status, &bytes));
    }
    match serde_json::from_slice::<Problem>(&bytes) {
        Ok(problem) => Err(ClientError::Problem {
            status,
            problem: Box::new(problem),
        }),
        Err(_) => Err(unexpected(status, &bytes)),
    }
}

fn unexpected(status: StatusCode, body: &[u8]) -> ClientError {
    // A short prefix is enough to recognise what answered (a proxy, another server).
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    ClientError::Unexpected { status, body: text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_with_a_host_are_accepted() {
        for bad in [
            "",
            "http://",
            "https://mcq.example",
            "127.0.0.1:8080",
            "ftp://x",
        ] {
            assert!(
                matches!(Client::new(bad), Err(ClientError::InvalidUrl(_))),
                "{bad:?}"
            );
        }
        let client = Client::new("http://127.0.0.1:8080/").expect("valid");
        assert_eq!(client.base_url(), "http://127.0.0.1:8080");
    }

    #[test]
    fn waits_go_out_in_whole_milliseconds_capped_at_the_maximum() {
        assert_eq!(wait_param(Duration::from_micros(2_500)), "2ms");
        assert_eq!(wait_param(Duration::from_secs(2)), "2000ms");
        assert_eq!(wait_param(Duration::from_secs(600)), "60000ms");
    }
}
