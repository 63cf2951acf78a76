//! What a batch costs on each platform, and the paths per call from which
//! the service is the cheaper way to run it. The prices and what holding
//! cores costs are `mcq_cost`'s, shared with `mcq submit --dry-run`.

use std::fmt::Write;

use serde::Serialize;

use crate::analysis::LevelSummary;
use crate::breakeven::{
    Crossing, LevelMedians, Margin, crossing, crossing_with_interval, walls_by_level,
};
use crate::interval::Interval;
use crate::platform::Platform;
use crate::record::TrialRecord;

pub use mcq_cost::{CostModel, parse_cloud_price, parse_price};

/// Cost of holding `slots` cores of `platform` for `wall_ms`: local
/// cores exactly, the service's as cloud cores.
pub(crate) fn batch_cost(model: &CostModel, platform: Platform, slots: u32, wall_ms: f64) -> f64 {
    match platform {
        Platform::Local1 | Platform::LocalAll => model.local_cost(slots, wall_ms),
        Platform::Service => model.cloud_cost(slots, wall_ms),
    }
}

/// One platform's cost per batch at one level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostRow {
    /// Platform.
    pub platform: Platform,
    /// Paths per call.
    pub runs: u64,
    /// Cores held.
    pub slots: u32,
    /// Cost of one batch at the median warm wall time.
    pub per_batch: f64,
    /// The cost at the ends of the median's 95% interval (cost grows with
    /// wall time, so the interval carries over).
    pub per_batch_interval: Option<Interval>,
}

/// The costs of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostSummary {
    /// The prices used.
    pub model: CostModel,
    /// One row per platform and level.
    pub rows: Vec<CostRow>,
    /// Where the service becomes cheaper per batch than `local-1` (with
    /// more than one level), with the 95% bootstrap interval of the paths
    /// per call there: the warm walls resampled as for the time
    /// break-even, each resample's medians costed again.
    pub service_cheaper_than_local_1: Option<Crossing>,
}

/// Costs every platform and level of `levels`, and finds the cost
/// break-even in the warm walls of `trials`.
pub(crate) fn analyse(
    model: CostModel,
    levels: &[LevelSummary],
    trials: &[TrialRecord],
) -> CostSummary {
    let rows: Vec<CostRow> = levels
        .iter()
        .filter_map(|l| {
            let wall = l.wall_ms?.p50;
            let cost = |ms| batch_cost(&model, l.platform, l.slots, ms);
            Some(CostRow {
                platform: l.platform,
                runs: l.runs,
                slots: l.slots,
                per_batch: cost(wall),
                per_batch_interval: l.wall_p50_interval_ms.map(|ci| Interval {
                    low: cost(ci.low),
                    high: cost(ci.high),
                    ..ci
                }),
            })
        })
        .collect();
    let (runs, walls) = walls_by_level(trials);
    // The cores each platform held at each level, in the order of
    // `Platform::ALL`, so that a resampled median is costed as the rows are.
    let slots: Vec<[Option<u32>; 3]> = runs
        .iter()
        .map(|&r| {
            Platform::ALL.map(|p| {
                levels
                    .iter()
                    .find(|l| l.platform == p && l.runs == r)
                    .map(|l| l.slots)
            })
        })
        .collect();
    let cheaper = |medians: &[LevelMedians]| {
        let margins: Vec<Margin> = runs
            .iter()
            .zip(&slots)
            .zip(medians)
            .filter_map(|((&r, s), m)| {
                let local = batch_cost(&model, Platform::Local1, s[0]?, m[0]?);
                let service = batch_cost(&model, Platform::Service, s[2]?, m[2]?);
                (local > 0.0 && service > 0.0).then(|| (r as f64, (local / service).ln(), None))
            })
            .collect();
        (!margins.is_empty()).then(|| crossing(&margins))
    };
    CostSummary {
        model,
        service_cheaper_than_local_1: if runs.len() > 1 {
            crossing_with_interval(&walls, cheaper)
        } else {
            None
        },
        rows,
    }
}

/// The cost table as Markdown.
pub(crate) fn render_markdown(cost: &CostSummary) -> String {
    let m = &cost.model;
    let mut out = format!(
        "Local cores {} per core-hour, cloud cores {} per core-hour billed per {} s \
         per batch.\n\n| platform | runs | cores | cost per batch [95% CI] |\n|---|---|---|---|\n",
        m.local_per_core_hour, m.cloud_per_core_hour, m.cloud_granularity_s
    );
    for r in &cost.rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            r.platform,
            r.runs,
            r.slots,
            crate::table::interval_by(Some(r.per_batch), r.per_batch_interval, |v| format!(
                "{v:.3e}"
            ))
        );
    }
    if let Some(c) = &cost.service_cheaper_than_local_1 {
        let _ = writeln!(
            out,
            "\nService cheaper than local-1 per batch: {}",
            crate::table::describe(Some(c))
        );
    }
    out
}

/// The cost lines of the terminal table.
pub(crate) fn render(cost: &CostSummary) -> String {
    let mut out = String::from("cost per batch:");
    for r in &cost.rows {
        let _ = write!(
            out,
            "\n  {:<9} {:>10} runs  {}",
            r.platform.name(),
            r.runs,
            crate::table::interval_by(Some(r.per_batch), r.per_batch_interval, |v| format!(
                "{v:.3e}"
            ))
        );
    }
    out.push('\n');
    if let Some(c) = &cost.service_cheaper_than_local_1 {
        let _ = writeln!(
            out,
            "cost break-even, service cheaper than local-1: {}",
            crate::table::describe(Some(c))
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::summarise;
    use crate::breakeven::CrossingKind;
    use crate::interval::Method;

    /// The same price per core-second on both sides, billed per second:
    /// whole-second walls cost exactly their seconds, so the margins are
    /// plain ratios of walls.
    const EVEN: CostModel = CostModel {
        local_per_core_hour: 3.6,
        cloud_per_core_hour: 3.6,
        cloud_granularity_s: 1.0,
    };

    /// `local-1` and the service on one core each at every (runs, local-1
    /// seconds, service seconds per warm trial) level, after a cold trial
    /// a hundred times slower that the analysis must leave out.
    fn sweep(levels: &[(u64, f64, &[f64])]) -> Vec<TrialRecord> {
        let mut out = Vec::new();
        for &(runs, local_s, service_s) in levels {
            let cold = std::iter::once((1, 100.0 * local_s, 100.0 * service_s[0]));
            let warm = (2..).zip(service_s).map(|(t, &s)| (t, local_s, s));
            for (trial, local, service) in cold.chain(warm) {
                out.push(TrialRecord::timed(
                    Platform::Local1,
                    runs,
                    trial,
                    1,
                    local * 1e3,
                ));
                out.push(TrialRecord::timed(
                    Platform::Service,
                    runs,
                    trial,
                    1,
                    service * 1e3,
                ));
            }
        }
        out
    }

    fn cost_of(trials: &[TrialRecord]) -> CostSummary {
        analyse(EVEN, &summarise(trials, &[]), trials)
    }

    #[test]
    fn walls_without_noise_give_a_point_interval_at_the_crossing() {
        // The service costs 4× local-1 at 1e3 and ¼ of it at 1e5: the log
        // margins −ln 4 and +ln 4 cross halfway in log(runs), at 1e4.
        let trials = sweep(&[
            (1_000, 1.0, &[4.0; 5]),
            (100_000, 16.0, &[4.0; 5]),
            (1_000_000, 100.0, &[10.0; 5]),
        ]);
        let c = cost_of(&trials).service_cheaper_than_local_1.unwrap();
        assert_eq!(c.kind, CrossingKind::Interpolated);
        let runs = c.runs.unwrap();
        assert!((runs - 1e4).abs() < 1e-6, "{c:?}");
        // Every resample draws the same walls, so finds the same crossing.
        let ci = c.runs_interval.unwrap();
        assert_eq!(
            (ci.low, ci.high, ci.method),
            (runs, runs, Method::Bootstrap)
        );
    }

    #[test]
    fn noise_at_two_levels_widens_the_interval_over_both() {
        // At 1e4 and 1e5 the service's median equals local-1's, its trials
        // scattered either side: a resample's crossing falls below 1e4,
        // between the two or above 1e5, each in a fifth of the resamples or
        // more, so both ends of the 95% interval lie outside them.
        let trials = sweep(&[
            (1_000, 1.0, &[4.0; 5]),
            (10_000, 10.0, &[6.0, 8.0, 10.0, 12.0, 14.0]),
            (100_000, 12.0, &[8.0, 10.0, 12.0, 14.0, 16.0]),
            (1_000_000, 100.0, &[10.0; 5]),
        ]);
        let c = cost_of(&trials).service_cheaper_than_local_1.unwrap();
        let runs = c.runs.unwrap();
        assert!((runs - 1e4).abs() < 1e-6, "{c:?}");
        let ci = c.runs_interval.unwrap();
        assert!(ci.low > 1e3 && ci.low < 9e3, "{ci:?}");
        assert!(ci.high > 1.05e5 && ci.high < 1e6, "{ci:?}");
    }

    #[test]
    fn the_table_the_report_and_the_json_carry_the_interval() {
        let trials = sweep(&[
            (1_000, 1.0, &[4.0; 5]),
            (10_000, 10.0, &[6.0, 8.0, 10.0, 12.0, 14.0]),
            (100_000, 100.0, &[10.0; 5]),
        ]);
        let cost = cost_of(&trials);
        let ci = cost
            .service_cheaper_than_local_1
            .unwrap()
            .runs_interval
            .unwrap();
        assert!(ci.low < ci.high, "{ci:?}");
        let shown = format!("95% CI [{:.0}, {:.0}]", ci.low, ci.high);
        let table = render(&cost);
        let line = table
            .lines()
            .find(|l| l.starts_with("cost break-even"))
            .unwrap();
        assert!(line.contains(&shown), "{table}");
        assert!(render_markdown(&cost).contains(&shown));
        let json = serde_json::to_value(&cost).unwrap();
        let interval = &json["service_cheaper_than_local_1"]["runs_interval"];
        assert_eq!(interval["method"], "bootstrap");
        assert_eq!(interval["low"].as_f64(), Some(ci.low));
        assert_eq!(interval["high"].as_f64(), Some(ci.high));
        // One level has nothing to cross.
        let one = trials[..12].to_vec();
        assert_eq!(cost_of(&one).service_cheaper_than_local_1, None);
    }

    #[test]
    fn local_platforms_pay_exactly_and_the_service_per_granule() {
        let model = CostModel::new(0.036, (0.072, 3600.0));
        assert_eq!(
            batch_cost(&model, Platform::Local1, 1, 10_000.0),
            model.local_cost(1, 10_000.0)
        );
        assert_eq!(
            batch_cost(&model, Platform::LocalAll, 2, 10_000.0),
            model.local_cost(2, 10_000.0)
        );
        // Two cloud cores for 10 s are billed two whole hours.
        assert!((batch_cost(&model, Platform::Service, 2, 10_000.0) - 0.144).abs() < 1e-12);
    }
}
