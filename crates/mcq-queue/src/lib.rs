//! The queue of mcq. A **job** is one pricing request; a **batch** groups
//! jobs submitted together; a job is split into **tasks** (ranges of the
//! kernel's fixed-size chunks) that workers claim under a lease. The state
//! machine is written down in `docs/state-machine.md`.
//!
//! One [`Store`] type serves both backends: PostgreSQL for many machines,
//! SQLite for the embedded single-machine default.

mod types;

pub use types::*;
mod store;

pub use store::{QueueConfig, Store, StoreError};
