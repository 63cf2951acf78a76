//! Reading and cancelling: jobs, batches, a batch's jobs by cursor.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::{Extension, Json};
use mcq_api_types::{BatchCancelled, BatchView, JobCancelled, JobPage, JobView, Problem};
use mcq_queue::Scope;
use serde::Deserialize;
use uuid::Uuid;

use crate::AppState;
use crate::access::Caller;
use crate::extract::{RawId, parse_id, parse_uuid};
use crate::problem::ApiError;
use crate::wait::{Progress, Stopping, Wake, cap, parse_wait, poll_until};

/// Jobs per page when `limit` is not given.
const DEFAULT_PAGE: u32 = 100;
/// Most jobs per page.
pub(crate) const MAX_PAGE: u32 = 1000;

/// Query of `GET /v1/jobs/{id}` and `GET /v1/batches/{id}`; a string so
/// that bad values get our own error rather than the extractor's.
#[derive(Debug, Deserialize)]
pub(crate) struct WaitQuery {
    wait: Option<String>,
}

/// The requested wait, checked and capped below the request timeout.
fn wait_of(
    state: &AppState,
    query: Result<Query<WaitQuery>, QueryRejection>,
) -> Result<std::time::Duration, ApiError> {
    let Query(query) = query.map_err(|err| ApiError::BadParameter(err.body_text()))?;
    let wait = parse_wait(query.wait.as_deref())?;
    Ok(cap(wait, state.config.request_timeout))
}

/// One job with its result and timings; with `wait`, answered once the job
/// has finished or the wait has run out, whichever comes first.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}",
    tag = "jobs",
    params(
        ("id" = uuid::Uuid, Path, description = "Job id"),
        ("wait" = Option<String>, Query, description = "Long poll: hold the answer until the job has finished (succeeded, failed or cancelled) or this much time has passed, e.g. `500ms`, `2s` or `2` (seconds); 0 to 60 s, capped at three quarters of the server's request timeout. Absent or 0: answer at once"),
    ),
    responses(
        (status = 200, description = "The job (with `wait`, possibly still unfinished when the wait ran out)", body = JobView),
        (status = 400, description = "Bad `wait`", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job (or not a UUID, or another tenant's)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn get_job(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    RawId(raw): RawId,
    query: Result<Query<WaitQuery>, QueryRejection>,
    stopping: Option<Extension<Stopping>>,
) -> Result<Json<JobView>, ApiError> {
    let id = parse_id(&raw, "job")?;
    let wait = wait_of(&state, query)?;
    let read = || async {
        state
            .store
            .job(id, caller.scope())
            .await?
            .ok_or_else(|| ApiError::NotFound {
                what: "job",
                id: raw.clone(),
            })
    };
    let wake = (!wait.is_zero()).then(|| Wake {
        events: state.store.finished_events(),
        key: |view: &JobView| view.batch_id.unwrap_or(view.id),
    });
    let view = poll_until(
        wait,
        stopping.map(|Extension(s)| s),
        wake,
        read,
        |view: &JobView| {
            let finished = view.state.is_finished();
            Progress {
                finished: u64::from(finished),
                total: 1,
                done: finished,
            }
        },
    )
    .await?;
    Ok(Json(view))
}

/// Counts, aggregate statistics and timings of a batch, read in one query;
/// with `wait`, answered once the batch is done or the wait has run out.
#[utoipa::path(
    get,
    path = "/v1/batches/{id}",
    tag = "batches",
    params(
        ("id" = uuid::Uuid, Path, description = "Batch id"),
        ("wait" = Option<String>, Query, description = "Long poll: hold the answer until the batch is `done` or this much time has passed, e.g. `500ms`, `2s` or `2` (seconds); 0 to 60 s, capped at three quarters of the server's request timeout. Absent or 0: answer at once"),
    ),
    responses(
        (status = 200, description = "The batch (with `wait`, possibly not yet done when the wait ran out)", body = BatchView),
        (status = 400, description = "Bad `wait`", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such batch (or not a UUID, or another tenant's)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn get_batch(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    RawId(raw): RawId,
    query: Result<Query<WaitQuery>, QueryRejection>,
    stopping: Option<Extension<Stopping>>,
) -> Result<Json<BatchView>, ApiError> {
    let id = parse_id(&raw, "batch")?;
    let wait = wait_of(&state, query)?;
    let read = || batch_or_not_found(&state, id, &raw, caller.scope());
    let wake = (!wait.is_zero()).then(|| Wake {
        events: state.store.finished_events(),
        key: |view: &BatchView| view.id,
    });
    let view = poll_until(
        wait,
        stopping.map(|Extension(s)| s),
        wake,
        read,
        |view: &BatchView| Progress {
            finished: view.counts.finished(),
            total: view.total,
            done: view.done,
        },
    )
    .await?;
    Ok(Json(view))
}

/// The batch `id` as `scope` may see it, or the 404 that names it as the
/// caller wrote it (`raw`).
pub(crate) async fn batch_or_not_found(
    state: &AppState,
    id: Uuid,
    raw: &str,
    scope: Scope,
) -> Result<BatchView, ApiError> {
    state
        .store
        .batch(id, scope)
        .await?
        .ok_or_else(|| ApiError::NotFound {
            what: "batch",
            id: raw.to_owned(),
        })
}

/// Query of `GET /v1/batches/{id}/jobs`; strings so that bad values get our
/// own error rather than the extractor's.
#[derive(Debug, Deserialize)]
pub(crate) struct PageQuery {
    after: Option<String>,
    limit: Option<String>,
    wait: Option<String>,
}

/// A page of a batch's jobs in submission order; with `wait`, answered
/// once every job on the page has finished or the wait has run out.
#[utoipa::path(
    get,
    path = "/v1/batches/{id}/jobs",
    tag = "batches",
    params(
        ("id" = uuid::Uuid, Path, description = "Batch id"),
        ("after" = Option<uuid::Uuid>, Query, description = "Cursor: the `next` of the previous page"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "Jobs per page, 1 to 1000 (default 100)"),
        ("wait" = Option<String>, Query, description = "Long poll: hold the answer until every job on the page has finished (succeeded, failed or cancelled) or this much time has passed, e.g. `500ms`, `2s` or `2` (seconds); 0 to 60 s, capped at three quarters of the server's request timeout. Absent or 0: answer at once"),
    ),
    responses(
        (status = 200, description = "A page of jobs; `next` is absent on the last page (with `wait`, jobs may still be unfinished when the wait ran out)", body = JobPage),
        (status = 400, description = "Bad `after`, `limit` or `wait`", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such batch (or not a UUID, or another tenant's)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn batch_jobs(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    RawId(raw): RawId,
    query: Result<Query<PageQuery>, QueryRejection>,
    stopping: Option<Extension<Stopping>>,
) -> Result<Json<JobPage>, ApiError> {
    let id = parse_id(&raw, "batch")?;
    let Query(query) = query.map_err(|err| ApiError::BadParameter(err.body_text()))?;
    let after = match query.after.as_deref() {
        None => None,
        Some(after) => Some(parse_uuid(after).ok_or_else(|| {
            ApiError::BadParameter("after must be a job id (UUID) from a previous page".into())
        })?),
    };
    let limit = match query.limit.as_deref() {
        None => DEFAULT_PAGE,
        Some(limit) => parse_limit(limit, MAX_PAGE).ok_or_else(|| {
            ApiError::BadParameter(format!("limit must be an integer from 1 to {MAX_PAGE}"))
        })?,
    };
    let wait = cap(
        parse_wait(query.wait.as_deref())?,
        state.config.request_timeout,
    );
    // One extra row tells whether another page follows without a second query.
    let read = || async {
        state
            .store
            .batch_jobs(id, caller.scope(), after, limit + 1)
            .await?
            .ok_or_else(|| ApiError::NotFound {
                what: "batch",
                id: raw.clone(),
            })
    };
    // Every job of the page belongs to this batch: its announcements are
    // keyed by the batch id.
    let wake = (!wait.is_zero()).then(|| Wake {
        events: state.store.finished_events(),
        key: |jobs: &Vec<JobView>| {
            jobs.first()
                .and_then(|job| job.batch_id)
                .unwrap_or_default()
        },
    });
    let mut jobs = poll_until(
        wait,
        stopping.map(|Extension(s)| s),
        wake,
        read,
        |jobs: &Vec<JobView>| {
            let page = &jobs[..jobs.len().min(limit as usize)];
            let finished = page.iter().filter(|job| job.state.is_finished()).count();
            Progress {
                finished: finished as u64,
                total: page.len() as u64,
                done: finished == page.len(),
            }
        },
    )
    .await?;
    if jobs.is_empty()
        && let Some(after) = after
    {
        // An empty page after a cursor: the cursor was this batch's last
        // job, or it is no job of this batch at all (the query finds no
        // position for it), which is the client's mistake.
        let owner = state
            .store
            .job(after, caller.scope())
            .await?
            .and_then(|job| job.batch_id);
        if owner != Some(id) {
            return Err(ApiError::BadParameter(
                "after is not a job of this batch; pass the next of one of its pages".into(),
            ));
        }
    }
    let next = if jobs.len() > limit as usize {
        jobs.truncate(limit as usize);
        jobs.last().map(|job| job.id)
    } else {
        None
    };
    Ok(Json(JobPage { jobs, next }))
}

/// A page `limit`: decimal digits only (no sign, no spaces), from 1 to `max`.
pub(crate) fn parse_limit(text: &str, max: u32) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u32>().ok().filter(|n| (1..=max).contains(n))
}

/// Cancels a job that has not finished.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/cancel",
    tag = "jobs",
    request_body(content = serde_json::Value, content_type = "application/json", description = "Ignored; any JSON value (e.g. `{}`). The JSON content type is what a browser cannot send from another site."),
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job's state afterwards (a finished job keeps its state)", body = JobCancelled),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job (or not a UUID, or another tenant's)", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Without an API key, a cancel must say `Content-Type: application/json`, so that other web sites cannot send it", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn cancel_job(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    RawId(raw): RawId,
) -> Result<Json<JobCancelled>, ApiError> {
    let id = parse_id(&raw, "job")?;
    let state = state
        .store
        .cancel_job(id, caller.scope())
        .await?
        .ok_or(ApiError::NotFound {
            what: "job",
            id: raw,
        })?;
    audit_cancel(&caller, "job", id, &format!("state {state:?}"));
    Ok(Json(JobCancelled { id, state }))
}

/// Cancels every unfinished job of a batch.
#[utoipa::path(
    post,
    path = "/v1/batches/{id}/cancel",
    tag = "batches",
    request_body(content = serde_json::Value, content_type = "application/json", description = "Ignored; any JSON value (e.g. `{}`). The JSON content type is what a browser cannot send from another site."),
    params(("id" = uuid::Uuid, Path, description = "Batch id")),
    responses(
        (status = 200, description = "How many jobs were cancelled", body = BatchCancelled),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such batch (or not a UUID, or another tenant's)", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Without an API key, a cancel must say `Content-Type: application/json`, so that other web sites cannot send it", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn cancel_batch(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    RawId(raw): RawId,
) -> Result<Json<BatchCancelled>, ApiError> {
    let id = parse_id(&raw, "batch")?;
    let cancelled =
        state
            .store
            .cancel_batch(id, caller.scope())
            .await?
            .ok_or(ApiError::NotFound {
                what: "batch",
                id: raw,
            })?;
    audit_cancel(&caller, "batch", id, &format!("{cancelled} jobs cancelled"));
    Ok(Json(BatchCancelled { id, cancelled }))
}

/// The record of who cancelled what (target `mcq::audit`), kept apart
/// from the access log, which names routes but never ids.
fn audit_cancel(caller: &Caller, what: &'static str, id: uuid::Uuid, outcome: &str) {
    tracing::info!(
        target: "mcq::audit",
        tenant = %caller.tenant_name,
        key = %caller.key_id.as_deref().unwrap_or("-"),
        role = %caller.role,
        what,
        id = %id,
        outcome,
        "cancel"
    );
}
