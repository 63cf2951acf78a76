//! Delta: exact against finite differences of the exact price, Monte
//! Carlo against exact, and asking for it changes no bit of the price.

use mcq_kernel::{CHUNK_PATHS, Greek, Method, Partial, Spec, VarianceReduction};

use super::accuracy::{CASES, spec};
use super::{price, running, valid};

fn with_delta(spec: Spec) -> Spec {
    Spec {
        greeks: vec![Greek::Delta],
        ..spec
    }
}

fn exact(spec: &Spec) -> Spec {
    Spec {
        method: Method::Exact,
        ..spec.clone()
    }
}

/// The exact price is piecewise linear in `initial` (the paying paths
/// change only where a path's average crosses the strike), so a central
/// difference over a small step is its slope up to the kinks inside the
/// step and rounding.
#[test]
fn exact_delta_is_the_slope_of_the_exact_price() {
    for case in CASES {
        let base = exact(&spec(case));
        let delta = price(with_delta(base.clone()));
        let d = delta.delta.expect("delta asked for");
        assert_eq!(delta.delta_std_error, Some(0.0));
        // Kinks are dense at 40 periods: a step of 1e-5 S0 crosses enough
        // of them to move the difference by 6e-6 relative; 1e-7 S0 does not.
        let h = 1e-7 * base.initial;
        let at = |initial: f64| {
            price(Spec {
                initial,
                ..base.clone()
            })
            .price
        };
        let difference = (at(base.initial + h) - at(base.initial - h)) / (2.0 * h);
        assert!(
            (difference - d).abs() <= 1e-6 * d.abs().max(1.0),
            "{case:?}: delta {d} vs central difference {difference}"
        );
    }
}

#[test]
fn monte_carlo_delta_is_within_four_standard_errors_of_exact() {
    let methods = [
        VarianceReduction::None,
        VarianceReduction::Antithetic,
        VarianceReduction::Arithmetic,
        VarianceReduction::Geometric,
        VarianceReduction::Auto,
    ];
    for (i, case) in CASES.iter().enumerate() {
        let want = price(with_delta(exact(&spec(case)))).delta.unwrap();
        for (j, vr) in methods.into_iter().enumerate() {
            let mc = price(with_delta(Spec {
                runs: Some(150_000),
                seed: Some((100 + i * 10 + j) as u64),
                variance_reduction: vr,
                ..spec(case)
            }));
            let (got, error) = (mc.delta.unwrap(), mc.delta_std_error.unwrap());
            // Plus what paths rarer than about one in 10^7 contribute: with
            // p near 0 (interest 0.801) every sampled put pays, delta is then
            // exactly linear in the arithmetic control, and the fit reports
            // no error while missing the rare paths that do not pay (2.4e-7
            // of delta there); and the bias of 32-bit probabilities.
            let tolerance = 4.0 * error + 1e-6 * want.abs().max(1.0);
            assert!(
                error.is_finite() && (got - want).abs() <= tolerance,
                "case {case:?} {vr:?}: mc delta {got} ± {error} vs exact {want}"
            );
        }
    }
}

/// At the defaults a control cuts delta's variance too, with its own β.
#[test]
fn controls_cut_the_variance_of_delta() {
    let run = |vr| {
        price(with_delta(Spec {
            runs: Some(200_000),
            seed: Some(5),
            variance_reduction: vr,
            ..Spec::default()
        }))
        .delta_std_error
        .unwrap()
    };
    let plain = run(VarianceReduction::None);
    let arithmetic = run(VarianceReduction::Arithmetic);
    assert!(
        plain > 5.0 * arithmetic,
        "plain {plain} vs arithmetic {arithmetic}"
    );
}

/// Delta rides on the price's paths: with or without it, the same seed
/// gives the same price bits, and a spec without it reports no delta and
/// writes partials with no delta sums.
#[test]
fn asking_for_delta_changes_no_bit_of_the_price() {
    for periods in [1, 7, 12, 20, 41] {
        for vr in [
            VarianceReduction::None,
            VarianceReduction::Antithetic,
            VarianceReduction::Arithmetic,
            VarianceReduction::Geometric,
            VarianceReduction::Auto,
        ] {
            let plain = Spec {
                periods,
                runs: Some(2 * CHUNK_PATHS + 3),
                seed: Some(11),
                variance_reduction: vr,
                ..Spec::default()
            };
            let without = price(plain.clone());
            let with = price(with_delta(plain.clone()));
            assert_eq!(without.price.to_bits(), with.price.to_bits(), "{plain:?}");
            assert_eq!(without.std_error.to_bits(), with.std_error.to_bits());
            assert_eq!(without.variance_reduction, with.variance_reduction);
            assert_eq!((without.delta, without.delta_std_error), (None, None));
            assert!(with.delta.is_some() && with.delta_std_error.is_some());
            let result = serde_json::to_string(&without).unwrap();
            assert!(!result.contains("delta"), "{result}");
            let partial = valid(plain).run_chunks(0..2, &running()).unwrap();
            let text = serde_json::to_string(&partial).unwrap();
            let keys: Vec<&str> =
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text)
                    .unwrap()
                    .keys()
                    .map(|k| &*k.clone().leak())
                    .collect();
            assert_eq!(
                keys,
                [
                    "a", "aa", "chunks", "g", "gg", "paths", "pp", "samples", "y", "ya", "yg", "yy"
                ],
                "{text}"
            );
            assert_eq!(serde_json::from_str::<Partial>(&text).unwrap(), partial);
        }
    }
}

/// Call minus put is E[A]/S0 discounted on every path that is not at
/// the strike, so the plain estimates of the same seed obey parity to
/// rounding, as the exact deltas do.
#[test]
fn delta_parity_holds_path_by_path() {
    for (method, runs) in [(Method::Mc, Some(CHUNK_PATHS + 9)), (Method::Exact, None)] {
        let base = with_delta(Spec {
            method,
            runs,
            seed: Some(3),
            variance_reduction: VarianceReduction::None,
            ..Spec::default()
        });
        let call = price(base.clone());
        let put = price(Spec {
            option: mcq_kernel::OptionKind::Put,
            ..base.clone()
        });
        let sum = price(Spec {
            exercise: 0.0,
            ..base
        });
        // A call struck at 0 pays the average on every path: its delta is
        // the mean average over S0, discounted, from the same paths.
        let (c, p, a) = (call.delta.unwrap(), put.delta.unwrap(), sum.delta.unwrap());
        assert!(
            (c - p - a).abs() < 1e-12 * a,
            "{method:?}: {c} - {p} vs {a}"
        );
    }
}
