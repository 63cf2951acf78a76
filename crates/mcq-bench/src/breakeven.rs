//! The break-even analysis of `--sweep-runs`: from which per-call work on
//! does the service beat `local-1`, and from which does it reach 90% of
//! `local-all`'s speed?

use serde::Serialize;

use crate::analysis::warm_walls;
use crate::interval::{Bootstrap, Interval, median_at, median_interval};
use crate::platform::Platform;
use crate::record::{JobRecord, TrialRecord};
use crate::stats::median;

/// Fraction of `local-all`'s speed the service must reach for the second mark.
pub const EFFICIENCY_MARK: f64 = 0.9;

/// Median warm wall times at one level of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    /// Paths per call.
    pub runs: u64,
    /// Median warm kernel time of one call on `local-1`.
    pub local_1_compute_per_call_ms: Option<f64>,
    /// Median warm wall of each platform that ran.
    pub local_1_ms: Option<f64>,
    /// As above, `local-all`.
    pub local_all_ms: Option<f64>,
    /// As above, `service`.
    pub service_ms: Option<f64>,
    /// 95% interval of `local_1_ms` (order statistics).
    pub local_1_interval_ms: Option<Interval>,
    /// 95% interval of `local_all_ms`.
    pub local_all_interval_ms: Option<Interval>,
    /// 95% interval of `service_ms`.
    pub service_interval_ms: Option<Interval>,
}

/// How a crossing was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CrossingKind {
    /// Between two measured levels, interpolated on log(runs).
    Interpolated,
    /// Already true at the smallest level measured: the break-even is at or below it.
    AtOrBelowSmallest,
    /// Not true at the largest level measured.
    NotReached,
}

/// Where a condition starts to hold (and keeps holding for every larger level).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Crossing {
    /// How it was found.
    pub kind: CrossingKind,
    /// Paths per call at the crossing (`None` when not reached).
    pub runs: Option<f64>,
    /// `local-1` kernel time per call there, interpolated log-log.
    pub compute_per_call_ms: Option<f64>,
    /// 95% bootstrap interval of `runs`, every platform's warm trials of
    /// every level resampled and the crossing found again. A resample that
    /// holds at the smallest level counts as that level; one that never
    /// crosses counts as +∞, so an infinite upper end says the crossing may
    /// lie beyond the levels measured.
    pub runs_interval: Option<Interval>,
}

/// The sweep and its two marks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakEven {
    /// One point per level.
    pub points: Vec<SweepPoint>,
    /// Service wall < `local-1` wall.
    pub service_beats_local_1: Option<Crossing>,
    /// `local-all` wall / service wall ≥ 0.9.
    pub service_reaches_90pct_of_local_all: Option<Crossing>,
}

/// Builds the sweep points from the measurements and finds both crossings.
pub(crate) fn analyse(trials: &[TrialRecord], jobs: &[JobRecord]) -> BreakEven {
    let (levels, walls) = walls_by_level(trials);
    let compute: Vec<Option<f64>> = levels
        .iter()
        .map(|&runs| local_1_compute(jobs, runs))
        .collect();
    let points: Vec<SweepPoint> = levels
        .iter()
        .zip(&walls)
        .zip(&compute)
        .map(|((&runs, walls), &compute)| {
            let [local_1, local_all, service] = medians_of(walls);
            SweepPoint {
                runs,
                local_1_compute_per_call_ms: compute,
                local_1_ms: local_1,
                local_all_ms: local_all,
                service_ms: service,
                local_1_interval_ms: median_interval(&walls[0]),
                local_all_interval_ms: median_interval(&walls[1]),
                service_interval_ms: median_interval(&walls[2]),
            }
        })
        .collect();
    let crossing_of = |mark: Mark| {
        crossing_with_interval(&walls, |medians| find(&levels, &compute, medians, mark))
    };
    BreakEven {
        service_beats_local_1: crossing_of(Mark::BeatsLocal1),
        service_reaches_90pct_of_local_all: crossing_of(Mark::Reaches90PctOfLocalAll),
        points,
    }
}

/// Warm walls of every platform at one level, in the order of
/// [`Platform::ALL`] (empty where a platform did not run).
pub(crate) type LevelWalls = [Vec<f64>; 3];

/// Medians of [`LevelWalls`], `None` where a platform did not run.
pub(crate) type LevelMedians = [Option<f64>; 3];

/// The levels that ran, ascending, and every platform's warm walls at each.
pub(crate) fn walls_by_level(trials: &[TrialRecord]) -> (Vec<u64>, Vec<LevelWalls>) {
    let mut levels: Vec<u64> = trials.iter().map(|t| t.runs).collect();
    levels.sort_unstable();
    levels.dedup();
    let walls = levels
        .iter()
        .map(|&runs| Platform::ALL.map(|p| warm_walls(trials, p, runs)))
        .collect();
    (levels, walls)
}

fn medians_of(walls: &LevelWalls) -> LevelMedians {
    walls.each_ref().map(|w| (!w.is_empty()).then(|| median(w)))
}

/// The crossing `find` locates in the median walls of every level, with
/// its 95% bootstrap interval: every non-empty (level, platform) group of
/// warm walls is resampled on its own and `find` runs again on the
/// resampled medians. A resample that never crosses counts as +∞.
pub(crate) fn crossing_with_interval(
    walls: &[LevelWalls],
    find: impl Fn(&[LevelMedians]) -> Option<Crossing>,
) -> Option<Crossing> {
    let medians: Vec<LevelMedians> = walls.iter().map(medians_of).collect();
    let found = find(&medians)?;
    let groups: Vec<(usize, usize)> = (0..walls.len())
        .flat_map(|l| (0..3).map(move |p| (l, p)))
        .filter(|&(l, p)| !walls[l][p].is_empty())
        .collect();
    let sizes: Vec<usize> = groups.iter().map(|&(l, p)| walls[l][p].len()).collect();
    let runs_interval = Bootstrap::default().interval(&sizes, |picks| {
        let mut medians = vec![[None; 3]; walls.len()];
        for (&(l, p), pick) in groups.iter().zip(picks) {
            medians[l][p] = Some(median_at(&walls[l][p], pick));
        }
        match find(&medians) {
            Some(c) if c.kind == CrossingKind::NotReached => f64::INFINITY,
            Some(c) => c.runs.unwrap_or(f64::NAN),
            None => f64::NAN,
        }
    });
    Some(Crossing {
        runs_interval,
        ..found
    })
}

/// Median warm kernel time of one `local-1` call at one level (all trials
/// when only a cold one ran).
fn local_1_compute(jobs: &[JobRecord], runs: u64) -> Option<f64> {
    let of = |warm_only: bool| -> Vec<f64> {
        jobs.iter()
            .filter(|j| j.platform == Platform::Local1 && j.runs == runs)
            .filter(|j| !warm_only || j.trial > 1)
            .map(|j| j.compute_ms)
            .collect()
    };
    let warm = of(true);
    let compute = if warm.is_empty() { of(false) } else { warm };
    (!compute.is_empty()).then(|| median(&compute))
}

/// The two conditions the sweep looks for.
#[derive(Debug, Clone, Copy)]
enum Mark {
    BeatsLocal1,
    Reaches90PctOfLocalAll,
}

impl Mark {
    /// The condition's margin as a log ratio (≥ 0 where it holds), so the
    /// interpolated crossing is where the straight segments of the log-log
    /// chart cross. Medians in the order local-1, local-all, service.
    fn margin(self, m: &LevelMedians) -> Option<f64> {
        match self {
            Mark::BeatsLocal1 => Some((m[0]? / m[2]?).ln()),
            Mark::Reaches90PctOfLocalAll => Some((m[1]? / m[2]? / EFFICIENCY_MARK).ln()),
        }
    }
}

fn find(
    levels: &[u64],
    compute: &[Option<f64>],
    medians: &[LevelMedians],
    mark: Mark,
) -> Option<Crossing> {
    let known: Vec<Margin> = levels
        .iter()
        .zip(compute)
        .zip(medians)
        .filter_map(|((&runs, &c), m)| Some((runs as f64, mark.margin(m)?, c)))
        .collect();
    (!known.is_empty()).then(|| crossing(&known))
}

/// (runs, margin, compute per call) for every point where the margin is known.
pub(crate) type Margin = (f64, f64, Option<f64>);

/// Finds the first level from which `margin >= 0` holds for all larger
/// levels (noise can make a single small level look good), interpolating
/// the zero of the margin linearly in log(runs) between its neighbours.
pub(crate) fn crossing(points: &[Margin]) -> Crossing {
    let Some(first) = (0..points.len()).find(|&i| points[i..].iter().all(|p| p.1 >= 0.0)) else {
        return Crossing {
            kind: CrossingKind::NotReached,
            runs: None,
            compute_per_call_ms: None,
            runs_interval: None,
        };
    };
    if first == 0 {
        return Crossing {
            kind: CrossingKind::AtOrBelowSmallest,
            runs: Some(points[0].0),
            compute_per_call_ms: points[0].2,
            runs_interval: None,
        };
    }
    let (r0, m0, c0) = points[first - 1];
    let (r1, m1, c1) = points[first];
    // m0 < 0 <= m1, so the fraction lies in (0, 1].
    let t = m0 / (m0 - m1);
    let runs = (r0.ln() + t * (r1.ln() - r0.ln())).exp();
    let compute = match (c0, c1) {
        (Some(c0), Some(c1)) if c0 > 0.0 && c1 > 0.0 => {
            Some((c0.ln() + t * (c1.ln() - c0.ln())).exp())
        }
        _ => None,
    };
    Crossing {
        kind: CrossingKind::Interpolated,
        runs: Some(runs),
        compute_per_call_ms: compute,
        runs_interval: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_on_log_runs() {
        // Margin −1 at 1e3 and +1 at 1e5: zero halfway in log space, at 1e4;
        // compute 0.1 ms and 10 ms: halfway log-log is 1 ms.
        let c = crossing(&[(1e3, -1.0, Some(0.1)), (1e5, 1.0, Some(10.0))]);
        assert_eq!(c.kind, CrossingKind::Interpolated);
        assert!((c.runs.unwrap() - 1e4).abs() < 1e-6);
        assert!((c.compute_per_call_ms.unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn edge_cases() {
        let at = crossing(&[(1e3, 0.5, Some(0.1)), (1e4, 0.2, None)]);
        assert_eq!(
            (at.kind, at.runs),
            (CrossingKind::AtOrBelowSmallest, Some(1e3))
        );
        let never = crossing(&[(1e3, -0.5, None), (1e4, -0.1, None)]);
        assert_eq!((never.kind, never.runs), (CrossingKind::NotReached, None));
        // A lucky small level followed by a loss does not count.
        let noisy = crossing(&[(1e3, 0.1, None), (1e4, -0.2, None), (1e5, 0.2, None)]);
        assert_eq!(noisy.kind, CrossingKind::Interpolated);
        assert!((noisy.runs.unwrap() - 10f64.powf(4.5)).abs() < 1e-6);
    }

    #[test]
    fn the_crossing_has_a_bootstrap_interval_around_it() {
        // local-1 takes 10·r µs, the service 5·r µs + 50 ms, each trial
        // scattered by ±10%: they cross at r = 10,000.
        let mut trials = Vec::new();
        for &runs in &[1_000u64, 3_000, 30_000, 100_000] {
            for trial in 1..=11u32 {
                let noise = 1.0 + 0.1 * ((f64::from(trial) * 0.618).fract() - 0.5) * 2.0;
                let r = runs as f64;
                let wall =
                    |platform, wall_ms| TrialRecord::timed(platform, runs, trial, 1, wall_ms);
                trials.push(wall(Platform::Local1, 0.01 * r * noise));
                trials.push(wall(Platform::Service, (0.005 * r + 50.0) / noise));
            }
        }
        let analysis = analyse(&trials, &[]);
        let beats = analysis.service_beats_local_1.unwrap();
        let runs = beats.runs.unwrap();
        assert!((3_000.0..30_000.0).contains(&runs), "{beats:?}");
        let ci = beats.runs_interval.unwrap();
        assert!(
            ci.low <= runs && runs <= ci.high && ci.high.is_finite(),
            "{ci:?}"
        );
        assert!(ci.low >= 3_000.0 && ci.high <= 30_000.0, "{ci:?}");
        // local-all never ran, so the second mark is unknown.
        assert_eq!(analysis.service_reaches_90pct_of_local_all, None);
        let point = &analysis.points[0];
        assert!(point.local_1_interval_ms.is_some() && point.local_all_interval_ms.is_none());
    }
}
