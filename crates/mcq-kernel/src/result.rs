//! What a pricing computation answers. Field names are a public contract
//! shared by `mcq price --json`, the HTTP API and the results table.

use serde::{Deserialize, Serialize};

use crate::spec::{Method, OptionKind, VarianceReduction};

/// The answer to one pricing request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PriceResult {
    /// Estimated (or exact) option price.
    pub price: f64,
    /// Standard error of `price`; 0 for `exact`.
    pub std_error: f64,
    /// 95% confidence interval `[lo, hi]`.
    pub ci95: [f64; 2],
    /// Paths simulated (for `exact`: 2^periods paths enumerated).
    pub paths: u64,
    /// Seed of the random streams, 0 to 2^53 − 1 (`None` for `exact`).
    #[cfg_attr(feature = "openapi", schema(maximum = 9_007_199_254_740_991_u64))]
    pub seed: Option<u64>,
    /// `mc` or `exact`.
    pub method: Method,
    /// Call or put.
    pub option: OptionKind,
    /// Variance reduction actually used (`auto` resolved).
    pub variance_reduction: VarianceReduction,
    /// Estimated variance of a plain estimator divided by the variance of the
    /// one used, from the same paths (1 for plain; `None` for `exact`).
    pub variance_reduction_factor: Option<f64>,
    /// In target-standard-error mode: true when the path limit was hit
    /// before the target was reached.
    pub max_paths_reached: bool,
    /// Wall time of the computation in milliseconds.
    pub elapsed_ms: f64,
    /// ∂price/∂`initial`, present when the spec asks for `delta`: the
    /// pathwise estimate from the same paths and estimator as the price
    /// (exact for `exact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
    /// Standard error of `delta`; 0 for `exact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_std_error: Option<f64>,
}
