//! What operators and dashboards list: batches newest first, workers with
//! their state, the queue's depth.

use axum::Extension;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use mcq_api_types::{BatchPage, Problem, QueueView, WorkerList};
use mcq_queue::{BatchQuery, MAX_BATCH_PAGE};
use serde::Deserialize;

use crate::AppState;
use crate::access::Caller;
use crate::extract::parse_uuid;
use crate::problem::ApiError;
use crate::read::parse_limit;

/// Batches per page when `limit` is not given.
const DEFAULT_BATCH_PAGE: u32 = 20;

/// Longest `label` filter: labels themselves are at most 200 characters.
const MAX_LABEL_FILTER: usize = 200;

/// Query of `GET /v1/batches`; strings so that bad values get our own
/// error rather than the extractor's.
#[derive(Debug, Deserialize)]
pub(crate) struct BatchListQuery {
    state: Option<String>,
    label: Option<String>,
    after: Option<String>,
    limit: Option<String>,
}

/// Batches newest first, each with its counts, statistics and timings.
#[utoipa::path(
    get,
    path = "/v1/batches",
    tag = "batches",
    params(
        ("state" = Option<String>, Query, pattern = "^(active|done)$", description = "`active` (some job queued or running) or `done` (none); absent: both"),
        ("label" = Option<String>, Query, min_length = 1, max_length = 200, pattern = r"^[^\u0000]*$", description = "Only batches whose label contains this text (case-sensitive, 1 to 200 characters, no U+0000)"),
        ("after" = Option<uuid::Uuid>, Query, description = "Cursor: the `next` of the previous page"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Batches per page, 1 to 100 (default 20)"),
    ),
    responses(
        (status = 200, description = "A page of batches, newest first; `next` is absent on the last page", body = BatchPage),
        (status = 400, description = "Bad `state`, `label`, `after` or `limit`", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn list_batches(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<BatchListQuery>, QueryRejection>,
) -> Result<Json<BatchPage>, ApiError> {
    let Query(query) = query.map_err(|err| ApiError::BadParameter(err.body_text()))?;
    let done = match query.state.as_deref() {
        None => None,
        Some("active") => Some(false),
        Some("done") => Some(true),
        Some(_) => {
            return Err(ApiError::BadParameter(
                "state must be `active` or `done`".into(),
            ));
        }
    };
    let label = query.label;
    if label.as_ref().is_some_and(|label| {
        label.is_empty() || label.chars().count() > MAX_LABEL_FILTER || label.contains('\0')
    }) {
        return Err(ApiError::BadParameter(format!(
            "label must be 1 to {MAX_LABEL_FILTER} characters, without U+0000"
        )));
    }
    let after = match query.after.as_deref() {
        None => None,
        Some(after) => Some(parse_uuid(after).ok_or_else(|| {
            ApiError::BadParameter("after must be a batch id (UUID) from a previous page".into())
        })?),
    };
    let limit = match query.limit.as_deref() {
        None => DEFAULT_BATCH_PAGE,
        Some(limit) => parse_limit(limit, MAX_BATCH_PAGE).ok_or_else(|| {
            ApiError::BadParameter(format!(
                "limit must be an integer from 1 to {MAX_BATCH_PAGE}"
            ))
        })?,
    };
    // One extra batch tells whether another page follows.
    let mut batches = state
        .store
        .batches(
            BatchQuery {
                done,
                label,
                after,
                limit: limit + 1,
            },
            caller.scope(),
        )
        .await?;
    let next = if batches.len() > limit as usize {
        batches.truncate(limit as usize);
        batches.last().map(|batch| batch.id)
    } else {
        None
    };
    Ok(Json(BatchPage { batches, next }))
}

/// Workers heard from in the last five minutes, with their state.
#[utoipa::path(
    get,
    path = "/v1/workers",
    tag = "workers",
    responses(
        (status = 200, description = "Workers heard from in the last five minutes: state (`active`, `draining`, or `lost` once the last heartbeat is older than the lease), tasks held, throughput, work done", body = WorkerList),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn workers(State(state): State<AppState>) -> Result<Json<WorkerList>, ApiError> {
    Ok(Json(WorkerList {
        workers: state.store.workers().await?,
    }))
}

/// The queue as a whole: unfinished tasks by state, the oldest wait,
/// workers by state.
#[utoipa::path(
    get,
    path = "/v1/queue",
    tag = "workers",
    responses(
        (status = 200, description = "Unfinished tasks by state, the age of the oldest due task, workers by state", body = QueueView),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn queue(State(state): State<AppState>) -> Result<Json<QueueView>, ApiError> {
    Ok(Json(state.store.queue().await?))
}
