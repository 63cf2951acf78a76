//! The queue of mcq. A **job** is one pricing request; a **batch** groups
//! jobs submitted together; a job is split into **tasks** (ranges of the
//! kernel's fixed-size chunks) that workers claim under a lease. The state
//! machine is written down in `docs/state-machine.md`.
//!
//! One [`Store`] type serves both backends: PostgreSQL for many machines,
//! SQLite for the embedded single-machine default. All SQL of a database
//! lives in its module (`postgres`, `sqlite`).

mod finished;
mod idle;
mod outage;
mod plan;
mod postgres;
mod schema;
mod sqlite;
mod store;
mod types;

pub use finished::FinishedEvents;
pub use idle::IdleWorkers;
pub use schema::SchemaStatus;
pub use store::{MAX_PAGE, QueueConfig, Store, StoreError};
pub use types::*;
