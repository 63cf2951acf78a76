//! Workers on the wire: the list of workers with their state, load and
//! recent throughput.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Where a worker stands, as its heartbeats tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Heartbeats arrive and it claims work.
    Active,
    /// Shutting down: it claims nothing more and finishes or hands back
    /// what it holds.
    Draining,
    /// No heartbeat for longer than a lease: killed, crashed or cut off.
    /// Its tasks go back to the queue as their leases expire.
    Lost,
}

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
    /// `active`, `draining`, or `lost` once its last heartbeat is older
    /// than the lease.
    pub state: WorkerState,
    /// Tasks running under its leases now (computing, or claimed and
    /// waiting for one of its slots).
    pub tasks_held: u64,
    /// Tasks it recorded during the minute before its last heartbeat.
    pub tasks_last_minute: u64,
    /// Tasks it completed.
    pub tasks_done: u64,
    /// Jobs whose final task it completed.
    pub jobs_done: u64,
}

/// Answer of `GET /v1/workers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerList {
    /// Workers heard from within the last five minutes (lost ones
    /// included, marked `lost`), oldest first.
    pub workers: Vec<WorkerView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_snake_case_on_the_wire() {
        let names: Vec<String> = [
            WorkerState::Active,
            WorkerState::Draining,
            WorkerState::Lost,
        ]
        .iter()
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
        assert_eq!(names, ["\"active\"", "\"draining\"", "\"lost\""]);
    }
}
