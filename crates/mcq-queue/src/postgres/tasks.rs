//! The worker's side: claiming under a lease, renewing it, and ending it
//! by failure or hand-back (completion is `complete.rs`). Every statement
//! that ends a lease is fenced: it only touches rows still `running` under
//! the caller's token.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use sqlx::Connection as _;
use sqlx::Row as _;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::PgQueue;
use crate::plan;
use crate::store::StoreError;
use crate::types::{Claim, ClaimedTask, Heartbeat, Reaped, WorkerPulse};

// Row estimates of CTEs are guesses (usually one row), so the queue's
// statements (here and in functions/) avoid joining one CTE against
// another: a nested loop over two CTEs of a thousand rows each is a
// million comparisons. Results that belong to different CTEs come back as
// separate rows of a UNION ALL instead.
//
// Fenced statements find their leases without a join: `id = ANY($ids) AND
// lease_token = ANY($tokens)`. Tokens are random and new on every claim, so
// a row whose token is among the presented ones carries exactly the token
// presented with its id. A join of the presented pairs with `tasks` let the
// planner put the partial index of running tasks on the outside of a nested
// loop whenever its statistics said few tasks were running (just after an
// ANALYZE of an idle queue, say), rescanning the pairs once per running
// task: 5,529 × 2,000 rows, 7 s for one completion (auto_explain, 2026-11-30).
//
// The `lease_token = ANY` filter compares each row with every presented
// token, which is harmless for the tens of tasks a completion carries but
// quadratic in a heartbeat that presents a whole prefetch: the heartbeat
// reads the presented rows by id and pairs tokens in Rust instead.

/// Claim: `mcq_claim` (functions/mcq_claim.sql) takes due queued tasks in
/// order under new leases and starts their jobs. It lives in the database
/// so that its plan can be pinned to the ordered walk of the queued-tasks
/// index whatever the statistics say. Expired leases are
/// not looked for here: the reaper puts them back in the queue, so a claim
/// never scans running tasks (whose index keeps the entries of deleted
/// tasks until vacuum).
const CLAIM: &str = "SELECT id, job_id, lease_token, attempt, chunk_start, chunk_end, spec \
                     FROM mcq_claim($1, mcq_claim_ahead($2, $4), $3)";

/// Reap: expired leases, once, skipping rows another reaper holds. Tasks
/// with attempts left go back to the queue (keeping their place: `run_at`
/// is unchanged); those on their last attempt fail. Failed rows come back
/// with their job and error; a requeued row comes back as a bare count row.
const REAP: &str = "
WITH expired AS (
    SELECT id, attempt FROM tasks
    WHERE state = 'running' AND lease_expires_at < now()
    FOR UPDATE SKIP LOCKED
), requeued AS (
    UPDATE tasks SET state = 'queued', lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
    WHERE id = ANY(ARRAY(SELECT id FROM expired WHERE attempt < $1))
    RETURNING id
), failed AS (
    UPDATE tasks SET state = 'failed', finished_at = now(),
        error = format('lease expired on attempt %s of %s: the worker holding the task \
                        was lost each time (killed, crashed or cut off)', attempt, $1::int),
        lease_token = NULL, lease_expires_at = NULL
    WHERE id = ANY(ARRAY(SELECT id FROM expired WHERE attempt >= $1))
    RETURNING id, job_id, error
)
SELECT id, job_id, error FROM failed
UNION ALL
SELECT id, NULL, NULL FROM requeued";

/// Heartbeat, step 1: marks the worker alive and reads what the presented
/// tasks are now, by primary key. Whether each row still carries the token
/// presented with its id is decided in Rust, against a map of the pairs:
/// a filter `lease_token = ANY($tokens)` compares every row with every
/// presented token, and a worker that holds a prefetch of 2,000 tiny tasks
/// made each heartbeat 4 million comparisons (64 ms per heartbeat, 15% of
/// the database's time in a burn-down).
/// `due` marks running leases past half their length.
/// A worker that tells of itself (`$4`, `$5`) also sets its draining flag
/// and recent throughput; one that does not leaves them as they are.
/// The heartbeat also adds to the worker's counters what the store's
/// completions recorded since the last write (`$7` tasks, `$8` jobs;
/// `tally.rs`).
/// One that holds tasks clears its idle mark, and, with `$6` (a store
/// that hears no announcements now: a busy worker, which listens to
/// nothing, or any worker through a transaction-mode pool), asks for one
/// live idle peer, returned as a row with only `idle_peer` set.
/// With `$9` (seconds) it takes the fleet's reaper turn if no worker reaped
/// within that gap, as `take_reaper_turn` does, and says so in a row with
/// only `reaper_turn` set: one round trip a heartbeat interval, not two.
/// A heartbeat that adds no counts (every heartbeat of an idle worker)
/// commits without waiting for the disk: what it writes (the worker alive,
/// the reaper turn taken, its idle mark cleared, its draining flag and
/// throughput) is written again by the next heartbeat, a turn lost in a
/// crash is taken again, and a flush per heartbeat was about half of what
/// an idle fleet cost the database. Counts wait for the disk, as the
/// completions that recorded them did. (`set_config(…, true)` lasts to the
/// commit; the branch returns no row.)
pub(super) const HEARTBEAT_READ: &str = "
WITH turn AS (
    UPDATE reaper_turn SET reaped_at = now()
    WHERE $9::float8 IS NOT NULL AND reaped_at <= now() - make_interval(secs => $9)
    RETURNING true AS taken
), beat AS (
    UPDATE workers SET last_heartbeat_at = now(), draining = coalesce($4, draining),
                       tasks_last_minute = coalesce($5, tasks_last_minute),
                       tasks_done = tasks_done + $7, jobs_done = jobs_done + $8,
                       idle_since = CASE WHEN cardinality($2::int8[]) > 0 THEN NULL
                                         ELSE idle_since END
    WHERE id = $1
)
SELECT t.id, t.lease_token, t.state = 'running' AS running,
       t.lease_expires_at < now() + make_interval(secs => $3 / 2) AS due,
       NULL::uuid AS idle_peer, NULL::bool AS reaper_turn
FROM tasks t
WHERE t.id = ANY($2::int8[])
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, turn.taken FROM turn
UNION ALL
(SELECT NULL, NULL, NULL, NULL, w.id, NULL
 FROM workers w
 WHERE $6 AND cardinality($2::int8[]) > 0 AND w.idle_since IS NOT NULL AND w.id <> $1
   AND w.last_heartbeat_at > now() - make_interval(secs => $3)
 LIMIT 1)
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL
WHERE CASE WHEN $7 = 0 AND $8 = 0
           THEN set_config('synchronous_commit', 'off', true) IS NULL
           ELSE false END";

/// Heartbeat, step 2 (only when step 1 found something to do): renews the
/// due leases and tells, once, the held tasks of ended jobs by dropping
/// their token. Both stay fenced (token and state are checked again on the
/// row), and rows another transaction holds (a completion in flight) are
/// skipped, never waited for, so a heartbeat cannot deadlock with its own
/// worker's completions. These sets are small: a lease is renewed at most
/// once per half lease, a cancelled task told once.
const HEARTBEAT_WRITE: &str = "
WITH renewed AS (
    UPDATE tasks SET lease_expires_at = now() + make_interval(secs => $5)
    WHERE id IN (
        SELECT t.id FROM tasks t
        WHERE t.id = ANY($1::int8[]) AND t.lease_token = ANY($2::uuid[]) AND t.state = 'running'
        ORDER BY t.id
        FOR UPDATE SKIP LOCKED)
)
UPDATE tasks SET lease_token = NULL, lease_expires_at = NULL
WHERE id IN (
    SELECT t.id FROM tasks t
    WHERE t.id = ANY($3::int8[]) AND t.lease_token = ANY($4::uuid[]) AND t.state <> 'running'
    ORDER BY t.id
    FOR UPDATE SKIP LOCKED)
RETURNING id";

impl PgQueue {
    /// Claims up to `max` tasks in one statement, `ahead` of them beyond
    /// the worker's free slots (see `mcq_claim`).
    pub(crate) async fn claim(
        &self,
        worker: Uuid,
        max: u32,
        ahead: u32,
    ) -> Result<Claim, StoreError> {
        let rows = sqlx::query(CLAIM)
            .bind(worker)
            .bind(i64::from(max))
            .bind(self.lease_secs())
            .bind(i64::from(ahead))
            .fetch_all(&mut *self.conn().await?)
            .await?;
        let tasks = claimed_tasks(&rows)?;
        self.hold(&tasks);
        Ok(Claim {
            tasks,
            contended: contended(&rows)?,
        })
    }

    /// Renews the worker's heartbeat and the presented leases in one
    /// statement; presented tasks of cancelled jobs are told once and let
    /// go, and presented tasks not held under their token are reported lost.
    pub(crate) async fn heartbeat(
        &self,
        worker: Uuid,
        held: &[(i64, Uuid)],
        pulse: Option<WorkerPulse>,
    ) -> Result<Heartbeat, StoreError> {
        let ids: Vec<i64> = held.iter().map(|h| h.0).collect();
        let counts = self.tally.take(worker);
        let rows = sqlx::query(HEARTBEAT_READ)
            .bind(worker)
            .bind(&ids)
            .bind(self.lease_secs())
            .bind(pulse.map(|p| p.draining))
            .bind(pulse.map(|p| i64::try_from(p.tasks_last_minute).unwrap_or(i64::MAX)))
            // A worker that hears no announcement now (busy, so not
            // listening, or through a transaction-mode pool) asks here.
            .bind(!self.hears_work())
            .bind(counts.tasks)
            .bind(counts.jobs)
            .bind(pulse.and_then(|p| p.reaper_gap).map(|g| g.as_secs_f64()))
            .fetch_all(&mut *self.conn().await?)
            .await
            .inspect_err(|_| self.tally.add(worker, counts))?;
        let mut now = HashMap::with_capacity(rows.len());
        let mut reaper_turn = false;
        for row in &rows {
            if row.try_get::<Option<bool>, _>("reaper_turn")? == Some(true) {
                reaper_turn = true;
                continue;
            }
            if let Some(peer) = row.try_get::<Option<Uuid>, _>("idle_peer")? {
                self.tell_idle(peer);
                continue;
            }
            let id: i64 = row.try_get("id")?;
            let token: Option<Uuid> = row.try_get("lease_token")?;
            let running: bool = row.try_get("running")?;
            let due: Option<bool> = row.try_get("due")?;
            now.insert(id, (token, running, due.unwrap_or(false)));
        }
        let mut reply = Heartbeat {
            reaper_turn,
            ..Heartbeat::default()
        };
        let (mut renew, mut tell) = (Vec::new(), Vec::new());
        for &(id, token) in held {
            match now.get(&id) {
                Some(&(Some(held_by), running, due)) if held_by == token => {
                    if !running {
                        tell.push((id, token));
                    } else if due {
                        renew.push((id, token));
                    }
                }
                _ => reply.lost.push(id),
            }
        }
        if !renew.is_empty() || !tell.is_empty() {
            let (renew_ids, renew_tokens): (Vec<i64>, Vec<Uuid>) = renew.into_iter().unzip();
            let (tell_ids, tell_tokens): (Vec<i64>, Vec<Uuid>) = tell.into_iter().unzip();
            reply.cancelled = sqlx::query_scalar(HEARTBEAT_WRITE)
                .bind(renew_ids)
                .bind(renew_tokens)
                .bind(tell_ids)
                .bind(tell_tokens)
                .bind(self.lease_secs())
                .fetch_all(&mut *self.conn().await?)
                .await?;
        }
        reply.cancelled.sort_unstable();
        reply.lost.sort_unstable();
        self.let_go(reply.lost.iter().chain(&reply.cancelled).copied());
        Ok(reply)
    }

    /// Takes the fleet's reaper turn if the last reap is older than `gap`
    /// (migrations/postgres/0006_reaper_turn.sql). An offer that does not
    /// match writes nothing and takes no lock; offers racing a taker wait
    /// for its commit and then find the turn taken.
    pub(crate) async fn take_reaper_turn(&self, gap: Duration) -> Result<bool, StoreError> {
        let taken = sqlx::query(
            "UPDATE reaper_turn SET reaped_at = now()
             WHERE reaped_at <= now() - make_interval(secs => $1)",
        )
        .bind(gap.as_secs_f64())
        .execute(&mut *self.conn().await?)
        .await?
        .rows_affected();
        Ok(taken == 1)
    }

    /// Requeues expired leases with attempts left and fails those on their
    /// last attempt, with their jobs (siblings cancelled, as for `fail`).
    pub(crate) async fn reap(&self) -> Result<Reaped, StoreError> {
        let mut conn = self.conn().await?;
        let mut tx = conn.begin().await?;
        let rows = sqlx::query(REAP)
            .bind(i32::try_from(self.config.max_attempts).unwrap_or(i32::MAX))
            .fetch_all(&mut *tx)
            .await?;
        if rows.is_empty() {
            // Ended here, not when the connection is next used: a store
            // keeps its last connection, which would wait idle in a
            // transaction until then.
            tx.rollback().await?;
            return Ok(Reaped::default());
        }
        let mut reaped = Reaped::default();
        let mut jobs = Vec::new();
        let mut errors = Vec::new();
        for row in &rows {
            match row.try_get::<Option<Uuid>, _>("job_id")? {
                Some(job) => {
                    reaped.failed += 1;
                    jobs.push(job);
                    errors.push(row.try_get::<String, _>("error")?);
                }
                None => reaped.requeued += 1,
            }
        }
        let finished = if jobs.is_empty() {
            BTreeMap::new()
        } else {
            fail_jobs(&mut tx, &jobs, &errors).await?
        };
        tx.commit().await?;
        self.announce_finished(finished);
        if reaped.requeued > 0 {
            self.announce_work(usize::try_from(reaped.requeued).unwrap_or(usize::MAX));
            self.wake_own_workers();
        }
        Ok(reaped)
    }

    /// Fenced failure: back to the queue after a backoff, or — on the last
    /// attempt — the job fails and its other tasks are cancelled. The job's
    /// unfinished tasks are locked first, in id order (the order of
    /// completions and cancellations), since the last attempt changes them.
    pub(crate) async fn fail(
        &self,
        _worker: Uuid,
        task_id: i64,
        token: Uuid,
        error: &str,
    ) -> Result<bool, StoreError> {
        let mut conn = self.conn().await?;
        let mut tx = conn.begin().await?;
        let row = sqlx::query(
            "UPDATE tasks SET
                 state = CASE WHEN attempt < $3 THEN 'queued' ELSE 'failed' END,
                 run_at = CASE WHEN attempt < $3
                     THEN now() + make_interval(secs => $4 * power(2, least(attempt - 1, 30)))
                     ELSE run_at END,
                 finished_at = CASE WHEN attempt < $3 THEN NULL ELSE now() END,
                 error = $5, lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
             WHERE id = $1 AND state = 'running' AND lease_token = $2
               AND id = ANY(ARRAY(
                   SELECT t.id FROM tasks t
                   WHERE t.job_id = (SELECT job_id FROM tasks WHERE id = $1)
                     AND t.state IN ('queued', 'running')
                   ORDER BY t.id FOR UPDATE))
             RETURNING job_id, state",
        )
        .bind(task_id)
        .bind(token)
        .bind(i32::try_from(self.config.max_attempts).unwrap_or(i32::MAX))
        .bind(self.config.retry_backoff.as_secs_f64())
        .bind(error)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            self.let_go([task_id]);
            return Ok(false);
        };
        let job_id: Uuid = row.try_get("job_id")?;
        let state: String = row.try_get("state")?;
        let mut finished = BTreeMap::new();
        if state == "failed" {
            finished = fail_jobs(&mut tx, &[job_id], &[error.to_owned()]).await?;
        } else {
            requeue_jobs(&mut tx, &[job_id], &[task_id], 0).await?;
        }
        tx.commit().await?;
        self.let_go_into([task_id], &mut finished);
        self.announce_finished(finished);
        if state != "failed" {
            self.announce_work(1);
            self.wake_own_workers();
        }
        Ok(true)
    }

    /// Fenced hand-back without using up an attempt; returns how many of
    /// the tasks were still held.
    pub(crate) async fn release(
        &self,
        _worker: Uuid,
        tasks: &[(i64, Uuid)],
    ) -> Result<usize, StoreError> {
        let ids: Vec<i64> = tasks.iter().map(|t| t.0).collect();
        let tokens: Vec<Uuid> = tasks.iter().map(|t| t.1).collect();
        let mut conn = self.conn().await?;
        let mut tx = conn.begin().await?;
        let rows = sqlx::query(
            "UPDATE tasks t SET state = 'queued', attempt = greatest(t.attempt - 1, 0), run_at = now(),
                 lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
             WHERE t.id = ANY($1::int8[]) AND t.lease_token = ANY($2::uuid[]) AND t.state = 'running'
             RETURNING t.id, t.job_id",
        )
        .bind(ids)
        .bind(tokens)
        .fetch_all(&mut *tx)
        .await?;
        if !rows.is_empty() {
            let released: Vec<i64> = rows
                .iter()
                .map(|r| r.try_get("id"))
                .collect::<Result<_, _>>()?;
            let jobs: Vec<Uuid> = rows
                .iter()
                .map(|r| r.try_get("job_id"))
                .collect::<Result<_, _>>()?;
            requeue_jobs(&mut tx, &jobs, &released, 1).await?;
        }
        tx.commit().await?;
        self.let_go(tasks.iter().map(|t| t.0));
        if !rows.is_empty() {
            self.announce_work(rows.len());
            self.wake_own_workers();
        }
        Ok(rows.len())
    }
}

/// The claimed tasks among a claim's rows (`mcq_claim`'s shape: task rows,
/// then one spec row per job, its batch in `lease_token`; rows of neither
/// kind, such as the mark of a contended claim, are skipped).
pub(super) fn claimed_tasks(rows: &[PgRow]) -> Result<Vec<ClaimedTask>, StoreError> {
    let mut specs = HashMap::new();
    for row in rows {
        if let Some(spec) = row.try_get::<Option<&str>, _>("spec")? {
            let batch: Option<Uuid> = row.try_get("lease_token")?;
            specs.insert(
                row.try_get::<Uuid, _>("job_id")?,
                (plan::parse_spec(spec)?, batch),
            );
        }
    }
    let mut claimed = Vec::with_capacity(rows.len() - specs.len());
    for row in rows {
        let Some(task_id) = row.try_get::<Option<i64>, _>("id")? else {
            continue;
        };
        let job_id: Uuid = row.try_get("job_id")?;
        let (spec, batch_id) = specs
            .get(&job_id)
            .ok_or_else(|| StoreError::Corrupt(format!("claimed task {task_id} has no job")))?;
        claimed.push(ClaimedTask {
            task_id,
            job_id,
            batch_id: *batch_id,
            lease_token: row.try_get("lease_token")?,
            attempt: u32::try_from(row.try_get::<i32, _>("attempt")?).unwrap_or(0),
            spec: spec.clone(),
            chunks: plan::chunk_range(row.try_get("chunk_start")?, row.try_get("chunk_end")?),
        });
    }
    claimed.sort_unstable_by_key(|t| t.task_id);
    Ok(claimed)
}

/// Whether any of a claim's rows is the one `mcq_claim_staged` returns for
/// a staged row other claims held: every column NULL, neither a task nor
/// a job.
pub(super) fn contended<'a>(rows: impl IntoIterator<Item = &'a PgRow>) -> Result<bool, StoreError> {
    for row in rows {
        let task: Option<i64> = row.try_get("id")?;
        let job: Option<Uuid> = row.try_get("job_id")?;
        let tenant: Option<i32> = row.try_get("attempt")?;
        if task.is_none() && job.is_none() && tenant.is_none() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The tenants a claim riding a recording call left running low on
/// queued tasks, from its rows with only `attempt` (the tenant's id) set
/// (functions/mcq_record_and_claim.sql): the store writes their next
/// staged jobs out after the commit.
pub(super) fn refills<'a>(
    rows: impl IntoIterator<Item = &'a PgRow>,
) -> Result<Vec<i32>, StoreError> {
    let mut tenants = Vec::new();
    for row in rows {
        let task: Option<i64> = row.try_get("id")?;
        let job: Option<Uuid> = row.try_get("job_id")?;
        if task.is_none() && job.is_none() {
            tenants.extend(row.try_get::<Option<i32>, _>("attempt")?);
        }
    }
    tenants.sort_unstable();
    tenants.dedup();
    Ok(tenants)
}

/// Writes the next staged jobs of tenant `$2` out as queued tasks, taking
/// none (`mcq_claim_staged` with the spread of a small claim, 256, as
/// `mcq_claim` does). Its commit does not wait for the disk: writing out
/// lost in a crash leaves the jobs staged, where the next claim finds them.
const REFILL: &str = "
SELECT set_config('synchronous_commit', 'off', true),
       (SELECT count(*) FROM mcq_claim_staged($1, $2, 0, 256, $3))";

impl PgQueue {
    /// Writes out the next staged jobs of each of `tenants` ([`refills`]),
    /// in a task of its own, one transaction per tenant. Beside the herald,
    /// not behind its announcements: under a saturated database an
    /// announcement can wait hundreds of milliseconds for the notification
    /// lock, longer than a fleet takes to claim the 64 queued tasks left.
    pub(super) fn refill_later(&self, worker: Uuid, tenants: Vec<i32>) {
        if tenants.is_empty() {
            return;
        }
        let connections = self.connections();
        let lease_secs = self.lease_secs();
        tokio::spawn(async move {
            for tenant in tenants {
                let written = async {
                    sqlx::query(REFILL)
                        .bind(worker)
                        .bind(tenant)
                        .bind(lease_secs)
                        .execute(&mut *connections.get().await?)
                        .await
                }
                .await;
                if let Err(err) = written {
                    // The jobs stay staged: a claim that finds the queued
                    // tasks gone takes them from there.
                    tracing::debug!(error = %err, tenant, "could not write staged jobs out");
                }
            }
        });
    }
}

/// Jobs whose task failed for good: they fail with its error, and their
/// other unfinished tasks are cancelled (tasks, then jobs, each in id
/// order: the lock order of completions). Running siblings keep their token:
/// the next heartbeat of their worker tells it to stop. Returns how many
/// jobs failed per announcement key, for the caller to announce once it has
/// committed (`herald.rs`).
async fn fail_jobs(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    jobs: &[Uuid],
    errors: &[String],
) -> Result<BTreeMap<Uuid, i64>, StoreError> {
    sqlx::query(
        "UPDATE tasks SET state = 'cancelled', finished_at = now()
         WHERE id = ANY(ARRAY(
             SELECT id FROM tasks WHERE job_id = ANY($1) AND state IN ('queued', 'running')
             ORDER BY id FOR UPDATE))",
    )
    .bind(jobs)
    .execute(&mut **tx)
    .await?;
    let keys: Vec<Uuid> = sqlx::query_scalar(
        "UPDATE jobs j SET state = 'failed', error = i.error, finished_at = now()
         FROM (SELECT DISTINCT ON (id) id, error FROM unnest($1::uuid[], $2::text[]) AS i(id, error)) i
         WHERE j.id = i.id AND j.state IN ('queued', 'running')
           AND j.id = ANY(ARRAY(SELECT id FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE))
         RETURNING coalesce(j.batch_id, j.id)",
    )
    .bind(jobs)
    .bind(errors)
    .fetch_all(&mut **tx)
    .await?;
    Ok(count_keys(keys))
}

/// How many times each key occurs.
pub(super) fn count_keys(keys: impl IntoIterator<Item = Uuid>) -> BTreeMap<Uuid, i64> {
    let mut counts = BTreeMap::new();
    for key in keys {
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// After tasks went back to the queue: each job (locked in id order, as
/// completions lock jobs) gives back `refund` attempts per task, and returns to `queued` when none of its other tasks
/// runs (`tasks`, the ids just requeued, are excluded explicitly so the
/// guard does not depend on statement visibility).
async fn requeue_jobs(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    jobs: &[Uuid],
    tasks: &[i64],
    refund: i32,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE jobs j SET
             attempts = greatest(j.attempts - $3 * p.n, 0),
             state = CASE WHEN NOT EXISTS (
                 SELECT 1 FROM tasks t
                 WHERE t.job_id = j.id AND t.state = 'running' AND t.id <> ALL($2)
             ) THEN 'queued' ELSE j.state END
         FROM (SELECT job_id, count(*)::int AS n FROM unnest($1::uuid[]) AS job_id GROUP BY job_id) p
         WHERE j.id = p.job_id AND j.state = 'running'
           AND j.id = ANY(ARRAY(SELECT id FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE))",
    )
    .bind(jobs)
    .bind(tasks)
    .bind(refund)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use sqlx::Connection as _;

    use super::HEARTBEAT_READ;
    use crate::QueueConfig;
    use crate::postgres::{migrated, registered_worker};

    /// The heartbeat of a worker with nothing to count (an idle one) ends
    /// its transaction without waiting for the disk; one that adds counts
    /// waits, whatever the session's setting.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_a_heartbeat_with_nothing_to_count_skips_the_flush() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = migrated(&db.url, QueueConfig::default()).await;
        let w = registered_worker(&q).await;
        let mut conn = sqlx::PgConnection::connect(&db.url).await.expect("connect");
        // The test cluster may run with it off for speed.
        sqlx::query("SET synchronous_commit = on")
            .execute(&mut conn)
            .await
            .expect("set");
        for (tasks, jobs, commit) in [(0_i64, 0_i64, "off"), (3, 2, "on"), (0, 1, "on")] {
            let mut tx = conn.begin().await.expect("begin");
            let rows = sqlx::query(HEARTBEAT_READ)
                .bind(w)
                .bind(Vec::<i64>::new())
                .bind(10.0_f64)
                .bind(None::<bool>)
                .bind(None::<i64>)
                .bind(false)
                .bind(tasks)
                .bind(jobs)
                .bind(None::<f64>)
                .fetch_all(&mut *tx)
                .await
                .expect("heartbeat");
            assert!(rows.is_empty(), "no leases, no turn, no peer: no rows");
            let mode: String = sqlx::query_scalar("SHOW synchronous_commit")
                .fetch_one(&mut *tx)
                .await
                .expect("show");
            assert_eq!(
                mode, commit,
                "a heartbeat adding {tasks} tasks and {jobs} jobs commits with synchronous_commit {commit}"
            );
            tx.rollback().await.expect("rollback");
        }
        q.close().await;
    }
}
