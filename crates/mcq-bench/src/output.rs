//! The files of `--out`: every trial and every job as CSV, and a JSON summary.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::analysis::LevelSummary;
use crate::breakeven::BreakEven;
use crate::platform::Platform;

/// Name of the per-trial CSV.
pub const TRIALS_CSV: &str = "trials.csv";
/// Name of the per-job CSV.
pub const JOBS_CSV: &str = "jobs.csv";
/// Name of the JSON summary.
pub const SUMMARY_JSON: &str = "summary.json";

/// The settings a run used, echoed into the summary so a file explains itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    /// Calls per batch.
    pub calls: u32,
    /// Paths per call of the main level.
    pub runs: u64,
    /// Every level measured (the main one and the sweep).
    pub levels: Vec<u64>,
    /// Trials per platform and level.
    pub trials: u32,
    /// Platforms.
    pub platforms: Vec<Platform>,
    /// Seed of call 0 (call i uses seed + i).
    pub seed: u64,
    /// Threads of `local-all`.
    pub local_all_threads: usize,
    /// How the service was reached, e.g. "started: embedded, 2 workers".
    pub service: Option<String>,
    /// Pause between plain batch polls, in milliseconds (unused with a wait).
    pub poll_interval_ms: f64,
    /// Longest server-side wait of one batch poll (a long poll), in
    /// milliseconds; 0 for plain polls.
    pub poll_wait_ms: f64,
}

/// The machine the numbers come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// Cores available to this process.
    pub cores: usize,
    /// Operating system.
    pub os: &'static str,
    /// CPU architecture.
    pub arch: &'static str,
}

impl Machine {
    /// This machine.
    pub fn current() -> Self {
        Self {
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
        }
    }
}

/// Everything `summary.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// When the run finished.
    pub finished_at: chrono::DateTime<chrono::Utc>,
    /// Settings.
    pub settings: Settings,
    /// Machine.
    pub machine: Machine,
    /// One entry per platform and level.
    pub levels: Vec<LevelSummary>,
    /// Sweep analysis, when more than one level ran.
    pub break_even: Option<BreakEven>,
    /// Files written, relative to the output directory.
    pub files: Vec<String>,
}

/// Writes `rows` as CSV with a header row taken from the field names.
pub(crate) fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> anyhow::Result<()> {
    let mut writer =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    for row in rows {
        writer
            .serialize(row)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    writer
        .flush()
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes `value` as pretty JSON.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = BufWriter::new(file);
    serde_json::to_writer_pretty(&mut out, value)
        .with_context(|| format!("writing {}", path.display()))?;
    out.write_all(b"\n")
        .and_then(|()| out.flush())
        .with_context(|| format!("writing {}", path.display()))
}
