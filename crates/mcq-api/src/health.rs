//! Probes and the API description: `/healthz`, `/readyz`, `/openapi.json`.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use mcq_api_types::{Health, Problem};

use crate::AppState;
use crate::problem::ApiError;

/// The process is up (no database round trip).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    responses((status = 200, description = "The process answers", body = Health))
)]
pub(crate) async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// The database answers and holds the schema this binary needs.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    responses(
        (status = 200, description = "The database answers with the schema this server needs", body = Health),
        (status = 503, description = "The database is unreachable, or its schema is missing or older than this server", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    match tokio::time::timeout(READY_WITHIN, state.store.schema_status()).await {
        Ok(Ok(status)) if status.is_ready() => Ok(Json(Health {
            status: "ready".into(),
        })),
        Ok(Ok(status)) => {
            tracing::warn!(%status, "not ready");
            Err(ApiError::Unavailable)
        }
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "readiness check failed");
            Err(ApiError::Unavailable)
        }
        Err(_) => {
            tracing::warn!(within = ?READY_WITHIN, "readiness check failed: the database did not answer in time");
            Err(ApiError::Unavailable)
        }
    }
}

/// Longest a readiness check waits for the database. A database that
/// neither answers nor refuses (a host gone, a network cut) would otherwise
/// hold the probe for the pool's acquire timeout, longer than the probe
/// timeouts of orchestrators (1 s by default in Kubernetes).
pub(crate) const READY_WITHIN: std::time::Duration = std::time::Duration::from_millis(900);

/// This API's OpenAPI 3.1 document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json", body = Object))
)]
pub(crate) async fn openapi_json() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::openapi::document_json(),
    )
}
