//! Cancellation, worker registration and retention. Cancelling locks its
//! staged rows, then its tasks in id order, then its jobs in id order: the
//! order of completions (`mcq_complete`), so cancelling a running batch
//! while its workers complete never deadlocks.

use sqlx::Connection as _;
use uuid::Uuid;

use super::PgQueue;
use crate::access::Scope;
use crate::plan;
use crate::store::StoreError;
use crate::types::{JobState, WorkerInfo};

/// Deletes the jobs named by `$select` (a chunk at most), with their tasks
/// and results, in one statement returning how many jobs went. There are
/// no foreign keys to cascade: they cost every insert a lookup.
macro_rules! delete_jobs {
    ($select:literal $(,)?) => {
        concat!(
            "WITH gone AS (DELETE FROM jobs WHERE id IN (",
            $select,
            ") RETURNING id),
             tasks_gone AS (DELETE FROM tasks WHERE job_id = ANY(ARRAY(SELECT id FROM gone))),
             results_gone AS (DELETE FROM results WHERE job_id = ANY(ARRAY(SELECT id FROM gone)))
             SELECT count(*) FROM gone"
        )
    };
}

/// Rows deleted per statement by [`PgQueue::prune`], so retention never
/// holds long locks or writes a huge transaction.
const PRUNE_CHUNK: i64 = 5000;

impl PgQueue {
    /// Cancels an unfinished job: queued tasks leave the queue, running ones
    /// lose their lease (their worker learns it from its next heartbeat).
    /// A job outside `scope` is left alone and answered as unknown.
    pub(crate) async fn cancel_job(
        &self,
        id: Uuid,
        scope: Scope,
    ) -> Result<Option<JobState>, StoreError> {
        let mut conn = self.conn().await?;
        let mut tx = conn.begin().await?;
        // A staged job is written out as a queued one first.
        sqlx::query(
            "SELECT mcq_unstage(st.batch_id, $1) FROM staged st
             WHERE st.min_id <= $1 AND st.max_id >= $1 AND $1 = ANY(st.ids)
               AND ($2::int IS NULL OR st.tenant_id = $2)",
        )
        .bind(id)
        .bind(scope.tenant())
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE tasks SET state = 'cancelled', finished_at = now()
             WHERE id = ANY(ARRAY(
                 SELECT id FROM tasks
                 WHERE job_id = $1 AND state IN ('queued', 'running')
                   AND ($2::int IS NULL OR tenant_id = $2)
                 ORDER BY id FOR UPDATE))",
        )
        .bind(id)
        .bind(scope.tenant())
        .execute(&mut *tx)
        .await?;
        let key: Option<Uuid> = sqlx::query_scalar(
            "UPDATE jobs SET state = 'cancelled', finished_at = now()
             WHERE id = $1 AND state IN ('queued', 'running')
               AND ($2::int IS NULL OR tenant_id = $2)
             RETURNING coalesce(batch_id, id)",
        )
        .bind(id)
        .bind(scope.tenant())
        .fetch_optional(&mut *tx)
        .await?;
        let state: Option<String> = sqlx::query_scalar(
            "SELECT state FROM jobs WHERE id = $1 AND ($2::int IS NULL OR tenant_id = $2)",
        )
        .bind(id)
        .bind(scope.tenant())
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        self.announce_finished(super::tasks::count_keys(key));
        state.as_deref().map(plan::parse_state).transpose()
    }

    /// Cancels every unfinished job of a batch; `None` for an unknown batch.
    /// A batch outside `scope` is left alone and answered as unknown.
    pub(crate) async fn cancel_batch(
        &self,
        id: Uuid,
        scope: Scope,
    ) -> Result<Option<u64>, StoreError> {
        let mut conn = self.conn().await?;
        let mut tx = conn.begin().await?;
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM batches
                            WHERE id = $1 AND ($2::int IS NULL OR tenant_id = $2))",
        )
        .bind(id)
        .bind(scope.tenant())
        .fetch_one(&mut *tx)
        .await?;
        if !exists {
            tx.rollback().await?;
            return Ok(None);
        }
        // Its staged jobs are written out as queued ones first.
        sqlx::query("SELECT mcq_unstage($1, NULL)")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE tasks SET state = 'cancelled', finished_at = now()
             WHERE id = ANY(ARRAY(
                 SELECT t.id FROM jobs j JOIN tasks t ON t.job_id = j.id
                 WHERE j.batch_id = $1 AND j.state IN ('queued', 'running')
                   AND t.state IN ('queued', 'running')
                 ORDER BY t.id FOR UPDATE OF t))",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let cancelled = sqlx::query(
            "UPDATE jobs SET state = 'cancelled', finished_at = now()
             WHERE id = ANY(ARRAY(
                 SELECT id FROM jobs WHERE batch_id = $1 AND state IN ('queued', 'running')
                 ORDER BY id FOR UPDATE))
               AND state IN ('queued', 'running')",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if cancelled > 0 {
            self.announce_finished([(id, i64::try_from(cancelled).unwrap_or(i64::MAX))].into());
        }
        Ok(Some(cancelled))
    }

    /// Adds a worker row; the id is new on every start.
    pub(crate) async fn register_worker(&self, info: WorkerInfo) -> Result<Uuid, StoreError> {
        let id = Uuid::new_v4();
        sqlx::query("INSERT INTO workers (id, hostname, pid, concurrency) VALUES ($1, $2, $3, $4)")
            .bind(id)
            .bind(&info.hostname)
            .bind(i64::from(info.pid))
            .bind(i32::try_from(info.concurrency).unwrap_or(i32::MAX))
            .execute(&mut *self.conn().await?)
            .await?;
        Ok(id)
    }

    /// Deletes a worker row (its unfinished tasks return once their leases expire).
    pub(crate) async fn deregister(&self, worker: Uuid) -> Result<(), StoreError> {
        // Its counters go with its row.
        self.tally.take(worker);
        sqlx::query("DELETE FROM workers WHERE id = $1")
            .bind(worker)
            .execute(&mut *self.conn().await?)
            .await?;
        Ok(())
    }

    /// Deletes what finished before `now() - retention`: unbatched jobs,
    /// then whole batches all of whose jobs finished before then, then
    /// expired idempotency keys and long-silent worker rows. Tasks and
    /// results go with their jobs, in the same statement.
    pub(crate) async fn prune(&self) -> Result<u64, StoreError> {
        let keep = self.config.retention.as_secs_f64();
        let mut deleted = 0;
        loop {
            let n: i64 = sqlx::query_scalar(delete_jobs!(
                "SELECT id FROM jobs
                 WHERE batch_id IS NULL AND submitted_at < now() - make_interval(secs => $1)
                   AND finished_at < now() - make_interval(secs => $1)
                 LIMIT $2",
            ))
            .bind(keep)
            .bind(PRUNE_CHUNK)
            .fetch_one(&mut *self.conn().await?)
            .await?;
            let n = n as u64;
            deleted += n;
            if n < PRUNE_CHUNK as u64 {
                break;
            }
        }
        loop {
            let batches: Vec<Uuid> = sqlx::query_scalar(
                "SELECT id FROM batches b
                 WHERE submitted_at < now() - make_interval(secs => $1)
                   AND NOT EXISTS (SELECT 1 FROM staged st WHERE st.batch_id = b.id)
                   AND NOT EXISTS (
                       SELECT 1 FROM jobs j WHERE j.batch_id = b.id
                         AND (j.finished_at IS NULL OR j.finished_at >= now() - make_interval(secs => $1)))
                 LIMIT 100",
            )
            .bind(keep)
            .fetch_all(&mut *self.conn().await?)
            .await?;
            if batches.is_empty() {
                break;
            }
            deleted += self.prune_batches(&batches).await?;
        }
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1)",
        )
        .bind(keep)
        .execute(&mut *self.conn().await?)
        .await?;
        sqlx::query(
            "DELETE FROM workers WHERE last_heartbeat_at < now() - make_interval(secs => $1)",
        )
        .bind(keep)
        .execute(&mut *self.conn().await?)
        .await?;
        Ok(deleted)
    }

    /// Deletes the jobs of finished batches chunk by chunk, then the batches.
    async fn prune_batches(&self, batches: &[Uuid]) -> Result<u64, StoreError> {
        let mut deleted = 0;
        loop {
            let n: i64 = sqlx::query_scalar(delete_jobs!(
                "SELECT id FROM jobs WHERE batch_id = ANY($1) LIMIT $2",
            ))
            .bind(batches)
            .bind(PRUNE_CHUNK)
            .fetch_one(&mut *self.conn().await?)
            .await?;
            let n = n as u64;
            deleted += n;
            if n < PRUNE_CHUNK as u64 {
                break;
            }
        }
        sqlx::query("DELETE FROM batches WHERE id = ANY($1)")
            .bind(batches)
            .execute(&mut *self.conn().await?)
            .await?;
        Ok(deleted)
    }
}
