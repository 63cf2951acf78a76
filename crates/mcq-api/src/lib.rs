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

mod dashboard;
mod extract;
mod health;
mod openapi;
mod origin;
mod overview;
mod problem;
mod read;
mod submit;
mod wait;

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Extension, Router};
use mcq_queue::Store;

pub use dashboard::{CONTENT_SECURITY_POLICY, dashboard_bytes};
pub use mcq_api_types::PROBLEM_JSON;
pub use openapi::{ApiDoc, openapi};
pub use problem::ApiError;

/// Limits of the service; defaults are what `mcq serve` uses without flags.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Largest request body in bytes. 8 MiB holds 10,000 fully written specs
    /// (about 300 bytes each) with room to spare.
    pub max_body_bytes: usize,
    /// Most jobs in one batch.
    pub max_batch_jobs: usize,
    /// A request running longer than this is answered with 503.
    pub request_timeout: Duration,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            max_body_bytes: 8 * 1024 * 1024,
            max_batch_jobs: 100_000,
            request_timeout: Duration::from_secs(30),
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
            Method::POST,
            "/v1/batches/{id}/cancel",
            post(read::cancel_batch),
        ),
        (Method::GET, "/v1/workers", get(overview::workers)),
        (Method::GET, "/v1/queue", get(overview::queue)),
        (Method::GET, "/healthz", get(health::healthz)),
        (Method::GET, "/readyz", get(health::readyz)),
        (Method::GET, "/openapi.json", get(health::openapi_json)),
    ]
}

/// The whole service: routes, the dashboard, problem+json fallbacks, body
/// limit, timeout, and the refusal of cross-origin writes.
pub fn app(state: AppState) -> Router {
    let mut router = dashboard::router();
    for (_, path, route) in routes() {
        router = router.route(path, route);
    }
    // The extractor enforces the limit itself (and answers 413 as a
    // problem); the axum default of 2 MB would be too small for big batches.
    let body_limit = DefaultBodyLimit::max(state.config.max_body_bytes);
    router
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(body_limit)
        .layer(middleware::from_fn_with_state(
            state.config.request_timeout,
            timeout,
        ))
        .layer(middleware::from_fn(origin::same_origin_writes))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// Serves [`app`] on `listener` until `shutdown` completes, then stops
/// accepting and lets in-flight requests finish; long polls (`?wait=`)
/// answer at once then rather than holding the shutdown up.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let app = app(state).layer(Extension(wait::Stopping(stop_rx)));
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Sent before axum waits for in-flight requests; the waits see it.
            let _ = stop_tx.send(true);
        })
        .await
}

async fn no_route(uri: Uri) -> ApiError {
    ApiError::NoRoute(uri.path().chars().take(200).collect())
}

async fn method_not_allowed() -> ApiError {
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
