//! Exact prices: the expected payoff over all 2^n paths, by plain
//! enumeration (the oracle for small n) and by meet in the middle (the
//! `exact` method, up to [`MAX_EXACT_PERIODS`]).
//!
//! Meet in the middle: a path is a first half (n1 steps) followed by a
//! second half (n2 steps). With a = S_0 + … + S_n1 and s = S_n1 from the
//! first half, and b = T_1 + … + T_n2 the running products of the second
//! half, the path sum is a + s·b. For a call, the first half contributes
//! Σ_{b > t} P2·(a − K' + s·b) with t = (K' − a)/s: after sorting the second
//! halves by b, that is two suffix sums found by binary search. The cost is
//! O(2^(n/2)·n) instead of O(2^n).
//!
//! Delta comes from the same sums: every price on a path is S0 times its
//! normalised value, so the paying paths' contribution to ∂E[payoff]/∂S0
//! is Σ P2·(a + s·b) over the same suffix (a put: minus its prefix), the
//! price's terms without the strike.

use crate::model::{Model, powi};
use crate::spec::OptionKind;

/// Most periods the `exact` method accepts (2^20 half-paths per side,
/// about 50 MB and a second of work).
pub const MAX_EXACT_PERIODS: u32 = 40;

/// Neumaier's compensated sum: the oracles must agree to 1e-10, which
/// naive summation of 2^20 terms does not guarantee.
#[derive(Debug, Clone, Copy, Default)]
struct Compensated {
    sum: f64,
    carry: f64,
}

impl Compensated {
    fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.carry += (self.sum - t) + x;
        } else {
            self.carry += (x - t) + self.sum;
        }
        self.sum = t;
    }

    fn value(self) -> f64 {
        self.sum + self.carry
    }
}

/// Probabilities of each up-count over `steps` steps.
fn count_probabilities(model: &Model, steps: u32) -> Vec<f64> {
    (0..=steps)
        .map(|k| powi(model.p, k) * powi(1.0 - model.p, steps - k))
        .collect()
}

/// (sum of running products, final product, up count) of every pattern of
/// `steps` steps, starting from spot 1 (the start itself not included).
fn half_paths(model: &Model, steps: u32) -> Vec<(f64, f64, u32)> {
    (0u64..1 << steps)
        .map(|pattern| {
            let (mut spot, mut sum) = (1.0, 0.0);
            for j in 0..steps {
                spot *= if pattern >> j & 1 == 1 {
                    model.up
                } else {
                    model.down
                };
                sum += spot;
            }
            (sum, spot, pattern.count_ones())
        })
        .collect()
}

/// Expectations over all paths, in path-sum units (undiscounted, spot 1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expectations {
    /// E[payoff].
    pub(crate) payoff: f64,
    /// E[pathwise delta] (`Model::delta`): ∂E[payoff]/∂S0 over
    /// `Model::delta_scale`.
    pub(crate) delta: f64,
}

/// The expectations by enumerating every path (n ≲ 26); the oracle the
/// faster method is tested against.
#[cfg(test)]
pub(crate) fn enumerate(model: &Model) -> Expectations {
    let probs = count_probabilities(model, model.periods);
    let (mut payoff, mut delta) = (Compensated::default(), Compensated::default());
    for (sum, _, ups) in half_paths(model, model.periods) {
        payoff.add(probs[ups as usize] * model.payoff(1.0 + sum));
        delta.add(probs[ups as usize] * model.delta(1.0 + sum));
    }
    Expectations {
        payoff: payoff.value(),
        delta: delta.value(),
    }
}

/// The expectations by meet in the middle.
pub(crate) fn meet_in_the_middle(model: &Model) -> Expectations {
    let n1 = model.periods / 2;
    let n2 = model.periods - n1;
    let (p1, p2) = (
        count_probabilities(model, n1),
        count_probabilities(model, n2),
    );
    let mut second: Vec<(f64, f64)> = half_paths(model, n2)
        .into_iter()
        .map(|(b, _, ups)| (b, p2[ups as usize]))
        .collect();
    second.sort_unstable_by(|x, y| x.0.total_cmp(&y.0));
    let call = model.option == OptionKind::Call;
    // cum_q[i], cum_m[i]: Σ P2 and Σ P2·b over the entries a call (suffix
    // from i) or a put (prefix before i) pays on.
    let len = second.len();
    let (mut cum_q, mut cum_m) = (vec![0.0; len + 1], vec![0.0; len + 1]);
    let (mut q, mut m) = (Compensated::default(), Compensated::default());
    if call {
        for i in (0..len).rev() {
            q.add(second[i].1);
            m.add(second[i].1 * second[i].0);
            (cum_q[i], cum_m[i]) = (q.value(), m.value());
        }
    } else {
        for i in 0..len {
            q.add(second[i].1);
            m.add(second[i].1 * second[i].0);
            (cum_q[i + 1], cum_m[i + 1]) = (q.value(), m.value());
        }
    }
    let strike = model.strike_sum;
    let (mut total, mut delta) = (Compensated::default(), Compensated::default());
    for (a, s, ups) in half_paths(model, n1) {
        let a = 1.0 + a;
        let threshold = (strike - a) / s;
        let i = second.partition_point(|&(b, _)| b <= threshold);
        let inner = if call {
            (a - strike) * cum_q[i] + s * cum_m[i]
        } else {
            (strike - a) * cum_q[i] - s * cum_m[i]
        };
        total.add(p1[ups as usize] * inner.max(0.0));
        // Path sums are positive, so a rounding below zero is zero.
        let paying = (a * cum_q[i] + s * cum_m[i]).max(0.0);
        delta.add(p1[ups as usize] * if call { paying } else { -paying });
    }
    Expectations {
        payoff: total.value(),
        delta: delta.value(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;

    fn model(option: OptionKind, periods: u32, exercise: f64, down: f64, up: f64) -> Model {
        Model::new(&Spec {
            option,
            periods,
            exercise,
            down,
            up,
            ..Spec::default()
        })
    }

    #[test]
    fn default_sample_exact_call() {
        let m = model(OptionKind::Call, 20, 30.0, 0.8, 1.4);
        let price = meet_in_the_middle(&m).payoff * m.scale;
        assert!((price - 9.530286028882).abs() < 1e-11, "{price}");
    }

    #[test]
    fn enumeration_and_meet_in_the_middle_agree() {
        for option in [OptionKind::Call, OptionKind::Put] {
            for (n, k, d, u) in [
                (1, 30.0, 0.8, 1.4),
                (2, 31.0, 0.8, 1.4),
                (7, 10.0, 0.5, 1.1),
                (15, 60.0, 0.9, 1.3),
                (20, 30.0, 0.8, 1.4),
                (18, 29.0, 1.0, 1.0801),
            ] {
                let m = model(option, n, k, d, u);
                let (e, mitm) = (enumerate(&m), meet_in_the_middle(&m));
                let (e_price, mitm_price) = (e.payoff * m.scale, mitm.payoff * m.scale);
                assert!(
                    (e_price - mitm_price).abs() < 1e-10,
                    "{option:?} n={n} K={k}: {e_price} vs {mitm_price}"
                );
                let (e_delta, mitm_delta) = (e.delta * m.delta_scale, mitm.delta * m.delta_scale);
                assert!(
                    (e_delta - mitm_delta).abs() < 1e-12,
                    "{option:?} n={n} K={k}: delta {e_delta} vs {mitm_delta}"
                );
            }
        }
    }

    #[test]
    fn put_call_parity_is_exact() {
        for (n, k) in [(1, 30.0), (11, 25.0), (20, 30.0), (33, 45.0)] {
            let call = model(OptionKind::Call, n, k, 0.8, 1.4);
            let put = model(OptionKind::Put, n, k, 0.8, 1.4);
            let (c, p) = (meet_in_the_middle(&call), meet_in_the_middle(&put));
            let lhs = (c.payoff - p.payoff) * call.scale;
            // (E[A] − K)/R^n with S0 = 30.
            let rhs = (call.mean_sum - call.strike_sum) * call.scale;
            assert!(
                (lhs - rhs).abs() < 1e-10 * rhs.abs().max(1.0),
                "n={n}: {lhs} vs {rhs}"
            );
            // Its derivative in S0: the deltas differ by E[A]/(S0 R^n).
            let lhs = (c.delta - p.delta) * call.delta_scale;
            let rhs = call.mean_sum * call.delta_scale;
            assert!((lhs - rhs).abs() < 1e-12 * rhs, "n={n}: {lhs} vs {rhs}");
        }
    }
}
