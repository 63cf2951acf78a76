//! The files of `--out`: every trial and every job as CSV, a JSON summary,
//! a Markdown report; and the clean-up that keeps an earlier run's files
//! from lying beside a new run's.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::analysis::LevelSummary;
use crate::breakeven::BreakEven;
use crate::cost::CostSummary;
use crate::environment::Environment;
use crate::platform::Platform;

/// Name of the per-trial CSV.
pub const TRIALS_CSV: &str = "trials.csv";
/// Name of the per-job CSV.
pub const JOBS_CSV: &str = "jobs.csv";
/// Name of the JSON summary.
pub const SUMMARY_JSON: &str = "summary.json";
/// Name of the Markdown report.
pub const REPORT_MD: &str = "report.md";
/// Subdirectory of a started service's logs.
pub const SERVICE_DIR: &str = "service";

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
    /// Where the numbers come from.
    pub environment: Environment,
    /// Reasons to distrust this run (a busy machine, intervals too wide or
    /// overlapping to tell platforms apart); empty when there are none.
    pub warnings: Vec<String>,
    /// Sweep analysis, when more than one level ran.
    pub break_even: Option<BreakEven>,
    /// Cost per batch, with `--cost-local` and `--cost-cloud`.
    pub cost: Option<CostSummary>,
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

/// Whether `name` (relative to the output directory) is a file some run
/// of the command writes: only those are removed before a new run.
pub(crate) fn is_ours(name: &str, charts: &[&str]) -> bool {
    let fixed = [TRIALS_CSV, JOBS_CSV, SUMMARY_JSON, REPORT_MD];
    if fixed.contains(&name) {
        return true;
    }
    if let Some((stem, ext)) = name.rsplit_once('.')
        && (ext == "png" || ext == "svg")
        && charts.contains(&stem)
    {
        return true;
    }
    let Some(log) = name.strip_prefix(&format!("{SERVICE_DIR}/")) else {
        return false;
    };
    log == "server.log"
        || log
            .strip_prefix("worker-")
            .and_then(|rest| rest.strip_suffix(".log"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Regular files under `dir` (one level of subdirectories deep), as
/// sorted paths relative to it with `/` separators.
pub(crate) fn list_files(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    let read = |d: &Path| std::fs::read_dir(d).with_context(|| format!("listing {}", d.display()));
    for entry in read(dir)? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry
            .file_type()
            .with_context(|| format!("reading {name}"))?;
        if kind.is_file() {
            names.push(name);
        } else if kind.is_dir() {
            for inner in read(&entry.path())? {
                let inner = inner.with_context(|| format!("listing {name}"))?;
                if inner.file_type().is_ok_and(|k| k.is_file()) {
                    names.push(format!("{name}/{}", inner.file_name().to_string_lossy()));
                }
            }
        }
    }
    names.sort();
    Ok(names)
}

/// Removes the files of an earlier run from `dir` (and its service logs),
/// leaving every file the command does not write itself.
pub(crate) fn remove_stale(dir: &Path, charts: &[&str]) -> anyhow::Result<Vec<String>> {
    let stale: Vec<String> = list_files(dir)?
        .into_iter()
        .filter(|name| is_ours(name, charts))
        .collect();
    for name in &stale {
        let path = dir.join(name);
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_own_files_are_stale() {
        let charts = ["wall-per-trial", "break-even"];
        for ours in [
            "trials.csv",
            "report.md",
            "break-even.svg",
            "service/server.log",
            "service/worker-12.log",
        ] {
            assert!(is_ours(ours, &charts), "{ours}");
        }
        for theirs in [
            "notes.md",
            "break-even.pdf",
            "other.png",
            "service/worker-.log",
            "service/worker-x.log",
            "service/bench.sqlite",
            "trials.csv.bak",
        ] {
            assert!(!is_ours(theirs, &charts), "{theirs}");
        }
    }

    #[test]
    fn a_fresh_run_finds_only_foreign_files_left() {
        let dir = std::env::temp_dir().join(format!("mcq-bench-stale-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(SERVICE_DIR)).unwrap();
        for name in [
            "summary.json",
            "break-even.png",
            "keep.txt",
            "service/worker-3.log",
        ] {
            std::fs::write(dir.join(name), "x").unwrap();
        }
        let removed = remove_stale(&dir, &["break-even"]).unwrap();
        assert_eq!(
            removed,
            ["break-even.png", "service/worker-3.log", "summary.json"]
        );
        assert_eq!(list_files(&dir).unwrap(), ["keep.txt"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
