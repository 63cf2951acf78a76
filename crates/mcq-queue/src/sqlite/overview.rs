//! What operators and dashboards read about the service as a whole on
//! SQLite: batches newest first, workers with their state and load, and
//! the queue's depth.

use sqlx::Row as _;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::{SqliteQueue, duration_us, now_us, time};
use crate::access::Scope;
use crate::plan;
use crate::store::{LOST_LISTED, StoreError};
use crate::types::{BatchQuery, BatchView, QueueView, TaskDepth, WorkerCounts, WorkerView};

/// Candidate batches read per round while a state filter skips some.
const SCAN: u32 = 100;

impl SqliteQueue {
    /// Batches newest first (ids are time-ordered UUIDv7s, whose bytes
    /// compare in time order). Batch views are read one by one, in
    /// process, until `limit` pass the state filter.
    pub(crate) async fn batches(
        &self,
        query: &BatchQuery,
        scope: Scope,
    ) -> Result<Vec<BatchView>, StoreError> {
        let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
        let mut page = Vec::new();
        let mut after = query.after;
        loop {
            let ids: Vec<Uuid> = sqlx::query_scalar(
                "SELECT id FROM batches
                 WHERE (?1 IS NULL OR id < ?1) AND (?2 IS NULL OR instr(label, ?2) > 0)
                   AND (?4 IS NULL OR tenant_id = ?4)
                 ORDER BY id DESC LIMIT ?3",
            )
            .bind(after)
            .bind(query.label.as_deref())
            .bind(i64::from(SCAN))
            .bind(scope.tenant())
            .fetch_all(&self.reader)
            .await?;
            let scanned = ids.len();
            for id in ids {
                after = Some(id);
                // A batch pruned since the id was read is simply skipped.
                let Some(view) = self.batch(id, scope).await? else {
                    continue;
                };
                if query.done.is_none_or(|done| view.done == done) {
                    page.push(view);
                    if page.len() == limit {
                        return Ok(page);
                    }
                }
            }
            if scanned < usize::try_from(SCAN).unwrap_or(usize::MAX) {
                return Ok(page);
            }
        }
    }

    /// Workers heard from recently, with state, held tasks and throughput.
    pub(crate) async fn workers(&self) -> Result<Vec<WorkerView>, StoreError> {
        let now = now_us();
        let rows = sqlx::query(
            "SELECT w.id, w.hostname, w.pid, w.concurrency, w.started_at, w.last_heartbeat_at,
                    w.tasks_done, w.jobs_done, w.tasks_last_minute, coalesce(h.n, 0) AS tasks_held,
                    CASE WHEN w.last_heartbeat_at < ?2 THEN 'lost'
                         WHEN w.draining THEN 'draining' ELSE 'active' END AS state
             FROM workers w
             LEFT JOIN (SELECT worker_id, count(*) AS n FROM tasks WHERE state = 'running'
                        GROUP BY worker_id) h ON h.worker_id = w.id
             WHERE w.last_heartbeat_at > ?1
             ORDER BY w.started_at, w.id",
        )
        .bind(now - duration_us(LOST_LISTED))
        .bind(now - self.lease_us())
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(worker_view).collect()
    }

    /// The queue's depth by state, oldest due wait, workers by state.
    pub(crate) async fn queue(&self) -> Result<QueueView, StoreError> {
        let now = now_us();
        let row = sqlx::query(
            "SELECT (SELECT count(*) FROM tasks WHERE state = 'queued' AND run_at <= ?3) AS queued,
                    (SELECT count(*) FROM tasks WHERE state = 'queued' AND run_at > ?3) AS scheduled,
                    (SELECT count(*) FROM tasks WHERE state = 'running') AS running,
                    (SELECT min(run_at) FROM tasks WHERE state = 'queued' AND run_at <= ?3) AS oldest,
                    coalesce(sum(last_heartbeat_at >= ?2 AND NOT draining), 0) AS active,
                    coalesce(sum(last_heartbeat_at >= ?2 AND draining), 0) AS draining,
                    coalesce(sum(last_heartbeat_at < ?2), 0) AS lost
             FROM workers WHERE last_heartbeat_at > ?1",
        )
        .bind(now - duration_us(LOST_LISTED))
        .bind(now - self.lease_us())
        .bind(now)
        .fetch_one(&self.reader)
        .await?;
        let count = |name: &str| -> Result<u64, StoreError> {
            Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
        };
        let oldest: Option<i64> = row.try_get("oldest")?;
        Ok(QueueView {
            depth: TaskDepth {
                queued: count("queued")?,
                scheduled: count("scheduled")?,
                running: count("running")?,
            },
            oldest_queued_at: oldest.map(time).transpose()?,
            oldest_queued_age_ms: oldest.map(|t| (now - t).max(0) as f64 / 1e3),
            workers: WorkerCounts {
                active: count("active")?,
                draining: count("draining")?,
                lost: count("lost")?,
            },
            read_at: time(now)?,
        })
    }
}

/// A worker view from a row of the workers statement.
fn worker_view(row: &SqliteRow) -> Result<WorkerView, StoreError> {
    let count = |name: &str| -> Result<u64, StoreError> {
        Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
    };
    Ok(WorkerView {
        id: row.try_get("id")?,
        hostname: row.try_get("hostname")?,
        pid: u32::try_from(row.try_get::<i64, _>("pid")?).unwrap_or(0),
        concurrency: u32::try_from(row.try_get::<i64, _>("concurrency")?).unwrap_or(0),
        started_at: time(row.try_get("started_at")?)?,
        last_heartbeat_at: time(row.try_get("last_heartbeat_at")?)?,
        state: plan::parse_worker_state(row.try_get("state")?)?,
        tasks_held: count("tasks_held")?,
        tasks_last_minute: count("tasks_last_minute")?,
        tasks_done: count("tasks_done")?,
        jobs_done: count("jobs_done")?,
    })
}
