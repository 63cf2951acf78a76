//! Which charts a comparison draws, from which measurements, and the
//! backend-and-link context every title names.

use anyhow::Context;

use crate::CHART_NAMES;
use crate::breakeven::BreakEven;
use crate::chart;
use crate::cost::CostSummary;
use crate::link::LinkProfile;
use crate::platform::Platform;
use crate::record::{JobRecord, TrialRecord};
use crate::runner::{Measurements, Plan};
use crate::service::{Backend, Target};

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

pub(crate) fn draw_charts(
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
    use std::path::PathBuf;

    use super::*;
    use crate::analysis::summarise;
    use crate::breakeven::{self, CrossingKind};
    use crate::cost::{self, CostModel};
    use crate::service::PollOptions;

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
                            claimed_ms: started_ms,
                            compute_started_ms: started_ms + 0.1,
                            compute_finished_ms: started_ms + 0.1 + compute,
                            recorded_ms: finished_ms,
                            claim_ms: 0.1,
                            record_ms: 0.1,
                            phases_measured: true,
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
            &measured.trials,
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
