//! Tenants and API keys on PostgreSQL.

use sqlx::Row as _;
use sqlx::postgres::PgRow;

use super::PgQueue;
use crate::access::{KeyRecord, NewKey, Role, Tenant, TenantId, TenantLimits, bind_limit, limit};
use crate::store::StoreError;

/// A key and its tenant, for `FROM api_keys k JOIN tenants t`.
const KEY_SELECT: &str = "
SELECT k.id, k.role, k.label, k.secret_hash, k.created_at, k.revoked_at,
       t.id AS tenant_id, t.name, t.max_active_jobs, t.max_paths_per_job,
       t.created_at AS tenant_created_at
FROM api_keys k JOIN tenants t ON t.id = k.tenant_id";

impl PgQueue {
    /// Inserts the tenant if its name is new, then the key, in one statement.
    pub(crate) async fn create_key(&self, key: &NewKey) -> Result<(), StoreError> {
        sqlx::query(
            "WITH fresh AS (
                 INSERT INTO tenants (name) VALUES ($2) ON CONFLICT (name) DO NOTHING RETURNING id
             ), tenant AS (
                 SELECT id FROM fresh UNION ALL SELECT id FROM tenants WHERE name = $2
             )
             INSERT INTO api_keys (id, tenant_id, role, label, secret_hash)
             SELECT $1, (SELECT id FROM tenant LIMIT 1), $3, $4, $5",
        )
        .bind(&key.id)
        .bind(&key.tenant)
        .bind(key.role.as_str())
        .bind(key.label.as_deref())
        .bind(&key.secret_hash)
        .execute(&mut *self.conn().await?)
        .await?;
        Ok(())
    }

    pub(crate) async fn key(&self, id: &str) -> Result<Option<KeyRecord>, StoreError> {
        let sql = format!("{KEY_SELECT} WHERE k.id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&mut *self.conn().await?)
            .await?;
        row.as_ref().map(key_record).transpose()
    }

    pub(crate) async fn keys(&self) -> Result<Vec<KeyRecord>, StoreError> {
        let sql = format!("{KEY_SELECT} ORDER BY k.created_at, k.id");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(&mut *self.conn().await?)
            .await?;
        rows.iter().map(key_record).collect()
    }

    pub(crate) async fn revoke_key(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1")
            .bind(id)
            .execute(&mut *self.conn().await?)
            .await?;
        Ok(())
    }

    pub(crate) async fn has_keys(&self) -> Result<bool, StoreError> {
        Ok(sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM api_keys)")
            .fetch_one(&mut *self.conn().await?)
            .await?)
    }

    pub(crate) async fn tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        let rows = sqlx::query(
            "SELECT id AS tenant_id, name, max_active_jobs, max_paths_per_job,
                    created_at AS tenant_created_at
             FROM tenants ORDER BY id",
        )
        .fetch_all(&mut *self.conn().await?)
        .await?;
        rows.iter().map(tenant).collect()
    }

    pub(crate) async fn set_tenant_limits(
        &self,
        name: &str,
        limits: TenantLimits,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO tenants (name, max_active_jobs, max_paths_per_job) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE
             SET max_active_jobs = excluded.max_active_jobs,
                 max_paths_per_job = excluded.max_paths_per_job",
        )
        .bind(name)
        .bind(bind_limit(limits.max_active_jobs))
        .bind(bind_limit(limits.max_paths_per_job))
        .execute(&mut *self.conn().await?)
        .await?;
        Ok(())
    }

    /// Distinct jobs among the tenant's queued and running tasks, plus its
    /// staged jobs not yet written out.
    pub(crate) async fn active_jobs(&self, tenant: TenantId) -> Result<u64, StoreError> {
        count_active(&mut *self.conn().await?, tenant).await
    }
}

/// [`PgQueue::active_jobs`] through `executor`: inside a submission's
/// transaction, after its tenant's lock, the count is exact.
pub(crate) async fn count_active<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    tenant: TenantId,
) -> Result<u64, StoreError> {
    let n: i64 = sqlx::query_scalar(
        // Two branches, so that each walks its partial index.
        "SELECT (SELECT count(*) FROM (
                     SELECT job_id FROM tasks WHERE state = 'queued' AND tenant_id = $1
                     UNION
                     SELECT job_id FROM tasks WHERE state = 'running' AND tenant_id = $1) u)
              + (SELECT coalesce(sum(cardinality(ids) - next), 0) FROM staged
                 WHERE tenant_id = $1)::bigint",
    )
    .bind(tenant)
    .fetch_one(executor)
    .await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

fn tenant(row: &PgRow) -> Result<Tenant, StoreError> {
    Ok(Tenant {
        id: row.try_get("tenant_id")?,
        name: row.try_get("name")?,
        limits: TenantLimits {
            max_active_jobs: limit(row.try_get("max_active_jobs")?),
            max_paths_per_job: limit(row.try_get("max_paths_per_job")?),
        },
        created_at: row.try_get("tenant_created_at")?,
    })
}

fn key_record(row: &PgRow) -> Result<KeyRecord, StoreError> {
    let role: String = row.try_get("role")?;
    Ok(KeyRecord {
        id: row.try_get("id")?,
        tenant: tenant(row)?,
        role: Role::parse(&role)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown role {role:?} in api_keys")))?,
        label: row.try_get("label")?,
        secret_hash: row.try_get("secret_hash")?,
        created_at: row.try_get("created_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}
