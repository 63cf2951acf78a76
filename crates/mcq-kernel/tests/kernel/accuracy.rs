//! Monte Carlo against the exact oracle, exact against known numbers.

use mcq_kernel::{Method, OptionKind, Spec, VarianceReduction};

use super::price;

/// (option, periods, initial, exercise, up, down, interest): calls and puts,
/// deep in and out of the money, p near 0 and 1, 1 to 40 periods.
pub(super) const CASES: &[(OptionKind, u32, f64, f64, f64, f64, f64)] = &[
    (OptionKind::Call, 20, 30.0, 30.0, 1.4, 0.8, 1.08),
    (OptionKind::Put, 20, 30.0, 30.0, 1.4, 0.8, 1.08),
    (OptionKind::Call, 20, 30.0, 5.0, 1.4, 0.8, 1.08),
    (OptionKind::Call, 12, 30.0, 90.0, 1.4, 0.8, 1.08),
    (OptionKind::Put, 12, 30.0, 80.0, 1.4, 0.8, 1.08),
    (OptionKind::Put, 15, 30.0, 12.0, 1.2, 0.9, 1.01),
    (OptionKind::Put, 10, 100.0, 100.0, 1.4, 0.8, 0.801),
    (OptionKind::Call, 10, 100.0, 100.0, 1.4, 0.8, 1.399),
    (OptionKind::Call, 1, 50.0, 49.0, 1.1, 0.9, 1.0),
    (OptionKind::Put, 2, 50.0, 52.0, 1.1, 0.9, 1.0),
    (OptionKind::Call, 7, 1.0, 0.0, 1.3, 0.7, 1.05),
    (OptionKind::Call, 33, 100.0, 100.0, 1.05, 0.96, 1.002),
    (OptionKind::Put, 40, 100.0, 100.0, 1.032, 0.969, 1.001),
];

pub(super) fn spec(case: &(OptionKind, u32, f64, f64, f64, f64, f64)) -> Spec {
    let &(option, periods, initial, exercise, up, down, interest) = case;
    Spec {
        option,
        periods,
        initial,
        exercise,
        up,
        down,
        interest,
        ..Spec::default()
    }
}

#[test]
fn default_exact_call_is_the_known_price() {
    let result = price(Spec {
        method: Method::Exact,
        ..Spec::default()
    });
    assert!(
        (result.price - 9.530286028882).abs() < 1e-11,
        "{}",
        result.price
    );
    assert_eq!(result.paths, 1 << 20);
    assert_eq!(result.std_error, 0.0);
}

#[test]
fn monte_carlo_is_within_four_standard_errors_of_exact() {
    let methods = [
        VarianceReduction::None,
        VarianceReduction::Antithetic,
        VarianceReduction::Arithmetic,
        VarianceReduction::Geometric,
        VarianceReduction::Auto,
    ];
    for (i, case) in CASES.iter().enumerate() {
        let exact = price(Spec {
            method: Method::Exact,
            ..spec(case)
        })
        .price;
        for (j, vr) in methods.into_iter().enumerate() {
            let seed = (i * 10 + j) as u64;
            let mc = price(Spec {
                runs: Some(150_000),
                seed: Some(seed),
                variance_reduction: vr,
                ..spec(case)
            });
            // Plus the documented bias of 32-bit probability resolution (~1e-8
            // relative), visible when a control makes the error tiny.
            let tolerance = 4.0 * mc.std_error + 1e-7 * exact.abs().max(1.0);
            assert!(
                (mc.price - exact).abs() <= tolerance,
                "case {case:?} {vr:?}: mc {} ± {} vs exact {exact}",
                mc.price,
                mc.std_error
            );
            assert!(mc.std_error.is_finite() && mc.ci95[0] <= mc.price && mc.price <= mc.ci95[1]);
        }
    }
}

#[test]
fn put_call_parity_holds_for_exact_prices() {
    for case in CASES {
        let call = price(Spec {
            method: Method::Exact,
            option: OptionKind::Call,
            ..spec(case)
        })
        .price;
        let put = price(Spec {
            method: Method::Exact,
            option: OptionKind::Put,
            ..spec(case)
        })
        .price;
        let s = spec(case);
        let n = s.periods as i32;
        let r = s.interest;
        // E[A] = S0 (R^(n+1) − 1) / ((n + 1)(R − 1)), or S0 when R = 1.
        let mean_average = if r == 1.0 {
            s.initial
        } else {
            s.initial * (r.powi(n + 1) - 1.0) / (f64::from(n + 1) * (r - 1.0))
        };
        let parity = (mean_average - s.exercise) / r.powi(n);
        assert!(
            (call - put - parity).abs() < 1e-10 * parity.abs().max(1.0),
            "{case:?}: {call} - {put} vs {parity}"
        );
    }
}

#[test]
fn control_variates_cut_the_variance_at_the_defaults() {
    let run = |vr| {
        price(Spec {
            runs: Some(200_000),
            seed: Some(1),
            variance_reduction: vr,
            ..Spec::default()
        })
    };
    let plain = run(VarianceReduction::None);
    let arithmetic = run(VarianceReduction::Arithmetic);
    let auto = run(VarianceReduction::Auto);
    assert_eq!(plain.variance_reduction_factor, Some(1.0));
    let factor = arithmetic.variance_reduction_factor.unwrap();
    // About 250× at the defaults; the reported factor matches the errors.
    assert!(factor > 100.0, "arithmetic control factor {factor}");
    let observed = (plain.std_error / arithmetic.std_error).powi(2);
    assert!(
        (observed / factor - 1.0).abs() < 0.1,
        "{observed} vs {factor}"
    );
    assert_ne!(auto.variance_reduction, VarianceReduction::Auto);
    assert!(
        auto.std_error
            <= arithmetic
                .std_error
                .max(run(VarianceReduction::Geometric).std_error)
    );
}

#[test]
fn target_standard_error_mode_reaches_the_target_or_says_so() {
    let result = price(Spec {
        runs: None,
        target_std_error: Some(2e-3),
        seed: Some(3),
        ..Spec::default()
    });
    assert!(result.std_error <= 2e-3, "{result:?}");
    assert!(!result.max_paths_reached);
    assert!((result.price - 9.530286028882).abs() < 4.0 * result.std_error);
}

/// The mirror really is the path's reflection: pairs are negatively
/// correlated, so the antithetic estimator cuts the variance, whether pairs
/// are counted (1 and 7 periods) or walked (20 and 33). Measured with the
/// per-step-uniform pairs of earlier versions: 7.9×, 1.93×, 1.44×, 1.20×.
/// Mirrors drawn independently would give a factor near 1.
#[test]
fn antithetic_pairs_cut_the_variance() {
    for (periods, at_least) in [(1, 5.0), (7, 1.6), (20, 1.3), (33, 1.1)] {
        let result = price(Spec {
            periods,
            runs: Some(400_000),
            seed: Some(u64::from(periods)),
            variance_reduction: VarianceReduction::Antithetic,
            ..Spec::default()
        });
        let factor = result.variance_reduction_factor.unwrap();
        assert!(factor > at_least, "{periods} periods: factor {factor}");
    }
}
