//! What operators and dashboards read about the service as a whole: the
//! batches newest first, the workers with their state and load, and the
//! queue's depth. Each is one statement over indexes that hold unfinished
//! work only (or the primary key), whatever the number of finished jobs.

use sqlx::Row as _;
use sqlx::postgres::PgRow;

use super::PgQueue;
use super::read::{BATCH_SELECT, batch_view, ms_between};
use crate::access::Scope;
use crate::plan;
use crate::store::{LOST_LISTED, StoreError};
use crate::types::{BatchQuery, BatchView, QueueView, TaskDepth, WorkerCounts, WorkerView};

/// Workers heard from within `$1` seconds, with the running tasks each
/// holds (one pass over the partial index of running tasks) and its state:
/// `lost` once its heartbeat is older than the lease (`$2` seconds).
const WORKERS: &str = "
SELECT w.id, w.hostname, w.pid, w.concurrency, w.started_at, w.last_heartbeat_at,
       w.tasks_done, w.jobs_done, w.tasks_last_minute, coalesce(h.n, 0) AS tasks_held,
       CASE WHEN w.last_heartbeat_at < now() - make_interval(secs => $2) THEN 'lost'
            WHEN w.draining THEN 'draining' ELSE 'active' END AS state
FROM workers w
LEFT JOIN (SELECT worker_id, count(*) AS n FROM tasks WHERE state = 'running' GROUP BY worker_id) h
       ON h.worker_id = w.id
WHERE w.last_heartbeat_at > now() - make_interval(secs => $1)
ORDER BY w.started_at, w.id";

/// The queue's depth: queued tasks (due, or waiting out a retry backoff)
/// from their partial index, staged jobs (each one due task), running tasks
/// from theirs, the oldest due wait, and the workers by state.
const QUEUE: &str = "
SELECT (SELECT count(*) FROM tasks WHERE state = 'queued' AND run_at <= now())
         + (SELECT coalesce(sum(cardinality(ids) - next), 0) FROM staged) AS queued,
       (SELECT count(*) FROM tasks WHERE state = 'queued' AND run_at > now()) AS scheduled,
       (SELECT count(*) FROM tasks WHERE state = 'running') AS running,
       least((SELECT min(run_at) FROM tasks WHERE state = 'queued' AND run_at <= now()),
             (SELECT min(submitted_at) FROM staged)) AS oldest,
       w.active, w.draining, w.lost, now() AS read_at
FROM (SELECT count(*) FILTER (WHERE last_heartbeat_at >= now() - make_interval(secs => $2)
                               AND NOT draining) AS active,
             count(*) FILTER (WHERE last_heartbeat_at >= now() - make_interval(secs => $2)
                               AND draining) AS draining,
             count(*) FILTER (WHERE last_heartbeat_at < now() - make_interval(secs => $2)) AS lost
      FROM workers WHERE last_heartbeat_at > now() - make_interval(secs => $1)) w";

impl PgQueue {
    /// Batches newest first (ids are time-ordered UUIDv7s, so the primary
    /// key walked backwards gives the order and the cursor). The view of
    /// each is computed only as the walk reaches it, and the walk stops at
    /// `limit` batches that pass the filters.
    pub(crate) async fn batches(
        &self,
        query: &BatchQuery,
        scope: Scope,
    ) -> Result<Vec<BatchView>, StoreError> {
        let sql = format!(
            "SELECT * FROM ({BATCH_SELECT}
                 WHERE ($1::uuid IS NULL OR b.id < $1)
                   AND ($2::text IS NULL OR strpos(b.label, $2) > 0)
                   AND ($5::int IS NULL OR b.tenant_id = $5)
                 ORDER BY b.id DESC) page
             WHERE $3::bool IS NULL OR (page.queued = 0 AND page.running = 0) = $3
             LIMIT $4"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(query.after)
            .bind(query.label.as_deref())
            .bind(query.done)
            .bind(i64::from(query.limit))
            .bind(scope.tenant())
            .fetch_all(&mut *self.conn().await?)
            .await?;
        rows.iter().map(batch_view).collect()
    }

    /// Workers heard from recently, with state, held tasks and throughput.
    pub(crate) async fn workers(&self) -> Result<Vec<WorkerView>, StoreError> {
        let rows = sqlx::query(WORKERS)
            .bind(LOST_LISTED.as_secs_f64())
            .bind(self.lease_secs())
            .fetch_all(&mut *self.conn().await?)
            .await?;
        rows.iter().map(worker_view).collect()
    }

    /// The queue's depth by state, oldest due wait, workers by state.
    pub(crate) async fn queue(&self) -> Result<QueueView, StoreError> {
        let row = sqlx::query(QUEUE)
            .bind(LOST_LISTED.as_secs_f64())
            .bind(self.lease_secs())
            .fetch_one(&mut *self.conn().await?)
            .await?;
        let count = |name: &str| -> Result<u64, StoreError> {
            Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
        };
        let read_at = row.try_get("read_at")?;
        let oldest: Option<chrono::DateTime<chrono::Utc>> = row.try_get("oldest")?;
        Ok(QueueView {
            depth: TaskDepth {
                queued: count("queued")?,
                scheduled: count("scheduled")?,
                running: count("running")?,
            },
            oldest_queued_at: oldest,
            oldest_queued_age_ms: oldest.map(|t| ms_between(t, read_at).max(0.0)),
            workers: WorkerCounts {
                active: count("active")?,
                draining: count("draining")?,
                lost: count("lost")?,
            },
            read_at,
        })
    }
}

/// A worker view from a row of [`WORKERS`].
fn worker_view(row: &PgRow) -> Result<WorkerView, StoreError> {
    let count = |name: &str| -> Result<u64, StoreError> {
        Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
    };
    Ok(WorkerView {
        id: row.try_get("id")?,
        hostname: row.try_get("hostname")?,
        pid: u32::try_from(row.try_get::<i64, _>("pid")?).unwrap_or(0),
        concurrency: u32::try_from(row.try_get::<i32, _>("concurrency")?).unwrap_or(0),
        started_at: row.try_get("started_at")?,
        last_heartbeat_at: row.try_get("last_heartbeat_at")?,
        state: plan::parse_worker_state(row.try_get("state")?)?,
        tasks_held: count("tasks_held")?,
        tasks_last_minute: count("tasks_last_minute")?,
        tasks_done: count("tasks_done")?,
        jobs_done: count("jobs_done")?,
    })
}
