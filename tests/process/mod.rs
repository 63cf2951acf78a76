//! Process tests: real `mcq worker` processes against a real PostgreSQL.
//!
//! Work is submitted and inspected through `mcq_queue::Store` directly (no
//! HTTP). Each test sizes its tasks through the submitting store's
//! `chunks_per_task` so that a task takes a known number of kernel chunks.

pub(crate) mod batch;
mod bench_queue;
mod connections;
mod fleet;
pub(crate) mod freeze;
mod keda;
mod kill;
mod logs;
mod misconfigured;
mod probes;
mod restart;
mod terminate;
mod tls;
