//! The sampling tables of a valid spec, each built the first time the
//! kernel needs it.
//!
//! Checking a spec is cheap; building its tables is not (for tiny tasks it
//! can cost more than the paths). So [`ValidSpec`](crate::ValidSpec) only
//! holds an empty [`Tables`], and the code that runs the kernel fills in
//! what its estimator uses: a front end that checks and stores specs never
//! builds one, and finishing a split job builds only the geometric control.
//! Every table is a function of the model alone (never of the seed), so
//! specs that differ only in their seed can share one `Tables`.

use std::fmt;
use std::sync::OnceLock;

use crate::blocks::BlockPlan;
use crate::geometric::GeometricControl;
use crate::model::Model;
use crate::pair_blocks::PairPlan;

/// Lazily built tables of one model; shared behind an `Arc` by the clones
/// of a valid spec. Each cell is built at most once, even when several
/// threads ask at the same moment.
#[derive(Default)]
pub(crate) struct Tables {
    blocks: OnceLock<BlockPlan>,
    pairs: OnceLock<PairPlan>,
    geometric: OnceLock<GeometricControl>,
    geometric_mean: OnceLock<f64>,
}

impl Tables {
    /// The block tables of the plain and control-variate samplers.
    pub(crate) fn blocks(&self, model: &Model) -> &BlockPlan {
        self.blocks.get_or_init(|| BlockPlan::new(model))
    }

    /// The pair tables of the antithetic sampler.
    pub(crate) fn pairs(&self, model: &Model) -> &PairPlan {
        self.pairs.get_or_init(|| PairPlan::new(model))
    }

    /// The geometric control's payoff by W.
    pub(crate) fn geometric(&self, model: &Model) -> &GeometricControl {
        self.geometric.get_or_init(|| GeometricControl::new(model))
    }

    /// The exact mean of the geometric control (an O(n³) sum, done once).
    pub(crate) fn geometric_mean(&self, model: &Model) -> f64 {
        *self
            .geometric_mean
            .get_or_init(|| self.geometric(model).mean(model))
    }

    /// Names of the tables built so far.
    pub(crate) fn built(&self) -> Vec<&'static str> {
        [
            ("blocks", self.blocks.get().is_some()),
            ("pairs", self.pairs.get().is_some()),
            ("geometric", self.geometric.get().is_some()),
            ("geometric_mean", self.geometric_mean.get().is_some()),
        ]
        .into_iter()
        .filter_map(|(name, built)| built.then_some(name))
        .collect()
    }
}

impl fmt::Debug for Tables {
    /// Which tables exist, not their contents (tens of kilobytes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tables")
            .field("built", &self.built())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use crate::{Method, Spec, VarianceReduction};

    fn spec(variance_reduction: VarianceReduction) -> Spec {
        Spec {
            runs: Some(1000),
            seed: Some(3),
            variance_reduction,
            ..Spec::default()
        }
    }

    #[test]
    fn validating_builds_nothing_and_pricing_builds_what_it_uses() {
        let cases = [
            (VarianceReduction::None, &["blocks"][..]),
            (VarianceReduction::Antithetic, &["pairs"]),
            (
                VarianceReduction::Geometric,
                &["blocks", "geometric", "geometric_mean"],
            ),
            (
                VarianceReduction::Auto,
                &["blocks", "geometric", "geometric_mean"],
            ),
        ];
        for (vr, built) in cases {
            let valid = spec(vr).validate().expect("valid");
            assert!(valid.tables_built().is_empty(), "{vr:?}");
            valid.price(&AtomicBool::new(false)).expect("not cancelled");
            assert_eq!(valid.tables_built(), built, "{vr:?}");
        }
        let exact = Spec {
            method: Method::Exact,
            ..spec(VarianceReduction::Auto)
        };
        let valid = exact.validate().expect("valid");
        valid.price(&AtomicBool::new(false)).expect("not cancelled");
        assert!(valid.tables_built().is_empty(), "exact enumerates paths");
    }

    #[test]
    fn every_accepted_size_builds_its_tables() {
        // Validation no longer builds tables, so a size it accepts must not
        // make building them fail later, on a worker.
        let sizes = (1..=64).chain([100, 255, 256, 399, 400, 401, 999, 1000]);
        for periods in sizes {
            for vr in [
                VarianceReduction::None,
                VarianceReduction::Antithetic,
                VarianceReduction::Geometric,
                VarianceReduction::Auto,
            ] {
                // Interest near 1 keeps interest^periods in range at 1000 periods.
                let spec = Spec {
                    periods,
                    up: 1.01,
                    down: 0.99,
                    interest: 1.0,
                    ..spec(vr)
                };
                if let Ok(valid) = spec.validate() {
                    valid.build_tables();
                } else {
                    assert!(periods > 400 && vr == VarianceReduction::Geometric);
                }
            }
        }
    }

    #[test]
    fn finishing_builds_only_the_geometric_control() {
        let valid = spec(VarianceReduction::Auto).validate().expect("valid");
        let partial = valid
            .with_seed(9)
            .run_chunks(0..1, &AtomicBool::new(false))
            .expect("not cancelled");
        let fresh = valid.spec().validate().expect("valid");
        fresh.finish(&partial, 0.0);
        assert_eq!(fresh.tables_built(), ["geometric", "geometric_mean"]);
    }

    #[test]
    fn clones_and_reseeded_copies_share_the_tables() {
        let valid = spec(VarianceReduction::Arithmetic)
            .validate()
            .expect("valid");
        let reseeded = valid.with_seed(11);
        let copy = valid.clone();
        reseeded
            .run_chunks(0..1, &AtomicBool::new(false))
            .expect("not cancelled");
        assert_eq!(valid.tables_built(), ["blocks"]);
        assert_eq!(copy.tables_built(), ["blocks"]);
        assert_eq!(reseeded.spec().seed, Some(11));
        assert_eq!(valid.spec().seed, Some(3));
    }
}
