//! `GET /metrics`: every metric of this process in the Prometheus text
//! format — the HTTP layer's ([`http`]), the queue-wide gauges ([`queue`])
//! and those of any workers embedded in the process.

pub(crate) mod http;
pub(crate) mod queue;

use axum::Extension;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use crate::AppState;
use queue::QueueGauges;

/// Every metric of this process, in the Prometheus text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4: the queue-wide gauges (read from the database at most once per refresh interval), HTTP and submission counters, and the metrics of workers embedded in this process", content_type = "text/plain; version=0.0.4; charset=utf-8", body = String),
    )
)]
pub(crate) async fn metrics(
    State(state): State<AppState>,
    Extension(gauges): Extension<QueueGauges>,
) -> impl IntoResponse {
    gauges.refresh(&state.store).await;
    (
        [(header::CONTENT_TYPE, mcq_metrics::CONTENT_TYPE)],
        mcq_metrics::install().render(),
    )
}
