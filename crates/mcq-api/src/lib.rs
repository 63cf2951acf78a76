//! The HTTP API of mcq (axum): submit jobs and batches, poll results by id,
//! cancel, list workers; and the web dashboard at `/`.
//!
//! [`app`] builds the whole service from an [`AppState`]; `mcq serve` and
//! the tests use the same constructor. Handlers never price anything: they
//! validate, enqueue and read, and every error leaves as an RFC 9457
//! problem document (see [`ApiError`]).

// Counts and sizes cross between u64, i64 (SQL), usize and u32 (the wire):
// a silent truncation there would corrupt a count, so every narrowing cast
// must be a checked conversion or state why it cannot truncate.
#![warn(clippy::cast_possible_truncation)]

mod access;
mod access_log;
mod body;
mod calibrate;
mod dashboard;
mod decode;
mod dry_run;
mod extract;
mod head;
mod health;
mod listen;
mod openapi;
mod origin;
mod overview;
mod problem;
mod prometheus;
mod read;
mod results;
mod submit;
mod summary;
mod sweep;
mod table;
mod wait;

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Extension, Router};
use mcq_queue::Store;

pub use access::{Caller, KEY_CACHE_TTL};
pub use access_log::{REQUEST_ID, RequestId};
pub use dashboard::{CONTENT_SECURITY_POLICY, dashboard_bytes};
pub use mcq_api_types::PROBLEM_JSON;
pub use openapi::{ApiDoc, openapi};
pub use problem::ApiError;

/// Limits of the service; defaults are what `mcq serve` uses without flags.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Largest request body in bytes. The default, 32 MiB, holds the
    /// default 100,000 jobs written in full (every field, 17 significant
    /// digits, about 280 bytes each), so for compact JSON the job count
    /// binds first.
    pub max_body_bytes: usize,
    /// Most jobs in one batch; decoding stops at the first job past it.
    pub max_batch_jobs: usize,
    /// A request running longer than this is answered with 503.
    pub request_timeout: Duration,
    /// Most connections open at once; more wait to be accepted.
    pub max_connections: usize,
    /// A connection that sends no complete request head for this long,
    /// after opening or after its last answer, is closed: the header-read
    /// and the keep-alive idle timeout.
    pub header_read_timeout: Duration,
    /// Whether requests without a key are served (as an admin of the
    /// default tenant) while the database holds no active key. `mcq serve`
    /// allows it on a loopback address only, unless `--insecure-open`.
    pub open_without_keys: bool,
    /// Host names the server answers to (the `Host` header, without its
    /// port), against DNS rebinding; empty: any.
    pub allowed_hosts: Vec<String>,
    /// Shortest time between two reads of the queue-wide gauges of
    /// `/metrics` from the database (0: every scrape reads).
    pub metrics_refresh: Duration,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            max_body_bytes: 32 * 1024 * 1024,
            max_batch_jobs: 100_000,
            request_timeout: Duration::from_secs(30),
            max_connections: 1024,
            header_read_timeout: Duration::from_secs(10),
            open_without_keys: true,
            allowed_hosts: Vec::new(),
            metrics_refresh: Duration::from_secs(5),
        }
    }
}

/// What every handler shares: the queue and the limits.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The queue the API enqueues into and reads from.
    pub store: Store,
    /// Limits.
    pub config: ApiConfig,
}

/// Every route of the API with its method. The router is built from this
/// table, and a test checks it against the OpenAPI document both ways.
pub fn routes() -> Vec<(Method, &'static str, MethodRouter<AppState>)> {
    vec![
        (Method::POST, "/v1/jobs", post(submit::submit_job)),
        (Method::GET, "/v1/jobs/{id}", get(read::get_job)),
        (Method::POST, "/v1/jobs/{id}/cancel", post(read::cancel_job)),
        (Method::POST, "/v1/batches", post(submit::submit_batch)),
        (Method::GET, "/v1/batches", get(overview::list_batches)),
        (Method::GET, "/v1/batches/{id}", get(read::get_batch)),
        (Method::GET, "/v1/batches/{id}/jobs", get(read::batch_jobs)),
        (
            Method::GET,
            "/v1/batches/{id}/summary",
            get(summary::batch_summary),
        ),
        (
            Method::GET,
            "/v1/batches/{id}/results",
            get(results::batch_results),
        ),
        (
            Method::POST,
            "/v1/batches/{id}/cancel",
            post(read::cancel_batch),
        ),
        (Method::GET, "/v1/workers", get(overview::workers)),
        (Method::GET, "/v1/queue", get(overview::queue)),
        (Method::GET, "/healthz", get(health::healthz)),
        (Method::GET, "/readyz", get(health::readyz)),
        (Method::GET, "/openapi.json", get(health::openapi_json)),
        (Method::GET, "/metrics", get(prometheus::metrics)),
    ]
}

/// The whole service: routes, the dashboard, problem+json fallbacks,
/// limits on the request head, API keys and roles, timeout, the refusal of
/// cross-origin writes, the access log and the HTTP metrics.
///
/// Installs mcq's metrics recorder as the process's global one unless it
/// is installed already (see [`mcq_metrics::install`]).
pub fn app(state: AppState) -> Router {
    let mut router = dashboard::router();
    for (_, path, route) in routes() {
        router = router.route(path, route);
    }
    // Every refusal drains what the client sends up to the bound of a 413
    // (see `body`), inside the timeout: a client trickling a refused body
    // holds its connection no longer than any request.
    let drain = body::drain_bound(state.config.max_body_bytes);
    let gate = access::Gate::new(
        state.store.clone(),
        state.config.open_without_keys,
        state.config.allowed_hosts.clone(),
        drain,
    );
    // The body extractor reads bodies itself, within `max_body_bytes`;
    // axum's default limit of 2 MB must not cut in first.
    router
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(gate, access::authorize))
        .layer(middleware::from_fn_with_state(
            drain,
            origin::same_origin_writes,
        ))
        .layer(middleware::from_fn_with_state(drain, head::check))
        .layer(middleware::from_fn_with_state(
            state.config.request_timeout,
            timeout,
        ))
        // Inside the access log, so that its events (a failed answer at
        // error level) carry the request's span; with no span of its own,
        // whose default fields would bring the raw path into the log.
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(|_: &Request| tracing::Span::none()),
        )
        .layer(middleware::from_fn(access_log::access_log))
        .layer(middleware::from_fn(prometheus::http::record))
        .layer(Extension(prometheus::queue::QueueGauges::new(
            state.config.metrics_refresh,
        )))
        .with_state(state)
}

/// Serves [`app`] on `listener` until `shutdown` completes, then stops
/// accepting and lets in-flight requests finish; long polls (`?wait=`)
/// answer at once then rather than holding the shutdown up. Connections
/// are capped and timed out as [`ApiConfig`] says.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = listen::ConnectionLimits {
        max_connections: state.config.max_connections,
        header_read_timeout: state.config.header_read_timeout,
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let app = app(state).layer(Extension(wait::Stopping(stop_rx)));
    listen::serve(listener, app, limits, async move {
        shutdown.await;
        // Sent before the connections are asked to finish; the waits see it.
        let _ = stop_tx.send(true);
    })
    .await
}

// The fallbacks read what a client sent (see `body`), so that a client
// which writes its whole body first still receives the problem.
async fn no_route(State(state): State<AppState>, uri: Uri, sent: Request) -> ApiError {
    let (parts, sent) = sent.into_parts();
    let bound = body::drain_bound(state.config.max_body_bytes);
    body::drain_refused(&parts.headers, sent, bound).await;
    ApiError::NoRoute(uri.path().chars().take(200).collect())
}

async fn method_not_allowed(State(state): State<AppState>, sent: Request) -> ApiError {
    let (parts, sent) = sent.into_parts();
    let bound = body::drain_bound(state.config.max_body_bytes);
    body::drain_refused(&parts.headers, sent, bound).await;
    ApiError::MethodNotAllowed
}

/// Ends requests that run too long with a problem (tower-http's timeout
/// layer would answer with an empty body).
async fn timeout(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(?limit, "request timed out");
            ApiError::Timeout.into_response()
        }
    }
}
