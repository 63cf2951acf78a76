//! The queue of mcq. A **job** is one pricing request; a **batch** groups
//! jobs submitted together; a job is split into **tasks** (ranges of the
//! kernel's fixed-size chunks) that workers claim under a lease. The state
//! machine is written down in `docs/state-machine.md`.
//!
//! One [`Store`] type serves both backends: PostgreSQL for many machines,
//! SQLite for the embedded single-machine default. All SQL of a database
//! lives in its module (`postgres`, `sqlite`).

// Counts and sizes cross between u64, i64 (SQL), usize and u32 (the wire):
// a silent truncation there would corrupt a count, so every narrowing cast
// must be a checked conversion or state why it cannot truncate.
#![warn(clippy::cast_possible_truncation)]

mod access;
mod demand;
mod finished;
mod idle;
mod outage;
mod phases;
mod plan;
mod postgres;
mod schema;
mod sqlite;
mod store;
mod types;
mod work;

pub use access::{DEFAULT_TENANT, KeyRecord, NewKey, Role, Scope, Tenant, TenantId, TenantLimits};
pub use finished::FinishedEvents;
pub use idle::IdleWorkers;
pub use schema::SchemaStatus;
pub use store::{LOST_LISTED, MAX_BATCH_PAGE, MAX_PAGE, PoolMode, QueueConfig, Store, StoreError};
pub use types::*;
pub use work::WorkEvents;
