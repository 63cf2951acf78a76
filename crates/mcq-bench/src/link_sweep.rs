//! Several links, one question: how far does the break-even move as the
//! link's round trip grows? Each link is a complete comparison of its own
//! (every platform, interleaved and shuffled rounds), so each break-even
//! compares platforms measured in the same minutes; this module puts the
//! crossings of those runs side by side against the links' RTTs, in a
//! table, CSV, JSON and two charts.

use std::fmt::Write;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::breakeven::Crossing;
use crate::chart;
use crate::interval::Interval;
use crate::link::LinkProfile;
use crate::output::{self, Summary};
use crate::platform::Platform;
use crate::table::describe;

/// Name of the JSON of a link sweep.
pub const LINKS_JSON: &str = "links.json";
/// Name of the CSV of a link sweep (one row per link and mark).
pub const LINKS_CSV: &str = "links.csv";
/// Name of the Markdown report of a link sweep.
pub const LINKS_MD: &str = "links.md";
/// Base names of the charts of a link sweep (each `.png` and `.svg`).
pub const LINK_CHARTS: [&str; 2] = ["break-even-rtt", "speedup-by-link"];

/// One link's complete comparison, as the sweep reads it.
#[derive(Debug, Clone)]
pub struct LinkRun {
    /// The link between the service and its users (and database).
    pub profile: LinkProfile,
    /// Where the run's own files are, relative to the sweep's folder.
    pub dir: String,
    /// The run's summary.
    pub summary: Summary,
}

/// The service's speedup over `local-1` at one level over one link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelSpeedup {
    /// Paths per call.
    pub runs: u64,
    /// Median warm wall of `local-1` / that of the service.
    pub speedup: Option<f64>,
    /// Its 95% bootstrap interval.
    pub interval: Option<Interval>,
}

/// One link of the sweep: its profile and where the service starts to pay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkPoint {
    /// The profile (name, RTT, jitter, rate, loss).
    pub profile: LinkProfile,
    /// The run's folder, relative to the sweep's.
    pub dir: String,
    /// Paths per call from which the service beats `local-1`.
    pub service_beats_local_1: Option<Crossing>,
    /// Paths per call from which the service reaches 90% of `local-all`.
    pub service_reaches_90pct_of_local_all: Option<Crossing>,
    /// Paths per call from which the service is cheaper than `local-1`
    /// (with the cost flags).
    pub service_cheaper_than_local_1: Option<Crossing>,
    /// The service's speedup over `local-1` at every level.
    pub speedups: Vec<LevelSpeedup>,
    /// The run's own warnings (a busy machine, overlapping intervals).
    pub warnings: Vec<String>,
}

/// Everything `links.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkSweep {
    /// Calls per batch.
    pub calls: u32,
    /// Paths per call measured on every link.
    pub levels: Vec<u64>,
    /// Where the service ran, as the runs' environment records name it.
    pub backend: String,
    /// One entry per link, in ascending RTT.
    pub links: Vec<LinkPoint>,
    /// Files written into the sweep's folder, its runs' folders excluded.
    pub files: Vec<String>,
}

/// What a finished sweep produced.
#[derive(Debug, Clone)]
pub struct LinkSweepReport {
    /// The JSON (also in `links.json`).
    pub sweep: LinkSweep,
    /// The Markdown table of the crossings (also in `links.md`).
    pub table: String,
}

/// Builds the sweep of `runs` (at least one).
pub fn analyse(runs: &[LinkRun]) -> LinkSweep {
    let mut links: Vec<LinkPoint> = runs
        .iter()
        .map(|run| {
            let s = &run.summary;
            let speedups = s
                .levels
                .iter()
                .filter(|l| l.platform == Platform::Service)
                .map(|l| LevelSpeedup {
                    runs: l.runs,
                    speedup: l.speedup_vs_local_1,
                    interval: l.speedup_interval,
                })
                .collect();
            let be = s.break_even.as_ref();
            LinkPoint {
                profile: run.profile.clone(),
                dir: run.dir.clone(),
                service_beats_local_1: be.and_then(|b| b.service_beats_local_1),
                service_reaches_90pct_of_local_all: be
                    .and_then(|b| b.service_reaches_90pct_of_local_all),
                service_cheaper_than_local_1: s
                    .cost
                    .as_ref()
                    .and_then(|c| c.service_cheaper_than_local_1),
                speedups,
                warnings: s.warnings.clone(),
            }
        })
        .collect();
    links.sort_by_key(|p| p.profile.rtt);
    let first = runs.first().map(|r| &r.summary);
    LinkSweep {
        calls: first.map_or(0, |s| s.settings.calls),
        levels: first.map_or_else(Vec::new, |s| s.settings.levels.clone()),
        backend: first.map_or_else(String::new, |s| s.environment.backend.clone()),
        links,
        files: Vec::new(),
    }
}

/// Every file name the sweep writes into its folder.
fn is_ours(name: &str) -> bool {
    [LINKS_JSON, LINKS_CSV, LINKS_MD].contains(&name)
        || name.rsplit_once('.').is_some_and(|(stem, ext)| {
            (ext == "png" || ext == "svg") && LINK_CHARTS.contains(&stem)
        })
}

/// Removes an earlier sweep's own files from `dir` (never anything else).
pub fn remove_stale(dir: &Path) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    for name in output::list_files(dir)? {
        if is_ours(&name) {
            let path = dir.join(&name);
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// One CSV row: a link and one of its marks.
#[derive(Debug, Serialize)]
struct CsvRow<'a> {
    link: &'a str,
    rtt_ms: f64,
    jitter_ms: f64,
    rate_mbit_per_s: Option<f64>,
    loss: f64,
    mark: &'static str,
    kind: Option<crate::breakeven::CrossingKind>,
    runs: Option<f64>,
    runs_low: Option<f64>,
    /// Empty when the interval is open above.
    runs_high: Option<f64>,
    compute_per_call_ms: Option<f64>,
}

/// The marks of a point, with their CSV names and chart labels.
pub(crate) fn marks(point: &LinkPoint) -> [(&'static str, Option<Crossing>); 3] {
    [
        ("service_beats_local_1", point.service_beats_local_1),
        (
            "service_reaches_90pct_of_local_all",
            point.service_reaches_90pct_of_local_all,
        ),
        (
            "service_cheaper_than_local_1",
            point.service_cheaper_than_local_1,
        ),
    ]
}

/// Analyses `runs`, writes `links.json`, `links.csv`, `links.md` and the
/// charts into `dir`, and returns the report.
pub fn write(runs: &[LinkRun], dir: &Path) -> anyhow::Result<LinkSweepReport> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    remove_stale(dir)?;
    let mut sweep = analyse(runs);
    let rows: Vec<CsvRow> = sweep
        .links
        .iter()
        .flat_map(|p| {
            marks(p).map(|(mark, c)| CsvRow {
                link: &p.profile.name,
                rtt_ms: p.profile.rtt.as_secs_f64() * 1e3,
                jitter_ms: p.profile.jitter.as_secs_f64() * 1e3,
                rate_mbit_per_s: p.profile.rate_bits_per_s.map(|r| r / 1e6),
                loss: p.profile.loss,
                mark,
                kind: c.map(|c| c.kind),
                runs: c.and_then(|c| c.runs),
                runs_low: c.and_then(|c| c.runs_interval).map(|i| i.low),
                runs_high: c
                    .and_then(|c| c.runs_interval)
                    .map(|i| i.high)
                    .filter(|h| h.is_finite()),
                compute_per_call_ms: c.and_then(|c| c.compute_per_call_ms),
            })
        })
        .collect();
    output::write_csv(&dir.join(LINKS_CSV), &rows)?;
    let context = format!(
        "service: {}, {} calls per batch",
        sweep.backend, sweep.calls
    );
    let mut charts = Vec::new();
    charts.extend(chart::save(
        &chart::RttChart {
            sweep: &sweep,
            context: context.clone(),
        },
        dir,
        LINK_CHARTS[0],
    )?);
    charts.extend(chart::save(
        &chart::SpeedupChart {
            sweep: &sweep,
            context,
        },
        dir,
        LINK_CHARTS[1],
    )?);
    let table = render(&sweep);
    let svgs: Vec<&String> = charts.iter().filter(|f| f.ends_with(".svg")).collect();
    let mut md = format!(
        "# mcq bench compare over {} links\n\n{table}\n",
        sweep.links.len()
    );
    for svg in svgs {
        let _ = writeln!(md, "![{svg}]({svg})\n");
    }
    std::fs::write(dir.join(LINKS_MD), md)
        .with_context(|| format!("writing {}", dir.join(LINKS_MD).display()))?;
    let mut files = charts;
    files.extend([LINKS_CSV, LINKS_JSON, LINKS_MD].map(str::to_owned));
    files.sort();
    sweep.files = files;
    output::write_json(&dir.join(LINKS_JSON), &sweep)?;
    Ok(LinkSweepReport { sweep, table })
}

/// The crossings per link as Markdown, with every run's warnings below.
pub fn render(sweep: &LinkSweep) -> String {
    let mut out = String::from(
        "| link | RTT ms | service beats local-1 | service reaches 90% of local-all | \
         service cheaper than local-1 | files |\n|---|---|---|---|---|---|\n",
    );
    for p in &sweep.links {
        let cost = if p.service_cheaper_than_local_1.is_some() {
            describe(p.service_cheaper_than_local_1.as_ref())
        } else {
            "-".to_owned()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {cost} | {}/ |",
            p.profile.name,
            p.profile.rtt.as_secs_f64() * 1e3,
            describe(p.service_beats_local_1.as_ref()),
            describe(p.service_reaches_90pct_of_local_all.as_ref()),
            p.dir
        );
    }
    out.push_str(
        "\nRuns per call at each crossing, with its 95% bootstrap interval; every link is a \
         complete run of its own, every platform re-measured in its own shuffled rounds.\n",
    );
    for p in &sweep.links {
        for w in &p.warnings {
            let _ = writeln!(out, "\n**WARNING** ({}): {w}", p.profile.name);
        }
    }
    out
}

/// The folder of each link's run inside the sweep's folder: the built-in
/// profile's name, `custom-1`, `custom-2`, … for the others. Refuses the
/// same profile twice, which would only repeat a run.
pub fn run_dirs(profiles: &[LinkProfile]) -> Result<Vec<String>, String> {
    let mut dirs = Vec::new();
    let mut customs = 0;
    for (i, p) in profiles.iter().enumerate() {
        if profiles[..i].contains(p) {
            return Err(format!("the link {p} is given twice"));
        }
        dirs.push(if p.name == "custom" {
            customs += 1;
            format!("custom-{customs}")
        } else {
            p.name.clone()
        });
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests;
