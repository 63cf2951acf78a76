//! The worker's side: claiming under a lease, renewing it, and ending it
//! by completion, failure or hand-back. Every statement that ends a lease
//! is fenced: it only touches rows still `running` under the caller's token.

use std::collections::{BTreeMap, HashMap, HashSet};

use sqlx::Row as _;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::{CHANNEL, FINISHED_CHANNEL, PgQueue};
use crate::plan;
use crate::store::StoreError;
use mcq_kernel::PriceResult;

use crate::types::{ClaimedTask, CompletedAndClaimed, Heartbeat, Reaped, TaskDone, TaskOutput};

// Row estimates of CTEs are guesses (usually one row), so these statements
// avoid joining one CTE against another: a nested loop over two CTEs of a
// thousand rows each is a million comparisons. Results that belong to
// different CTEs come back as separate rows of a UNION ALL instead, and
// per-job arithmetic happens in Rust between statements.
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

/// Claim: `mcq_claim` (migrations/postgres/0003_claim_plan.sql) takes due
/// queued tasks in order under new leases and starts their jobs. It lives
/// in the database so that its plan can be pinned to the ordered walk of
/// the queued-tasks index whatever the statistics say. Expired leases are
/// not looked for here: the reaper puts them back in the queue, so a claim
/// never scans running tasks (whose index keeps the entries of deleted
/// tasks until vacuum).
const CLAIM: &str = "SELECT id, job_id, lease_token, attempt, chunk_start, chunk_end, spec \
                     FROM mcq_claim($1, $2, $3)";

/// Completion of whole-job tasks and a claim, one transaction:
/// `mcq_complete_and_claim` (migrations/postgres/0007_complete_and_claim.sql).
/// Accepted completions come back as rows with `accepted` set, followed by
/// the claim's rows.
const COMPLETE_AND_CLAIM: &str = "SELECT accepted, id, job_id, lease_token, attempt, \
                                  chunk_start, chunk_end, spec \
                                  FROM mcq_complete_and_claim($1, $2, $3, $4, $5, $6, $7, $8, $9)";

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

/// Complete, step 1: the fenced task transitions; accepted rows come back.
/// A task of a split job succeeds (step 1b saves its partial). A
/// whole-job task (it brings a result, no partial) is deleted instead: its
/// job row is about to record everything it did, and a delete writes no
/// new row version and no index entries.
const COMPLETE_TASKS: &str = "
WITH whole AS (
    DELETE FROM tasks t
    WHERE t.id = ANY($1::int8[]) AND t.lease_token = ANY($2::uuid[]) AND t.state = 'running'
    RETURNING t.id, t.job_id
), split AS (
    UPDATE tasks t
    SET state = 'succeeded', finished_at = now(), lease_token = NULL, lease_expires_at = NULL
    WHERE t.id = ANY($3::int8[]) AND t.lease_token = ANY($4::uuid[]) AND t.state = 'running'
    RETURNING t.id, t.job_id
)
SELECT id, job_id FROM whole
UNION ALL
SELECT id, job_id FROM split";

/// Complete, step 1b: the partials of the split tasks step 1 accepted
/// (their rows are locked by this transaction, so no fence is needed).
/// Nothing here can match the partial index of running tasks, so the
/// planner's row estimate is the array's length.
const SAVE_PARTIALS: &str = "
UPDATE tasks t SET partial = i.partial::json, compute_ms = i.ms
FROM unnest($1::int8[], $2::text[], $3::float8[]) AS i(id, partial, ms)
WHERE t.id = i.id AND t.id = ANY($1::int8[])";

/// Complete, step 2, per job of the accepted tasks (in id order, so that
/// completers lock job rows in one order): bump the task counter under the
/// row lock, so exactly one completer sees `tasks_done` reach `task_count`.
/// A whole-job task brings its result: that job succeeds right here. Every
/// job comes back with its state and announcement key (batch id, or its
/// own id); those finished without a result (split jobs, to merge) with
/// their spec.
const COMPLETE_JOBS: &str = "
WITH bumped AS (
    UPDATE jobs j
    SET tasks_done = j.tasks_done + i.n, compute_ms = j.compute_ms + i.ms,
        state = CASE WHEN i.result IS NOT NULL AND j.state IN ('queued', 'running')
                     THEN 'succeeded' ELSE j.state END,
        finished_at = CASE WHEN i.result IS NOT NULL AND j.state IN ('queued', 'running')
                           THEN now() ELSE j.finished_at END,
        price = CASE WHEN i.result IS NOT NULL AND j.state IN ('queued', 'running')
                     THEN i.price ELSE j.price END
    FROM unnest($1::uuid[], $2::int[], $3::float8[], $4::text[], $5::float8[])
         AS i(id, n, ms, result, price)
    WHERE j.id = i.id
    RETURNING j.id, j.state, j.task_count, j.tasks_done, j.compute_ms, i.result,
              coalesce(j.batch_id, j.id) AS key,
              CASE WHEN i.result IS NULL AND j.tasks_done >= j.task_count THEN j.spec::text END AS spec
), saved AS (
    INSERT INTO results (job_id, result)
    SELECT id, result::json FROM bumped WHERE result IS NOT NULL AND state = 'succeeded'
), worker AS (
    UPDATE workers
    SET tasks_done = tasks_done + $6,
        jobs_done = jobs_done + (SELECT count(*) FROM bumped WHERE result IS NOT NULL AND state = 'succeeded')
    WHERE id = $7
)
SELECT id, compute_ms, spec, key, state FROM bumped";

/// Tells long polls (through `LISTEN`, after commit) which batches, or
/// jobs without a batch, had how many jobs finish: one notification per
/// key, payload `key:count`.
const ANNOUNCE: &str = "
SELECT pg_notify($1, t.k::text || ':' || t.n)
FROM unnest($2::uuid[], $3::int8[]) AS t(k, n)";

/// Complete, step 3: results of split jobs this transaction finished.
const FINISH_JOBS: &str = "
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::float8[]) AS i(id, result, price)
), saved AS (
    INSERT INTO results (job_id, result) SELECT id, result::json FROM input
), worker AS (
    UPDATE workers SET jobs_done = jobs_done + cardinality($1::uuid[]) WHERE id = $4
)
UPDATE jobs j SET state = 'succeeded', finished_at = now(), price = i.price
FROM input i
WHERE j.id = i.id AND j.state IN ('queued', 'running')";

/// Heartbeat, step 1: marks the worker alive and reads what the presented
/// tasks are now, by primary key. Whether each row still carries the token
/// presented with its id is decided in Rust, against a map of the pairs:
/// a filter `lease_token = ANY($tokens)` compares every row with every
/// presented token, and a worker that holds a prefetch of 2,000 tiny tasks
/// made each heartbeat 4 million comparisons (64 ms per heartbeat, 15% of
/// the database's time in a burn-down; docs/queue-perf.md, session 8).
/// `due` marks running leases past half their length.
const HEARTBEAT_READ: &str = "
WITH beat AS (
    UPDATE workers SET last_heartbeat_at = now() WHERE id = $1
)
SELECT t.id, t.lease_token, t.state = 'running' AS running,
       t.lease_expires_at < now() + make_interval(secs => $3 / 2) AS due
FROM tasks t
WHERE t.id = ANY($2::int8[])";

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
    /// Claims up to `max` tasks in one statement.
    pub(crate) async fn claim(
        &self,
        worker: Uuid,
        max: u32,
    ) -> Result<Vec<ClaimedTask>, StoreError> {
        let rows = sqlx::query(CLAIM)
            .bind(worker)
            .bind(i64::from(max))
            .bind(self.lease_secs())
            .fetch_all(&self.pool)
            .await?;
        claimed_tasks(&rows)
    }

    /// Fenced completion of tasks that each bring their job's whole result,
    /// and a claim, in one transaction and one round trip
    /// (`mcq_complete_and_claim`, migrations/postgres/0007).
    pub(crate) async fn complete_and_claim(
        &self,
        worker: Uuid,
        done: Vec<TaskDone>,
        max: u32,
    ) -> Result<CompletedAndClaimed, StoreError> {
        let whole = WholeResults::of(done.iter().collect())?;
        let rows = sqlx::query(COMPLETE_AND_CLAIM)
            .bind(worker)
            .bind(&whole.ids)
            .bind(whole.tokens)
            .bind(whole.ms)
            .bind(whole.results)
            .bind(whole.prices)
            .bind(FINISHED_CHANNEL)
            .bind(i64::from(max))
            .bind(self.lease_secs())
            .fetch_all(&self.pool)
            .await?;
        let mut accepted = HashSet::new();
        for row in &rows {
            if let Some(id) = row.try_get::<Option<i64>, _>("accepted")? {
                accepted.insert(id);
            }
        }
        Ok(CompletedAndClaimed {
            refused: whole
                .ids
                .into_iter()
                .filter(|id| !accepted.contains(id))
                .collect(),
            claimed: Ok(claimed_tasks(&rows)?),
        })
    }

    /// Renews the worker's heartbeat and the presented leases in one
    /// statement; presented tasks of cancelled jobs are told once and let
    /// go, and presented tasks not held under their token are reported lost.
    pub(crate) async fn heartbeat(
        &self,
        worker: Uuid,
        held: &[(i64, Uuid)],
    ) -> Result<Heartbeat, StoreError> {
        let ids: Vec<i64> = held.iter().map(|h| h.0).collect();
        let rows = sqlx::query(HEARTBEAT_READ)
            .bind(worker)
            .bind(&ids)
            .bind(self.lease_secs())
            .fetch_all(&self.pool)
            .await?;
        let mut now = HashMap::with_capacity(rows.len());
        for row in &rows {
            let id: i64 = row.try_get("id")?;
            let token: Option<Uuid> = row.try_get("lease_token")?;
            let running: bool = row.try_get("running")?;
            let due: Option<bool> = row.try_get("due")?;
            now.insert(id, (token, running, due.unwrap_or(false)));
        }
        let mut reply = Heartbeat::default();
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
                .fetch_all(&self.pool)
                .await?;
        }
        reply.cancelled.sort_unstable();
        reply.lost.sort_unstable();
        Ok(reply)
    }

    /// Requeues expired leases with attempts left and fails those on their
    /// last attempt, with their jobs (siblings cancelled, as for `fail`).
    pub(crate) async fn reap(&self) -> Result<Reaped, StoreError> {
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(REAP)
            .bind(i32::try_from(self.config.max_attempts).unwrap_or(i32::MAX))
            .fetch_all(&mut *tx)
            .await?;
        if rows.is_empty() {
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
        if !jobs.is_empty() {
            fail_jobs(&mut tx, &jobs, &errors).await?;
        }
        if reaped.requeued > 0 {
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(CHANNEL)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(reaped)
    }

    /// Fenced batch completion; finished jobs get their result in the same
    /// transaction. Returns the refused task ids.
    pub(crate) async fn complete(
        &self,
        worker: Uuid,
        done: Vec<TaskDone>,
    ) -> Result<Vec<i64>, StoreError> {
        let ids: Vec<i64> = done.iter().map(|d| d.task_id).collect();
        let (whole, split): (Vec<&TaskDone>, Vec<&TaskDone>) = done
            .iter()
            .partition(|d| matches!(d.output, TaskOutput::Result(_)));
        if split.is_empty() {
            let accepted = if whole.is_empty() {
                HashSet::new()
            } else {
                self.complete_whole(worker, whole).await?
            };
            return Ok(ids
                .into_iter()
                .filter(|id| !accepted.contains(id))
                .collect());
        }
        let lease = |tasks: &[&TaskDone]| -> (Vec<i64>, Vec<Uuid>) {
            tasks.iter().map(|d| (d.task_id, d.lease_token)).unzip()
        };
        let (whole_ids, whole_tokens) = lease(&whole);
        let (split_ids, split_tokens) = lease(&split);
        let by_id: HashMap<i64, &TaskDone> = done.iter().map(|d| (d.task_id, d)).collect();

        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(COMPLETE_TASKS)
            .bind(whole_ids)
            .bind(whole_tokens)
            .bind(split_ids)
            .bind(split_tokens)
            .fetch_all(&mut *tx)
            .await?;
        // Per job, in id order: tasks accepted, their kernel time, and the
        // result a whole-job task brought.
        let mut per_job: BTreeMap<Uuid, (i32, f64, Option<&PriceResult>)> = BTreeMap::new();
        let mut accepted = HashSet::with_capacity(rows.len());
        let (mut part_ids, mut parts, mut part_ms) = (Vec::new(), Vec::new(), Vec::new());
        for row in &rows {
            let task_id: i64 = row.try_get("id")?;
            let task = by_id[&task_id];
            accepted.insert(task_id);
            let entry = per_job.entry(row.try_get("job_id")?).or_default();
            entry.0 += 1;
            entry.1 += task.compute_ms;
            match &task.output {
                TaskOutput::Result(result) => entry.2 = Some(result),
                TaskOutput::Partial(partial) => {
                    part_ids.push(task_id);
                    parts.push(plan::partial_json(partial)?);
                    part_ms.push(task.compute_ms);
                }
            }
        }
        if !part_ids.is_empty() {
            sqlx::query(SAVE_PARTIALS)
                .bind(part_ids)
                .bind(parts)
                .bind(part_ms)
                .execute(&mut *tx)
                .await?;
        }
        if !per_job.is_empty() {
            let mut jobs = Vec::with_capacity(per_job.len());
            let (mut counts, mut times) = (Vec::new(), Vec::new());
            let (mut results, mut prices) = (Vec::new(), Vec::new());
            for (job, (n, ms, result)) in &per_job {
                jobs.push(*job);
                counts.push(*n);
                times.push(*ms);
                results.push(result.map(plan::result_json).transpose()?);
                prices.push(result.map(|r| r.price));
            }
            let bumped = sqlx::query(COMPLETE_JOBS)
                .bind(jobs)
                .bind(counts)
                .bind(times)
                .bind(results)
                .bind(prices)
                .bind(rows.len() as i64)
                .bind(worker)
                .fetch_all(&mut *tx)
                .await?;
            let mut finished = Vec::new();
            let mut finishing = Vec::new();
            for row in bumped {
                if row.try_get::<Option<&str>, _>("spec")?.is_some() {
                    finished.push(row.try_get::<Uuid, _>("key")?);
                    finishing.push(row);
                } else if row.try_get::<&str, _>("state")? == "succeeded" {
                    finished.push(row.try_get::<Uuid, _>("key")?);
                }
            }
            if !finishing.is_empty() {
                self.finish_split_jobs(&mut tx, worker, &finishing).await?;
            }
            announce(&mut tx, &count_keys(finished)).await?;
        }
        tx.commit().await?;
        Ok(ids
            .into_iter()
            .filter(|id| !accepted.contains(id))
            .collect())
    }

    /// Completion of tasks that each bring their job's whole result: one
    /// call of `mcq_complete` (migrations/postgres/0005_complete_function.sql),
    /// which fences, records results, counts and announces like the
    /// statements below, in one round trip. Returns the accepted task ids.
    async fn complete_whole(
        &self,
        worker: Uuid,
        whole: Vec<&TaskDone>,
    ) -> Result<HashSet<i64>, StoreError> {
        let whole = WholeResults::of(whole)?;
        let accepted = sqlx::query_scalar("SELECT mcq_complete($1, $2, $3, $4, $5, $6, $7)")
            .bind(worker)
            .bind(whole.ids)
            .bind(whole.tokens)
            .bind(whole.ms)
            .bind(whole.results)
            .bind(whole.prices)
            .bind(FINISHED_CHANNEL)
            .fetch_all(&self.pool)
            .await?;
        Ok(accepted.into_iter().collect())
    }

    /// Merges the partials of split jobs whose last task just completed
    /// and writes their results.
    async fn finish_split_jobs(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
        worker: Uuid,
        finishing: &[sqlx::postgres::PgRow],
    ) -> Result<(), StoreError> {
        let mut jobs = Vec::with_capacity(finishing.len());
        for row in finishing {
            jobs.push(row.try_get::<Uuid, _>("id")?);
        }
        let rows = sqlx::query(
            "SELECT job_id, partial::text AS partial FROM tasks
             WHERE job_id = ANY($1) AND state = 'succeeded' ORDER BY job_id, chunk_start",
        )
        .bind(&jobs)
        .fetch_all(&mut **tx)
        .await?;
        let mut partials: HashMap<Uuid, Vec<String>> = HashMap::new();
        for row in rows {
            let partial: Option<String> = row.try_get("partial")?;
            let partial = partial.ok_or_else(|| {
                StoreError::Corrupt("a task of a split job has no partial".into())
            })?;
            partials
                .entry(row.try_get("job_id")?)
                .or_default()
                .push(partial);
        }
        let (mut results, mut prices) = (Vec::new(), Vec::new());
        for (job, row) in jobs.iter().zip(finishing) {
            let parts = partials.get(job).map(Vec::as_slice).unwrap_or_default();
            let result = plan::finish_from_partials(
                row.try_get("spec")?,
                parts.iter().map(String::as_str),
                row.try_get("compute_ms")?,
            )?;
            prices.push(result.price);
            results.push(plan::result_json(&result)?);
        }
        sqlx::query(FINISH_JOBS)
            .bind(jobs)
            .bind(results)
            .bind(prices)
            .bind(worker)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Fenced failure: back to the queue after a backoff, or — on the last
    /// attempt — the job fails and its other tasks are cancelled.
    pub(crate) async fn fail(
        &self,
        _worker: Uuid,
        task_id: i64,
        token: Uuid,
        error: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(
            "UPDATE tasks SET
                 state = CASE WHEN attempt < $3 THEN 'queued' ELSE 'failed' END,
                 run_at = CASE WHEN attempt < $3
                     THEN now() + make_interval(secs => $4 * power(2, least(attempt - 1, 30)))
                     ELSE run_at END,
                 finished_at = CASE WHEN attempt < $3 THEN NULL ELSE now() END,
                 error = $5, lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
             WHERE id = $1 AND state = 'running' AND lease_token = $2
             RETURNING job_id, state",
        )
        .bind(task_id)
        .bind(token)
        .bind(i32::try_from(self.config.max_attempts).unwrap_or(i32::MAX))
        .bind(self.config.retry_backoff.as_secs_f64())
        .bind(error)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(false) };
        let job_id: Uuid = row.try_get("job_id")?;
        let state: String = row.try_get("state")?;
        if state == "failed" {
            fail_jobs(&mut tx, &[job_id], &[error.to_owned()]).await?;
        } else {
            requeue_jobs(&mut tx, &[job_id], &[task_id], 0).await?;
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(CHANNEL)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
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
        let mut tx = self.pool.begin().await?;
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
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(CHANNEL)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(rows.len())
    }
}

/// Finished tasks that each bring their job's whole result, as the
/// aligned arrays `mcq_complete` takes, in ascending task id order.
struct WholeResults {
    ids: Vec<i64>,
    tokens: Vec<Uuid>,
    ms: Vec<f64>,
    results: Vec<String>,
    prices: Vec<f64>,
}

impl WholeResults {
    fn of(mut whole: Vec<&TaskDone>) -> Result<WholeResults, StoreError> {
        whole.sort_unstable_by_key(|d| d.task_id);
        let n = whole.len();
        let mut columns = WholeResults {
            ids: Vec::with_capacity(n),
            tokens: Vec::with_capacity(n),
            ms: Vec::with_capacity(n),
            results: Vec::with_capacity(n),
            prices: Vec::with_capacity(n),
        };
        for done in whole {
            let TaskOutput::Result(result) = &done.output else {
                return Err(StoreError::Corrupt(format!(
                    "task {} brought a partial to a whole-job completion",
                    done.task_id
                )));
            };
            columns.ids.push(done.task_id);
            columns.tokens.push(done.lease_token);
            columns.ms.push(done.compute_ms);
            columns.results.push(plan::result_json(result)?);
            columns.prices.push(result.price);
        }
        Ok(columns)
    }
}

/// The claimed tasks among a claim's rows (`mcq_claim`'s shape: task rows,
/// then one spec row per job; rows of neither kind are skipped).
fn claimed_tasks(rows: &[PgRow]) -> Result<Vec<ClaimedTask>, StoreError> {
    let mut specs = HashMap::new();
    for row in rows {
        if let Some(spec) = row.try_get::<Option<&str>, _>("spec")? {
            specs.insert(row.try_get::<Uuid, _>("job_id")?, plan::parse_spec(spec)?);
        }
    }
    let mut claimed = Vec::with_capacity(rows.len() - specs.len());
    for row in rows {
        let Some(task_id) = row.try_get::<Option<i64>, _>("id")? else {
            continue;
        };
        let job_id: Uuid = row.try_get("job_id")?;
        let spec = specs
            .get(&job_id)
            .ok_or_else(|| StoreError::Corrupt(format!("claimed task {task_id} has no job")))?;
        claimed.push(ClaimedTask {
            task_id,
            job_id,
            lease_token: row.try_get("lease_token")?,
            attempt: u32::try_from(row.try_get::<i32, _>("attempt")?).unwrap_or(0),
            spec: spec.clone(),
            chunks: plan::chunk_range(row.try_get("chunk_start")?, row.try_get("chunk_end")?),
        });
    }
    claimed.sort_unstable_by_key(|t| t.task_id);
    Ok(claimed)
}

/// Sends the finished-work notifications within `tx` (delivered when it
/// commits): per key (batch id, or job id), how many of its jobs finished.
pub(super) async fn announce(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    finished: &BTreeMap<Uuid, i64>,
) -> Result<(), StoreError> {
    if !finished.is_empty() {
        let (keys, counts): (Vec<Uuid>, Vec<i64>) = finished.iter().map(|(k, n)| (*k, *n)).unzip();
        sqlx::query(ANNOUNCE)
            .bind(FINISHED_CHANNEL)
            .bind(keys)
            .bind(counts)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Jobs whose task failed for good: they fail with its error, and their
/// other unfinished tasks are cancelled. Running siblings keep their token:
/// the next heartbeat of their worker tells it to stop.
async fn fail_jobs(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    jobs: &[Uuid],
    errors: &[String],
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE tasks SET state = 'cancelled', finished_at = now()
         WHERE job_id = ANY($1) AND state IN ('queued', 'running')",
    )
    .bind(jobs)
    .execute(&mut **tx)
    .await?;
    let keys: Vec<Uuid> = sqlx::query_scalar(
        "UPDATE jobs j SET state = 'failed', error = i.error, finished_at = now()
         FROM (SELECT DISTINCT ON (id) id, error FROM unnest($1::uuid[], $2::text[]) AS i(id, error)) i
         WHERE j.id = i.id AND j.state IN ('queued', 'running')
         RETURNING coalesce(j.batch_id, j.id)",
    )
    .bind(jobs)
    .bind(errors)
    .fetch_all(&mut **tx)
    .await?;
    announce(tx, &count_keys(keys)).await
}

/// How many times each key occurs.
pub(super) fn count_keys(keys: impl IntoIterator<Item = Uuid>) -> BTreeMap<Uuid, i64> {
    let mut counts = BTreeMap::new();
    for key in keys {
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// After tasks went back to the queue: each job gives back `refund`
/// attempts per task, and returns to `queued` when none of its other tasks
/// runs (`tasks`, the ids just requeued, are excluded explicitly so the
/// guard does not depend on statement visibility).
async fn requeue_jobs(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
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
         WHERE j.id = p.job_id AND j.state = 'running'",
    )
    .bind(jobs)
    .bind(tasks)
    .bind(refund)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
