//! The worker's side on SQLite: the same transitions and fences as
//! `postgres::tasks` (completion is `complete.rs`), each operation one
//! `BEGIN IMMEDIATE` transaction.
//!
//! Claims and completions touch their rows with a few multi-row statements
//! (`UPDATE … FROM (VALUES …)`), not one statement per job: every statement
//! is a hand-off to sqlx's SQLite thread and back, and per-job statements
//! made that hand-off most of the cost of a batch of small jobs on the
//! embedded default.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::time::Duration;

use sqlx::{Row as _, Sqlite, Transaction};
use uuid::Uuid;

use super::{SqliteQueue, duration_us, now_us};
use crate::plan;
use crate::store::StoreError;
use crate::types::{ClaimedTask, Heartbeat, Reaped, WorkerPulse};

/// Tenants with queued tasks, by a skip scan of `tasks_queued` (one index
/// probe per tenant).
const WAITING_TENANTS: &str = "
WITH RECURSIVE q(t) AS (
    SELECT (SELECT tenant_id FROM tasks WHERE state = 'queued' ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT tenant_id FROM tasks WHERE state = 'queued' AND tenant_id > q.t
            ORDER BY tenant_id LIMIT 1)
    FROM q WHERE q.t IS NOT NULL
)
SELECT t FROM q WHERE t IS NOT NULL";

/// The live fleet's slots (heartbeat since `?1`, not draining) and the
/// claiming worker's (`?2`): a claim ahead of its free slots takes its
/// share of the work left (see [`SqliteQueue::claim`]).
const FLEET: &str = "
SELECT coalesce(sum(concurrency), 0),
       (SELECT concurrency FROM workers WHERE id = ?2)
FROM workers WHERE NOT draining AND last_heartbeat_at > ?1";

/// The most queued tasks a claim ahead counts for its share, as on
/// PostgreSQL: past them it takes its whole ask.
const SHARE_COUNTED: u64 = 1024;

/// `x` rounded up, for the claim's shares.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "shares are non-negative and far below 2^53; a float cast saturates"
)]
fn ceil_u64(x: f64) -> u64 {
    x.ceil() as u64
}

/// Up to `?4` due queued tasks of tenant `?5`, by priority then in order
/// (expired leases are requeued by `reap`), each keeping the time of its
/// claim for its completion to copy into its job.
const CLAIM: &str = "
UPDATE tasks
SET state = 'running', attempt = attempt + 1, lease_token = randomblob(16),
    lease_expires_at = ?1 + ?2, worker_id = ?3, claimed_at = ?1
WHERE id IN (
    SELECT id FROM tasks
    WHERE state = 'queued' AND tenant_id = ?5 AND run_at <= ?1
    ORDER BY priority DESC, run_at, id LIMIT ?4)
RETURNING id, job_id, lease_token, attempt, chunk_start, chunk_end";

/// Rows per multi-row statement: at most six parameters a row keeps a
/// statement far below SQLite's limit of 32,766 parameters.
pub(super) const ROWS_PER_STATEMENT: usize = 250;

/// `(?2, ?3), (?4, ?5), …`: `rows` tuples of `width` numbered placeholders,
/// the first one `?first`. The statement text never carries data.
pub(super) fn placeholders(first: usize, rows: usize, width: usize) -> String {
    let mut out = String::with_capacity(rows * width * 6);
    for row in 0..rows {
        if row > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for column in 0..width {
            if column > 0 {
                out.push_str(", ");
            }
            out.push('?');
            out.push_str(&(first + row * width + column).to_string());
        }
        out.push(')');
    }
    out
}

/// `… FROM (SELECT column1 AS a, column2 AS b … FROM (VALUES …)) AS i`: the
/// rows bound to a multi-row statement as a table `i` with named columns.
pub(super) fn values_table(first: usize, rows: usize, columns: &[&str]) -> String {
    let named: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, name)| format!("column{} AS {name}", i + 1))
        .collect();
    format!(
        "(SELECT {} FROM (VALUES {})) AS i",
        named.join(", "),
        placeholders(first, rows, columns.len())
    )
}

impl SqliteQueue {
    /// Claims up to `max` tasks in one transaction, shared between the
    /// tenants with queued tasks as `mcq_claim` shares them on PostgreSQL:
    /// an equal part each, starting one tenant further on every claim,
    /// then what is left to those that filled their part. The `ahead` of
    /// them wanted beyond the worker's free slots take at most the
    /// worker's share of the due queued tasks left after the free slots':
    /// divided among the live fleet's workers (its slots over this
    /// worker's, at least two) and rounded up, as there.
    pub(crate) async fn claim(
        &self,
        worker: Uuid,
        max: u32,
        ahead: u32,
    ) -> Result<Vec<ClaimedTask>, StoreError> {
        let now = now_us();
        let mut tx = self.write().await?;
        let ahead = u64::from(ahead.min(max));
        let max = if ahead > 0 {
            let (slots, own): (i64, Option<i64>) = sqlx::query_as(FLEET)
                .bind(now - self.lease_us())
                .bind(worker)
                .fetch_one(&mut *tx)
                .await?;
            // The fleet in workers of this one's size, at least two; a
            // worker's slots and their sums are far below 2^53.
            let fleet = (slots as f64 / own.unwrap_or(1).max(1) as f64).max(2.0);
            let need = u64::from(max) - ahead;
            // Enough tasks for the whole ask to be this worker's share.
            let fair = need + ceil_u64(fleet * ahead as f64);
            let seen: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM (SELECT 1 FROM tasks
                 WHERE state = 'queued' AND run_at <= ?1 LIMIT ?2)",
            )
            .bind(now)
            .bind(i64::try_from(fair.min(SHARE_COUNTED)).unwrap_or(i64::MAX))
            .fetch_one(&mut *tx)
            .await?;
            let seen = u64::try_from(seen).unwrap_or(0);
            if seen < fair.min(SHARE_COUNTED) {
                let share = ceil_u64(seen.saturating_sub(need) as f64 / fleet);
                u32::try_from(need + ahead.min(share)).unwrap_or(max)
            } else {
                max
            }
        } else {
            max
        };
        let waiting: Vec<i32> = sqlx::query_scalar(WAITING_TENANTS)
            .fetch_all(&mut *tx)
            .await?;
        let n = waiting.len();
        let turn = if n > 1 {
            usize::try_from(self.turn.fetch_add(1, Ordering::Relaxed) % n as u64)
                .expect("below the number of tenants")
        } else {
            0
        };
        let mut rows = Vec::new();
        let mut left = u64::from(max);
        let mut filled = Vec::new();
        for pass in 0..2 {
            for i in 0..n {
                if left == 0 {
                    break;
                }
                let tenant = waiting[(turn + i) % n];
                let part = if pass == 0 {
                    left.div_ceil((n - i) as u64)
                } else if filled.contains(&tenant) {
                    left
                } else {
                    continue;
                };
                let got = sqlx::query(CLAIM)
                    .bind(now)
                    .bind(self.lease_us())
                    .bind(worker)
                    .bind(i64::try_from(part).unwrap_or(i64::MAX))
                    .bind(tenant)
                    .fetch_all(&mut *tx)
                    .await?;
                let taken = got.len() as u64;
                left = left.saturating_sub(taken);
                if pass == 0 && taken == part {
                    filled.push(tenant);
                }
                rows.extend(got);
            }
        }
        let mut per_job: BTreeMap<Uuid, i64> = BTreeMap::new();
        for row in &rows {
            *per_job.entry(row.try_get("job_id")?).or_default() += 1;
        }
        let mut specs = HashMap::with_capacity(per_job.len());
        let per_job: Vec<(Uuid, i64)> = per_job.into_iter().collect();
        for chunk in per_job.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "UPDATE jobs SET state = 'running', started_at = coalesce(started_at, ?1),
                     attempts = attempts + i.n
                 FROM {}
                 WHERE jobs.id = i.id
                 RETURNING jobs.id, jobs.spec, jobs.batch_id",
                values_table(2, chunk.len(), &["id", "n"])
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now);
            for (job_id, n) in chunk {
                query = query.bind(job_id).bind(n);
            }
            for row in query.fetch_all(&mut *tx).await? {
                let spec: &str = row.try_get("spec")?;
                let batch: Option<Uuid> = row.try_get("batch_id")?;
                specs.insert(
                    row.try_get::<Uuid, _>("id")?,
                    (plan::parse_spec(spec)?, batch),
                );
            }
        }
        if specs.len() != per_job.len() {
            return Err(StoreError::Corrupt("a claimed task has no job".into()));
        }
        tx.commit().await?;
        let mut claimed = rows
            .iter()
            .map(|row| {
                let job_id: Uuid = row.try_get("job_id")?;
                let (spec, batch_id) = &specs[&job_id];
                Ok(ClaimedTask {
                    task_id: row.try_get("id")?,
                    job_id,
                    batch_id: *batch_id,
                    lease_token: row.try_get("lease_token")?,
                    attempt: u32::try_from(row.try_get::<i64, _>("attempt")?).unwrap_or(0),
                    spec: spec.clone(),
                    chunks: plan::chunk_range(
                        row.try_get("chunk_start")?,
                        row.try_get("chunk_end")?,
                    ),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        claimed.sort_by_key(|t| t.task_id);
        Ok(claimed)
    }

    /// Renews heartbeat and the presented leases past half their length;
    /// reports presented tasks of cancelled jobs (once) and presented tasks
    /// no longer held.
    pub(crate) async fn heartbeat(
        &self,
        worker: Uuid,
        held: &[(i64, Uuid)],
        pulse: Option<WorkerPulse>,
    ) -> Result<Heartbeat, StoreError> {
        let now = now_us();
        let mut tx = self.write().await?;
        sqlx::query(
            "UPDATE workers SET last_heartbeat_at = ?2, draining = coalesce(?3, draining),
                 tasks_last_minute = coalesce(?4, tasks_last_minute)
             WHERE id = ?1",
        )
        .bind(worker)
        .bind(now)
        .bind(pulse.map(|p| p.draining))
        .bind(pulse.map(|p| i64::try_from(p.tasks_last_minute).unwrap_or(i64::MAX)))
        .execute(&mut *tx)
        .await?;
        let mut reply = Heartbeat::default();
        for &(task_id, token) in held {
            let row = sqlx::query(
                "SELECT state, lease_expires_at FROM tasks WHERE id = ?1 AND lease_token = ?2",
            )
            .bind(task_id)
            .bind(token)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else {
                reply.lost.push(task_id);
                continue;
            };
            let state: String = row.try_get("state")?;
            let expires: Option<i64> = row.try_get("lease_expires_at")?;
            if state != "running" {
                sqlx::query(
                    "UPDATE tasks SET lease_token = NULL, lease_expires_at = NULL WHERE id = ?1",
                )
                .bind(task_id)
                .execute(&mut *tx)
                .await?;
                reply.cancelled.push(task_id);
            } else if expires.is_none_or(|at| at < now + self.lease_us() / 2) {
                // Past half its length: renew (as on PostgreSQL).
                sqlx::query("UPDATE tasks SET lease_expires_at = ?2 WHERE id = ?1")
                    .bind(task_id)
                    .bind(now + self.lease_us())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        reply.cancelled.sort_unstable();
        reply.lost.sort_unstable();
        if let Some(gap) = pulse.and_then(|p| p.reaper_gap) {
            reply.reaper_turn = self.take_reaper_turn(gap).await?;
        }
        Ok(reply)
    }

    /// Takes the fleet's reaper turn if the last reap is older than `gap`
    /// (migrations/sqlite/0006_reaper_turn.sql): one statement, its own
    /// transaction.
    pub(crate) async fn take_reaper_turn(&self, gap: Duration) -> Result<bool, StoreError> {
        let now = now_us();
        let taken = sqlx::query("UPDATE reaper_turn SET reaped_at = ?1 WHERE reaped_at <= ?2")
            .bind(now)
            .bind(now.saturating_sub(duration_us(gap)))
            .execute(&self.writer)
            .await?
            .rows_affected();
        Ok(taken == 1)
    }

    /// Requeues expired leases with attempts left (keeping their place in
    /// the queue) and fails those on their last attempt, with their jobs.
    pub(crate) async fn reap(&self) -> Result<Reaped, StoreError> {
        let now = now_us();
        let mut tx = self.write().await?;
        let requeued = sqlx::query(
            "UPDATE tasks SET state = 'queued', lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
             WHERE state = 'running' AND lease_expires_at < ?1 AND attempt < ?2",
        )
        .bind(now)
        .bind(i64::from(self.config.max_attempts))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let rows = sqlx::query(
            "UPDATE tasks SET state = 'failed', finished_at = ?1,
                 error = 'lease expired on attempt ' || attempt || ' of ' || ?2 || ': the worker holding \
                          the task was lost each time (killed, crashed or cut off)',
                 lease_token = NULL, lease_expires_at = NULL
             WHERE state = 'running' AND lease_expires_at < ?1 AND attempt >= ?2
             RETURNING job_id, error",
        )
        .bind(now)
        .bind(i64::from(self.config.max_attempts))
        .fetch_all(&mut *tx)
        .await?;
        for row in &rows {
            fail_job(&mut tx, row.try_get("job_id")?, row.try_get("error")?, now).await?;
        }
        tx.commit().await?;
        Ok(Reaped {
            requeued,
            failed: rows.len() as u64,
        })
    }

    /// Fenced failure: retry after backoff, or fail the job on the last attempt.
    pub(crate) async fn fail(
        &self,
        _worker: Uuid,
        task_id: i64,
        token: Uuid,
        error: &str,
    ) -> Result<bool, StoreError> {
        let now = now_us();
        let mut tx = self.write().await?;
        let row = sqlx::query(
            "UPDATE tasks SET
                 state = CASE WHEN attempt < ?3 THEN 'queued' ELSE 'failed' END,
                 run_at = CASE WHEN attempt < ?3 THEN ?4 + ?5 * (1 << min(max(attempt - 1, 0), 30)) ELSE run_at END,
                 finished_at = CASE WHEN attempt < ?3 THEN NULL ELSE ?4 END,
                 error = ?6, lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
             WHERE id = ?1 AND state = 'running' AND lease_token = ?2
             RETURNING job_id, state",
        )
        .bind(task_id)
        .bind(token)
        .bind(i64::from(self.config.max_attempts))
        .bind(now)
        .bind(duration_us(self.config.retry_backoff))
        .bind(error)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(false) };
        let job_id: Uuid = row.try_get("job_id")?;
        let state: String = row.try_get("state")?;
        if state == "failed" {
            fail_job(&mut tx, job_id, error, now).await?;
        } else {
            requeue_job(&mut tx, job_id, 0).await?;
        }
        tx.commit().await?;
        if state == "failed" {
            self.announcer.announce(Uuid::nil(), 1);
        } else {
            self.wake();
        }
        Ok(true)
    }

    /// Fenced hand-back without using up an attempt; returns how many were held.
    pub(crate) async fn release(
        &self,
        _worker: Uuid,
        tasks: &[(i64, Uuid)],
    ) -> Result<usize, StoreError> {
        let now = now_us();
        let mut tx = self.write().await?;
        let mut per_job: BTreeMap<Uuid, i64> = BTreeMap::new();
        for (task_id, token) in tasks {
            let job_id: Option<Uuid> = sqlx::query_scalar(
                "UPDATE tasks SET state = 'queued', attempt = max(attempt - 1, 0), run_at = ?3,
                     lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
                 WHERE id = ?1 AND state = 'running' AND lease_token = ?2
                 RETURNING job_id",
            )
            .bind(task_id)
            .bind(token)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(job_id) = job_id {
                *per_job.entry(job_id).or_default() += 1;
            }
        }
        let released = usize::try_from(per_job.values().sum::<i64>())
            .expect("a count of released tasks is neither negative nor above the held tasks");
        for (job_id, n) in per_job {
            requeue_job(&mut tx, job_id, n).await?;
        }
        tx.commit().await?;
        if released > 0 {
            self.wake();
        }
        Ok(released)
    }
}

/// A job whose task failed for good fails with its error; its other
/// unfinished tasks are cancelled (running ones keep their token until
/// their worker's heartbeat is told).
async fn fail_job(
    tx: &mut Transaction<'static, Sqlite>,
    job_id: Uuid,
    error: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE tasks SET state = 'cancelled', finished_at = ?2
         WHERE job_id = ?1 AND state IN ('queued', 'running')",
    )
    .bind(job_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE jobs SET state = 'failed', error = ?2, finished_at = ?3
         WHERE id = ?1 AND state IN ('queued', 'running')",
    )
    .bind(job_id)
    .bind(error)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// After tasks of a job went back to the queue: give back `refund`
/// attempts, and return the job to `queued` when none of its tasks runs.
async fn requeue_job(
    tx: &mut Transaction<'static, Sqlite>,
    job_id: Uuid,
    refund: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE jobs SET
             attempts = max(attempts - ?2, 0),
             state = CASE WHEN NOT EXISTS (SELECT 1 FROM tasks WHERE job_id = ?1 AND state = 'running')
                     THEN 'queued' ELSE state END
         WHERE id = ?1 AND state = 'running'",
    )
    .bind(job_id)
    .bind(refund)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
