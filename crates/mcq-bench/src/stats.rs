//! Summary statistics of a sample of timings.

use serde::Serialize;

/// Count, mean, spread and quantiles of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub count: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1 denominator; 0 for one value).
    pub stddev: f64,
    /// Smallest value.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// Summarises `values`; `None` when there are none or one is not finite
    /// (a NaN would make every order statistic meaningless).
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Summary {
            count: sorted.len(),
            mean: mean(&sorted),
            stddev: stddev(&sorted),
            min: sorted[0],
            p50: quantile_sorted(&sorted, 0.5),
            p90: quantile_sorted(&sorted, 0.9),
            p99: quantile_sorted(&sorted, 0.99),
            max: sorted[sorted.len() - 1],
        })
    }
}

/// Arithmetic mean; NaN for an empty slice.
pub(crate) fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Sample standard deviation with the n − 1 denominator, by the two-pass
/// formula (the one-pass sum-of-squares form loses digits when the mean is
/// large against the spread, as it is for wall times). 0 for fewer than two values.
pub(crate) fn stddev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let m = mean(values);
    let squares: f64 = values.iter().map(|v| (v - m) * (v - m)).sum();
    (squares / (values.len() - 1) as f64).sqrt()
}

/// Quantile `q` in [0, 1] of an ascending slice, interpolating linearly
/// between the closest ranks (the common "type 7" definition, as in NumPy's
/// default and R's `quantile`). NaN for an empty slice.
pub(crate) fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let position = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let below = position.floor() as usize;
            let above = (below + 1).min(n - 1);
            let weight = position - below as f64;
            sorted[below] + (sorted[above] - sorted[below]) * weight
        }
    }
}

/// Median of an unsorted sample; NaN when empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    quantile_sorted(&sorted, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    #[test]
    fn hand_checked_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum to 32,
        // sample variance 32/7.
        let s = Summary::of(&[9.0, 2.0, 5.0, 4.0, 4.0, 7.0, 4.0, 5.0]).unwrap();
        assert_eq!(s.count, 8);
        assert!(close(s.mean, 5.0));
        assert!(close(s.stddev, (32.0f64 / 7.0).sqrt()));
        assert_eq!((s.min, s.max), (2.0, 9.0));
        // Median: between ranks 3 and 4 (0-based) = (4 + 5) / 2.
        assert!(close(s.p50, 4.5));
        // p90: position 0.9 * 7 = 6.3 → 7 + 0.3 * (9 − 7) = 7.6.
        assert!(close(s.p90, 7.6));
        // p99: position 6.93 → 7 + 0.93 * 2 = 8.86.
        assert!(close(s.p99, 8.86));
    }

    #[test]
    fn small_and_degenerate_samples() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
        let one = Summary::of(&[3.5]).unwrap();
        assert_eq!(
            (one.mean, one.stddev, one.p50, one.p99),
            (3.5, 0.0, 3.5, 3.5)
        );
        assert!(close(median(&[3.0, 1.0, 2.0]), 2.0));
        assert!(close(quantile_sorted(&[10.0, 20.0], 0.25), 12.5));
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn stddev_keeps_its_digits_on_a_large_mean() {
        // Spread 1 around 1e9: the naive E[x²] − E[x]² form returns garbage here.
        let values = [1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0];
        assert!(close(stddev(&values), 1.0));
    }
}
