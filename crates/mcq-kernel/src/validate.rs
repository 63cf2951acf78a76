//! Checks a [`Spec`], collecting every problem, and yields the
//! [`ValidSpec`] the estimators run on. The checks are a few comparisons
//! and powers: they build no table, so a front end can check every spec
//! of a large batch and the queue can trust what it is handed.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::SpecError;
use crate::exact::MAX_EXACT_PERIODS;
use crate::geometric::MAX_GEOMETRIC_PERIODS;
use crate::model::powi;
use crate::pricing::ValidSpec;
use crate::spec::{Method, Spec, VarianceReduction};

/// Most periods a spec may have. Paths cost O(periods) each and the
/// geometric control's table grows with periods², so we stop here.
pub const MAX_PERIODS: u32 = 1000;
/// Most paths one request may simulate, with `runs` or in
/// target-standard-error mode (about 100 s of one core at 20 periods).
pub const MAX_RUNS: u64 = 10_000_000_000;
/// Fewest paths: a standard error needs two samples (antithetic: two pairs).
pub const MIN_RUNS: u64 = 2;
/// Largest path value (spot scaled to 1) and strike ratio accepted: squares
/// of path sums over a chunk must stay far from overflow.
pub const MAX_PATH_VALUE: f64 = 1e100;

impl Spec {
    /// Checks every field and every rule between fields; returns all
    /// problems found, not just the first. A missing seed is drawn here and
    /// kept in [`ValidSpec::spec`] (`exact` drops its seed). Builds no
    /// sampling table: pricing builds them on first use.
    pub fn validate(&self) -> Result<ValidSpec, Vec<SpecError>> {
        let mut errors = Vec::new();
        let numbers = [
            ("initial", self.initial),
            ("exercise", self.exercise),
            ("up", self.up),
            ("down", self.down),
            ("interest", self.interest),
        ];
        for (field, value) in numbers {
            if !value.is_finite() {
                errors.push(SpecError::NotFinite { field, value });
            }
        }
        let finite = errors.is_empty();
        check_model(self, finite, &mut errors);
        check_size(self, &mut errors);
        if finite && errors.is_empty() {
            check_magnitudes(self, &mut errors);
        }
        if errors.is_empty() {
            Ok(ValidSpec::new(self))
        } else {
            Err(errors)
        }
    }
}

impl Serialize for ValidSpec {
    /// As its spec: the stored and wire form.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.spec().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ValidSpec {
    /// Reads a spec and validates it: stored text is not trusted to have
    /// passed the checks of this build.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spec = Spec::deserialize(deserializer)?;
        spec.validate().map_err(|errors| {
            let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
            serde::de::Error::custom(format!("invalid spec: {}", text.join("; ")))
        })
    }
}

fn check_model(spec: &Spec, finite: bool, errors: &mut Vec<SpecError>) {
    // Comparisons with NaN are false, so each check only fires on numbers.
    if spec.initial <= 0.0 {
        errors.push(SpecError::InitialNotPositive(spec.initial));
    }
    if spec.exercise < 0.0 {
        errors.push(SpecError::ExerciseNegative(spec.exercise));
    }
    if spec.down <= 0.0 {
        errors.push(SpecError::DownNotPositive(spec.down));
    }
    if finite && spec.down >= spec.interest {
        errors.push(SpecError::DownNotBelowInterest {
            down: spec.down,
            interest: spec.interest,
        });
    }
    if finite && spec.up <= spec.interest {
        errors.push(SpecError::UpNotAboveInterest {
            up: spec.up,
            interest: spec.interest,
        });
    }
}

fn check_size(spec: &Spec, errors: &mut Vec<SpecError>) {
    let n = spec.periods;
    if n == 0 {
        errors.push(SpecError::PeriodsZero);
    } else if n > MAX_PERIODS {
        errors.push(SpecError::PeriodsTooMany(n));
    } else if spec.method == Method::Exact && n > MAX_EXACT_PERIODS {
        errors.push(SpecError::ExactTooManyPeriods(n));
    } else if spec.method == Method::Mc
        && spec.variance_reduction == VarianceReduction::Geometric
        && n > MAX_GEOMETRIC_PERIODS
    {
        errors.push(SpecError::GeometricTooManyPeriods(n));
    }
    match (spec.runs, spec.target_std_error) {
        (Some(_), Some(_)) => errors.push(SpecError::RunsAndTarget),
        (None, None) if spec.method == Method::Mc => errors.push(SpecError::NoRunsOrTarget),
        _ => {}
    }
    if let Some(runs) = spec.runs {
        let min = if spec.variance_reduction == VarianceReduction::Antithetic {
            2 * MIN_RUNS
        } else {
            MIN_RUNS
        };
        if runs < min {
            errors.push(SpecError::RunsTooFew { min, got: runs });
        } else if runs > MAX_RUNS {
            errors.push(SpecError::RunsTooMany(runs));
        }
    }
    for (i, greek) in spec.greeks.iter().enumerate() {
        // Its second appearance reports it, once however often it repeats.
        if spec.greeks[..i].iter().filter(|g| *g == greek).count() == 1 {
            errors.push(SpecError::GreekRepeated(*greek));
        }
    }
    if let Some(target) = spec.target_std_error
        && !(target.is_finite() && target > 0.0)
    {
        errors.push(SpecError::TargetNotPositive(target));
    }
}

/// Bounds that keep every path value, square and price finite. Runs only on
/// an otherwise valid model (finite numbers, 0 < d < R < u, periods in range).
fn check_magnitudes(spec: &Spec, errors: &mut Vec<SpecError>) {
    let n = spec.periods;
    let top = powi(spec.up, n);
    if top > MAX_PATH_VALUE {
        errors.push(SpecError::UpPowerTooLarge(top));
    }
    let growth = powi(spec.interest, n);
    if growth < 1.0 / MAX_PATH_VALUE {
        errors.push(SpecError::DiscountTooLarge(growth));
    }
    let ratio = spec.exercise / spec.initial;
    if ratio.is_nan() || ratio > MAX_PATH_VALUE {
        errors.push(SpecError::StrikeRatioTooLarge(ratio));
    }
    if errors.is_empty() {
        // Largest payoff in price units, with room for squares of
        // sums over a chunk to be formed in normalised units.
        let bound = spec.initial * top.max(1.0).max(ratio) * f64::from(n + 1) / growth.min(1.0);
        if bound.is_nan() || bound > 1e290 {
            errors.push(SpecError::PriceOverflow(bound));
        }
    }
}
