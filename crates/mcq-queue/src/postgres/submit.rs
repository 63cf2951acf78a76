//! Enqueueing: a whole submission in one transaction of a few statements,
//! whatever its size (arrays bound once and expanded with `unnest`).

use sqlx::{Postgres, Row as _, Transaction};
use uuid::Uuid;

use super::{CHANNEL, PgQueue};
use crate::plan::{self, Plan};
use crate::store::StoreError;
use crate::types::{IdempotencyKey, Submission, Submitted};

impl PgQueue {
    /// Inserts the batch, its jobs and their tasks, all or nothing, and
    /// wakes idle workers. An idempotency key is claimed first, so a
    /// concurrent submit with the same key waits for us and then replays.
    pub(crate) async fn submit(&self, submission: Submission) -> Result<Submitted, StoreError> {
        let plan = plan::plan(&submission, self.config.chunks_per_task)?;
        let mut tx = self.pool.begin().await?;
        if let Some(key) = &submission.idempotency
            && !claim_key(&mut tx, key, &plan).await?
        {
            tx.rollback().await?;
            return self.replay(key).await;
        }
        if let Some(batch_id) = plan.batch_id {
            sqlx::query("INSERT INTO batches (id, label, total) VALUES ($1, $2, $3)")
                .bind(batch_id)
                .bind(submission.label.as_deref())
                .bind(plan.jobs.len() as i64)
                .execute(&mut *tx)
                .await?;
        }
        insert_jobs(&mut tx, &plan).await?;
        insert_tasks(&mut tx, &plan).await?;
        // Delivered at commit, and only if we commit.
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(CHANNEL)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Submitted {
            batch_id: plan.batch_id,
            job_ids: plan.job_ids(),
            replayed: false,
        })
    }

    /// What an earlier submission with this key created, or a conflict when
    /// the key came with a different request.
    async fn replay(&self, key: &IdempotencyKey) -> Result<Submitted, StoreError> {
        let row = sqlx::query(
            "SELECT fingerprint, batch_id, job_ids FROM idempotency_keys WHERE key = $1",
        )
        .bind(&key.key)
        .fetch_optional(&self.pool)
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
                sqlx::query_scalar("SELECT id FROM jobs WHERE batch_id = $1 ORDER BY position")
                    .bind(batch)
                    .fetch_all(&self.pool)
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

/// Records the key with what this submission creates; false when the key
/// exists already (after waiting for a concurrent holder to commit).
async fn claim_key(
    tx: &mut Transaction<'static, Postgres>,
    key: &IdempotencyKey,
    plan: &Plan,
) -> Result<bool, StoreError> {
    // A batch's ids are read back from its jobs: no need to store 100,000 of them.
    let job_ids = if plan.batch_id.is_some() {
        Vec::new()
    } else {
        plan.job_ids()
    };
    let inserted = sqlx::query(
        "INSERT INTO idempotency_keys (key, fingerprint, batch_id, job_ids) VALUES ($1, $2, $3, $4)
         ON CONFLICT (key) DO NOTHING",
    )
    .bind(&key.key)
    .bind(&key.fingerprint)
    .bind(plan.batch_id)
    .bind(job_ids)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}

/// All jobs in one statement; `position` is the submission order.
async fn insert_jobs(
    tx: &mut Transaction<'static, Postgres>,
    plan: &Plan,
) -> Result<(), StoreError> {
    let ids: Vec<Uuid> = plan.job_ids();
    let specs: Vec<&str> = plan.jobs.iter().map(|j| j.spec_json.as_str()).collect();
    let task_counts: Vec<i32> = plan.jobs.iter().map(|j| j.tasks.len() as i32).collect();
    sqlx::query(
        "INSERT INTO jobs (id, batch_id, position, spec, task_count)
         SELECT j.id, $2, (j.ord - 1)::int, j.spec::json, j.task_count
         FROM unnest($1::uuid[], $3::text[], $4::int[]) WITH ORDINALITY AS j(id, spec, task_count, ord)",
    )
    .bind(ids)
    .bind(plan.batch_id)
    .bind(specs)
    .bind(task_counts)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// All tasks in one statement.
async fn insert_tasks(
    tx: &mut Transaction<'static, Postgres>,
    plan: &Plan,
) -> Result<(), StoreError> {
    let n = plan.task_count();
    let (mut job_ids, mut starts, mut ends) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for job in &plan.jobs {
        for range in &job.tasks {
            job_ids.push(job.id);
            starts.push(range.as_ref().map(|r| r.start as i64));
            ends.push(range.as_ref().map(|r| r.end as i64));
        }
    }
    sqlx::query(
        "INSERT INTO tasks (job_id, chunk_start, chunk_end)
         SELECT * FROM unnest($1::uuid[], $2::int8[], $3::int8[])",
    )
    .bind(job_ids)
    .bind(starts)
    .bind(ends)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
