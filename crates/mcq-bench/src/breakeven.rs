//! The break-even analysis of `--sweep-runs`: from which per-call work on
//! does the service beat `local-1`, and from which does it reach 90% of
//! `local-all`'s speed?

use serde::Serialize;

use crate::analysis::median_wall;
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
    let mut levels: Vec<u64> = trials.iter().map(|t| t.runs).collect();
    levels.sort_unstable();
    levels.dedup();
    let points: Vec<SweepPoint> = levels
        .iter()
        .map(|&runs| {
            let warm_compute: Vec<f64> = jobs
                .iter()
                .filter(|j| j.platform == Platform::Local1 && j.runs == runs && j.trial > 1)
                .map(|j| j.compute_ms)
                .collect();
            let any_compute: Vec<f64> = jobs
                .iter()
                .filter(|j| j.platform == Platform::Local1 && j.runs == runs)
                .map(|j| j.compute_ms)
                .collect();
            let compute = if warm_compute.is_empty() {
                any_compute
            } else {
                warm_compute
            };
            SweepPoint {
                runs,
                local_1_compute_per_call_ms: (!compute.is_empty()).then(|| median(&compute)),
                local_1_ms: median_wall(trials, Platform::Local1, runs),
                local_all_ms: median_wall(trials, Platform::LocalAll, runs),
                service_ms: median_wall(trials, Platform::Service, runs),
            }
        })
        .collect();
    // Margins are log ratios, so the interpolated crossing is where the
    // straight segments of the log-log chart cross.
    let beats = margins(&points, |p| Some((p.local_1_ms? / p.service_ms?).ln()));
    let efficient = margins(&points, |p| {
        Some((p.local_all_ms? / p.service_ms? / EFFICIENCY_MARK).ln())
    });
    BreakEven {
        service_beats_local_1: beats.map(|m| crossing(&m)),
        service_reaches_90pct_of_local_all: efficient.map(|m| crossing(&m)),
        points,
    }
}

/// (runs, margin, compute per call) for every point where the margin is known.
type Margin = (f64, f64, Option<f64>);

fn margins(
    points: &[SweepPoint],
    margin: impl Fn(&SweepPoint) -> Option<f64>,
) -> Option<Vec<Margin>> {
    let known: Vec<Margin> = points
        .iter()
        .filter_map(|p| Some((p.runs as f64, margin(p)?, p.local_1_compute_per_call_ms)))
        .collect();
    (!known.is_empty()).then_some(known)
}

/// Finds the first level from which `margin >= 0` holds for all larger
/// levels (noise can make a single small level look good), interpolating
/// the zero of the margin linearly in log(runs) between its neighbours.
pub(crate) fn crossing(points: &[Margin]) -> Crossing {
    let Some(first) = (0..points.len()).find(|&i| points[i..].iter().all(|p| p.1 >= 0.0)) else {
        return Crossing {
            kind: CrossingKind::NotReached,
            runs: None,
            compute_per_call_ms: None,
        };
    };
    if first == 0 {
        return Crossing {
            kind: CrossingKind::AtOrBelowSmallest,
            runs: Some(points[0].0),
            compute_per_call_ms: points[0].2,
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
}
