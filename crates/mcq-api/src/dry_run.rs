//! `?dry_run=true` on the submissions: the same decoding and validation as
//! a real submission, then, instead of queueing, what the work amounts to
//! and what it would take: on this server (from the kernel's measured
//! speed, [`crate::calibrate`]) and on the live fleet (its slots, and its
//! speed on the jobs it finished lately), with its cost at the prices of
//! `mcq bench compare` when they are given.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::response::{IntoResponse, Response};
use mcq_api_types::{
    DryRun, DryRunCost, FleetBasis, FleetPrediction, LocalPrediction, WorkerState,
};
use mcq_cost::{CostModel, parse_cloud_price, parse_price};
use mcq_kernel::{Method, ValidSpec};
use mcq_queue::FinishedCompute;
use serde::Deserialize;

use crate::AppState;
use crate::calibrate::{Shape, ms_per_unit};
use crate::problem::ApiError;

/// Jobs most recently submitted among which finished ones are looked for.
const HISTORY_SCAN: u32 = 2000;
/// How recent a finished job must be to tell the fleet's speed.
const HISTORY_WITHIN: Duration = Duration::from_secs(600);
/// Distinct shapes of recent jobs timed for the comparison; jobs of other
/// shapes are left out of it.
const HISTORY_SHAPES: usize = 8;
/// Predicted kernel time below which recent jobs are too few to measure
/// the fleet by (timer and scheduling noise would dominate).
const HISTORY_MIN_MS: f64 = 20.0;

/// Query of `POST /v1/jobs` and `POST /v1/batches`; strings so that bad
/// values get our own error rather than the extractor's.
#[derive(Debug, Deserialize)]
pub(crate) struct SubmitQuery {
    dry_run: Option<String>,
    cost_local: Option<String>,
    cost_cloud: Option<String>,
}

/// A dry run was asked for, with these prices (if any).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked {
    cost: Option<CostModel>,
}

/// Whether the query asks for a dry run: `None` for a real submission.
/// Prices without `dry_run=true`, or one price without the other, are a
/// 400 (as the CLI's flags, each needs the other).
pub(crate) fn asked(
    query: Result<Query<SubmitQuery>, QueryRejection>,
) -> Result<Option<Asked>, ApiError> {
    let Query(query) = query.map_err(|err| ApiError::BadParameter(err.body_text()))?;
    let dry = match query.dry_run.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(ApiError::BadParameter(
                "dry_run must be true or false".into(),
            ));
        }
    };
    let bad = |detail: &str| ApiError::BadParameter(detail.to_owned());
    let cost = match (query.cost_local.as_deref(), query.cost_cloud.as_deref()) {
        (None, None) => None,
        (Some(local), Some(cloud)) => {
            let local = parse_price(local).map_err(|e| bad(&format!("cost_local: {e}")))?;
            let cloud = parse_cloud_price(cloud).map_err(|e| bad(&format!("cost_cloud: {e}")))?;
            Some(CostModel::new(local, cloud))
        }
        (Some(_), None) => return Err(bad("cost_local needs cost_cloud too")),
        (None, Some(_)) => return Err(bad("cost_cloud needs cost_local too")),
    };
    if cost.is_some() && !dry {
        return Err(bad(
            "cost_local and cost_cloud price a dry run: add dry_run=true",
        ));
    }
    Ok(dry.then_some(Asked { cost }))
}

/// The dry run's answer for validated `jobs`: `200` with a [`DryRun`].
pub(crate) async fn answer(
    state: &AppState,
    jobs: Vec<ValidSpec>,
    asked: Asked,
) -> Result<Response, ApiError> {
    let workers = state.store.workers().await?;
    let live = workers
        .iter()
        .filter(|w| w.state == WorkerState::Active)
        .collect::<Vec<_>>();
    let live_workers = u32::try_from(live.len()).unwrap_or(u32::MAX);
    let slots = live.iter().map(|w| w.concurrency).sum::<u32>();
    let history = state
        .store
        .recent_compute(HISTORY_SCAN, HISTORY_WITHIN)
        .await?;
    let per_task = state.store.config().chunks_per_task;
    let cores = std::thread::available_parallelism()
        .ok()
        .and_then(|n| u32::try_from(n.get()).ok())
        .unwrap_or(1);
    // Timing the kernel is CPU work: off the async threads.
    let answer = tokio::task::spawn_blocking(move || {
        let work = Work::of(&jobs, per_task, cores);
        let (history_jobs, measured_ratio) = fleet_ratio(&history);
        let ratio = measured_ratio.unwrap_or(1.0);
        let fleet_compute_ms = work.compute_ms * ratio;
        let fleet_wall_ms = (slots > 0)
            .then(|| (fleet_compute_ms / f64::from(slots)).max(work.longest_task_ms * ratio));
        DryRun {
            jobs: work.jobs,
            tasks: work.tasks,
            paths: work.paths,
            exact_jobs: work.exact_jobs,
            unpredicted_jobs: work.unpredicted_jobs,
            cost: asked.cost.map(|model| DryRunCost {
                local_per_core_hour: model.local_per_core_hour,
                cloud_per_core_hour: model.cloud_per_core_hour,
                cloud_granularity_s: model.cloud_granularity_s,
                local: model.local_cost(cores, work.local_wall_ms),
                fleet: fleet_wall_ms.map(|ms| model.cloud_cost(slots, ms)),
            }),
            local: LocalPrediction {
                compute_s: work.compute_ms / 1e3,
                cores,
                wall_s: work.local_wall_ms / 1e3,
                ns_per_path_step: (work.path_steps > 0.0)
                    .then(|| work.mc_compute_ms * 1e6 / work.path_steps),
            },
            fleet: FleetPrediction {
                workers: live_workers,
                slots,
                basis: if measured_ratio.is_some() {
                    FleetBasis::History
                } else {
                    FleetBasis::Calibration
                },
                history_jobs: if measured_ratio.is_some() {
                    history_jobs
                } else {
                    0
                },
                speed_ratio: ratio,
                compute_s: fleet_compute_ms / 1e3,
                wall_s: fleet_wall_ms.map(|ms| ms / 1e3),
            },
        }
    })
    .await
    .map_err(|_| ApiError::Internal)?;
    Ok(axum::Json(answer).into_response())
}

/// The submission's work, counted and priced on one core of this server.
#[derive(Debug, Default)]
struct Work {
    jobs: u64,
    tasks: u64,
    paths: u64,
    exact_jobs: u64,
    unpredicted_jobs: u64,
    /// Kernel time of the predicted jobs on one core.
    compute_ms: f64,
    /// The part of it spent on Monte Carlo jobs, and their path-steps.
    mc_compute_ms: f64,
    path_steps: f64,
    /// The jobs priced one after the other, each over every core it can use.
    local_wall_ms: f64,
    /// The longest single task, on one core.
    longest_task_ms: f64,
}

impl Work {
    fn of(jobs: &[ValidSpec], chunks_per_task: u64, cores: u32) -> Work {
        let per_task = chunks_per_task.max(1);
        // One lock of the calibration cache per shape, not per job.
        let mut costs: HashMap<Shape, f64> = HashMap::new();
        let mut work = Work::default();
        for job in jobs {
            let spec = job.spec();
            work.jobs += 1;
            let chunks = job.chunk_count();
            work.tasks += chunks.map_or(1, |c| c.div_ceil(per_task).max(1));
            let ms_per_unit = *costs
                .entry(Shape::of(spec))
                .or_insert_with(|| ms_per_unit(job));
            let (job_ms, spread) = match (spec.method, spec.runs, chunks) {
                (Method::Exact, _, _) => {
                    work.exact_jobs += 1;
                    // Meet in the middle runs on one thread.
                    (ms_per_unit, 1)
                }
                (Method::Mc, Some(runs), Some(chunks)) => {
                    work.paths += runs;
                    let ms = runs as f64 * ms_per_unit;
                    work.mc_compute_ms += ms;
                    work.path_steps += runs as f64 * f64::from(spec.periods);
                    let task_share = per_task.min(chunks) as f64 / chunks as f64;
                    work.longest_task_ms = work.longest_task_ms.max(ms * task_share);
                    (ms, chunks.min(u64::from(cores)))
                }
                _ => {
                    work.unpredicted_jobs += 1;
                    continue;
                }
            };
            if spec.method == Method::Exact {
                work.longest_task_ms = work.longest_task_ms.max(job_ms);
            }
            work.compute_ms += job_ms;
            work.local_wall_ms += job_ms / spread.max(1) as f64;
        }
        work
    }
}

/// The fleet's kernel time on recently finished Monte Carlo jobs over this
/// server's calibrated time for the same jobs, and how many jobs it rests
/// on; `None` when they are too few to tell.
fn fleet_ratio(history: &[FinishedCompute]) -> (u64, Option<f64>) {
    let mut costs: HashMap<Shape, f64> = HashMap::new();
    let (mut jobs, mut measured, mut predicted) = (0u64, 0.0, 0.0);
    for finished in history {
        // A stored spec deserialises only if it still validates.
        let Ok(job) = serde_json::from_str::<ValidSpec>(&finished.spec) else {
            continue;
        };
        let spec = job.spec();
        let (Method::Mc, Some(runs), Some(_)) = (spec.method, spec.runs, job.chunk_count()) else {
            continue;
        };
        let shape = Shape::of(spec);
        if !costs.contains_key(&shape) && costs.len() == HISTORY_SHAPES {
            continue;
        }
        let ms_per_path = *costs.entry(shape).or_insert_with(|| ms_per_unit(&job));
        jobs += 1;
        measured += finished.compute_ms;
        predicted += runs as f64 * ms_per_path;
    }
    let ratio = (predicted >= HISTORY_MIN_MS).then(|| measured / predicted);
    (jobs, ratio)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcq_kernel::Spec;

    fn valid(spec: Spec) -> ValidSpec {
        spec.with_defaults().validate().unwrap()
    }

    #[test]
    fn work_counts_jobs_tasks_and_paths_exactly() {
        let jobs = vec![
            // 20M paths: 306 chunks, 20 tasks of 16 chunks.
            valid(Spec {
                runs: Some(20_000_000),
                ..Spec::default()
            }),
            valid(Spec::default()),
            valid(Spec {
                method: Method::Exact,
                ..Spec::default()
            }),
            valid(Spec {
                target_std_error: Some(0.01),
                ..Spec::default()
            }),
        ];
        let work = Work::of(&jobs, 16, 2);
        assert_eq!(
            (work.jobs, work.tasks, work.paths),
            (4, 20 + 1 + 1 + 1, 21_000_000)
        );
        assert_eq!((work.exact_jobs, work.unpredicted_jobs), (1, 1));
        assert!(work.compute_ms > 0.0);
        // The 20M-path job's tasks are a twentieth of it at most.
        assert!(work.longest_task_ms < work.compute_ms);
        // Two cores share every job but the exact one.
        assert!(work.local_wall_ms < work.compute_ms);
    }

    #[test]
    fn the_fleet_ratio_is_measured_over_calibrated_time() {
        let job = valid(Spec::default());
        let ms = 1_000_000.0 * ms_per_unit(&job);
        let spec = serde_json::to_string(&job).unwrap();
        // Jobs that took 1.5 times the calibration on the fleet.
        let slow = |n: u32| {
            (0..n)
                .map(|_| FinishedCompute {
                    spec: spec.clone(),
                    compute_ms: 1.5 * ms,
                })
                .collect::<Vec<_>>()
        };
        let enough = (1..).find(|&n| f64::from(n) * ms > HISTORY_MIN_MS).unwrap();
        let (jobs, ratio) = fleet_ratio(&slow(enough));
        assert_eq!(jobs, u64::from(enough));
        assert!((ratio.unwrap() - 1.5).abs() < 1e-9, "{ratio:?}");
        // Nothing, or a stored spec that no longer validates, tells nothing.
        assert_eq!(fleet_ratio(&[]), (0, None));
        let broken = FinishedCompute {
            spec: r#"{"down": 2}"#.into(),
            compute_ms: 5.0,
        };
        assert_eq!(fleet_ratio(&[broken]), (0, None));
    }
}
