//! Enqueueing: the whole submission in one transaction, each table filled
//! by one statement that expands a JSON array bound as a single parameter
//! (no per-row round trips, no bind-count limits).
//!
//! A tenant's quota is counted inside that transaction. It begins with
//! `BEGIN IMMEDIATE`, which takes the database's one write lock (across
//! processes too), so no other submission can add jobs between the count
//! and the commit.

use sqlx::{Row as _, Sqlite, Transaction};
use uuid::Uuid;

use super::access::count_active;
use super::{SqliteQueue, now_us};
use crate::access::TenantId;
use crate::plan::{self, Plan};
use crate::store::StoreError;
use crate::types::{IdempotencyKey, Submission, Submitted};

impl SqliteQueue {
    /// Inserts the batch, its jobs and their tasks, all or nothing; refused
    /// if the tenant would have more than `max_active_jobs` jobs queued or
    /// running.
    pub(crate) async fn submit(
        &self,
        submission: Submission,
        max_active_jobs: Option<u64>,
    ) -> Result<Submitted, StoreError> {
        let plan = plan::plan(&submission, self.config.chunks_per_task)?;
        let now = now_us();
        let mut tx = self.write().await?;
        if let Some(key) = &submission.idempotency
            && !claim_key(&mut tx, submission.tenant, key, &plan, now).await?
        {
            let replayed = replay(&mut tx, submission.tenant, key).await;
            tx.rollback().await?;
            return replayed;
        }
        if let Some(limit) = max_active_jobs {
            let active = count_active(&mut *tx, submission.tenant).await?;
            let adding = plan.jobs.len() as u64;
            if active.saturating_add(adding) > limit {
                // Also forgets the key claimed above.
                tx.rollback().await?;
                return Err(StoreError::QuotaExceeded {
                    limit,
                    active,
                    adding,
                });
            }
        }
        if let Some(batch_id) = plan.batch_id {
            sqlx::query(
                "INSERT INTO batches (id, label, total, submitted_at, tenant_id, sweep)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .bind(batch_id)
            .bind(submission.label.as_deref())
            .bind(plan.jobs.len() as i64)
            .bind(now)
            .bind(submission.tenant)
            .bind(plan::grid_json(submission.grid.as_ref())?)
            .execute(&mut *tx)
            .await?;
        }
        insert_jobs(&mut tx, &plan, submission.tenant, now).await?;
        insert_tasks(&mut tx, &plan, submission.tenant, submission.priority, now).await?;
        tx.commit().await?;
        self.wake();
        Ok(Submitted {
            batch_id: plan.batch_id,
            job_ids: plan.job_ids(),
            replayed: false,
        })
    }
}

/// Records the key; false when it exists already.
async fn claim_key(
    tx: &mut Transaction<'static, Sqlite>,
    tenant: TenantId,
    key: &IdempotencyKey,
    plan: &Plan,
    now: i64,
) -> Result<bool, StoreError> {
    let job_ids: Vec<Uuid> = if plan.batch_id.is_some() {
        Vec::new()
    } else {
        plan.job_ids()
    };
    let job_ids =
        serde_json::to_string(&job_ids).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let inserted = sqlx::query(
        "INSERT INTO idempotency_keys (key, fingerprint, batch_id, job_ids, created_at, tenant_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (tenant_id, key) DO NOTHING",
    )
    .bind(&key.key)
    .bind(&key.fingerprint)
    .bind(plan.batch_id)
    .bind(job_ids)
    .bind(now)
    .bind(tenant)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}

/// What the earlier submission with this key created, or a conflict.
async fn replay(
    tx: &mut Transaction<'static, Sqlite>,
    tenant: TenantId,
    key: &IdempotencyKey,
) -> Result<Submitted, StoreError> {
    let row = sqlx::query(
        "SELECT fingerprint, batch_id, job_ids FROM idempotency_keys WHERE tenant_id = ?1 AND key = ?2",
    )
    .bind(tenant)
    .bind(&key.key)
    .fetch_one(&mut **tx)
    .await?;
    let fingerprint: String = row.try_get("fingerprint")?;
    if fingerprint != key.fingerprint {
        return Err(StoreError::IdempotencyConflict);
    }
    let batch_id: Option<Uuid> = row.try_get("batch_id")?;
    let job_ids: Vec<Uuid> = match batch_id {
        Some(batch) => {
            sqlx::query_scalar("SELECT id FROM jobs WHERE batch_id = ?1 ORDER BY position")
                .bind(batch)
                .fetch_all(&mut **tx)
                .await?
        }
        None => {
            let text: String = row.try_get("job_ids")?;
            serde_json::from_str(&text)
                .map_err(|e| StoreError::Corrupt(format!("idempotency job ids: {e}")))?
        }
    };
    Ok(Submitted {
        batch_id,
        job_ids,
        replayed: true,
    })
}

/// All jobs in one statement; `position` is the array index.
async fn insert_jobs(
    tx: &mut Transaction<'static, Sqlite>,
    plan: &Plan,
    tenant: TenantId,
    now: i64,
) -> Result<(), StoreError> {
    let rows: Vec<(String, &str, usize)> = plan
        .jobs
        .iter()
        .map(|j| {
            (
                j.id.simple().to_string(),
                j.spec_json.as_str(),
                j.tasks.len(),
            )
        })
        .collect();
    let rows = serde_json::to_string(&rows).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    sqlx::query(
        "INSERT INTO jobs (id, batch_id, position, spec, task_count, submitted_at, tenant_id)
         SELECT unhex(value ->> 0), ?2, key, value ->> 1, value ->> 2, ?3, ?4 FROM json_each(?1)",
    )
    .bind(rows)
    .bind(plan.batch_id)
    .bind(now)
    .bind(tenant)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// All tasks in one statement, in submission order (ids ascend with it).
async fn insert_tasks(
    tx: &mut Transaction<'static, Sqlite>,
    plan: &Plan,
    tenant: TenantId,
    priority: i16,
    now: i64,
) -> Result<(), StoreError> {
    let mut rows: Vec<(String, Option<u64>, Option<u64>)> = Vec::with_capacity(plan.task_count());
    for job in &plan.jobs {
        let id = job.id.simple().to_string();
        for range in &job.tasks {
            rows.push((
                id.clone(),
                range.as_ref().map(|r| r.start),
                range.as_ref().map(|r| r.end),
            ));
        }
    }
    let rows = serde_json::to_string(&rows).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    sqlx::query(
        "INSERT INTO tasks (job_id, chunk_start, chunk_end, run_at, tenant_id, priority)
         SELECT unhex(value ->> 0), value ->> 1, value ->> 2, ?2, ?3, ?4 FROM json_each(?1)",
    )
    .bind(rows)
    .bind(now)
    .bind(tenant)
    .bind(priority)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
