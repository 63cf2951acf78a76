//! What a batch costs on each platform, and the paths per call from which
//! the service is the cheaper way to run it.
//!
//! The model: a platform holds its compute slots (cores) for the batch's
//! wall time. Local cores cost `--cost-local` per core-hour for exactly
//! that time; cloud cores (the service's workers) cost `--cost-cloud` per
//! core-hour, each core's time rounded up to the billing granularity per
//! batch, as if the workers were rented for the batch alone (the 2010
//! cloud billed whole hours; today's bill per second or minute).

use std::fmt::Write;

use serde::Serialize;

use crate::analysis::LevelSummary;
use crate::breakeven::{Crossing, crossing};
use crate::interval::Interval;
use crate::platform::Platform;

/// Prices per core-hour, as given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostModel {
    /// Price of a local core-hour (`local-1`, `local-all`).
    pub local_per_core_hour: f64,
    /// Price of a cloud core-hour (the service's workers).
    pub cloud_per_core_hour: f64,
    /// Cloud billing granularity in seconds (1, 60 or 3600).
    pub cloud_granularity_s: f64,
}

/// Parses `--cost-local PRICE` (a finite, non-negative number).
pub fn parse_price(text: &str) -> Result<f64, String> {
    let price: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a price per core-hour (e.g. 0.04)"))?;
    if !(price.is_finite() && price >= 0.0) {
        return Err(format!(
            "a price per core-hour must be zero or more, got {text:?}"
        ));
    }
    Ok(price)
}

/// Parses `--cost-cloud PRICE[,granularity=1s|1min|1h]` into the price
/// and the granularity in seconds (default 1 s).
pub fn parse_cloud_price(text: &str) -> Result<(f64, f64), String> {
    let mut parts = text.split(',');
    let price = parse_price(parts.next().unwrap_or_default())?;
    let mut granularity = 1.0;
    for part in parts {
        let value = part.trim().strip_prefix("granularity=").ok_or_else(|| {
            format!("unknown cost option {part:?}; expected granularity=1s, 1min or 1h")
        })?;
        granularity = match value {
            "1s" => 1.0,
            "1min" => 60.0,
            "1h" => 3600.0,
            _ => {
                return Err(format!(
                    "unknown granularity {value:?}; expected 1s, 1min or 1h"
                ));
            }
        };
    }
    Ok((price, granularity))
}

impl CostModel {
    /// Cost of holding `slots` cores of `platform` for `wall_ms`.
    pub fn batch_cost(&self, platform: Platform, slots: u32, wall_ms: f64) -> f64 {
        let seconds = wall_ms / 1e3;
        let (billed, rate) = match platform {
            Platform::Local1 | Platform::LocalAll => (seconds, self.local_per_core_hour),
            Platform::Service => (
                (seconds / self.cloud_granularity_s).ceil() * self.cloud_granularity_s,
                self.cloud_per_core_hour,
            ),
        };
        f64::from(slots) * billed * rate / 3600.0
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
    /// more than one level).
    pub service_cheaper_than_local_1: Option<Crossing>,
}

/// Costs every platform and level of `levels`.
pub(crate) fn analyse(model: CostModel, levels: &[LevelSummary]) -> CostSummary {
    let rows: Vec<CostRow> = levels
        .iter()
        .filter_map(|l| {
            let wall = l.wall_ms?.p50;
            let cost = |ms| model.batch_cost(l.platform, l.slots, ms);
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
    let mut runs: Vec<u64> = rows.iter().map(|r| r.runs).collect();
    runs.sort_unstable();
    runs.dedup();
    let of = |p: Platform, r: u64| {
        rows.iter()
            .find(|x| x.platform == p && x.runs == r)
            .map(|x| x.per_batch)
    };
    let margins: Vec<(f64, f64, Option<f64>)> = runs
        .iter()
        .filter_map(|&r| {
            let (local, service) = (of(Platform::Local1, r)?, of(Platform::Service, r)?);
            (local > 0.0 && service > 0.0).then(|| (r as f64, (local / service).ln(), None))
        })
        .collect();
    CostSummary {
        model,
        service_cheaper_than_local_1: (runs.len() > 1 && !margins.is_empty())
            .then(|| crossing(&margins)),
        rows,
    }
}

/// The cost table as Markdown.
pub(crate) fn render_markdown(cost: &CostSummary) -> String {
    let m = &cost.model;
    let mut out = format!(
        "Local cores {:.4} per core-hour, cloud cores {:.4} per core-hour billed per {} s \
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

    #[test]
    fn prices_and_granularities_parse_or_say_why_not() {
        assert_eq!(parse_price("0.04"), Ok(0.04));
        assert!(parse_price("-1").unwrap_err().contains("zero or more"));
        assert!(parse_price("cheap").unwrap_err().contains("not a price"));
        assert_eq!(parse_cloud_price("0.05"), Ok((0.05, 1.0)));
        assert_eq!(parse_cloud_price("0.05,granularity=1min"), Ok((0.05, 60.0)));
        assert_eq!(parse_cloud_price("0.05,granularity=1h"), Ok((0.05, 3600.0)));
        assert!(
            parse_cloud_price("0.05,granularity=2h")
                .unwrap_err()
                .contains("1s, 1min or 1h")
        );
        assert!(
            parse_cloud_price("0.05,size=1")
                .unwrap_err()
                .contains("unknown cost option")
        );
    }

    #[test]
    fn the_cloud_rounds_each_core_up_to_its_granularity() {
        let model = CostModel {
            local_per_core_hour: 0.036,
            cloud_per_core_hour: 0.072,
            cloud_granularity_s: 3600.0,
        };
        // Local: 1 core for 10 s at 0.036/h = 0.0001.
        assert!((model.batch_cost(Platform::Local1, 1, 10_000.0) - 0.0001).abs() < 1e-15);
        // Cloud per hour: 2 cores for 10 s are billed 2 whole hours.
        assert!((model.batch_cost(Platform::Service, 2, 10_000.0) - 0.144).abs() < 1e-12);
        let per_second = CostModel {
            cloud_granularity_s: 1.0,
            ..model
        };
        // Per second: 10.2 s → 11 s on each of 2 cores.
        let cost = per_second.batch_cost(Platform::Service, 2, 10_200.0);
        assert!((cost - 2.0 * 11.0 * 0.072 / 3600.0).abs() < 1e-15, "{cost}");
    }
}
