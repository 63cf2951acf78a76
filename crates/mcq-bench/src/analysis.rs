//! Derived numbers: per platform and level, the warm wall time, speedup
//! against `local-1`, efficiency against `local-all`, per-job overhead and
//! the per-job breakdown; and whether all platforms priced identically.

use serde::Serialize;

use crate::interval::{Bootstrap, Interval, median_at, median_interval};
use crate::platform::Platform;
use crate::record::{JobRecord, TrialRecord};
use crate::stats::{Summary, median};

/// Per-job time components over all jobs of the warm trials.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSummary {
    /// Started − submitted.
    pub queue_wait_ms: Option<Summary>,
    /// Kernel time.
    pub compute_ms: Option<Summary>,
    /// Finished − started − compute.
    pub dispatch_ms: Option<Summary>,
    /// Compute started − claimed (measured phases).
    pub claim_ms: Option<Summary>,
    /// Recorded − compute finished (measured phases).
    pub record_ms: Option<Summary>,
    /// Seen − finished.
    pub result_latency_ms: Option<Summary>,
    /// Seen − submitted.
    pub end_to_end_ms: Option<Summary>,
}

/// One platform at one `runs` level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelSummary {
    /// Platform.
    pub platform: Platform,
    /// Paths per call.
    pub runs: u64,
    /// Calls per batch.
    pub calls: u32,
    /// Compute slots.
    pub slots: u32,
    /// Wall time of the first (cold) trial.
    pub cold_wall_ms: f64,
    /// Wall times of the warm trials (all trials when there is only one).
    pub wall_ms: Option<Summary>,
    /// 95% order-statistic interval of the median warm wall time.
    pub wall_p50_interval_ms: Option<Interval>,
    /// Median warm compute per call (kernel time).
    pub compute_per_call_ms: f64,
    /// Median warm wall of `local-1` / median warm wall of this platform.
    pub speedup_vs_local_1: Option<f64>,
    /// 95% bootstrap interval of the speedup.
    pub speedup_interval: Option<Interval>,
    /// Median warm wall of `local-all` / median warm wall of this platform.
    pub efficiency_vs_local_all: Option<f64>,
    /// 95% bootstrap interval of the efficiency (both platforms' trials
    /// resampled independently).
    pub efficiency_interval: Option<Interval>,
    /// Median, over the warm trials both ran, of `local-all`'s wall / this
    /// platform's wall in the trial of the same number. The platforms'
    /// trials run one after the other, so each ratio compares the same
    /// minute of the machine: on a shared machine whose speed drifts
    /// (`local-all` alone took 0.24–0.30 s for the same batch within an
    /// hour) it is steadier than the ratio of the medians.
    pub efficiency_paired_vs_local_all: Option<f64>,
    /// 95% bootstrap interval of the paired efficiency (pairs resampled).
    pub efficiency_paired_interval: Option<Interval>,
    /// `(slots × wall − compute) / calls` over the warm trials.
    pub overhead_per_job_ms: Option<Summary>,
    /// (wall − wall of `local-all`) / calls, medians of warm trials: what
    /// each job cost beyond computing the batch locally on the same cores.
    pub extra_vs_local_all_per_job_ms: Option<f64>,
    /// Per-job breakdown over the warm trials.
    pub jobs: JobSummary,
    /// Calls whose price differs (in any bit) from `local-1`'s for the same
    /// seed; `None` when `local-1` did not run.
    pub price_mismatches_vs_local_1: Option<u32>,
}

/// Trials that count as warm: all but the first, or the only one.
fn warm<'a>(trials: &[&'a TrialRecord]) -> Vec<&'a TrialRecord> {
    let warm: Vec<_> = trials.iter().copied().filter(|t| !t.cold).collect();
    if warm.is_empty() {
        trials.to_vec()
    } else {
        warm
    }
}

/// Warm wall times of one platform at one level, in trial order.
pub(crate) fn warm_walls(trials: &[TrialRecord], platform: Platform, runs: u64) -> Vec<f64> {
    let mine: Vec<&TrialRecord> = trials
        .iter()
        .filter(|t| t.platform == platform && t.runs == runs)
        .collect();
    warm(&mine).iter().map(|t| t.wall_ms).collect()
}

/// Median warm wall time of one platform at one level.
pub(crate) fn median_wall(trials: &[TrialRecord], platform: Platform, runs: u64) -> Option<f64> {
    let walls = warm_walls(trials, platform, runs);
    (!walls.is_empty()).then(|| median(&walls))
}

/// The ratio of two platforms' median warm walls, `base / platform`, with
/// its bootstrap interval.
fn ratio_of_medians(
    trials: &[TrialRecord],
    base: Platform,
    platform: Platform,
    runs: u64,
) -> (Option<f64>, Option<Interval>) {
    let (b, p) = (
        warm_walls(trials, base, runs),
        warm_walls(trials, platform, runs),
    );
    if b.is_empty() || p.is_empty() {
        return (None, None);
    }
    if base == platform {
        // A platform against itself is 1 exactly, with no uncertainty.
        let one = Interval {
            low: 1.0,
            high: 1.0,
            confidence: 1.0,
            method: crate::interval::Method::OrderStatistics,
        };
        return (Some(1.0), Some(one));
    }
    let ratio = median(&b) / median(&p);
    let ci = Bootstrap::default().interval(&[b.len(), p.len()], |picks| {
        median_at(&b, &picks[0]) / median_at(&p, &picks[1])
    });
    (Some(ratio), ci)
}

/// Median over the warm trial numbers that both `base` and `platform` ran
/// of `base`'s wall / `platform`'s wall in that trial, with the bootstrap
/// interval from resampling those pairs.
fn paired_ratio(
    trials: &[TrialRecord],
    base: Platform,
    platform: Platform,
    runs: u64,
) -> (Option<f64>, Option<Interval>) {
    let of = |p: Platform| -> Vec<&TrialRecord> {
        trials
            .iter()
            .filter(|t| t.platform == p && t.runs == runs)
            .collect()
    };
    let (bases, mine) = (of(base), of(platform));
    let bases = warm(&bases);
    let ratios: Vec<f64> = warm(&mine)
        .iter()
        .filter_map(|t| {
            let b = bases.iter().find(|b| b.trial == t.trial)?;
            (t.wall_ms > 0.0).then(|| b.wall_ms / t.wall_ms)
        })
        .collect();
    if ratios.is_empty() {
        return (None, None);
    }
    let ci = Bootstrap::default().interval(&[ratios.len()], |picks| median_at(&ratios, &picks[0]));
    (Some(median(&ratios)), ci)
}

/// Summarises every (platform, level) that ran, in platform then level order.
pub fn summarise(trials: &[TrialRecord], jobs: &[JobRecord]) -> Vec<LevelSummary> {
    let mut keys: Vec<(Platform, u64)> = trials.iter().map(|t| (t.platform, t.runs)).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|(platform, runs)| level(trials, jobs, platform, runs))
        .collect()
}

fn level(
    trials: &[TrialRecord],
    jobs: &[JobRecord],
    platform: Platform,
    runs: u64,
) -> LevelSummary {
    let mine: Vec<&TrialRecord> = trials
        .iter()
        .filter(|t| t.platform == platform && t.runs == runs)
        .collect();
    let warm_trials = warm(&mine);
    let warm_numbers: Vec<u32> = warm_trials.iter().map(|t| t.trial).collect();
    let warm_jobs: Vec<&JobRecord> = jobs
        .iter()
        .filter(|j| j.platform == platform && j.runs == runs && warm_numbers.contains(&j.trial))
        .collect();
    let walls: Vec<f64> = warm_trials.iter().map(|t| t.wall_ms).collect();
    let overheads: Vec<f64> = warm_trials.iter().map(|t| t.overhead_per_job_ms).collect();
    let component =
        |f: fn(&JobRecord) -> f64| Summary::of(&warm_jobs.iter().map(|j| f(j)).collect::<Vec<_>>());
    let own = median_wall(trials, platform, runs);
    let (speedup, speedup_interval) = ratio_of_medians(trials, Platform::Local1, platform, runs);
    let (efficiency, efficiency_interval) =
        ratio_of_medians(trials, Platform::LocalAll, platform, runs);
    let (paired, paired_interval) = paired_ratio(trials, Platform::LocalAll, platform, runs);
    let calls = mine.first().map_or(0, |t| t.calls);
    let extra = match (own, median_wall(trials, Platform::LocalAll, runs)) {
        (Some(own), Some(all)) if calls > 0 => Some((own - all) / f64::from(calls)),
        _ => None,
    };
    LevelSummary {
        platform,
        runs,
        calls,
        slots: mine.first().map_or(0, |t| t.slots),
        cold_wall_ms: mine.iter().find(|t| t.cold).map_or(f64::NAN, |t| t.wall_ms),
        wall_ms: Summary::of(&walls),
        wall_p50_interval_ms: median_interval(&walls),
        compute_per_call_ms: median(&warm_jobs.iter().map(|j| j.compute_ms).collect::<Vec<_>>()),
        speedup_vs_local_1: speedup,
        speedup_interval,
        efficiency_vs_local_all: efficiency,
        efficiency_interval,
        efficiency_paired_vs_local_all: paired,
        efficiency_paired_interval: paired_interval,
        overhead_per_job_ms: Summary::of(&overheads),
        extra_vs_local_all_per_job_ms: extra,
        jobs: JobSummary {
            queue_wait_ms: component(|j| j.queue_wait_ms),
            compute_ms: component(|j| j.compute_ms),
            dispatch_ms: component(|j| j.dispatch_ms),
            claim_ms: component(|j| j.claim_ms),
            record_ms: component(|j| j.record_ms),
            result_latency_ms: component(|j| j.result_latency_ms),
            end_to_end_ms: component(|j| j.end_to_end_ms),
        },
        price_mismatches_vs_local_1: price_mismatches(jobs, platform, runs),
    }
}

fn price_mismatches(jobs: &[JobRecord], platform: Platform, runs: u64) -> Option<u32> {
    let reference: Vec<&JobRecord> = jobs
        .iter()
        .filter(|j| j.platform == Platform::Local1 && j.runs == runs)
        .collect();
    if reference.is_empty() {
        return None;
    }
    let mismatches = jobs
        .iter()
        .filter(|j| j.platform == platform && j.runs == runs)
        .filter(|j| {
            reference
                .iter()
                .find(|r| r.trial == j.trial && r.index == j.index)
                .is_none_or(|r| r.price.to_bits() != j.price.to_bits())
        })
        .count();
    Some(u32::try_from(mismatches).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(platform: Platform, trial: u32, wall_ms: f64, slots: u32) -> TrialRecord {
        let compute_ms = 900.0;
        TrialRecord {
            compute_ms,
            overhead_per_job_ms: TrialRecord::overhead_per_job(slots, wall_ms, compute_ms, 10),
            ..TrialRecord::timed(platform, 1000, trial, slots, wall_ms)
        }
    }

    fn of(summary: &[LevelSummary], platform: Platform) -> &LevelSummary {
        summary
            .iter()
            .find(|s| s.platform == platform)
            .expect("the platform ran")
    }

    #[test]
    fn speedup_efficiency_and_overhead_use_warm_medians() {
        let trials = vec![
            trial(Platform::Local1, 1, 5000.0, 1),
            trial(Platform::Local1, 2, 1000.0, 1),
            trial(Platform::Local1, 3, 1200.0, 1),
            trial(Platform::LocalAll, 1, 900.0, 2),
            trial(Platform::LocalAll, 2, 500.0, 2),
            trial(Platform::LocalAll, 3, 500.0, 2),
            trial(Platform::Service, 1, 2000.0, 2),
            trial(Platform::Service, 2, 520.0, 2),
            trial(Platform::Service, 3, 580.0, 2),
        ];
        let summary = summarise(&trials, &[]);
        let service = of(&summary, Platform::Service);
        // Warm medians: local-1 1100, local-all 500, service 550.
        assert_eq!(service.cold_wall_ms, 2000.0);
        assert_eq!(service.wall_ms.unwrap().p50, 550.0);
        assert!((service.speedup_vs_local_1.unwrap() - 2.0).abs() < 1e-12);
        assert!((service.efficiency_vs_local_all.unwrap() - 500.0 / 550.0).abs() < 1e-12);
        // (2 × 520 − 900)/10 = 14 and (2 × 580 − 900)/10 = 26 → median 20.
        assert!((service.overhead_per_job_ms.unwrap().p50 - 20.0).abs() < 1e-12);
        assert!((service.extra_vs_local_all_per_job_ms.unwrap() - 5.0).abs() < 1e-12);
        let local1 = of(&summary, Platform::Local1);
        assert!((local1.speedup_vs_local_1.unwrap() - 1.0).abs() < 1e-12);
        // Two warm trials: the interval of the median is their range, which
        // covers the true median only half the time, and says so.
        let ci = service.wall_p50_interval_ms.unwrap();
        assert_eq!((ci.low, ci.high, ci.confidence), (520.0, 580.0, 0.5));
        let eff = service.efficiency_interval.unwrap();
        assert!(
            eff.low <= 500.0 / 550.0 && 500.0 / 550.0 <= eff.high,
            "{eff:?}"
        );
        // Bootstrap ends are ratios of medians of resampled trials.
        assert!(eff.low >= 500.0 / 580.0 - 1e-12 && eff.high <= 500.0 / 520.0 + 1e-12);
        assert_eq!(
            local1.speedup_interval.map(|c| (c.low, c.high)),
            Some((1.0, 1.0))
        );
    }

    #[test]
    fn the_paired_efficiency_compares_trials_of_the_same_number() {
        // The machine slowed down for trial 3 (both platforms took twice
        // as long) and the service's trial 4 was slow on its own.
        let trials = vec![
            trial(Platform::LocalAll, 1, 900.0, 2),
            trial(Platform::LocalAll, 2, 500.0, 2),
            trial(Platform::LocalAll, 3, 1000.0, 2),
            trial(Platform::LocalAll, 4, 520.0, 2),
            trial(Platform::Service, 1, 2000.0, 2),
            trial(Platform::Service, 2, 550.0, 2),
            trial(Platform::Service, 3, 1100.0, 2),
            trial(Platform::Service, 4, 600.0, 2),
        ];
        let summary = summarise(&trials, &[]);
        let service = of(&summary, Platform::Service);
        // Per trial 500/550, 1000/1100, 520/600: median 10/11. The ratio of
        // the medians (520/600) mixes the slow minute into both.
        let paired = service.efficiency_paired_vs_local_all.unwrap();
        assert!((paired - 10.0 / 11.0).abs() < 1e-12, "{paired}");
        assert!((service.efficiency_vs_local_all.unwrap() - 520.0 / 600.0).abs() < 1e-12);
        let all = of(&summary, Platform::LocalAll);
        assert_eq!(all.efficiency_paired_vs_local_all, Some(1.0));
    }

    #[test]
    fn one_trial_counts_as_warm() {
        let summary = summarise(&[trial(Platform::Local1, 1, 700.0, 1)], &[]);
        assert_eq!(summary[0].wall_ms.unwrap().p50, 700.0);
        assert_eq!(summary[0].efficiency_vs_local_all, None);
        assert_eq!(summary[0].efficiency_paired_vs_local_all, None);
    }
}
