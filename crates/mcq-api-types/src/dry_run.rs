//! The answer of a dry run (`?dry_run=true` on a submission): what the
//! submission would queue, and what it would take on this server and on
//! the live fleet, with nothing queued.

use serde::{Deserialize, Serialize};

/// Answer of `POST /v1/jobs?dry_run=true` and `POST /v1/batches?dry_run=true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DryRun {
    /// Jobs the submission would queue.
    pub jobs: u64,
    /// Tasks (the units workers claim) the queue would cut them into.
    pub tasks: u64,
    /// Monte Carlo paths over every job with a fixed `runs`: the sum of
    /// their `runs`.
    pub paths: u64,
    /// Jobs priced exactly (`method: exact`), predicted from a timed
    /// exact pricing.
    pub exact_jobs: u64,
    /// Jobs with a `target_std_error`, whose paths are known only once
    /// they run; the predictions leave them out.
    pub unpredicted_jobs: u64,
    /// The kernel's speed measured on this server, and the work priced on it.
    pub local: LocalPrediction,
    /// The live workers and the work spread over them.
    pub fleet: FleetPrediction,
    /// What the work costs at the given prices; absent without
    /// `cost_local` and `cost_cloud`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<DryRunCost>,
}

/// The work priced on this server, from a calibration of the kernel on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LocalPrediction {
    /// Kernel time of every predicted job, summed, in seconds: each job on
    /// one core of this server while all its cores compute.
    pub compute_s: f64,
    /// Cores of this server.
    pub cores: u32,
    /// Wall time pricing the jobs one after the other on every core (as
    /// `mcq price` does), in seconds.
    pub wall_s: f64,
    /// Measured nanoseconds per path-step over the Monte Carlo jobs (their
    /// kernel time over paths × periods); absent without such jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns_per_path_step: Option<f64>,
}

/// What the fleet's speed is taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum FleetBasis {
    /// The kernel time of jobs the fleet finished in the last ten minutes,
    /// against this server's calibration for the same specs.
    History,
    /// No recent history: the workers are taken to run at this server's
    /// calibrated speed.
    Calibration,
}

/// The work spread over the live workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FleetPrediction {
    /// Active workers (heartbeating within a lease, not draining).
    pub workers: u32,
    /// Their slots (tasks they run at once), summed.
    pub slots: u32,
    /// Where the workers' speed comes from.
    pub basis: FleetBasis,
    /// Recently finished jobs the speed was measured on (0 for
    /// `calibration`).
    pub history_jobs: u64,
    /// The fleet's kernel time over this server's for the same work: above
    /// 1, the fleet's cores are slower (or busier).
    pub speed_ratio: f64,
    /// Kernel time of every predicted job on the fleet's cores, in seconds.
    pub compute_s: f64,
    /// Wall time of the work on the fleet's slots, in seconds: the compute
    /// spread over the slots, but no less than the longest task; absent
    /// when no worker is live (the work would wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
}

/// The cost of the work at the prices of `mcq bench compare` (the same
/// flags and billing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DryRunCost {
    /// Price of a local core-hour (`cost_local`).
    pub local_per_core_hour: f64,
    /// Price of a cloud core-hour (`cost_cloud`).
    pub cloud_per_core_hour: f64,
    /// Cloud billing granularity in seconds (1, 60 or 3600).
    pub cloud_granularity_s: f64,
    /// Every core of this server held for the local wall time, billed exactly.
    pub local: f64,
    /// Every slot of the fleet held for the fleet's wall time, each rounded
    /// up to the granularity; absent when no worker is live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<f64>,
}
