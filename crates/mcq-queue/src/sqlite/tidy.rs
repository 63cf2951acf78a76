//! Cancellation, worker registration and retention on SQLite.

use uuid::Uuid;

use super::{SqliteQueue, duration_us, now_us};
use crate::access::Scope;
use crate::plan;
use crate::store::StoreError;
use crate::types::{JobState, WorkerInfo};

/// Jobs deleted per transaction by [`SqliteQueue::prune`]: each chunk
/// holds the write lock only briefly, so workers keep going meanwhile.
const PRUNE_CHUNK: i64 = 2000;

impl SqliteQueue {
    /// Cancels an unfinished job; running tasks are told by heartbeat.
    /// A job outside `scope` is left alone and answered as unknown.
    pub(crate) async fn cancel_job(
        &self,
        id: Uuid,
        scope: Scope,
    ) -> Result<Option<JobState>, StoreError> {
        let now = now_us();
        let mut tx = self.write().await?;
        sqlx::query(
            "UPDATE tasks SET state = 'cancelled', finished_at = ?2
             WHERE job_id = ?1 AND state IN ('queued', 'running')
               AND (?3 IS NULL OR tenant_id = ?3)",
        )
        .bind(id)
        .bind(now)
        .bind(scope.tenant())
        .execute(&mut *tx)
        .await?;
        let state: Option<String> = sqlx::query_scalar(
            "UPDATE jobs SET state = CASE WHEN state IN ('queued', 'running') THEN 'cancelled' ELSE state END,
                 finished_at = CASE WHEN state IN ('queued', 'running') THEN ?2 ELSE finished_at END
             WHERE id = ?1 AND (?3 IS NULL OR tenant_id = ?3) RETURNING state",
        )
        .bind(id)
        .bind(now)
        .bind(scope.tenant())
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        self.announcer.announce(Uuid::nil(), 1);
        state.as_deref().map(plan::parse_state).transpose()
    }

    /// Cancels every unfinished job of a batch; `None` for an unknown batch.
    /// A batch outside `scope` is left alone and answered as unknown.
    pub(crate) async fn cancel_batch(
        &self,
        id: Uuid,
        scope: Scope,
    ) -> Result<Option<u64>, StoreError> {
        let now = now_us();
        let mut tx = self.write().await?;
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM batches WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2))",
        )
        .bind(id)
        .bind(scope.tenant())
        .fetch_one(&mut *tx)
        .await?;
        if !exists {
            return Ok(None);
        }
        sqlx::query(
            "UPDATE tasks SET state = 'cancelled', finished_at = ?2
             WHERE state IN ('queued', 'running')
               AND job_id IN (SELECT id FROM jobs WHERE batch_id = ?1 AND state IN ('queued', 'running'))",
        )
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let cancelled = sqlx::query(
            "UPDATE jobs SET state = 'cancelled', finished_at = ?2
             WHERE batch_id = ?1 AND state IN ('queued', 'running')",
        )
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        self.announcer.announce(Uuid::nil(), cancelled);
        Ok(Some(cancelled))
    }

    /// Adds a worker row; the id is new on every start.
    pub(crate) async fn register_worker(&self, info: WorkerInfo) -> Result<Uuid, StoreError> {
        let id = Uuid::new_v4();
        let now = now_us();
        sqlx::query(
            "INSERT INTO workers (id, hostname, pid, concurrency, started_at, last_heartbeat_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
        )
        .bind(id)
        .bind(&info.hostname)
        .bind(i64::from(info.pid))
        .bind(i64::from(info.concurrency))
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(id)
    }

    /// Deletes a worker row.
    pub(crate) async fn deregister(&self, worker: Uuid) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM workers WHERE id = ?1")
            .bind(worker)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Deletes what finished before the retention horizon, as on PostgreSQL:
    /// unbatched jobs, whole finished batches, old keys and silent workers.
    pub(crate) async fn prune(&self) -> Result<u64, StoreError> {
        let cutoff = now_us() - duration_us(self.config.retention);
        let mut deleted = 0;
        loop {
            let n = sqlx::query(
                "DELETE FROM jobs WHERE id IN (
                     SELECT id FROM jobs WHERE batch_id IS NULL AND finished_at < ?1 LIMIT ?2)",
            )
            .bind(cutoff)
            .bind(PRUNE_CHUNK)
            .execute(&self.writer)
            .await?
            .rows_affected();
            deleted += n;
            if n < PRUNE_CHUNK as u64 {
                break;
            }
        }
        loop {
            let batches: Vec<Uuid> = sqlx::query_scalar(
                "SELECT id FROM batches b
                 WHERE submitted_at < ?1
                   AND NOT EXISTS (
                       SELECT 1 FROM jobs j WHERE j.batch_id = b.id
                         AND (j.finished_at IS NULL OR j.finished_at >= ?1))
                 LIMIT 100",
            )
            .bind(cutoff)
            .fetch_all(&self.reader)
            .await?;
            if batches.is_empty() {
                break;
            }
            for batch in batches {
                deleted += self.prune_batch(batch).await?;
            }
        }
        sqlx::query("DELETE FROM idempotency_keys WHERE created_at < ?1")
            .bind(cutoff)
            .execute(&self.writer)
            .await?;
        sqlx::query("DELETE FROM workers WHERE last_heartbeat_at < ?1")
            .bind(cutoff)
            .execute(&self.writer)
            .await?;
        Ok(deleted)
    }

    /// Deletes one finished batch's jobs chunk by chunk, then the batch.
    async fn prune_batch(&self, batch: Uuid) -> Result<u64, StoreError> {
        let mut deleted = 0;
        loop {
            let n = sqlx::query(
                "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE batch_id = ?1 LIMIT ?2)",
            )
            .bind(batch)
            .bind(PRUNE_CHUNK)
            .execute(&self.writer)
            .await?
            .rows_affected();
            deleted += n;
            if n < PRUNE_CHUNK as u64 {
                break;
            }
        }
        sqlx::query("DELETE FROM batches WHERE id = ?1")
            .bind(batch)
            .execute(&self.writer)
            .await?;
        Ok(deleted)
    }
}
