//! What a pricing request is: the inputs of the original sample, plus the
//! choices (method, variance reduction, seed) that a modern pricer needs.

use serde::{Deserialize, Serialize};

/// Default spot price of the original sample.
pub const DEFAULT_INITIAL: f64 = 30.0;
/// Default strike of the original sample.
pub const DEFAULT_EXERCISE: f64 = 30.0;
/// Default up factor of the original sample.
pub const DEFAULT_UP: f64 = 1.4;
/// Default down factor of the original sample.
pub const DEFAULT_DOWN: f64 = 0.8;
/// Default gross per-period interest factor of the original sample.
pub const DEFAULT_INTEREST: f64 = 1.08;
/// Default number of periods of the original sample.
pub const DEFAULT_PERIODS: u32 = 20;
/// Default number of Monte Carlo paths of the original sample.
pub const DEFAULT_RUNS: u64 = 1_000_000;
/// Largest seed the service accepts and draws: 2^53 − 1, the largest
/// integer every common JSON client (a JavaScript number, a double) holds
/// exactly.
pub const MAX_SEED: u64 = (1 << 53) - 1;

/// Call or put on the arithmetic average.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum OptionKind {
    /// Pays `max(A - K, 0)`.
    #[default]
    Call,
    /// Pays `max(K - A, 0)`.
    Put,
}

/// How the price is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Monte Carlo simulation of `runs` paths (or until a target standard error).
    #[default]
    Mc,
    /// Exact expectation over all 2^periods paths (meet in the middle).
    Exact,
}

/// Variance reduction used by the Monte Carlo estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum VarianceReduction {
    /// Plain average of discounted payoffs.
    None,
    /// Antithetic paths (each path paired with its mirror).
    Antithetic,
    /// Control variate: the arithmetic average itself, whose mean is known.
    Arithmetic,
    /// Control variate: the geometric-average option, priced exactly.
    Geometric,
    /// The kernel's recommended choice for these inputs.
    #[default]
    Auto,
}

/// A sensitivity of the price that a spec may ask for besides the price.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Greek {
    /// ∂price/∂`initial`, estimated from the same paths as the price.
    Delta,
}

impl Greek {
    /// The name as in the JSON spec and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Greek::Delta => "delta",
        }
    }
}

/// One pricing request, as a user writes it. Field names are a public
/// contract shared by `mcq price`, the HTTP API and the database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct Spec {
    /// Spot price S0 (> 0).
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0))]
    pub initial: f64,
    /// Strike K (>= 0).
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub exercise: f64,
    /// Up factor u per period (> interest).
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0))]
    pub up: f64,
    /// Down factor d per period (0 < down < interest).
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0))]
    pub down: f64,
    /// Gross interest factor R per period, e.g. 1.08 (not a continuous rate).
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0))]
    pub interest: f64,
    /// Number of periods n (1 to 1000; `exact` at most 40).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    #[serde(deserialize_with = "crate::integral::u32")]
    pub periods: u32,
    /// Number of Monte Carlo paths; exclusive with `target_std_error`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::integral::option_u64"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 2, maximum = 10_000_000_000_u64))]
    pub runs: Option<u64>,
    /// Keep simulating until the standard error is at most this; exclusive with `runs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0))]
    pub target_std_error: Option<f64>,
    /// Call (default) or put.
    pub option: OptionKind,
    /// `mc` (default) or `exact`.
    pub method: Method,
    /// Seed of the random streams, 0 to 2^53 − 1; drawn (in that range) and
    /// reported when absent.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::integral::option_u64"
    )]
    #[cfg_attr(feature = "openapi", schema(maximum = 9_007_199_254_740_991_u64))]
    pub seed: Option<u64>,
    /// Variance reduction for `mc`.
    pub variance_reduction: VarianceReduction,
    /// Sensitivities to report besides the price (`["delta"]`); none by
    /// default, and then the price costs what it always did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub greeks: Vec<Greek>,
}

impl Default for Spec {
    /// The original sample: a 20-period at-the-money call, 1M paths.
    fn default() -> Self {
        Self {
            initial: DEFAULT_INITIAL,
            exercise: DEFAULT_EXERCISE,
            up: DEFAULT_UP,
            down: DEFAULT_DOWN,
            interest: DEFAULT_INTEREST,
            periods: DEFAULT_PERIODS,
            runs: None,
            target_std_error: None,
            option: OptionKind::Call,
            method: Method::Mc,
            seed: None,
            variance_reduction: VarianceReduction::Auto,
            greeks: Vec::new(),
        }
    }
}

impl Spec {
    /// Fills what a user may leave out: `runs` defaults to 1,000,000 when
    /// neither `runs` nor `target_std_error` is given.
    pub fn with_defaults(mut self) -> Self {
        if self.runs.is_none() && self.target_std_error.is_none() {
            self.runs = Some(DEFAULT_RUNS);
        }
        self
    }

    /// True when the spec asks for delta.
    pub fn wants_delta(&self) -> bool {
        self.greeks.contains(&Greek::Delta)
    }
}
