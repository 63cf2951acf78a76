//! Runs a benchmark plan: every `runs` level, every trial, every platform,
//! as randomised multiple interleaved trials. Each round runs every
//! platform once, in an order shuffled afresh for the round by a generator
//! seeded from the plan's seed: slow drift of a shared machine then hits
//! all platforms alike, and no platform always runs right after another
//! (a fixed order lets one platform's after-effects, such as a cooling CPU
//! or a busy page cache, bias the next one's times).

use std::path::PathBuf;

use anyhow::Context;
use mcq_kernel::Spec;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom;

use crate::local;
use crate::platform::Platform;
use crate::record::{JobRecord, TrialRecord};
use crate::service::{PollOptions, Service, Target};
use crate::stats::mean;
use crate::trial::TrialOutcome;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Calls per batch.
    pub calls: u32,
    /// Paths per call, one value per level (ascending, no duplicates).
    pub levels: Vec<u64>,
    /// Trials per platform and level; the first is reported as cold.
    pub trials: u32,
    /// Platforms to run.
    pub platforms: Vec<Platform>,
    /// Call `i` of every batch uses seed `seed + i`, on every platform, so
    /// all platforms compute the same prices.
    pub seed: u64,
    /// Threads of `local-all` (the machine's cores).
    pub local_all_threads: usize,
    /// How to reach the service (needed when `platforms` has it).
    pub service: Option<Target>,
    /// Polling of the service.
    pub poll: PollOptions,
    /// The `mcq` executable, to start a private service.
    pub exe: PathBuf,
    /// Working directory of a private service (data and logs).
    pub service_dir: PathBuf,
    /// Prices per core-hour, for the cost of a batch.
    pub cost: Option<crate::cost::CostModel>,
    /// The emulated link between the service's workers and its database.
    pub link_db: crate::link::LinkProfile,
    /// The emulated link between this client and the service's API.
    pub link_client: crate::link::LinkProfile,
}

/// What the runner tells its observer (the command's progress bars).
#[derive(Debug, Clone)]
pub enum Event {
    /// The service is up.
    ServiceReady {
        /// Its URL.
        url: String,
        /// Its compute slots.
        slots: u32,
    },
    /// A trial begins.
    TrialStarted {
        /// Platform.
        platform: Platform,
        /// Paths per call.
        runs: u64,
        /// Trial number.
        trial: u32,
        /// Calls in the batch.
        calls: u32,
    },
    /// Calls finished so far in the current trial.
    Progress(u64),
    /// A trial ended.
    TrialFinished(TrialRecord),
}

/// Everything measured.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    /// One row per trial.
    pub trials: Vec<TrialRecord>,
    /// One row per call of every trial.
    pub jobs: Vec<JobRecord>,
}

/// Mixed into the plan's seed for the generator of the platform order, so
/// the order does not correlate with the prices' seeds.
const ORDER_SALT: u64 = 0x6f72_6465_725f_6d63;

/// The platform order of every round: `rounds` shuffles of `platforms`,
/// the same for the same seed.
pub fn round_orders(platforms: &[Platform], rounds: usize, seed: u64) -> Vec<Vec<Platform>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ ORDER_SALT);
    (0..rounds)
        .map(|_| {
            let mut order = platforms.to_vec();
            order.shuffle(&mut rng);
            order
        })
        .collect()
}

/// The batch of one level: the original sample's spec with `runs` paths and
/// a distinct, reproducible seed per call.
pub fn batch(calls: u32, runs: u64, seed: u64) -> Vec<Spec> {
    (0..calls)
        .map(|i| Spec {
            runs: Some(runs),
            seed: Some(seed.wrapping_add(u64::from(i))),
            ..Spec::default()
        })
        .collect()
}

/// Runs the plan, reporting to `observer` as it goes.
pub(crate) fn run(plan: &Plan, observer: &(dyn Fn(Event) + Sync)) -> anyhow::Result<Measurements> {
    let one = local::pool(1)?;
    let all = local::pool(plan.local_all_threads)?;
    let mut service = match (&plan.service, plan.platforms.contains(&Platform::Service)) {
        (Some(target), true) => {
            let service =
                Service::connect(target, plan).context("starting the service platform")?;
            observer(Event::ServiceReady {
                url: service.url().to_owned(),
                slots: service.slots(),
            });
            Some(service)
        }
        (None, true) => anyhow::bail!("the service platform needs --server URL or --workers N"),
        _ => None,
    };
    let mut out = Measurements::default();
    let rounds = plan.levels.len() * plan.trials as usize;
    let mut orders = round_orders(&plan.platforms, rounds, plan.seed).into_iter();
    for &runs in &plan.levels {
        let specs = batch(plan.calls, runs, plan.seed);
        for trial in 1..=plan.trials {
            let order = orders.next().unwrap_or_default();
            for (place, &platform) in order.iter().enumerate() {
                observer(Event::TrialStarted {
                    platform,
                    runs,
                    trial,
                    calls: plan.calls,
                });
                let outcome = match platform {
                    Platform::Local1 | Platform::LocalAll => {
                        let pool = if platform == Platform::Local1 {
                            &one
                        } else {
                            &all
                        };
                        let done = std::sync::atomic::AtomicU64::new(0);
                        let on_done = || {
                            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                            observer(Event::Progress(n));
                        };
                        local::run_trial(pool, &specs, &on_done)
                    }
                    Platform::Service => {
                        let service = service.as_mut().context("the service is not connected")?;
                        let label = format!("mcq bench compare: {runs} runs, trial {trial}");
                        service
                            .run_trial(&label, &specs, plan.poll, &|n| observer(Event::Progress(n)))
                    }
                }
                .with_context(|| format!("{platform}, {runs} runs per call, trial {trial}"))?;
                let mut record = trial_record(platform, runs, trial, &outcome);
                record.position = u32::try_from(place + 1).unwrap_or(u32::MAX);
                out.jobs
                    .extend(job_records(platform, runs, trial, &outcome));
                observer(Event::TrialFinished(record.clone()));
                out.trials.push(record);
            }
        }
    }
    Ok(out)
}

fn trial_record(platform: Platform, runs: u64, trial: u32, outcome: &TrialOutcome) -> TrialRecord {
    let calls = u32::try_from(outcome.calls.len()).unwrap_or(u32::MAX);
    let compute_ms: f64 = outcome.calls.iter().map(|c| c.breakdown.compute_ms).sum();
    let prices: Vec<f64> = outcome.calls.iter().map(|c| c.price).collect();
    TrialRecord {
        platform,
        runs,
        trial,
        position: 0,
        cold: trial == 1,
        calls,
        slots: outcome.slots,
        wall_ms: outcome.wall_ms,
        compute_ms,
        overhead_per_job_ms: TrialRecord::overhead_per_job(
            outcome.slots,
            outcome.wall_ms,
            compute_ms,
            calls,
        ),
        succeeded: calls,
        mean_price: mean(&prices),
        polls: outcome.polls,
    }
}

fn job_records(
    platform: Platform,
    runs: u64,
    trial: u32,
    outcome: &TrialOutcome,
) -> Vec<JobRecord> {
    outcome
        .calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            let b = &call.breakdown;
            JobRecord {
                platform,
                runs,
                trial,
                index: u32::try_from(index).unwrap_or(u32::MAX),
                job_id: call.job_id.map(|id| id.to_string()).unwrap_or_default(),
                price: call.price,
                std_error: call.std_error,
                submitted_ms: b.submitted_ms,
                started_ms: b.started_ms,
                finished_ms: b.finished_ms,
                seen_ms: b.seen_ms,
                queue_wait_ms: b.queue_wait_ms,
                compute_ms: b.compute_ms,
                dispatch_ms: b.dispatch_ms,
                result_latency_ms: b.result_latency_ms,
                end_to_end_ms: b.end_to_end_ms,
                server_queue_wait_ms: b.server_queue_wait_ms,
                claimed_ms: b.phases.claimed_ms,
                compute_started_ms: b.phases.compute_started_ms,
                compute_finished_ms: b.phases.compute_finished_ms,
                recorded_ms: b.phases.recorded_ms,
                claim_ms: b.phases.claim_ms(),
                record_ms: b.phases.record_ms(),
                phases_measured: b.phases.measured,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_shuffled_reproducibly_and_keep_every_platform() {
        let platforms = Platform::ALL.to_vec();
        let orders = round_orders(&platforms, 40, 2010);
        assert_eq!(orders, round_orders(&platforms, 40, 2010));
        assert_ne!(orders, round_orders(&platforms, 40, 2011));
        for order in &orders {
            let mut sorted = order.clone();
            sorted.sort();
            assert_eq!(sorted, platforms);
        }
        // Over 40 rounds of 3 platforms every platform goes first at least
        // once (a fixed order would put the same one first every time).
        for p in Platform::ALL {
            assert!(orders.iter().any(|o| o[0] == p), "{p} never first");
        }
    }
}
