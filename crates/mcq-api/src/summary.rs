//! `GET /v1/batches/{id}/summary`: a batch's jobs grouped by grid point,
//! each point with its counts and the price its jobs estimate.

use axum::extract::State;
use axum::{Extension, Json};
use mcq_api_types::{
    BatchSummary, GridPoint, JobState, JobView, PointPrice, PointSummary, Problem, StateCounts,
};
use mcq_queue::MAX_PAGE;

use crate::AppState;
use crate::access::Caller;
use crate::extract::{RawId, parse_id};
use crate::problem::ApiError;
use crate::read::batch_or_not_found;

/// Counts and prices per grid point, read a page of jobs at a time.
#[utoipa::path(
    get,
    path = "/v1/batches/{id}/summary",
    tag = "batches",
    params(("id" = uuid::Uuid, Path, description = "Batch id")),
    responses(
        (status = 200, description = "One entry per grid point in grid order (one for a batch that is not a sweep)", body = BatchSummary),
        (status = 401, description = "No valid API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such batch (or not a UUID, or another tenant's)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub(crate) async fn batch_summary(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    RawId(raw): RawId,
) -> Result<Json<BatchSummary>, ApiError> {
    let id = parse_id(&raw, "batch")?;
    let view = batch_or_not_found(&state, id, &raw, caller.scope()).await?;
    let grid = view.grid();
    let repeat = u64::from(grid.as_ref().map_or(1, |g| g.repeat.max(1)));
    let points = grid.as_ref().and_then(|g| g.sweep.points()).unwrap_or(1);
    let mut groups: Vec<Group> = (0..points).map(|_| Group::default()).collect();
    // Positions run 0, 1, … in page order: job p prices point p / repeat.
    let mut position = 0u64;
    let mut after = None;
    loop {
        let page = state
            .store
            .batch_jobs(id, caller.scope(), after, MAX_PAGE)
            .await?
            .unwrap_or_default();
        for job in &page {
            let point = if grid.is_some() { position / repeat } else { 0 };
            if let Some(group) = usize::try_from(point).ok().and_then(|p| groups.get_mut(p)) {
                group.add(job);
            }
            position += 1;
        }
        if page.len() < MAX_PAGE as usize {
            break;
        }
        after = page.last().map(|job| job.id);
    }
    let points = groups
        .into_iter()
        .enumerate()
        .map(|(i, group)| PointSummary {
            point: grid
                .as_ref()
                .map_or_else(GridPoint::default, |g| g.sweep.grid_point(i as u64)),
            price: group.price(),
            counts: group.counts,
        })
        .collect();
    Ok(Json(BatchSummary {
        id,
        done: view.done,
        sweep: view.sweep,
        points,
    }))
}

/// The jobs of one grid point, accumulated.
#[derive(Debug, Default)]
struct Group {
    counts: StateCounts,
    count: u64,
    /// Running mean and sum of squared deviations (Welford), stable
    /// however close the prices lie.
    mean: f64,
    m2: f64,
    variance_sum: f64,
    min: f64,
    max: f64,
    paths: u64,
}

impl Group {
    fn add(&mut self, job: &JobView) {
        match job.state {
            JobState::Queued => self.counts.queued += 1,
            JobState::Running => self.counts.running += 1,
            JobState::Succeeded => self.counts.succeeded += 1,
            JobState::Failed => self.counts.failed += 1,
            JobState::Cancelled => self.counts.cancelled += 1,
        }
        let Some(result) = &job.result else { return };
        let price = result.price;
        if self.count == 0 {
            self.min = price;
            self.max = price;
        }
        self.count += 1;
        let delta = price - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (price - self.mean);
        self.variance_sum += result.std_error * result.std_error;
        self.min = self.min.min(price);
        self.max = self.max.max(price);
        self.paths += result.paths;
    }

    fn price(&self) -> Option<PointPrice> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as f64;
        // The mean of independent estimates: its variance is the sum of
        // theirs over n².
        let std_error = self.variance_sum.sqrt() / n;
        Some(PointPrice {
            count: self.count,
            mean: self.mean,
            std_error,
            ci95: [self.mean - 1.96 * std_error, self.mean + 1.96 * std_error],
            stddev: (self.count > 1).then(|| (self.m2 / (n - 1.0)).sqrt()),
            min: self.min,
            max: self.max,
            paths: self.paths,
        })
    }
}
