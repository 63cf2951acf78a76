//! What compute costs: prices per core-hour as `mcq bench compare` and
//! `mcq submit --dry-run` take them (`--cost-local`, `--cost-cloud`), and
//! the cost of holding cores for a wall time.
//!
//! The model: a platform holds its compute slots (cores) for the batch's
//! wall time. Local cores cost `--cost-local` per core-hour for exactly
//! that time; cloud cores (the service's workers) cost `--cost-cloud` per
//! core-hour, each core's time rounded up to the billing granularity per
//! batch, as if the workers were rented for the batch alone (the 2010
//! cloud billed whole hours; today's bill per second or minute).

use serde::Serialize;

/// Prices per core-hour, as given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostModel {
    /// Price of a local core-hour.
    pub local_per_core_hour: f64,
    /// Price of a cloud core-hour (the service's workers).
    pub cloud_per_core_hour: f64,
    /// Cloud billing granularity in seconds (1, 60 or 3600).
    pub cloud_granularity_s: f64,
}

impl CostModel {
    /// The model of `--cost-local` and `--cost-cloud` as parsed by
    /// [`parse_price`] and [`parse_cloud_price`].
    pub fn new(local_per_core_hour: f64, (cloud_per_core_hour, granularity_s): (f64, f64)) -> Self {
        CostModel {
            local_per_core_hour,
            cloud_per_core_hour,
            cloud_granularity_s: granularity_s,
        }
    }

    /// The texts of `--cost-local` and `--cost-cloud` (and of the query
    /// parameters `cost_local` and `cost_cloud`) that parse back to this
    /// model.
    pub fn flags(&self) -> (String, String) {
        let granularity = if self.cloud_granularity_s == 3600.0 {
            "1h"
        } else if self.cloud_granularity_s == 60.0 {
            "1min"
        } else {
            "1s"
        };
        (
            format!("{}", self.local_per_core_hour),
            format!("{},granularity={granularity}", self.cloud_per_core_hour),
        )
    }

    /// Cost of holding `cores` local cores for `wall_ms`, billed exactly.
    pub fn local_cost(&self, cores: u32, wall_ms: f64) -> f64 {
        f64::from(cores) * (wall_ms / 1e3) * self.local_per_core_hour / 3600.0
    }

    /// Cost of holding `cores` cloud cores for `wall_ms`, each core's time
    /// rounded up to the billing granularity.
    pub fn cloud_cost(&self, cores: u32, wall_ms: f64) -> f64 {
        let seconds = wall_ms / 1e3;
        let billed = (seconds / self.cloud_granularity_s).ceil() * self.cloud_granularity_s;
        f64::from(cores) * billed * self.cloud_per_core_hour / 3600.0
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_and_granularities_parse_or_say_why_not() {
        assert_eq!(parse_price("0.04"), Ok(0.04));
        assert!(parse_price("-1").unwrap_err().contains("zero or more"));
        assert!(parse_price("cheap").unwrap_err().contains("not a price"));
        assert!(parse_price("inf").unwrap_err().contains("zero or more"));
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
    fn flags_parse_back_to_the_same_model() {
        for model in [
            CostModel::new(0.04, (0.05, 1.0)),
            CostModel::new(0.0, (1e-7, 60.0)),
            CostModel::new(123.456, (0.1, 3600.0)),
        ] {
            let (local, cloud) = model.flags();
            let parsed = CostModel::new(
                parse_price(&local).unwrap(),
                parse_cloud_price(&cloud).unwrap(),
            );
            assert_eq!(parsed, model, "{local} {cloud}");
        }
    }

    #[test]
    fn the_cloud_rounds_each_core_up_to_its_granularity() {
        let model = CostModel::new(0.036, (0.072, 3600.0));
        // Local: 1 core for 10 s at 0.036/h = 0.0001.
        assert!((model.local_cost(1, 10_000.0) - 0.0001).abs() < 1e-15);
        // Cloud per hour: 2 cores for 10 s are billed 2 whole hours.
        assert!((model.cloud_cost(2, 10_000.0) - 0.144).abs() < 1e-12);
        let per_second = CostModel {
            cloud_granularity_s: 1.0,
            ..model
        };
        // Per second: 10.2 s → 11 s on each of 2 cores.
        let cost = per_second.cloud_cost(2, 10_200.0);
        assert!((cost - 2.0 * 11.0 * 0.072 / 3600.0).abs() < 1e-15, "{cost}");
    }
}
