//! 95% confidence intervals for the figures of a comparison.
//!
//! A median gets the distribution-free order-statistic interval: for a
//! sample of n independent values, the number below the true median is
//! Binomial(n, ½), so [x₍ₗ₎, x₍ₙ₊₁₋ₗ₎] covers it with probability
//! 1 − 2·P(B ≤ l − 1), whatever the distribution. Ratios of medians
//! (speedup, efficiency) and the break-even, which have no such closed
//! form, get a percentile bootstrap with a fixed seed, so the same
//! measurements always give the same interval.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

use crate::stats::quantile_sorted;

/// The confidence every interval aims for.
pub const CONFIDENCE: f64 = 0.95;

/// Resamples of every bootstrap interval.
pub const RESAMPLES: usize = 2000;

/// Seed of every bootstrap: fixed, so an analysis is a pure function of
/// the measurements.
pub const BOOTSTRAP_SEED: u64 = 0x6d63_715f_626f_6f74;

/// How an interval was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Order statistics of the sample (exact, distribution-free).
    OrderStatistics,
    /// Percentile bootstrap, resampling each group independently.
    Bootstrap,
}

/// A two-sided confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Lower end.
    pub low: f64,
    /// Upper end; for a break-even, infinite (`null` in JSON) when more
    /// than 2.5% of the resamples never cross.
    pub high: f64,
    /// Coverage: exact for order statistics (below 95% when the sample is
    /// too small for a 95% interval, fewer than 6 values), nominal for the
    /// bootstrap.
    pub confidence: f64,
    /// How it was computed.
    pub method: Method,
}

impl Interval {
    /// Whether this interval and `other` share any value.
    pub fn overlaps(&self, other: &Interval) -> bool {
        self.low <= other.high && other.low <= self.high
    }

    /// The interval with both ends multiplied by `factor` (unit changes).
    pub fn scaled(self, factor: f64) -> Interval {
        Interval {
            low: self.low * factor,
            high: self.high * factor,
            ..self
        }
    }
}

/// P(B ≤ k) for B ~ Binomial(n, p), for every k from 0 to n, each term in
/// log space so that neither pᵏ nor (1 − p)ⁿ⁻ᵏ underflows before it is
/// scaled.
pub(crate) fn binomial_cdfs(n: usize, p: f64) -> Vec<f64> {
    if p <= 0.0 || p >= 1.0 {
        let at = if p <= 0.0 { 0 } else { n };
        return (0..=n).map(|k| if k >= at { 1.0 } else { 0.0 }).collect();
    }
    let (ln_p, ln_q) = (p.ln(), (-p).ln_1p());
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut total = 0.0;
    let mut cdfs = Vec::with_capacity(n + 1);
    for k in 0..=n {
        total += (ln_choose + k as f64 * ln_p + (n - k) as f64 * ln_q).exp();
        cdfs.push(f64::min(total, 1.0));
        ln_choose += ((n - k) as f64).ln() - ((k + 1) as f64).ln();
    }
    cdfs
}

/// 1-based ranks (l, n + 1 − l) of the narrowest symmetric order-statistic
/// interval for the median of n values with coverage ≥ `confidence`, and
/// that coverage. With too few values for `confidence`, the widest interval
/// (1, n) and its smaller coverage. `None` for an empty sample.
pub fn median_ranks(n: usize, confidence: f64) -> Option<(usize, usize, f64)> {
    if n == 0 {
        return None;
    }
    let cdfs = binomial_cdfs(n, 0.5);
    let coverage = |l: usize| 1.0 - 2.0 * cdfs[l - 1];
    let mut l = 1;
    // Coverage falls as l grows; l stays at or below the middle rank.
    while l < n.div_ceil(2) && coverage(l + 1) >= confidence {
        l += 1;
    }
    Some((l, n + 1 - l, coverage(l).max(0.0)))
}

/// The 95% order-statistic interval of the median of `values`; `None` when
/// empty or when a value is not finite.
pub fn median_interval(values: &[f64]) -> Option<Interval> {
    if values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let (l, u, confidence) = median_ranks(values.len(), CONFIDENCE)?;
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(Interval {
        low: sorted[l - 1],
        high: sorted[u - 1],
        confidence,
        method: Method::OrderStatistics,
    })
}

/// 1-based ranks (l, u) of the equal-tailed order-statistic interval for
/// the `q` quantile of n values: the count of values below the true
/// quantile is Binomial(n, q), so x₍ₗ₎ lies at or below it with
/// probability ≥ 1 − α/2 and x₍ᵤ₎ at or above it likewise, α = 1 −
/// `confidence`, whatever the distribution. An end is `None` when no rank
/// reaches it: the sample is too small for that tail (a 99th percentile
/// has an upper end at 95% only from 368 values on, and every sample
/// smaller than that may lie wholly below it).
pub(crate) fn quantile_ranks(n: usize, q: f64, confidence: f64) -> (Option<usize>, Option<usize>) {
    let tail = (1.0 - confidence) / 2.0;
    let cdfs = binomial_cdfs(n, q);
    // P(B ≤ r − 1) grows with r: the lower rank is the last one whose
    // chance of lying above the quantile stays within the tail, the upper
    // rank the first one whose chance of lying below it does.
    let below = |r: usize| cdfs[r - 1];
    let lower = (1..=n).take_while(|&l| below(l) <= tail).last();
    let upper = (1..=n).find(|&u| below(u) >= 1.0 - tail);
    (lower, upper)
}

/// The ends of the 95% order-statistic interval of the `q` quantile of
/// ascending `sorted` values ([`quantile_ranks`]); `None` for an end the
/// sample cannot give.
pub(crate) fn quantile_interval_sorted(sorted: &[f64], q: f64) -> (Option<f64>, Option<f64>) {
    let (lower, upper) = quantile_ranks(sorted.len(), q, CONFIDENCE);
    (lower.map(|l| sorted[l - 1]), upper.map(|u| sorted[u - 1]))
}

/// A seeded percentile bootstrap over groups of observations.
#[derive(Debug, Clone)]
pub struct Bootstrap {
    rng: Xoshiro256PlusPlus,
    resamples: usize,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Self::new(BOOTSTRAP_SEED, RESAMPLES)
    }
}

impl Bootstrap {
    /// A bootstrap drawing `resamples` resamples from a generator seeded with `seed`.
    pub fn new(seed: u64, resamples: usize) -> Self {
        Self {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            resamples: resamples.max(1),
        }
    }

    /// The 95% percentile interval of `statistic`. Each resample draws, for
    /// every group of `sizes`, that many indices into the group with
    /// replacement, and hands them to `statistic`. Results that are NaN are
    /// dropped; infinities count (an unreached break-even is +∞). `None`
    /// when a group is empty or no resample gave a number.
    pub fn interval(
        &mut self,
        sizes: &[usize],
        statistic: impl Fn(&[Vec<usize>]) -> f64,
    ) -> Option<Interval> {
        if sizes.is_empty() || sizes.contains(&0) {
            return None;
        }
        let mut results = Vec::with_capacity(self.resamples);
        let mut picks: Vec<Vec<usize>> = sizes.iter().map(|&n| vec![0; n]).collect();
        for _ in 0..self.resamples {
            for (group, &n) in picks.iter_mut().zip(sizes) {
                for slot in group.iter_mut() {
                    *slot = self.rng.random_range(0..n);
                }
            }
            let value = statistic(&picks);
            if !value.is_nan() {
                results.push(value);
            }
        }
        if results.is_empty() {
            return None;
        }
        results.sort_by(f64::total_cmp);
        let tail = (1.0 - CONFIDENCE) / 2.0;
        Some(Interval {
            low: percentile(&results, tail),
            high: percentile(&results, 1.0 - tail),
            confidence: CONFIDENCE,
            method: Method::Bootstrap,
        })
    }
}

/// `quantile_sorted`, except that a quantile falling between two equal
/// infinities is that infinity (interpolating would give ∞ − ∞ = NaN).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let position = q * (sorted.len() - 1) as f64;
    let (below, above) = (position.floor() as usize, position.ceil() as usize);
    if sorted[above].is_infinite() || sorted[below].is_infinite() {
        // Rounded towards the infinite side: the conservative end.
        return if sorted[above].is_infinite() {
            sorted[above]
        } else {
            sorted[below]
        };
    }
    quantile_sorted(sorted, q)
}

/// Median of `values` at the indices `picks`.
pub(crate) fn median_at(values: &[f64], picks: &[usize]) -> f64 {
    let mut chosen: Vec<f64> = picks.iter().map(|&i| values[i]).collect();
    chosen.sort_by(f64::total_cmp);
    quantile_sorted(&chosen, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_distr::{Distribution, Exp, LogNormal};

    #[test]
    fn binomial_tail_matches_hand_counts() {
        // n = 10: C(10,0) + C(10,1) = 11 of 1024; + C(10,2) = 56 of 1024.
        assert!((binomial_cdfs(10, 0.5)[1] - 11.0 / 1024.0).abs() < 1e-15);
        assert!((binomial_cdfs(10, 0.5)[2] - 56.0 / 1024.0).abs() < 1e-15);
        assert!((binomial_cdfs(7, 0.5)[7] - 1.0).abs() < 1e-12);
        // Large n stays finite and symmetric around n / 2.
        let half = binomial_cdfs(5001, 0.5)[2500];
        assert!((half - 0.5).abs() < 1e-9, "{half}");
    }

    #[test]
    fn order_statistic_ranks_for_small_samples() {
        // Too few values for 95%: the whole range, with its real coverage.
        assert_eq!(median_ranks(1, 0.95), Some((1, 1, 0.0)));
        assert_eq!(median_ranks(5, 0.95), Some((1, 5, 1.0 - 2.0 / 32.0)));
        // n = 6: the range covers 1 − 2/64 = 96.9%.
        assert_eq!(median_ranks(6, 0.95), Some((1, 6, 1.0 - 2.0 / 64.0)));
        // n = 9: (2, 8) covers 1 − 2·10/512 = 96.1%; (3, 7) only 82%.
        assert_eq!(median_ranks(9, 0.95), Some((2, 8, 1.0 - 20.0 / 512.0)));
        // n = 10: (2, 9) covers 1 − 2·11/1024 = 97.9%; (3, 8) only 89.1%.
        assert_eq!(median_ranks(10, 0.95), Some((2, 9, 1.0 - 22.0 / 1024.0)));
        // n = 20: P(B ≤ 5) = 0.0207, P(B ≤ 6) = 0.0577, so l = 6.
        let (l, u, c) = median_ranks(20, 0.95).unwrap();
        assert_eq!((l, u), (6, 15));
        assert!(
            (c - (1.0 - 2.0 * 21_700.0 / 1_048_576.0)).abs() < 1e-12,
            "{c}"
        );
        assert_eq!(median_ranks(0, 0.95), None);
    }

    #[test]
    fn the_binomial_of_any_p_matches_hand_counts() {
        // n = 3, p = 0.9: P(B ≤ 1) = 0.1³ + 3·0.9·0.1² = 0.028.
        assert!((binomial_cdfs(3, 0.9)[1] - 0.028).abs() < 1e-12);
        assert!((binomial_cdfs(3, 0.9)[3] - 1.0).abs() < 1e-12);
        // Thousands of trials near certainty neither underflow nor pass 1.
        let all_but_a_few = binomial_cdfs(1000, 0.99)[995];
        assert!(
            all_but_a_few > 0.9 && all_but_a_few < 1.0,
            "{all_but_a_few}"
        );
    }

    #[test]
    fn ranks_of_a_99th_percentile_need_hundreds_of_values_above() {
        // Under 368 values the largest may still lie below the true p99
        // more often than 2.5% of the time: 0.99^367 = 0.0250…
        assert_eq!(quantile_ranks(367, 0.99, 0.95).1, None);
        assert_eq!(quantile_ranks(368, 0.99, 0.95).1, Some(368));
        // 80 probes: a lower end only, 3 or more values below the max.
        let (lower, upper) = quantile_ranks(80, 0.99, 0.95);
        assert_eq!(upper, None);
        let l = lower.unwrap();
        assert!(binomial_cdfs(80, 0.99)[l - 1] <= 0.025);
        assert!(binomial_cdfs(80, 0.99)[l] > 0.025);
        // 1,000 probes: both ends, around the 990th value.
        let (l, u) = match quantile_ranks(1000, 0.99, 0.95) {
            (Some(l), Some(u)) => (l, u),
            other => panic!("{other:?}"),
        };
        assert!(
            (980..990).contains(&l) && (991..=1000).contains(&u),
            "{l} {u}"
        );
        // The median's ranks are the symmetric ones of `median_ranks`.
        let (ml, mu, _) = median_ranks(20, 0.95).unwrap();
        assert_eq!(quantile_ranks(20, 0.5, 0.95), (Some(ml), Some(mu)));
        // From 3 values on, the ends lie on either side of the sample's own
        // p99 (type 7: position 0.99·(n − 1), 0-based). Of 2 values the
        // larger is a lower end (both lie below the p99 with chance
        // 0.99² = 98%), above their interpolated p99.
        assert_eq!(quantile_ranks(2, 0.99, 0.95), (Some(2), None));
        for n in (1..1500).filter(|&n| n != 2) {
            let at = 0.99 * (n - 1) as f64 + 1.0;
            let (lower, upper) = quantile_ranks(n, 0.99, 0.95);
            assert!(lower.is_none_or(|l| l as f64 <= at), "{n}: {lower:?}");
            assert!(upper.is_none_or(|u| u as f64 >= at), "{n}: {upper:?}");
        }
        // Too few values for either end.
        assert_eq!(quantile_ranks(3, 0.5, 0.95), (None, None));
        assert_eq!(quantile_ranks(0, 0.99, 0.95), (None, None));
    }

    #[test]
    fn the_interval_of_a_99th_percentile_covers_it_as_promised() {
        // Exponential(1): p99 = ln 100. With 500 values both ends exist;
        // each tail misses at most 2.5% (a little less: the ranks are
        // whole), so the coverage is 95% or a little above. 2000
        // replications: standard error 0.5%, and 93.5% is 3σ below.
        let exp = Exp::new(1.0).unwrap();
        let truth = 100f64.ln();
        let mut draws = Xoshiro256PlusPlus::seed_from_u64(11);
        let (mut hits, mut above, replications) = (0, 0, 2000);
        for _ in 0..replications {
            let mut sample: Vec<f64> = (0..500).map(|_| exp.sample(&mut draws)).collect();
            sample.sort_by(f64::total_cmp);
            let (Some(low), Some(high)) = quantile_interval_sorted(&sample, 0.99) else {
                panic!("500 values give both ends");
            };
            if low <= truth && truth <= high {
                hits += 1;
            } else if low > truth {
                above += 1;
            }
        }
        let seen = f64::from(hits) / f64::from(replications);
        assert!(seen >= 0.935, "coverage {seen}");
        // Neither end is given away: a lower end above the truth happens,
        // about as often as the 2.5% it is allowed.
        assert!(
            (10..=90).contains(&above),
            "{above} lower ends above the p99"
        );
    }

    #[test]
    fn the_median_interval_picks_those_order_statistics() {
        let values: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let ci = median_interval(&values).unwrap();
        assert_eq!((ci.low, ci.high), (2.0, 9.0));
        assert_eq!(ci.method, Method::OrderStatistics);
        assert_eq!(median_interval(&[1.0, f64::NAN]), None);
    }

    /// Fraction of `replications` seeded samples of size `n` whose interval
    /// (from `interval`) contains `truth`.
    fn coverage(
        replications: usize,
        mut draw: impl FnMut(&mut Xoshiro256PlusPlus) -> f64,
        truth: f64,
        interval: impl Fn(&mut Xoshiro256PlusPlus, &mut dyn FnMut() -> f64) -> Interval,
    ) -> f64 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
        let mut draws = Xoshiro256PlusPlus::seed_from_u64(7);
        let hits = (0..replications)
            .filter(|_| {
                let ci = interval(&mut rng, &mut || draw(&mut draws));
                ci.low <= truth && truth <= ci.high
            })
            .count();
        hits as f64 / replications as f64
    }

    #[test]
    fn order_statistic_interval_covers_the_true_median_as_promised() {
        // Exponential(1): median ln 2. n = 15 gives ranks (4, 12), exact
        // coverage 1 − 2·P(B ≤ 3) = 96.48%. Over 4000 replications the
        // observed coverage has a standard error of 0.3%, so ±1.2% is 4σ.
        let exp = Exp::new(1.0).unwrap();
        let (_, _, promised) = median_ranks(15, CONFIDENCE).unwrap();
        assert!((promised - 0.9648).abs() < 1e-4, "{promised}");
        let seen = coverage(
            4000,
            |rng| exp.sample(rng),
            std::f64::consts::LN_2,
            |_, draw| median_interval(&(0..15).map(|_| draw()).collect::<Vec<_>>()).unwrap(),
        );
        assert!((seen - promised).abs() < 0.012, "coverage {seen}");
    }

    #[test]
    fn bootstrap_interval_of_a_ratio_of_medians_covers_near_95_percent() {
        // Two lognormal groups of 20 whose medians are e⁰ = 1 and e^0.5;
        // the ratio of medians is e^-0.5. A percentile bootstrap of a median
        // is only approximately 95% at n = 20 (the sample median is
        // discrete), so the band is wider than sampling error alone: 300
        // replications have a standard error of 1.3%, and we accept 88–99%.
        let a = LogNormal::new(0.0, 0.3).unwrap();
        let b = LogNormal::new(0.5, 0.3).unwrap();
        let truth = (-0.5f64).exp();
        let mut flip = false;
        let seen = coverage(
            300,
            |rng| {
                flip = !flip;
                if flip { a.sample(rng) } else { b.sample(rng) }
            },
            truth,
            |rng, draw| {
                let (mut xs, mut ys) = (Vec::new(), Vec::new());
                for _ in 0..20 {
                    xs.push(draw());
                    ys.push(draw());
                }
                let mut boot = Bootstrap::new(rng.random(), 500);
                boot.interval(&[20, 20], |p| median_at(&xs, &p[0]) / median_at(&ys, &p[1]))
                    .unwrap()
            },
        );
        assert!((0.88..=0.99).contains(&seen), "coverage {seen}");
    }

    #[test]
    fn the_bootstrap_is_deterministic_and_handles_empty_groups() {
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let run = || Bootstrap::default().interval(&[6], |p| median_at(&xs, &p[0]));
        assert_eq!(run(), run());
        let ci = run().unwrap();
        assert!(
            ci.low >= 1.0 && ci.high <= 6.0 && ci.low < ci.high,
            "{ci:?}"
        );
        assert_eq!(Bootstrap::default().interval(&[3, 0], |_| 1.0), None);
        // Infinite results (unreached crossings) are kept as +∞.
        let ci = Bootstrap::default()
            .interval(&[6], |p| if p[0][0] < 3 { f64::INFINITY } else { 1.0 })
            .unwrap();
        assert_eq!(ci.high, f64::INFINITY);
    }
}
