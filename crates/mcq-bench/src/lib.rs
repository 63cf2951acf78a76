//! Local versus distributed: measures the same batch of pricing calls on
//! several platforms (`local-1`, `local-all`, `service`), optionally over
//! emulated network links, then writes a table, CSV of every trial and
//! job, a JSON summary, a Markdown report and charts, every figure with
//! its 95% interval and an environment record.
//!
//! The method is written down in `docs/bench.md`. In short: every platform
//! prices the same specs with the same seeds; a trial's wall time runs from
//! the first submit to the moment the client has seen the last result; for
//! the service, each job's time is split into queue wait, compute,
//! dispatch and result latency from the timestamps the server records;
//! platforms run in rounds whose order is shuffled with a seeded generator.

mod analysis;
mod breakdown;
mod breakeven;
mod caveats;
mod chart;
mod cost;
mod environment;
mod figures;
mod interval;
mod link;
pub mod link_sweep;
mod local;
mod output;
mod platform;
pub mod preset;
mod record;
mod report;
mod runner;
pub mod scale;
mod service;
mod stats;
mod table;
mod trial;

use std::path::PathBuf;

use anyhow::Context;

pub use analysis::{JobSummary, LevelSummary, summarise};
pub use breakdown::{Breakdown, Phases, Poll, ServerPhases, ServerTimes, break_down};
pub use breakeven::{BreakEven, Crossing, CrossingKind, EFFICIENCY_MARK, SweepPoint};
pub use cost::{CostModel, CostRow, CostSummary, parse_cloud_price, parse_price};
pub use environment::Environment;
pub use interval::{
    BOOTSTRAP_SEED, Bootstrap, CONFIDENCE, Interval, Method, RESAMPLES, median_interval,
    median_ranks,
};
pub use link::{BUILT_IN as LINK_PROFILES, LinkProfile, Relay, parse_link};
pub use output::{
    JOBS_CSV, Machine, REPORT_MD, SERVICE_DIR, SUMMARY_JSON, Settings, Summary, TRIALS_CSV,
};
pub use platform::{Platform, parse_platforms};
pub use record::{JobRecord, TrialRecord};
pub use runner::{Event, Measurements, Plan, batch, round_orders};
pub use service::{Backend, PollOptions, Target};
pub use stats::Summary as Stats;

/// Base names of the charts (each written as `.png` and `.svg`).
pub const CHART_NAMES: [&str; 4] = ["wall-per-trial", "job-breakdown", "break-even", "cost"];

/// What a finished comparison produced.
#[derive(Debug, Clone)]
pub struct Report {
    /// The JSON summary (also written to `summary.json`).
    pub summary: Summary,
    /// The terminal table, break-even lines included.
    pub table: String,
    /// Directory the files were written to.
    pub out_dir: PathBuf,
}

/// Runs `plan` with `main_runs` as the level of the per-trial and breakdown
/// charts, writes every output into `out_dir`, and returns the report.
pub fn compare(
    plan: &Plan,
    main_runs: u64,
    out_dir: PathBuf,
    observer: &(dyn Fn(Event) + Sync),
) -> anyhow::Result<Report> {
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    // An earlier run's files must not sit beside this run's (a chart of a
    // sweep this run does not make, the log of a worker it does not start).
    output::remove_stale(&out_dir, &CHART_NAMES)?;
    let mut environment = Environment::current(
        backend_name(plan),
        backend_version(plan),
        plan.link_db.to_string(),
        plan.link_client.to_string(),
    );
    let measured = runner::run(plan, observer)?;
    environment.load_after = environment::load_average();
    let levels = summarise(&measured.trials, &measured.jobs);
    let break_even =
        (plan.levels.len() > 1).then(|| breakeven::analyse(&measured.trials, &measured.jobs));
    let cost = plan
        .cost
        .map(|model| cost::analyse(model, &levels, &measured.trials));

    output::write_csv(&out_dir.join(TRIALS_CSV), &measured.trials)?;
    output::write_csv(&out_dir.join(JOBS_CSV), &measured.jobs)?;
    let charts = figures::draw_charts(
        plan,
        main_runs,
        &measured,
        break_even.as_ref(),
        cost.as_ref(),
        &out_dir,
    )?;
    let warnings = caveats::warnings(&environment, &levels);

    let mut summary = Summary {
        finished_at: chrono::Utc::now(),
        settings: Settings {
            calls: plan.calls,
            runs: main_runs,
            levels: plan.levels.clone(),
            trials: plan.trials,
            platforms: plan.platforms.clone(),
            seed: plan.seed,
            local_all_threads: plan.local_all_threads,
            service: plan
                .service
                .as_ref()
                .filter(|_| plan.platforms.contains(&Platform::Service))
                .map(describe_target),
            poll_interval_ms: plan.poll.interval.as_secs_f64() * 1e3,
            poll_wait_ms: plan.poll.wait.as_secs_f64() * 1e3,
        },
        machine: Machine::current(),
        environment,
        warnings,
        levels,
        break_even,
        cost,
        files: Vec::new(),
    };
    let svgs: Vec<String> = charts
        .iter()
        .filter(|f| f.ends_with(".svg"))
        .cloned()
        .collect();
    std::fs::write(out_dir.join(REPORT_MD), report::render(&summary, &svgs))
        .with_context(|| format!("writing {}", out_dir.join(REPORT_MD).display()))?;
    // The list is read from the folder itself (the service's logs
    // included), so it matches what is there; summary.json is about to be.
    // Files the command never writes are someone else's and not listed.
    let mut files: Vec<String> = output::list_files(&out_dir)?
        .into_iter()
        .filter(|name| output::is_ours(name, &CHART_NAMES))
        .collect();
    files.push(SUMMARY_JSON.to_owned());
    files.sort();
    files.dedup();
    summary.files = files;
    output::write_json(&out_dir.join(SUMMARY_JSON), &summary)?;
    let mut text = caveats::render(&summary.warnings);
    text.push_str(&table::render(&summary.levels));
    if let Some(analysis) = &summary.break_even {
        text.push('\n');
        text.push_str(&table::render_break_even(analysis));
    }
    if let Some(cost) = &summary.cost {
        text.push('\n');
        text.push_str(&cost::render(cost));
    }
    Ok(Report {
        summary,
        table: text,
        out_dir,
    })
}

/// The database behind the service, as the environment record names it.
fn backend_name(plan: &Plan) -> String {
    match plan.service.as_ref() {
        _ if !plan.platforms.contains(&Platform::Service) => "none (local platforms only)",
        Some(Target::Server(_)) => "remote server (database unknown)",
        Some(Target::Start(Backend::Embedded { .. })) => "SQLite (embedded)",
        Some(Target::Start(Backend::Postgres { .. })) => "PostgreSQL",
        None => "none",
    }
    .to_owned()
}

fn backend_version(plan: &Plan) -> Option<String> {
    if !plan.platforms.contains(&Platform::Service) {
        return None;
    }
    match plan.service.as_ref()? {
        Target::Server(_) => None,
        Target::Start(Backend::Embedded { .. }) => environment::backend_version(None),
        Target::Start(Backend::Postgres { url, .. }) => environment::backend_version(Some(url)),
    }
}

fn describe_target(target: &Target) -> String {
    match target {
        Target::Server(url) => format!("server at {url}"),
        Target::Start(Backend::Embedded { workers }) => {
            format!("started: embedded default, {workers} embedded workers")
        }
        Target::Start(Backend::Postgres { workers, .. }) => {
            format!("started: PostgreSQL, {workers} worker processes")
        }
    }
}
