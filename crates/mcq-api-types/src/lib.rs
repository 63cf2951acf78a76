//! The wire types of the mcq HTTP API: every body a request sends or an
//! answer carries, and the headers and limits that belong to the contract.
//!
//! The server serialises exactly these types and the client decodes them,
//! so the two cannot drift apart. The crate holds data only — no storage,
//! no runtime — so a program that merely calls the API compiles neither a
//! database driver nor the server. The queue maps its rows into these
//! views; nothing here knows how they are stored.
//!
//! With the `openapi` feature every type derives `utoipa::ToSchema`, from
//! which the server builds its OpenAPI document.

// Counts and sizes cross between u64, i64 (SQL), usize and u32 (the wire):
// a silent truncation there would corrupt a count, so every narrowing cast
// must be a checked conversion or state why it cannot truncate.
#![warn(clippy::cast_possible_truncation)]

mod batch;
mod dry_run;
mod health;
mod job;
mod problem;
mod queue;
mod results;
mod sweep;
mod worker;

use std::time::Duration;

pub use batch::{
    BatchAccepted, BatchCancelled, BatchPage, BatchRequest, BatchTimings, BatchView, PriceStats,
    StateCounts,
};
pub use dry_run::{DryRun, DryRunCost, FleetBasis, FleetPrediction, LocalPrediction};
pub use health::Health;
pub use job::{JobCancelled, JobPage, JobRequest, JobState, JobTimings, JobView, TaskCounts};
pub use problem::{FieldProblem, PROBLEM_JSON, Problem};
pub use queue::{QueueView, TaskDepth, WorkerCounts};
pub use results::{ResultRow, ResultsPage};
pub use sweep::{Axis, BatchGrid, BatchSummary, GridPoint, PointPrice, PointSummary, Sweep};
pub use worker::{WorkerList, WorkerState, WorkerView};

/// Longest `?wait=` a long poll may ask for; the server refuses more.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// Request header that makes a submission idempotent: a repeated key with
/// the same body replays the first answer, with another body it is a 409.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// Response header set to `true` when a submission replays an earlier one.
pub const IDEMPOTENT_REPLAYED: &str = "Idempotent-Replayed";
