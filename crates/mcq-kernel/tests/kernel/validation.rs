//! Every problem is reported with the field to fix; no accepted input
//! panics or produces NaN.

use mcq_kernel::{
    Greek, MAX_EXACT_PERIODS, MAX_GEOMETRIC_PERIODS, MAX_PATH_VALUE, MAX_PERIODS, MAX_RUNS,
    MIN_RUNS, Method, OptionKind, Spec, SpecError, ValidSpec, VarianceReduction,
};
use proptest::prelude::*;

use super::running;

fn fields(spec: Spec) -> Vec<&'static str> {
    match spec.validate() {
        Ok(_) => Vec::new(),
        Err(errors) => errors.iter().map(SpecError::field).collect(),
    }
}

fn base() -> Spec {
    Spec {
        runs: Some(1000),
        ..Spec::default()
    }
}

#[test]
fn each_problem_names_its_field() {
    assert_eq!(
        fields(Spec {
            initial: f64::NAN,
            ..base()
        }),
        ["initial"]
    );
    assert_eq!(
        fields(Spec {
            up: f64::INFINITY,
            ..base()
        }),
        ["up"]
    );
    assert_eq!(
        fields(Spec {
            initial: 0.0,
            ..base()
        }),
        ["initial"]
    );
    assert_eq!(
        fields(Spec {
            exercise: -1.0,
            ..base()
        }),
        ["exercise"]
    );
    assert_eq!(
        fields(Spec {
            down: 0.0,
            ..base()
        }),
        ["down"]
    );
    assert_eq!(
        fields(Spec {
            down: 1.1,
            ..base()
        }),
        ["down"]
    );
    assert_eq!(fields(Spec { up: 1.08, ..base() }), ["up"]);
    assert_eq!(
        fields(Spec {
            periods: 0,
            ..base()
        }),
        ["periods"]
    );
    assert_eq!(
        fields(Spec {
            periods: MAX_PERIODS + 1,
            ..base()
        }),
        ["periods"]
    );
    assert_eq!(
        fields(Spec {
            periods: MAX_EXACT_PERIODS + 1,
            method: Method::Exact,
            ..base()
        }),
        ["periods"]
    );
    assert_eq!(
        fields(Spec {
            periods: 500,
            variance_reduction: VarianceReduction::Geometric,
            ..base()
        }),
        ["variance_reduction"]
    );
    assert_eq!(
        fields(Spec {
            runs: Some(0),
            ..base()
        }),
        ["runs"]
    );
    assert_eq!(
        fields(Spec {
            runs: Some(MAX_RUNS + 1),
            ..base()
        }),
        ["runs"]
    );
    assert_eq!(
        fields(Spec {
            runs: Some(3),
            variance_reduction: VarianceReduction::Antithetic,
            ..base()
        }),
        ["runs"]
    );
    assert_eq!(
        fields(Spec {
            target_std_error: Some(0.01),
            ..base()
        }),
        ["runs"]
    );
    assert_eq!(
        fields(Spec {
            runs: None,
            ..base()
        }),
        ["runs"]
    );
    assert_eq!(
        fields(Spec {
            runs: None,
            target_std_error: Some(-1.0),
            ..base()
        }),
        ["target_std_error"]
    );
    assert_eq!(
        fields(Spec {
            runs: None,
            target_std_error: Some(f64::NAN),
            ..base()
        }),
        ["target_std_error"]
    );
    assert_eq!(
        fields(Spec {
            greeks: vec![Greek::Delta; 3],
            ..base()
        }),
        ["greeks"]
    );
    assert_eq!(
        fields(Spec {
            up: 10.0,
            periods: 200,
            ..base()
        }),
        ["up"]
    );
    assert_eq!(
        fields(Spec {
            down: 0.1,
            interest: 0.2,
            up: 1.0,
            periods: 1000,
            ..base()
        }),
        ["interest"]
    );
    assert_eq!(
        fields(Spec {
            exercise: 1e300,
            initial: 1e-10,
            ..base()
        }),
        ["exercise"]
    );
    assert_eq!(
        fields(Spec {
            initial: 1e300,
            ..base()
        }),
        ["initial"]
    );
    // Several problems at once are all reported.
    assert_eq!(
        fields(Spec {
            initial: -1.0,
            exercise: -1.0,
            periods: 0,
            ..base()
        }),
        ["initial", "exercise", "periods"]
    );
    // The sample's defaults, and exact without runs, are fine.
    assert!(fields(Spec::default().with_defaults()).is_empty());
    assert!(
        fields(Spec {
            method: Method::Exact,
            ..Spec::default()
        })
        .is_empty()
    );
}

#[test]
fn messages_say_what_to_fix() {
    let errors = Spec {
        down: 1.1,
        ..base()
    }
    .validate()
    .unwrap_err();
    let text = errors[0].to_string();
    assert!(
        text.contains("down") && text.contains("below interest"),
        "{text}"
    );
    let errors = Spec {
        periods: 2000,
        ..base()
    }
    .validate()
    .unwrap_err();
    assert!(errors[0].to_string().contains(&MAX_PERIODS.to_string()));
}

fn any_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => 0.0f64..3.0,
        1 => -10.0f64..1e6,
        1 => prop::num::f64::ANY,
        1 => Just(1e-300),
        1 => Just(1e300),
    ]
}

fn any_spec() -> impl Strategy<Value = Spec> {
    (
        (
            any_float(),
            any_float(),
            any_float(),
            any_float(),
            any_float(),
        ),
        prop_oneof![4 => 0u32..45, 1 => 0u32..2000],
        prop_oneof![Just(None), (0u64..3000).prop_map(Some)],
        prop_oneof![3 => Just(None), 1 => any_float().prop_map(Some)],
        any::<bool>(),
        any::<bool>(),
        0usize..5,
        any::<u64>(),
        prop_oneof![2 => Just(0usize), 2 => Just(1), 1 => Just(2)],
    )
        .prop_map(
            |(
                (initial, exercise, up, down, interest),
                periods,
                runs,
                target,
                put,
                exact,
                vr,
                seed,
                deltas,
            )| Spec {
                initial,
                exercise,
                up,
                down,
                interest,
                periods,
                runs,
                target_std_error: target,
                option: if put {
                    OptionKind::Put
                } else {
                    OptionKind::Call
                },
                method: if exact { Method::Exact } else { Method::Mc },
                seed: Some(seed),
                variance_reduction: [
                    VarianceReduction::None,
                    VarianceReduction::Antithetic,
                    VarianceReduction::Arithmetic,
                    VarianceReduction::Geometric,
                    VarianceReduction::Auto,
                ][vr],
                greeks: vec![Greek::Delta; deltas],
            },
        )
}

/// The rules of a valid spec, restated from their documentation (0 < d <
/// R < u, sizes in range, finite path values, prices and discount): an
/// oracle written apart from the checks, which must accept exactly these.
fn follows_the_rules(spec: &Spec) -> bool {
    let numbers = [
        spec.initial,
        spec.exercise,
        spec.up,
        spec.down,
        spec.interest,
    ];
    let n = spec.periods;
    let mc = spec.method == Method::Mc;
    let min_runs = match spec.variance_reduction {
        VarianceReduction::Antithetic => 2 * MIN_RUNS,
        _ => MIN_RUNS,
    };
    let model = numbers.iter().all(|x| x.is_finite())
        && spec.initial > 0.0
        && spec.exercise >= 0.0
        && 0.0 < spec.down
        && spec.down < spec.interest
        && spec.interest < spec.up;
    let size = (1..=MAX_PERIODS).contains(&n)
        && (mc || n <= MAX_EXACT_PERIODS)
        && !(mc
            && spec.variance_reduction == VarianceReduction::Geometric
            && n > MAX_GEOMETRIC_PERIODS);
    let paths = match (spec.runs, spec.target_std_error) {
        (Some(_), Some(_)) => false,
        (None, None) => !mc,
        (Some(runs), None) => (min_runs..=MAX_RUNS).contains(&runs),
        (None, Some(target)) => target.is_finite() && target > 0.0,
    };
    let greeks = spec.greeks.len() <= 1;
    if !(model && size && paths && greeks) {
        return false;
    }
    let top = spec.up.powi(n as i32);
    let growth = spec.interest.powi(n as i32);
    let ratio = spec.exercise / spec.initial;
    let largest_payoff =
        spec.initial * top.max(1.0).max(ratio) * f64::from(n + 1) / growth.min(1.0);
    top <= MAX_PATH_VALUE
        && growth >= 1.0 / MAX_PATH_VALUE
        && ratio <= MAX_PATH_VALUE
        && largest_payoff <= 1e290
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn accepted_specs_price_to_finite_numbers(spec in any_spec()) {
        let Ok(valid) = spec.validate() else { return Ok(()) };
        // Keep each case cheap: target mode can legitimately run to
        // MAX_RUNS paths; bound it by construction instead.
        if spec.target_std_error.is_some() || spec.periods > 200 {
            return Ok(());
        }
        let result = valid.price(&running()).unwrap();
        prop_assert!(result.price.is_finite() && result.std_error.is_finite(), "{spec:?} -> {result:?}");
        prop_assert!(result.ci95.iter().all(|x| x.is_finite()));
        prop_assert!(result.price >= 0.0 || result.variance_reduction != VarianceReduction::None, "{result:?}");
        prop_assert!(result.variance_reduction_factor.is_none_or(f64::is_finite));
        prop_assert_eq!(result.delta.is_some(), spec.wants_delta());
        prop_assert!(result.delta.is_none_or(f64::is_finite) && result.delta_std_error.is_none_or(f64::is_finite), "{result:?}");
        let text = serde_json::to_string(&result).unwrap();
        prop_assert!(!text.contains("null,") || text.contains("\"seed\":null"), "{text}");
    }

    #[test]
    fn validation_accepts_exactly_the_specs_that_follow_the_rules(spec in any_spec()) {
        let valid = spec.validate();
        prop_assert_eq!(valid.is_ok(), follows_the_rules(&spec), "{:?} -> {:?}", spec, valid);
    }

    #[test]
    fn a_valid_spec_survives_serde_and_a_stored_invalid_one_is_refused(spec in any_spec()) {
        let json = serde_json::to_string(&spec).unwrap();
        let read = serde_json::from_str::<ValidSpec>(&json);
        match spec.validate() {
            Ok(valid) => {
                let read = read.expect("a valid spec reads back");
                prop_assert_eq!(&read, &valid);
                prop_assert_eq!(serde_json::to_string(&read).unwrap(), serde_json::to_string(&valid).unwrap());
            }
            // Non-finite numbers are written as null, which reads as no
            // number: an error for a required one, no value for an
            // optional one (a NaN target reads as no target). Either way
            // the stored text reads as valid exactly when the spec it
            // holds validates.
            Err(_) if json.contains("null") => {
                let stored = serde_json::from_str::<Spec>(&json).map(|s| s.validate());
                let stored_valid = matches!(stored, Ok(Ok(_)));
                prop_assert_eq!(read.is_ok(), stored_valid, "{} -> {:?}", json, read);
                if let (Ok(read), Ok(Ok(valid))) = (&read, &stored) {
                    prop_assert_eq!(read, valid);
                }
            }
            Err(errors) => {
                let refused = read.expect_err("an invalid spec must not read as valid").to_string();
                prop_assert!(errors.iter().all(|e| refused.contains(&e.to_string())), "{refused}");
            }
        }
    }

    #[test]
    fn validation_never_panics(spec in any_spec()) {
        if let Err(errors) = spec.validate() {
            prop_assert!(!errors.is_empty());
            for e in errors {
                prop_assert!(!e.to_string().is_empty() && !e.field().is_empty());
            }
        }
    }
}
