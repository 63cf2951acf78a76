//! What clients and dashboards read on SQLite: jobs, batches (one query
//! each) and the worker list.

use sqlx::Row as _;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::{SqliteQueue, time};
use crate::access::Scope;
use crate::phases::Phases;
use crate::plan;
use crate::store::StoreError;
use crate::types::{
    BatchGrid, BatchTimings, BatchView, JobState, JobTimings, JobView, PriceStats, StateCounts,
};

/// Columns of a job view, for [`JOB_FROM`]: the job, its result, its
/// batch's sweep (which names its grid point) and the attempt numbers of
/// its task rows.
const JOB_COLUMNS: &str =
    "j.id, j.batch_id, j.state, j.spec, r.result, j.error, j.attempts, j.tasks_done,
    j.compute_ms, j.submitted_at, j.started_at, j.finished_at, j.position, j.task_count,
    (SELECT b.sweep FROM batches b WHERE b.id = j.batch_id) AS sweep,
    (SELECT coalesce(max(t.attempt), 0) FROM tasks t WHERE t.job_id = j.id) AS max_attempt,
    (SELECT coalesce(sum(t.attempt), 0) FROM tasks t WHERE t.job_id = j.id) AS sum_attempts,
    j.claimed_at, j.compute_started_at, j.compute_finished_at, j.worker_id";

/// The tables behind [`JOB_COLUMNS`].
const JOB_FROM: &str = "jobs j LEFT JOIN results r ON r.job_id = j.id";

/// Counts, statistics and timings of a batch. SQLite has no standard
/// deviation, so the sum of squared deviations from the mean is taken in a
/// second pass (the `mean` subquery) instead of the cancelling
/// `Σx² − n·mean²` formula.
const BATCH: &str = "
SELECT b.id, b.label, b.total, b.submitted_at, b.sweep,
       count(j.id) FILTER (WHERE j.state = 'queued') AS queued,
       count(j.id) FILTER (WHERE j.state = 'running') AS running,
       count(j.id) FILTER (WHERE j.state = 'succeeded') AS succeeded,
       count(j.id) FILTER (WHERE j.state = 'failed') AS failed,
       count(j.id) FILTER (WHERE j.state = 'cancelled') AS cancelled,
       count(j.price) AS priced, m.mean AS mean, min(j.price) AS min_price, max(j.price) AS max_price,
       total((j.price - m.mean) * (j.price - m.mean)) AS sum_sq,
       min(j.started_at) AS first_started_at, max(j.finished_at) AS last_finished_at,
       total(j.compute_ms) AS compute_ms_total
FROM batches b
LEFT JOIN jobs j ON j.batch_id = b.id
CROSS JOIN (SELECT avg(price) AS mean FROM jobs WHERE batch_id = ?1) m
WHERE b.id = ?1 AND (?2 IS NULL OR b.tenant_id = ?2)
GROUP BY b.id";

impl SqliteQueue {
    /// One job and its result.
    pub(crate) async fn job(&self, id: Uuid, scope: Scope) -> Result<Option<JobView>, StoreError> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM {JOB_FROM}
             WHERE j.id = ?1 AND (?2 IS NULL OR j.tenant_id = ?2)"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(scope.tenant())
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(|row| job_view(row, None)).transpose()
    }

    /// Counts, statistics and timings of a batch.
    pub(crate) async fn batch(
        &self,
        id: Uuid,
        scope: Scope,
    ) -> Result<Option<BatchView>, StoreError> {
        let Some(row) = sqlx::query(BATCH)
            .bind(id)
            .bind(scope.tenant())
            .fetch_optional(&self.reader)
            .await?
        else {
            return Ok(None);
        };
        let count = |name: &str| -> Result<u64, StoreError> {
            Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
        };
        let counts = StateCounts {
            queued: count("queued")?,
            running: count("running")?,
            succeeded: count("succeeded")?,
            failed: count("failed")?,
            cancelled: count("cancelled")?,
        };
        let priced = count("priced")?;
        let stats = if priced == 0 {
            None
        } else {
            let sum_sq: f64 = row.try_get("sum_sq")?;
            let stddev = if priced > 1 {
                (sum_sq / (priced - 1) as f64).sqrt()
            } else {
                0.0
            };
            Some(PriceStats {
                count: priced,
                mean: row.try_get::<Option<f64>, _>("mean")?.unwrap_or(0.0),
                min: row.try_get::<Option<f64>, _>("min_price")?.unwrap_or(0.0),
                max: row.try_get::<Option<f64>, _>("max_price")?.unwrap_or(0.0),
                stddev,
                std_error: stddev / (priced as f64).sqrt(),
            })
        };
        let done = counts.queued == 0 && counts.running == 0;
        let grid = plan::parse_grid(row.try_get::<Option<&str>, _>("sweep")?)?;
        let submitted_us: i64 = row.try_get("submitted_at")?;
        let first_started: Option<i64> = row.try_get("first_started_at")?;
        let last_finished: Option<i64> = row.try_get("last_finished_at")?;
        Ok(Some(BatchView {
            id: row.try_get("id")?,
            label: row.try_get("label")?,
            total: u64::try_from(row.try_get::<i64, _>("total")?).unwrap_or(0),
            counts,
            done,
            stats,
            timings: BatchTimings {
                submitted_at: time(submitted_us)?,
                first_started_at: first_started.map(time).transpose()?,
                last_finished_at: last_finished.map(time).transpose()?,
                makespan_ms: last_finished
                    .filter(|_| done)
                    .map(|t| (t - submitted_us) as f64 / 1e3),
                compute_ms_total: row.try_get("compute_ms_total")?,
            },
            repeat: grid.as_ref().map(|g| g.repeat),
            sweep: grid.map(|g| g.sweep),
        }))
    }

    /// A page of a batch's jobs after the job `after`, in submission order.
    pub(crate) async fn batch_jobs(
        &self,
        id: Uuid,
        scope: Scope,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Option<Vec<JobView>>, StoreError> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM {JOB_FROM}
             WHERE j.batch_id = ?1 AND (?4 IS NULL OR j.tenant_id = ?4)
               AND j.position > CASE WHEN ?2 IS NULL THEN -1
                   ELSE (SELECT position FROM jobs WHERE id = ?2 AND batch_id = ?1) END
             ORDER BY j.position LIMIT ?3"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(after)
            .bind(i64::from(limit))
            .bind(scope.tenant())
            .fetch_all(&self.reader)
            .await?;
        if rows.is_empty() {
            let exists: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM batches WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2))",
            )
            .bind(id)
            .bind(scope.tenant())
            .fetch_one(&self.reader)
            .await?;
            if !exists {
                return Ok(None);
            }
        }
        // Every row carries its batch's sweep: parse it once.
        let grid = match rows.first() {
            Some(row) => plan::parse_grid(row.try_get::<Option<&str>, _>("sweep")?)?,
            None => None,
        };
        rows.iter()
            .map(|row| job_view(row, Some(grid.as_ref())))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// A job view from a row of [`JOB_COLUMNS`]; `grid` is its batch's sweep
/// when the caller parsed it already.
fn job_view(row: &SqliteRow, grid: Option<Option<&BatchGrid>>) -> Result<JobView, StoreError> {
    let parsed;
    let grid = match grid {
        Some(grid) => grid,
        None => {
            parsed = plan::parse_grid(row.try_get::<Option<&str>, _>("sweep")?)?;
            parsed.as_ref()
        }
    };
    let position = u64::try_from(row.try_get::<i64, _>("position")?).unwrap_or(0);
    let (attempts, tasks) = plan::task_counts(
        row.try_get("task_count")?,
        row.try_get("tasks_done")?,
        row.try_get("attempts")?,
        row.try_get("max_attempt")?,
        row.try_get("sum_attempts")?,
    );
    let submitted_us: i64 = row.try_get("submitted_at")?;
    let started_us: Option<i64> = row.try_get("started_at")?;
    let finished_us: Option<i64> = row.try_get("finished_at")?;
    let tasks_done: i64 = row.try_get("tasks_done")?;
    let compute_ms: f64 = row.try_get("compute_ms")?;
    let result: Option<String> = row.try_get("result")?;
    let state = plan::parse_state(row.try_get("state")?)?;
    let finished_at = finished_us.map(time).transpose()?;
    let at = |column: &str| -> Result<_, StoreError> {
        row.try_get::<Option<i64>, _>(column)?.map(time).transpose()
    };
    let phases = Phases {
        claimed_at: at("claimed_at")?,
        compute_started_at: at("compute_started_at")?,
        compute_finished_at: at("compute_finished_at")?,
        worker_id: row.try_get("worker_id")?,
    }
    .of_state(state);
    let submitted_at = time(submitted_us)?;
    Ok(JobView {
        id: row.try_get("id")?,
        batch_id: row.try_get("batch_id")?,
        state,
        spec: plan::parse_spec(row.try_get("spec")?)?,
        result: result.as_deref().map(plan::parse_result).transpose()?,
        error: row.try_get("error")?,
        point: grid.map(|g| g.point_at(position)),
        attempts,
        tasks,
        worker_id: phases.worker_id,
        timings: JobTimings {
            submitted_at,
            started_at: started_us.map(time).transpose()?,
            finished_at,
            queue_wait_ms: started_us.map(|s| (s - submitted_us) as f64 / 1e3),
            compute_ms: (tasks_done > 0).then_some(compute_ms),
            queued_at: submitted_at,
            claimed_at: phases.claimed_at,
            compute_started_at: phases.compute_started_at,
            compute_finished_at: phases.compute_finished_at,
            recorded_at: finished_at.filter(|_| state == JobState::Succeeded),
        },
    })
}
