//! The binomial path model in normalised units: the spot is scaled to 1 and
//! payoffs are kept as sums over the path, so the simulation loop does the
//! fewest operations and the result is rescaled once at the end.
//!
//! Every derived quantity uses only IEEE basic operations (no `exp`, `ln`,
//! `powf`), whose results are the same on every platform: two workers on
//! different machines must build the same tables to produce the same bits.

use crate::spec::{OptionKind, Spec};

/// The model of a validated spec.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    /// Probability of an up move, (R - d) / (u - d).
    pub(crate) p: f64,
    pub(crate) up: f64,
    pub(crate) down: f64,
    pub(crate) periods: u32,
    pub(crate) option: OptionKind,
    /// Strike times (n + 1): the payoff compares the path sum with it.
    pub(crate) strike_sum: f64,
    /// E[S_0 + … + S_n] with S_0 = 1, i.e. Σ R^i.
    pub(crate) mean_sum: f64,
    /// Converts an expected payoff in path-sum units into a price:
    /// S0 / ((n + 1) R^n).
    pub(crate) scale: f64,
    /// Converts an expected pathwise delta in path-sum units into
    /// ∂price/∂S0: 1 / ((n + 1) R^n), which is `scale` / S0.
    pub(crate) delta_scale: f64,
}

impl Model {
    /// The model of `spec`, which must have passed the checks of `validate`.
    pub(crate) fn new(spec: &Spec) -> Self {
        let n = spec.periods;
        let (u, d, r) = (spec.up, spec.down, spec.interest);
        let mut mean_sum = 0.0;
        let mut power = 1.0;
        for _ in 0..=n {
            mean_sum += power;
            power *= r;
        }
        Self {
            p: (r - d) / (u - d),
            up: u,
            down: d,
            periods: n,
            option: spec.option,
            strike_sum: spec.exercise / spec.initial * f64::from(n + 1),
            mean_sum,
            scale: spec.initial / (f64::from(n + 1) * powi(r, n)),
            delta_scale: 1.0 / (f64::from(n + 1) * powi(r, n)),
        }
    }

    /// The undiscounted payoff of a path with sum `sum` (path-sum units).
    #[inline(always)]
    pub(crate) fn payoff(&self, sum: f64) -> f64 {
        match self.option {
            OptionKind::Call => (sum - self.strike_sum).max(0.0),
            OptionKind::Put => (self.strike_sum - sum).max(0.0),
        }
    }
}

impl Model {
    /// The pathwise delta of a path with sum `sum`, in path-sum units:
    /// every price on a path is S0 times its normalised value, so the
    /// payoff's derivative in S0 is ±(path sum)/(n + 1) where the option
    /// pays and 0 elsewhere; `delta_scale` applies the 1/((n + 1) R^n).
    /// It pays where `payoff` is positive, so the strike itself counts as
    /// not paying, for the exact method as for Monte Carlo.
    #[inline(always)]
    pub(crate) fn delta(&self, sum: f64) -> f64 {
        match self.option {
            OptionKind::Call => call_delta(sum, self.strike_sum),
            OptionKind::Put => put_delta(sum, self.strike_sum),
        }
    }
}

/// A call's pathwise delta in path-sum units (see [`Model::delta`]).
#[inline(always)]
pub(crate) fn call_delta(sum: f64, strike_sum: f64) -> f64 {
    if sum > strike_sum { sum } else { 0.0 }
}

/// A put's pathwise delta in path-sum units (see [`Model::delta`]).
#[inline(always)]
pub(crate) fn put_delta(sum: f64, strike_sum: f64) -> f64 {
    if sum < strike_sum { -sum } else { 0.0 }
}

/// `x^n` by binary powering (deterministic on every platform).
pub(crate) fn powi(x: f64, n: u32) -> f64 {
    let (mut result, mut base, mut e) = (1.0, x, n);
    while e > 0 {
        if e & 1 == 1 {
            result *= base;
        }
        base *= base;
        e >>= 1;
    }
    result
}

/// The positive `k`-th root of `a > 0` by bisection on `x^k`, which needs
/// only basic operations; accurate to a few ulps.
pub(crate) fn root(a: f64, k: u32) -> f64 {
    let (mut lo, mut hi) = if a >= 1.0 { (1.0, a) } else { (a, 1.0) };
    for _ in 0..2000 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if powi(mid, k) < a {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_and_roots() {
        assert_eq!(powi(2.0, 10), 1024.0);
        assert_eq!(powi(1.5, 0), 1.0);
        assert!((powi(1.4, 20) - 1.4f64.powi(20)).abs() < 1e-9);
        assert!((root(2.0, 2) - 2f64.sqrt()).abs() < 1e-15);
        assert!((root(1.75, 21) - 1.75f64.powf(1.0 / 21.0)).abs() < 1e-14);
        assert!((root(0.25, 2) - 0.5).abs() < 1e-15);
    }

    #[test]
    fn mean_of_the_average_matches_the_closed_form() {
        // E[A] = S0 (R^(n+1) - 1) / ((n + 1)(R - 1)).
        for (r, n) in [(1.08, 20u32), (1.001, 40), (0.97, 7), (1.3, 1)] {
            let spec = Spec {
                interest: r,
                down: r - 0.5 * r,
                up: 2.0 * r,
                periods: n,
                ..Spec::default()
            };
            let model = Model::new(&spec);
            let closed = (r.powi(n as i32 + 1) - 1.0) / (f64::from(n + 1) * (r - 1.0));
            let mean_average = model.mean_sum / f64::from(n + 1);
            assert!(
                (mean_average - closed).abs() < 1e-12 * closed,
                "{r} {n}: {mean_average} vs {closed}"
            );
        }
    }
}
