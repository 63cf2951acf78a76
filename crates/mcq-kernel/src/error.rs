//! What can be wrong with a spec, one variant per problem, each message
//! saying how to fix it.

use crate::exact::MAX_EXACT_PERIODS;
use crate::geometric::MAX_GEOMETRIC_PERIODS;
use crate::spec::Greek;
use crate::validate::{MAX_PATH_VALUE, MAX_PERIODS, MAX_RUNS};

/// One problem with a spec; `field()` names the offending spec field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// A number is NaN or infinite.
    #[error("{field} must be a finite number (got {value})")]
    NotFinite {
        /// Field name as in the JSON spec.
        field: &'static str,
        /// The value given.
        value: f64,
    },
    /// `initial` ≤ 0.
    #[error("initial must be greater than 0 (got {0})")]
    InitialNotPositive(f64),
    /// `exercise` < 0.
    #[error("exercise must be 0 or more (got {0})")]
    ExerciseNegative(f64),
    /// `down` ≤ 0.
    #[error("down must be greater than 0 (got {0})")]
    DownNotPositive(f64),
    /// `down` ≥ `interest`: the up probability would be ≤ 0.
    #[error(
        "down ({down}) must be below interest ({interest}): otherwise the model has arbitrage (0 < down < interest < up)"
    )]
    DownNotBelowInterest {
        /// The `down` given.
        down: f64,
        /// The `interest` given.
        interest: f64,
    },
    /// `up` ≤ `interest`: the up probability would be ≥ 1.
    #[error(
        "up ({up}) must be above interest ({interest}): otherwise the model has arbitrage (0 < down < interest < up)"
    )]
    UpNotAboveInterest {
        /// The `up` given.
        up: f64,
        /// The `interest` given.
        interest: f64,
    },
    /// `periods` = 0.
    #[error("periods must be at least 1")]
    PeriodsZero,
    /// `periods` above [`MAX_PERIODS`].
    #[error("periods must be at most {MAX_PERIODS} (got {0})")]
    PeriodsTooMany(u32),
    /// `method: exact` with more periods than it can enumerate.
    #[error("method exact supports at most {MAX_EXACT_PERIODS} periods (got {0}); use method mc")]
    ExactTooManyPeriods(u32),
    /// The geometric control with more periods than its table allows.
    #[error(
        "variance_reduction geometric supports at most {MAX_GEOMETRIC_PERIODS} periods (got {0}); use arithmetic or auto"
    )]
    GeometricTooManyPeriods(u32),
    /// `up^periods` too large for the path sums to stay finite.
    #[error(
        "up^periods = {0:e} exceeds {MAX_PATH_VALUE:e}: lower up or periods so path sums stay finite"
    )]
    UpPowerTooLarge(f64),
    /// `interest^periods` so small that discounting would overflow.
    #[error("interest^periods = {0:e} is below {min:e}: raise interest or lower periods so the discount stays finite", min = 1.0 / MAX_PATH_VALUE)]
    DiscountTooLarge(f64),
    /// `exercise / initial` too large.
    #[error(
        "exercise / initial = {0:e} exceeds {MAX_PATH_VALUE:e}: lower exercise or raise initial"
    )]
    StrikeRatioTooLarge(f64),
    /// A price bound that does not fit a double.
    #[error("prices of this size overflow (bound {0:e}): lower initial")]
    PriceOverflow(f64),
    /// Both `runs` and `target_std_error`.
    #[error("give either runs or target_std_error, not both")]
    RunsAndTarget,
    /// Neither `runs` nor `target_std_error` for Monte Carlo.
    #[error("give runs (a number of paths) or target_std_error")]
    NoRunsOrTarget,
    /// `runs` below the minimum needed for a standard error.
    #[error("runs must be at least {min} to estimate a standard error (got {got})")]
    RunsTooFew {
        /// Least accepted.
        min: u64,
        /// The value given.
        got: u64,
    },
    /// `runs` above [`MAX_RUNS`].
    #[error("runs must be at most {MAX_RUNS} (got {0}); split the work or use target_std_error")]
    RunsTooMany(u64),
    /// `target_std_error` ≤ 0 or not finite.
    #[error("target_std_error must be a finite number greater than 0 (got {0})")]
    TargetNotPositive(f64),
    /// A greek named twice in `greeks`.
    #[error("greeks lists {} more than once; name each at most once", .0.name())]
    GreekRepeated(Greek),
}

impl SpecError {
    /// The spec field (JSON name) this error is about.
    pub fn field(&self) -> &'static str {
        match self {
            SpecError::NotFinite { field, .. } => field,
            SpecError::InitialNotPositive(_) | SpecError::PriceOverflow(_) => "initial",
            SpecError::ExerciseNegative(_) | SpecError::StrikeRatioTooLarge(_) => "exercise",
            SpecError::DownNotPositive(_) | SpecError::DownNotBelowInterest { .. } => "down",
            SpecError::UpNotAboveInterest { .. } | SpecError::UpPowerTooLarge(_) => "up",
            SpecError::DiscountTooLarge(_) => "interest",
            SpecError::PeriodsZero
            | SpecError::PeriodsTooMany(_)
            | SpecError::ExactTooManyPeriods(_) => "periods",
            SpecError::GeometricTooManyPeriods(_) => "variance_reduction",
            SpecError::RunsAndTarget
            | SpecError::NoRunsOrTarget
            | SpecError::RunsTooFew { .. }
            | SpecError::RunsTooMany(_) => "runs",
            SpecError::TargetNotPositive(_) => "target_std_error",
            SpecError::GreekRepeated(_) => "greeks",
        }
    }
}

/// The computation was stopped through its cancel flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;
