//! Tenants, their quotas and their API keys: the records the store keeps
//! and the [`Store`] operations on them. A key's secret never reaches the
//! store; only its hash does (the `mcq-keys` crate makes and checks keys).

use chrono::{DateTime, Utc};

use crate::store::{Store, StoreError, dispatch};

/// A tenant's id in the database.
pub type TenantId = i32;

/// The tenant that owns the work of a server running without keys, and
/// everything stored before tenants existed.
pub const DEFAULT_TENANT: TenantId = 0;

/// Whose work a read or a cancellation may reach. Another tenant's job
/// or batch is answered exactly like one that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every tenant's (an admin key, or a server without keys).
    All,
    /// One tenant's only.
    Tenant(TenantId),
}

impl Scope {
    /// The tenant to filter by, `None` for every tenant.
    pub fn tenant(self) -> Option<TenantId> {
        match self {
            Scope::All => None,
            Scope::Tenant(id) => Some(id),
        }
    }
}

/// What a key may do. Each role may do everything the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads its tenant's jobs and batches.
    Read,
    /// Also submits and cancels its tenant's work.
    Submit,
    /// Sees and cancels every tenant's work, and the workers.
    Admin,
}

impl Role {
    /// The spelling in the database, the CLI and the logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Submit => "submit",
            Role::Admin => "admin",
        }
    }

    /// The role spelled `text`, if any.
    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "read" => Some(Role::Read),
            "submit" => Some(Role::Submit),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tenant's quotas; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantLimits {
    /// Most of its jobs queued or running at once; a submission that would
    /// go past it is refused.
    pub max_active_jobs: Option<u64>,
    /// Most Monte Carlo paths one of its jobs may ask for.
    pub max_paths_per_job: Option<u64>,
}

/// A tenant as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// Id in the database.
    pub id: TenantId,
    /// Unique name, as given to `mcq keys create --tenant`.
    pub name: String,
    /// Quotas.
    pub limits: TenantLimits,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// A key to store: its public id, its tenant by name (created if new), its
/// role, and the hash of its secret.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// Public id, unique.
    pub id: String,
    /// Tenant name.
    pub tenant: String,
    /// What the key may do.
    pub role: Role,
    /// Free text for people (`--label`).
    pub label: Option<String>,
    /// Hash of the secret; the secret itself is never stored.
    pub secret_hash: Vec<u8>,
}

/// A stored key with its tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// Public id.
    pub id: String,
    /// The tenant it acts for.
    pub tenant: Tenant,
    /// What it may do.
    pub role: Role,
    /// Free text for people.
    pub label: Option<String>,
    /// Hash of the secret.
    pub secret_hash: Vec<u8>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was revoked; a revoked key opens nothing.
    pub revoked_at: Option<DateTime<Utc>>,
}

impl Store {
    /// Stores a key, creating its tenant if the name is new.
    pub async fn create_key(&self, key: NewKey) -> Result<KeyRecord, StoreError> {
        dispatch!(self, q => q.create_key(&key).await)?;
        self.key(&key.id)
            .await?
            .ok_or_else(|| StoreError::Corrupt("a key vanished right after it was stored".into()))
    }
    /// One key by its public id, revoked or not.
    pub async fn key(&self, id: &str) -> Result<Option<KeyRecord>, StoreError> {
        dispatch!(self, q => q.key(id).await)
    }
    /// Every key, oldest first.
    pub async fn keys(&self) -> Result<Vec<KeyRecord>, StoreError> {
        dispatch!(self, q => q.keys().await)
    }
    /// Revokes a key; `None` when there is no key with this id. Revoking
    /// again keeps the first revocation's time.
    pub async fn revoke_key(&self, id: &str) -> Result<Option<KeyRecord>, StoreError> {
        dispatch!(self, q => q.revoke_key(id).await)?;
        self.key(id).await
    }
    /// Whether any key was ever made, revoked or not: a server may run open
    /// only before the first one (revoking every key does not reopen it).
    pub async fn has_keys(&self) -> Result<bool, StoreError> {
        dispatch!(self, q => q.has_keys().await)
    }
    /// Every tenant, by id.
    pub async fn tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        dispatch!(self, q => q.tenants().await)
    }
    /// Sets a tenant's quotas, creating the tenant if the name is new.
    pub async fn set_tenant_limits(
        &self,
        name: &str,
        limits: TenantLimits,
    ) -> Result<Tenant, StoreError> {
        dispatch!(self, q => q.set_tenant_limits(name, limits).await)?;
        self.tenants()
            .await?
            .into_iter()
            .find(|t| t.name == name)
            .ok_or_else(|| StoreError::Corrupt("a tenant vanished right after it was set".into()))
    }
    /// Jobs of a tenant that are queued or running, counted from its
    /// unfinished tasks (and, on PostgreSQL, its staged jobs): what its
    /// `max_active_jobs` quota limits.
    pub async fn active_jobs(&self, tenant: TenantId) -> Result<u64, StoreError> {
        dispatch!(self, q => q.active_jobs(tenant).await)
    }
}

/// Reads a stored limit: positive or absent.
pub(crate) fn limit(value: Option<i64>) -> Option<u64> {
    value.and_then(|v| u64::try_from(v).ok()).filter(|&v| v > 0)
}

/// A limit as bound: `None` stays NULL, huge values saturate.
pub(crate) fn bind_limit(value: Option<u64>) -> Option<i64> {
    value.map(|v| i64::try_from(v).unwrap_or(i64::MAX))
}
