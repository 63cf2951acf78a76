//! The workspace's end-to-end test binary: real `mcq` processes against real
//! PostgreSQL servers and SQLite files.
//!
//! - [`e2e`]: `mcq serve` (and `mcq worker`) driven over HTTP by the client;
//! - [`process`]: `mcq worker` processes driven through the queue directly,
//!   killed, frozen and restarted for real;
//! - [`chaos`]: faults under load, each asserting that every job ends once
//!   with the local result and that the system recovers by itself.

mod chaos;
mod e2e;
mod process;
