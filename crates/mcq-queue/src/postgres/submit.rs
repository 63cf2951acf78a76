//! Enqueueing: a whole submission in one statement, whatever its size
//! (arrays bound once and expanded with `unnest`).
//!
//! A large batch of single-task jobs is written as a few rows of arrays
//! that claims materialise (`SUBMIT_STAGED`); both
//! statements share the key and batch around the rows they write.
//!
//! One statement is one round trip and an implicit transaction: no BEGIN,
//! no COMMIT, so a single job is committed a few round trips sooner, which
//! is most of a fresh job's pickup latency. The workers are woken after
//! the commit, by the store's herald (`herald.rs`): a notification sent
//! inside the statement would hold the database's notification lock
//! through the submission's flush to disk, and every announcement of the
//! fleet would wait for it.
//!
//! A tenant with a quota of active jobs pays for an exact count instead:
//! a transaction that takes the tenant's advisory lock ([`QUOTA_LOCK`]),
//! counts, and runs the same statement. Submissions of one tenant with a
//! quota follow each other; other tenants, and tenants without one, never
//! wait for the lock.

use sqlx::Connection as _;
use sqlx::Row as _;
use uuid::Uuid;

use super::PgQueue;
use super::access::count_active;
use crate::access::TenantId;
use crate::plan::{self, Plan};
use crate::store::StoreError;
use crate::types::{IdempotencyKey, Submission, Submitted};

/// A submit statement around `$rows`, the CTEs that write the jobs: the
/// idempotency key (if any), the batch (if any) and the rows, all or
/// nothing. With a key that exists already nothing is written and `ok` is
/// false. Data-modifying CTEs always run to completion; each of them is
/// gated on `go`.
///
/// A concurrent submit with the same key waits on the key's insert until
/// the other commits, then sees the conflict and writes nothing.
///
/// Parameters of both statements: `$1` key, `$2` fingerprint, `$3` batch
/// id, `$4` the job ids kept with the key (unbatched submissions only: a
/// batch's ids are read back from its jobs), `$5` label, `$6` job count,
/// `$7` job ids and `$8` specs in submission order, `$9`–`$12` the rows'
/// own; the tenant and the batch's sweep (as JSON) are the expressions
/// `$tenant` and `$sweep`.
macro_rules! submit_statement {
    ($tenant:literal, $sweep:literal, $rows:literal) => {
        concat!(
            "
WITH key AS (
    INSERT INTO idempotency_keys (tenant_id, key, fingerprint, batch_id, job_ids)
    SELECT ",
            $tenant,
            ", $1, $2, $3, $4 WHERE $1::text IS NOT NULL
    ON CONFLICT (tenant_id, key) DO NOTHING
    RETURNING 1
), go AS (
    SELECT $1::text IS NULL OR EXISTS (SELECT 1 FROM key) AS ok
), batch AS (
    INSERT INTO batches (id, label, total, tenant_id, sweep)
    SELECT $3, $5, $6, ",
            $tenant,
            ", ",
            $sweep,
            " FROM go WHERE go.ok AND $3::uuid IS NOT NULL
), ",
            $rows,
            "
SELECT go.ok FROM go"
        )
    };
}

/// Every job and task written out: `$9` tasks per job, `$10`–`$12` the
/// tasks' job ids and chunk ranges, `$13` the tenant, `$14` the priority,
/// `$15` the sweep.
const SUBMIT: &str = submit_statement!(
    "$13::int",
    "$15::text",
    "job_rows AS (
    INSERT INTO jobs (id, batch_id, position, spec, task_count, tenant_id)
    SELECT j.id, $3, (j.ord - 1)::int, j.spec::json, j.task_count, $13
    FROM unnest($7::uuid[], $8::text[], $9::int[]) WITH ORDINALITY AS j(id, spec, task_count, ord)
    WHERE (SELECT ok FROM go)
), task_rows AS (
    INSERT INTO tasks (job_id, chunk_start, chunk_end, tenant_id, priority)
    SELECT t.*, $13, $14 FROM unnest($10::uuid[], $11::int8[], $12::int8[]) AS t
    WHERE (SELECT ok FROM go)
)"
);

/// The first key of the advisory lock a submission holds on its tenant
/// (`pg_advisory_xact_lock(QUOTA_LOCK, tenant)`) while it counts the
/// tenant's active jobs and inserts its own. The two-integer keys are a
/// space of their own, apart from the single-bigint keys that sqlx's
/// migrator takes.
const QUOTA_LOCK: i32 = 0x6d63_7101;

/// Jobs per row of `staged`.
const STAGED_ROW: usize = 5000;

/// A large batch of single-task jobs as rows of `$13` ([`STAGED_ROW`])
/// jobs, which claims turn into running jobs and tasks:
/// `$9`, `$10` the jobs' chunk ranges, `$11`, `$12` the least and greatest
/// id of each staged row, `$14` the tenant, `$15` the priority, `$16` the
/// sweep.
const SUBMIT_STAGED: &str = submit_statement!(
    "$14::int",
    "$16::text",
    "staged_rows AS (
    INSERT INTO staged (batch_id, first, ids, specs, chunk_starts, chunk_ends, min_id, max_id,
                        tenant_id, priority, jobs)
    SELECT $3, r.first, r.ids, $8[r.first + 1 : r.first + $13], $9[r.first + 1 : r.first + $13],
           $10[r.first + 1 : r.first + $13], $11[r.first / $13 + 1], $12[r.first / $13 + 1], $14,
           $15, cardinality(r.ids)
    FROM (SELECT f AS first, $7[f + 1 : f + $13] AS ids
          FROM generate_series(0, cardinality($7::uuid[]) - 1, $13) AS f) r
    WHERE (SELECT ok FROM go)
)"
);

impl PgQueue {
    /// Enqueues a submission (see [`SUBMIT`], and [`SUBMIT_STAGED`] for a
    /// large batch of single-task jobs); with a key seen before, replays
    /// what that submission created instead. With `max_active_jobs`, the
    /// tenant's count and the insert happen under its lock (see the module).
    pub(crate) async fn submit(
        &self,
        submission: Submission,
        max_active_jobs: Option<u64>,
    ) -> Result<Submitted, StoreError> {
        let plan = plan::plan(&submission, self.config.chunks_per_task)?;
        let key = submission.idempotency.as_ref();
        let key_job_ids = match (key, plan.batch_id) {
            (Some(_), None) => plan.job_ids(),
            _ => Vec::new(),
        };
        let job_ids = plan.job_ids();
        let grid = plan::grid_json(submission.grid.as_ref())?;
        let tasks = TaskColumns::of(&plan);
        let queued = tasks.job_ids.len();
        let staged = plan.batch_id.is_some()
            && plan.jobs.len() >= self.config.stage_from
            && tasks.job_ids.len() == plan.jobs.len();
        let query = sqlx::query(if staged { SUBMIT_STAGED } else { SUBMIT })
            .bind(key.map(|k| k.key.as_str()))
            .bind(key.map(|k| k.fingerprint.as_str()))
            .bind(plan.batch_id)
            .bind(key_job_ids)
            .bind(submission.label.as_deref())
            .bind(plan.jobs.len() as i64)
            .bind(&job_ids)
            .bind(
                plan.jobs
                    .iter()
                    .map(|j| j.spec_json.as_str())
                    .collect::<Vec<_>>(),
            );
        let query = if staged {
            // One task per job: the task columns are the jobs' chunk ranges.
            let per_row = |pick: fn(&[Uuid]) -> Option<Uuid>| {
                job_ids.chunks(STAGED_ROW).map(pick).collect::<Vec<_>>()
            };
            query
                .bind(tasks.starts)
                .bind(tasks.ends)
                .bind(per_row(|c| c.iter().min().copied()))
                .bind(per_row(|c| c.iter().max().copied()))
                .bind(i32::try_from(STAGED_ROW).expect("a staged row holds a few thousand jobs"))
                .bind(submission.tenant)
                .bind(submission.priority)
                .bind(grid)
        } else {
            query
                .bind(
                    plan.jobs
                        .iter()
                        .map(|j| {
                            i32::try_from(j.tasks.len()).expect(
                                "a job has at most one task per kernel chunk, far below i32::MAX",
                            )
                        })
                        .collect::<Vec<_>>(),
                )
                .bind(tasks.job_ids)
                .bind(tasks.starts)
                .bind(tasks.ends)
                .bind(submission.tenant)
                .bind(submission.priority)
                .bind(grid)
        };
        let mut conn = self.conn().await?;
        let row = match max_active_jobs {
            None => query.fetch_one(&mut *conn).await?,
            Some(limit) => {
                let mut tx = conn.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
                    .bind(QUOTA_LOCK)
                    .bind(submission.tenant)
                    .execute(&mut *tx)
                    .await?;
                // A statement of its own: its snapshot is taken after the
                // lock, so it sees every submission that held it before.
                let active = count_active(&mut *tx, submission.tenant).await?;
                let adding = plan.jobs.len() as u64;
                if active.saturating_add(adding) > limit {
                    let seen = match key {
                        Some(key) => key_exists(&mut tx, submission.tenant, key).await?,
                        None => false,
                    };
                    tx.rollback().await?;
                    // A repeated key adds nothing: it is answered as usual.
                    if let (true, Some(key)) = (seen, key) {
                        return self.replay(submission.tenant, key).await;
                    }
                    return Err(StoreError::QuotaExceeded {
                        limit,
                        active,
                        adding,
                    });
                }
                let row = query.fetch_one(&mut *tx).await?;
                tx.commit().await?;
                row
            }
        };
        if !row.try_get::<bool, _>("ok")? {
            drop(conn);
            let key = key.ok_or_else(|| {
                StoreError::Corrupt("a submission without a key was refused".into())
            })?;
            return self.replay(submission.tenant, key).await;
        }
        self.announce_work_on(queued, conn);
        self.wake_own_workers();
        Ok(Submitted {
            batch_id: plan.batch_id,
            job_ids,
            replayed: false,
        })
    }

    /// What an earlier submission with this key created, or a conflict when
    /// the key came with a different request.
    async fn replay(
        &self,
        tenant: TenantId,
        key: &IdempotencyKey,
    ) -> Result<Submitted, StoreError> {
        let row = sqlx::query(
            "SELECT fingerprint, batch_id, job_ids FROM idempotency_keys
             WHERE tenant_id = $1 AND key = $2",
        )
        .bind(tenant)
        .bind(&key.key)
        .fetch_optional(&mut *self.conn().await?)
        .await?;
        // The key can vanish between our insert attempt and this read only
        // if it was pruned meanwhile; the client may simply retry.
        let Some(row) = row else {
            return Err(StoreError::IdempotencyConflict);
        };
        let fingerprint: String = row.try_get("fingerprint")?;
        if fingerprint != key.fingerprint {
            return Err(StoreError::IdempotencyConflict);
        }
        let batch_id: Option<Uuid> = row.try_get("batch_id")?;
        let job_ids: Vec<Uuid> = match batch_id {
            Some(batch) => {
                // Materialised jobs, and those still staged.
                sqlx::query_scalar(
                    "SELECT id FROM (
                         SELECT id, position FROM jobs WHERE batch_id = $1
                         UNION ALL
                         SELECT u.id, st.first + u.o::integer - 1
                         FROM staged st, unnest(st.ids) WITH ORDINALITY AS u(id, o)
                         WHERE st.batch_id = $1 AND u.o > st.next
                     ) j ORDER BY position",
                )
                .bind(batch)
                .fetch_all(&mut *self.conn().await?)
                .await?
            }
            None => row.try_get("job_ids")?,
        };
        Ok(Submitted {
            batch_id,
            job_ids,
            replayed: true,
        })
    }
}

/// Whether the tenant has used this idempotency key.
async fn key_exists(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    tenant: TenantId,
    key: &IdempotencyKey,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM idempotency_keys WHERE tenant_id = $1 AND key = $2)",
    )
    .bind(tenant)
    .bind(&key.key)
    .fetch_one(&mut **tx)
    .await?)
}

/// The tasks of a plan as the three arrays the insert unnests.
struct TaskColumns {
    job_ids: Vec<Uuid>,
    starts: Vec<Option<i64>>,
    ends: Vec<Option<i64>>,
}

impl TaskColumns {
    fn of(plan: &Plan) -> TaskColumns {
        let n = plan.task_count();
        let mut columns = TaskColumns {
            job_ids: Vec::with_capacity(n),
            starts: Vec::with_capacity(n),
            ends: Vec::with_capacity(n),
        };
        for job in &plan.jobs {
            for range in &job.tasks {
                columns.job_ids.push(job.id);
                columns.starts.push(range.as_ref().map(|r| r.start as i64));
                columns.ends.push(range.as_ref().map(|r| r.end as i64));
            }
        }
        columns
    }
}
