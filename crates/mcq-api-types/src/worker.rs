//! Workers on the wire: the list of live workers.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A worker as listed by `GET /v1/workers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerView {
    /// Worker id (new on every start).
    pub id: Uuid,
    /// Host the worker runs on.
    pub hostname: String,
    /// Process id on that host.
    pub pid: u32,
    /// Tasks it computes at once.
    pub concurrency: u32,
    /// When it registered.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub last_heartbeat_at: DateTime<Utc>,
    /// Tasks it completed.
    pub tasks_done: u64,
    /// Jobs whose final task it completed.
    pub jobs_done: u64,
}

/// Answer of `GET /v1/workers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerList {
    /// Workers with a recent heartbeat.
    pub workers: Vec<WorkerView>,
}
