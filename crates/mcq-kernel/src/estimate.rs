//! From merged sums to an estimate: the plain mean, antithetic pairs, or a
//! control variate with its regression coefficient β estimated from the
//! same paths. Each also reports how much it cut the variance compared with
//! the plain estimator on those paths.

use crate::partial::Moments;
use crate::simulate::ChunkSums;
use crate::spec::VarianceReduction;

/// Largest variance-reduction factor reported: when the payoff is an exact
/// linear function of the control (a call struck at 0) the residual is
/// rounding noise and the ratio would be meaningless or infinite.
const MAX_FACTOR: f64 = 1e15;

/// An estimate in path-sum units (undiscounted, spot 1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Estimate {
    /// Estimated expected payoff.
    pub(crate) mean: f64,
    /// Estimated variance of `mean`.
    pub(crate) variance: f64,
    /// The estimator used.
    pub(crate) used: VarianceReduction,
    /// Variance of the plain estimator over the variance of the one used.
    pub(crate) factor: f64,
}

/// Sample variance from a count, a sum and a sum of squares.
fn sample_variance(n: f64, sum: f64, squares: f64) -> f64 {
    if n < 2.0 {
        0.0
    } else {
        ((squares - sum * sum / n) / (n - 1.0)).max(0.0)
    }
}

fn factor(plain: f64, used: f64) -> f64 {
    if plain <= 0.0 {
        1.0
    } else if used <= plain / MAX_FACTOR {
        MAX_FACTOR
    } else {
        plain / used
    }
}

/// The plain average of payoffs.
pub(crate) fn plain(m: &Moments) -> Estimate {
    let n = m.samples.max(1.0);
    let s = &m.sums;
    Estimate {
        mean: s.y / n,
        variance: sample_variance(n, s.y, s.yy) / n,
        used: VarianceReduction::None,
        factor: 1.0,
    }
}

/// The average over antithetic pairs; samples are pairs.
pub(crate) fn antithetic(m: &Moments) -> Estimate {
    let pairs = m.samples.max(1.0);
    let s = &m.sums;
    let pair_variance = sample_variance(pairs, s.y, s.yy);
    // Each path on its own, as the plain estimator would have used it.
    let path_variance = sample_variance(2.0 * pairs, 2.0 * s.y, s.pp);
    Estimate {
        mean: s.y / pairs,
        variance: pair_variance / pairs,
        used: VarianceReduction::Antithetic,
        factor: factor(path_variance, 2.0 * pair_variance),
    }
}

/// Control variate c with known mean `mu`: y − β (c − mu), with β the
/// least-squares slope of y on c over the same samples.
pub(crate) fn control(m: &Moments, which: VarianceReduction, mu: f64) -> Estimate {
    let n = m.samples.max(1.0);
    let s = &m.sums;
    let (c, cc, yc) = match which {
        VarianceReduction::Geometric => (s.g, s.gg, s.yg),
        _ => (s.a, s.aa, s.ya),
    };
    let sxx = cc - c * c / n;
    let sxy = yc - s.y * c / n;
    let syy = (s.yy - s.y * s.y / n).max(0.0);
    let beta = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let plain_variance = sample_variance(n, s.y, s.yy);
    // With two samples the regression fits exactly; fall back to the plain
    // variance rather than report a zero error.
    let residual = if n > 2.0 {
        ((syy - beta * sxy) / (n - 2.0)).max(0.0)
    } else {
        plain_variance
    };
    Estimate {
        mean: s.y / n - beta * (c / n - mu),
        variance: residual / n,
        used: which,
        factor: factor(plain_variance, residual),
    }
}

/// The better of the two controls on these paths (smaller estimated
/// variance; the arithmetic one on ties). `geometric_mean` is `None` when
/// the geometric control was not simulated.
pub(crate) fn best_control(m: &Moments, geometric_mean: Option<f64>) -> Estimate {
    let arithmetic = control(m, VarianceReduction::Arithmetic, 0.0);
    match geometric_mean {
        Some(mu) => {
            let geometric = control(m, VarianceReduction::Geometric, mu);
            if geometric.variance < arithmetic.variance {
                geometric
            } else {
                arithmetic
            }
        }
        None => arithmetic,
    }
}

/// Delta from the same paths, by the estimator the price used (`used`,
/// `auto` already resolved): the pathwise deltas take the place of the
/// payoffs, and a control, when one is used, gets its own β for delta.
/// `geometric_mean` is needed for the geometric control only.
pub(crate) fn delta(m: &Moments, used: VarianceReduction, geometric_mean: f64) -> Estimate {
    let s = m.sums;
    let deltas = Moments {
        samples: m.samples,
        sums: ChunkSums {
            y: s.d,
            yy: s.dd,
            ya: s.da,
            yg: s.dg,
            // Only the antithetic factor reads it, and no factor is
            // reported for delta.
            pp: 0.0,
            ..s
        },
    };
    match used {
        VarianceReduction::None => plain(&deltas),
        VarianceReduction::Antithetic => antithetic(&deltas),
        VarianceReduction::Geometric => control(&deltas, used, geometric_mean),
        VarianceReduction::Arithmetic | VarianceReduction::Auto => {
            control(&deltas, VarianceReduction::Arithmetic, 0.0)
        }
    }
}
