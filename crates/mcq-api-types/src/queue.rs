//! The queue as a whole on the wire: how much work waits, how old the
//! oldest is, and how many workers take it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Tasks (units of claiming) that have not finished, by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskDepth {
    /// Due and waiting for a worker.
    pub queued: u64,
    /// Waiting out a retry backoff before they are due again.
    pub scheduled: u64,
    /// Under a worker's lease.
    pub running: u64,
}

/// Workers by state (see `WorkerState`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerCounts {
    /// Heartbeating and claiming.
    pub active: u64,
    /// Shutting down.
    pub draining: u64,
    /// Silent for longer than a lease, within the last five minutes.
    pub lost: u64,
}

/// Answer of `GET /v1/queue`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueView {
    /// Unfinished tasks by state.
    pub depth: TaskDepth,
    /// Since when the oldest due queued task has waited; `None` when none
    /// waits. A retried task keeps its place, so this is its first enqueue.
    pub oldest_queued_at: Option<DateTime<Utc>>,
    /// `read_at - oldest_queued_at` in milliseconds.
    pub oldest_queued_age_ms: Option<f64>,
    /// Workers by state.
    pub workers: WorkerCounts,
    /// The database's clock when this was read.
    pub read_at: DateTime<Utc>,
}
