//! The geometric-average option as a control variate.
//!
//! With W = Σ_{i=1..n} U_i, where U_i counts the up moves among the first
//! i steps, the product of the path's prices is S0^(n+1)·d^(n(n+1)/2)·(u/d)^W,
//! so the geometric average is G(W) = S0·d^(n/2)·(u/d)^(W/(n+1)). W is an
//! integer in 0 ..= n(n+1)/2 and step j adds n + 1 − j to it when it goes
//! up, so its distribution is a subset-sum convolution over the weights
//! 1..n — a small dynamic programme. The control is any function of W
//! whose mean we know exactly: we use the geometric option's payoff,
//! tabulated by W, and the mean is computed over the very same table.

use crate::model::{Model, powi, root};
use crate::spec::OptionKind;

/// Most periods for which the geometric control is offered: its table has
/// n(n+1)/2 + 1 entries and its mean costs O(n³/2) operations.
pub const MAX_GEOMETRIC_PERIODS: u32 = 400;

/// The tabulated control, in path-sum units (scaled by n + 1 like the
/// arithmetic payoff, so the two are directly comparable).
#[derive(Debug, Clone)]
pub(crate) struct GeometricControl {
    pub(crate) payoff: Vec<f64>,
}

impl GeometricControl {
    /// Tabulates the geometric option's payoff for every W.
    pub(crate) fn new(model: &Model) -> Self {
        let n = model.periods;
        let top = (n as usize) * (n as usize + 1) / 2;
        let ratio = root(model.up / model.down, n + 1);
        let n1 = f64::from(n + 1);
        // (n + 1)·G(0) = (n + 1)·d^(n/2); each unit of W multiplies G by ratio.
        let mut g = n1 * powi(model.down.sqrt(), n);
        let mut payoff = Vec::with_capacity(top + 1);
        for _ in 0..=top {
            payoff.push(match model.option {
                OptionKind::Call => (g - model.strike_sum).max(0.0),
                OptionKind::Put => (model.strike_sum - g).max(0.0),
            });
            g *= ratio;
        }
        Self { payoff }
    }

    /// E[control] under the model, exactly up to rounding.
    ///
    /// Adding weight k maps the distribution of W to
    /// P'(w) = q·P(w) + p·P(w − k). It is written into a second buffer
    /// rather than in place, so the loop has no dependence between
    /// iterations and runs as vector operations: the same operations on the
    /// same values as the in-place update, several times faster (the mean
    /// is a fixed O(n³) cost of every geometric and `auto` request).
    pub(crate) fn mean(&self, model: &Model) -> f64 {
        let (p, q) = (model.p, 1.0 - model.p);
        let mut dist = vec![0.0f64; self.payoff.len()];
        let mut next = vec![0.0f64; self.payoff.len()];
        dist[0] = 1.0;
        let mut reach = 0usize;
        for weight in 1..=model.periods as usize {
            // Entries above the old reach are 0 in both buffers.
            reach += weight;
            let (low, high) = next[..=reach].split_at_mut(weight);
            for (d, &x) in low.iter_mut().zip(&dist[..weight]) {
                *d = x * q;
            }
            for ((d, &x), &y) in high
                .iter_mut()
                .zip(&dist[weight..=reach])
                .zip(&dist[..=reach - weight])
            {
                *d = q * x + p * y;
            }
            std::mem::swap(&mut dist, &mut next);
        }
        dist.iter().zip(&self.payoff).map(|(d, f)| d * f).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;

    /// Enumerates all 2^n paths and averages the control directly.
    fn brute_force(model: &Model, control: &GeometricControl) -> f64 {
        let n = model.periods;
        let mut total = 0.0;
        for path in 0u32..1 << n {
            let (mut ups, mut w, mut k) = (0, 0usize, 0usize);
            for j in 0..n {
                if path >> j & 1 == 1 {
                    ups += 1;
                    k += 1;
                }
                w += k;
            }
            let prob = model.p.powi(ups) * (1.0 - model.p).powi(n as i32 - ups);
            total += prob * control.payoff[w];
        }
        total
    }

    #[test]
    fn dynamic_programme_matches_enumeration() {
        for (option, n, exercise) in [
            (OptionKind::Call, 12, 30.0),
            (OptionKind::Put, 9, 35.0),
            (OptionKind::Call, 1, 20.0),
        ] {
            let model = Model::new(&Spec {
                option,
                periods: n,
                exercise,
                ..Spec::default()
            });
            let control = GeometricControl::new(&model);
            let (dp, brute) = (control.mean(&model), brute_force(&model, &control));
            assert!(
                (dp - brute).abs() < 1e-12 * brute.max(1.0),
                "{dp} vs {brute}"
            );
        }
    }

    /// The two-buffer programme does the in-place update's operations on
    /// the same values, so seeded geometric and `auto` results keep their
    /// bits.
    #[test]
    fn two_buffers_give_the_bits_of_the_in_place_update() {
        for (n, interest) in [(1, 1.08), (17, 1.08), (60, 0.81), (150, 1.3)] {
            let model = Model::new(&Spec {
                periods: n,
                interest,
                ..Spec::default()
            });
            let control = GeometricControl::new(&model);
            let (p, q) = (model.p, 1.0 - model.p);
            let mut dist = vec![0.0f64; control.payoff.len()];
            dist[0] = 1.0;
            let mut reach = 0usize;
            for weight in 1..=n as usize {
                reach += weight;
                for w in (weight..=reach).rev() {
                    dist[w] = q * dist[w] + p * dist[w - weight];
                }
                for d in &mut dist[..weight] {
                    *d *= q;
                }
            }
            let in_place: f64 = dist.iter().zip(&control.payoff).map(|(d, f)| d * f).sum();
            assert_eq!(
                control.mean(&model).to_bits(),
                in_place.to_bits(),
                "n = {n}"
            );
        }
    }

    #[test]
    fn table_is_the_geometric_average() {
        let model = Model::new(&Spec {
            periods: 4,
            exercise: 0.0,
            ..Spec::default()
        });
        let control = GeometricControl::new(&model);
        // All up: prices 1, u, .., u^4; W = 1+2+3+4 = 10.
        let g = (1.4f64 * 1.4f64.powi(2) * 1.4f64.powi(3) * 1.4f64.powi(4)).powf(1.0 / 5.0);
        assert!((control.payoff[10] / 5.0 - g).abs() < 1e-12);
        assert!((control.payoff[0] / 5.0 - 0.8f64.powf(2.0)).abs() < 1e-12);
    }
}
