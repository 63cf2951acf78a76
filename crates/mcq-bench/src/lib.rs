//! Local versus distributed: measures the same batch of pricing calls on
//! several platforms (`local-1`, `local-all`, `service`), then writes a
//! table, CSV of every trial and job, a JSON summary and charts.
//!
//! The method is written down in `docs/bench.md`. In short: every platform
//! prices the same specs with the same seeds; a trial's wall time runs from
//! the first submit to the moment the client has seen the last result; for
//! the service, each job's time is split into queue wait, compute,
//! dispatch and result latency from the timestamps the server records.

mod analysis;
mod breakdown;
mod breakeven;
mod caveats;
mod chart;
mod cost;
mod environment;
mod interval;
mod link;
mod local;
mod output;
mod platform;
pub mod preset;
mod record;
mod report;
mod runner;
mod service;
mod stats;
mod table;
mod trial;

use std::path::PathBuf;

use anyhow::Context;

pub use analysis::{JobSummary, LevelSummary, summarise};
pub use breakdown::{Breakdown, Poll, ServerTimes, break_down};
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
    let cost = plan.cost.map(|model| cost::analyse(model, &levels));

    output::write_csv(&out_dir.join(TRIALS_CSV), &measured.trials)?;
    output::write_csv(&out_dir.join(JOBS_CSV), &measured.jobs)?;
    let charts = draw_charts(
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

/// What every chart title names: where the service ran and over which link.
fn chart_context(plan: &Plan) -> String {
    let backend = match plan.service.as_ref() {
        _ if !plan.platforms.contains(&Platform::Service) => "local only".to_owned(),
        Some(Target::Server(_)) => "service: remote server".to_owned(),
        Some(Target::Start(Backend::Embedded { .. })) => "service: SQLite (embedded)".to_owned(),
        Some(Target::Start(Backend::Postgres { .. })) => "service: PostgreSQL".to_owned(),
        None => "service: none".to_owned(),
    };
    let link = |p: &LinkProfile| p.name.clone();
    if plan.link_db == plan.link_client {
        format!("{backend}, link {}", link(&plan.link_db))
    } else {
        format!(
            "{backend}, links db {} / client {}",
            link(&plan.link_db),
            link(&plan.link_client)
        )
    }
}

fn draw_charts(
    plan: &Plan,
    main_runs: u64,
    measured: &Measurements,
    break_even: Option<&BreakEven>,
    cost: Option<&CostSummary>,
    out_dir: &std::path::Path,
) -> anyhow::Result<Vec<String>> {
    let mut files = Vec::new();
    let main_trials: Vec<&TrialRecord> = measured
        .trials
        .iter()
        .filter(|t| t.runs == main_runs)
        .collect();
    let context = chart_context(plan);
    let wall = chart::WallChart {
        trials: main_trials,
        calls: plan.calls,
        runs: main_runs,
        context: context.clone(),
    };
    files.extend(chart::save(&wall, out_dir, CHART_NAMES[0])?);

    // The timeline shows the service's last trial when it ran, since that is
    // the path whose time needs explaining; otherwise the last platform's.
    let shown = [Platform::Service, Platform::LocalAll, Platform::Local1]
        .into_iter()
        .find(|p| plan.platforms.contains(p))
        .context("no platform ran")?;
    let last_trial = plan.trials;
    let trial_jobs: Vec<&JobRecord> = measured
        .jobs
        .iter()
        .filter(|j| j.platform == shown && j.runs == main_runs && j.trial == last_trial)
        .collect();
    let warm_jobs: Vec<&JobRecord> = measured
        .jobs
        .iter()
        .filter(|j| j.runs == main_runs && (j.trial > 1 || plan.trials == 1))
        .collect();
    let timeline = chart::TimelineChart {
        trial_jobs,
        trial_title: format!(
            "{shown}, trial {last_trial}, {} calls × {main_runs} runs, {context}",
            plan.calls
        ),
        warm_jobs,
    };
    files.extend(chart::save(&timeline, out_dir, CHART_NAMES[1])?);

    if let Some(analysis) = break_even {
        files.extend(chart::save(
            &chart::BreakEvenChart {
                analysis,
                calls: plan.calls,
                context,
            },
            out_dir,
            CHART_NAMES[2],
        )?);
    }
    if let Some(cost) = cost {
        files.extend(chart::save(
            &chart::CostChart {
                cost,
                calls: plan.calls,
                context: chart_context(plan),
            },
            out_dir,
            CHART_NAMES[3],
        )?);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Synthetic measurements shaped like a real sweep: the service pays a
    /// fixed 2 ms per job on top of local-all's time.
    fn synthetic(plan: &Plan) -> Measurements {
        let mut out = Measurements::default();
        for &runs in &plan.levels {
            let compute = runs as f64 * 2e-5;
            for trial in 1..=plan.trials {
                let cold = if trial == 1 { 1.5 } else { 1.0 };
                for (platform, slots, wall_per_call) in [
                    (Platform::Local1, 1, compute),
                    (Platform::LocalAll, 2, compute / 2.0),
                    (Platform::Service, 2, compute / 2.0 + 2.0),
                ] {
                    let wall_ms = wall_per_call * f64::from(plan.calls) * cold;
                    out.trials.push(TrialRecord {
                        platform,
                        runs,
                        trial,
                        position: 1,
                        cold: trial == 1,
                        calls: plan.calls,
                        slots,
                        wall_ms,
                        compute_ms: compute * f64::from(plan.calls),
                        overhead_per_job_ms: 0.0,
                        succeeded: plan.calls,
                        mean_price: 9.53,
                        polls: 3,
                    });
                    for index in 0..plan.calls {
                        let submitted_ms = 0.1;
                        let started_ms =
                            submitted_ms + f64::from(index) * wall_per_call / f64::from(slots);
                        let finished_ms = started_ms + compute + 0.2;
                        let seen_ms = finished_ms + 0.5;
                        out.jobs.push(JobRecord {
                            platform,
                            runs,
                            trial,
                            index,
                            job_id: String::new(),
                            price: 9.53,
                            std_error: 0.01,
                            submitted_ms,
                            started_ms,
                            finished_ms,
                            seen_ms,
                            queue_wait_ms: started_ms - submitted_ms,
                            compute_ms: compute,
                            dispatch_ms: 0.2,
                            result_latency_ms: 0.5,
                            end_to_end_ms: seen_ms - submitted_ms,
                            server_queue_wait_ms: None,
                        });
                    }
                }
            }
        }
        out
    }

    #[test]
    fn charts_render_as_png_and_svg_from_synthetic_data() {
        let plan = Plan {
            calls: 20,
            levels: vec![1_000, 10_000, 100_000, 1_000_000],
            trials: 4,
            platforms: Platform::ALL.to_vec(),
            seed: 1,
            local_all_threads: 2,
            service: None,
            poll: PollOptions {
                wait: std::time::Duration::from_secs(1),
                interval: std::time::Duration::from_millis(5),
                timeout: std::time::Duration::from_secs(1),
            },
            exe: PathBuf::new(),
            service_dir: PathBuf::new(),
            cost: None,
            link_db: LinkProfile::loopback(),
            link_client: LinkProfile::loopback(),
        };
        let measured = synthetic(&plan);
        let analysis = breakeven::analyse(&measured.trials, &measured.jobs);
        // Service time 1e-5·r + 2 per call vs local-1's 2e-5·r: equal at r = 2e5,
        // which lies between the 1e5 and 1e6 levels.
        let beats = analysis.service_beats_local_1.unwrap();
        assert_eq!(beats.kind, CrossingKind::Interpolated);
        assert!((1e5..1e6).contains(&beats.runs.unwrap()), "{beats:?}");
        let dir = std::env::var_os("MCQ_BENCH_CHART_DIR").map_or_else(
            || std::env::temp_dir().join(format!("mcq-bench-charts-{}", std::process::id())),
            PathBuf::from,
        );
        std::fs::create_dir_all(&dir).unwrap();
        let levels = summarise(&measured.trials, &measured.jobs);
        let cost = cost::analyse(
            CostModel {
                local_per_core_hour: 0.03,
                cloud_per_core_hour: 0.05,
                cloud_granularity_s: 1.0,
            },
            &levels,
        );
        let files = draw_charts(
            &plan,
            1_000_000,
            &measured,
            Some(&analysis),
            Some(&cost),
            &dir,
        )
        .unwrap();
        assert_eq!(files.len(), 8);
        for file in &files {
            let bytes = std::fs::read(dir.join(file)).unwrap();
            if file.ends_with(".png") {
                assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{file}");
            } else {
                let text = String::from_utf8(bytes).unwrap();
                assert!(text.contains("<svg") && text.contains("<text"), "{file}");
            }
        }
        if std::env::var_os("MCQ_BENCH_CHART_DIR").is_none() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
