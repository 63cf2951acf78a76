//! `GET /v1/batches/{id}/results`: one row per job — its grid point,
//! price, error, interval, paths, seed, attempts and timings — as CSV or
//! JSON lines streamed from the database a page at a time, or as JSON
//! pages. `?fields=` picks and orders the columns.

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use mcq_api_types::{JobView, Problem, ResultRow, ResultsPage};
use mcq_queue::{MAX_PAGE, Scope, Store};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::AppState;
use crate::access::Caller;
use crate::extract::{RawId, parse_id, parse_uuid};
use crate::problem::ApiError;
use crate::read::{batch_or_not_found, parse_limit};
use crate::table::{Columns, Format};

/// Query of `GET /v1/batches/{id}/results`; strings so that bad values
/// get our own error rather than the extractor's.
#[derive(Debug, Deserialize)]
pub(crate) struct ResultsQuery {
    fields: Option<String>,
    format: Option<String>,
    after: Option<String>,
    limit: Option<String>,
}

/// A batch's results as a table.
#[utoipa::path(
    get,
    path = "/v1/batches/{id}/results",
    tag = "batches",
    params(
        ("id" = uuid::Uuid, Path, description = "Batch id"),
        ("fields" = Option<String>, Query, pattern = "^[a-z0-9_]+(,[a-z0-9_]+)*$", description = "Columns to return, comma-separated, in that order (default: all); the names are those of the batch's table"),
        ("format" = Option<String>, Query, pattern = "^(csv|jsonl|json)$", description = "`csv`, `jsonl` or `json`: overrides the Accept header"),
        ("after" = Option<uuid::Uuid>, Query, description = "JSON pages only: the `next` of the previous page"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "JSON pages only: rows per page, 1 to 1000 (default 1000)"),
    ),
    responses(
        (status = 200, description = "`text/csv` or `application/x-ndjson` (streamed, every job in submission order), or one JSON page of rows; `next` is absent on the last page",
            content(
                ("text/csv"),
                ("application/x-ndjson"),
                (ResultsPage = "application/json"),
            )),
        (status = 400, description = "A field this batch's table lacks, or a bad `format`, `after` or `limit`", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such batch (or not a UUID, or another tenant's)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn batch_results(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    RawId(raw): RawId,
    headers: HeaderMap,
    query: Result<Query<ResultsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw, "batch")?;
    let Query(query) = query.map_err(|err| ApiError::BadParameter(err.body_text()))?;
    let format = Format::negotiate(query.format.as_deref(), &headers)?;
    let after = match query.after.as_deref() {
        None => None,
        Some(after) => Some(parse_uuid(after).ok_or_else(|| {
            ApiError::BadParameter("after must be a job id (UUID) from a previous page".into())
        })?),
    };
    let limit = match query.limit.as_deref() {
        None => MAX_PAGE,
        Some(limit) => parse_limit(limit, MAX_PAGE).ok_or_else(|| {
            ApiError::BadParameter(format!("limit must be an integer from 1 to {MAX_PAGE}"))
        })?,
    };
    let scope = caller.scope();
    let grid = batch_or_not_found(&state, id, &raw, scope).await?.grid();
    let (point_fields, delta) = match &grid {
        Some(grid) => {
            // Every job of a sweep shares the base spec: the first tells
            // whether delta was asked for, unless the sweep varies it.
            let first = state.store.batch_jobs(id, scope, None, 1).await?;
            let delta = grid.sweep.fields().any(|f| f == "greeks")
                || first
                    .as_deref()
                    .and_then(<[JobView]>::first)
                    .is_some_and(|job| job.spec.wants_delta());
            (grid.sweep.fields().map(str::to_owned).collect(), delta)
        }
        None => varying_fields(&state.store, id, scope).await?,
    };
    let columns = Columns::new(point_fields, delta, query.fields.as_deref())?;
    if format == Format::Json {
        return json_page(&state.store, id, scope, columns, after, limit).await;
    }
    let mut response = Body::from_stream(futures_util::stream::unfold(
        Stream {
            store: state.store.clone(),
            id,
            scope,
            columns,
            format,
            after: None,
            started: false,
            finished: false,
        },
        Stream::next_chunk,
    ))
    .into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    Ok(response)
}

/// The spec fields whose values differ between a batch's jobs (the seed
/// aside: it has a column of its own), in spec order: the point of a job
/// of a batch that was not a sweep; and whether any job asked for delta.
/// One pass over the batch, a page at a time.
async fn varying_fields(
    store: &Store,
    id: Uuid,
    scope: Scope,
) -> Result<(Vec<String>, bool), ApiError> {
    let mut delta = false;
    let mut first: Option<serde_json::Map<String, Value>> = None;
    let mut varying: Vec<String> = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .batch_jobs(id, scope, after, MAX_PAGE)
            .await?
            .unwrap_or_default();
        for job in &page {
            delta |= job.spec.wants_delta();
            let Ok(Value::Object(spec)) = serde_json::to_value(&job.spec) else {
                continue;
            };
            match &first {
                None => first = Some(spec),
                Some(first) => {
                    // Both ways: a field left out of one spec varies too.
                    let fields = spec.keys().chain(first.keys());
                    for field in fields {
                        if field != "seed"
                            && first.get(field) != spec.get(field)
                            && !varying.contains(field)
                        {
                            varying.push(field.clone());
                        }
                    }
                }
            }
        }
        if page.len() < MAX_PAGE as usize {
            break;
        }
        after = page.last().map(|job| job.id);
    }
    let order = first.map(|spec| spec.keys().cloned().collect::<Vec<_>>());
    if let Some(order) = order {
        varying.sort_by_key(|field| order.iter().position(|f| f == field));
    }
    Ok((varying, delta))
}

/// One page of rows with the cursor of the next.
async fn json_page(
    store: &Store,
    id: Uuid,
    scope: Scope,
    columns: Columns,
    after: Option<Uuid>,
    limit: u32,
) -> Result<Response, ApiError> {
    // One extra row tells whether another page follows.
    let mut jobs = store
        .batch_jobs(id, scope, after, limit + 1)
        .await?
        .unwrap_or_default();
    let next = if jobs.len() > limit as usize {
        jobs.truncate(limit as usize);
        jobs.last().map(|job| job.id)
    } else {
        None
    };
    let rows = jobs.iter().map(|job| ResultRow(columns.row(job))).collect();
    let page = ResultsPage {
        columns: columns.names().into_iter().map(str::to_owned).collect(),
        rows,
        next,
    };
    Ok(axum::Json(page).into_response())
}

/// The state of a streamed table: the cursor of the next page.
struct Stream {
    store: Store,
    id: Uuid,
    scope: Scope,
    columns: Columns,
    format: Format,
    after: Option<Uuid>,
    started: bool,
    finished: bool,
}

impl Stream {
    /// The next piece of the body: the CSV header first, then one chunk
    /// per page of jobs; an error ends the body early (the client sees a
    /// truncated transfer, not a complete-looking table).
    async fn next_chunk(mut self) -> Option<(Result<Bytes, std::io::Error>, Stream)> {
        if self.finished {
            return None;
        }
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            if self.format == Format::Csv {
                self.columns.csv_header(&mut out);
            }
        }
        let page = match self
            .store
            .batch_jobs(self.id, self.scope, self.after, MAX_PAGE)
            .await
        {
            Ok(page) => page.unwrap_or_default(),
            Err(err) => {
                tracing::error!(batch = %self.id, error = %err, "results stream ended by a read error");
                self.finished = true;
                return Some((Err(std::io::Error::other("read failed")), self));
            }
        };
        let jobs: Vec<JobView> = page;
        self.finished = jobs.len() < MAX_PAGE as usize;
        self.after = jobs.last().map(|job| job.id);
        for job in &jobs {
            let row = self.columns.row(job);
            match self.format {
                Format::Csv => self.columns.csv_row(&row, &mut out),
                _ => {
                    // Serialising a map of JSON values cannot fail.
                    let _ = serde_json::to_writer(&mut out, &ResultRow(row));
                    out.push(b'\n');
                }
            }
        }
        Some((Ok(Bytes::from(out)), self))
    }
}
