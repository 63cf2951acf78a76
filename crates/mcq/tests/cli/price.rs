//! `mcq price` as a user runs it.

use serde_json::Value;

use super::mcq;

/// Runs `mcq` with `args`; returns (success, stdout, stderr).
pub(super) fn run(args: &[&str]) -> (bool, String, String) {
    let out = mcq().args(args).output().expect("run mcq");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `mcq` with `args`, which must succeed, and parses its stdout.
pub(super) fn json(args: &[&str]) -> Value {
    let (ok, stdout, stderr) = run(args);
    assert!(ok, "mcq {args:?} failed: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn exact_price_of_the_original_sample() {
    let v = json(&["price", "--method", "exact", "--json"]);
    let price = v["price"].as_f64().unwrap();
    assert!((price - 9.530286028882).abs() < 1e-10, "{v}");
    assert_eq!(v["method"], "exact");
    assert_eq!(v["paths"], 1u64 << 20);
}

#[test]
fn json_has_the_result_keys_and_does_not_depend_on_threads() {
    let base = ["price", "--json", "--runs", "300000", "--seed", "5"];
    let one = json(&[&base[..], &["--threads", "1"]].concat());
    let two = json(&[&base[..], &["--threads", "2"]].concat());
    for key in [
        "price",
        "std_error",
        "ci95",
        "paths",
        "seed",
        "method",
        "elapsed_ms",
        "variance_reduction",
    ] {
        assert!(one.get(key).is_some(), "missing {key}: {one}");
    }
    assert_eq!(one["price"], two["price"]);
    assert_eq!(one["std_error"], two["std_error"]);
    assert_eq!(one["seed"], 5);
    assert_eq!(one["paths"], 300_000);
    let ci = one["ci95"].as_array().unwrap();
    let price = one["price"].as_f64().unwrap();
    assert!(ci[0].as_f64().unwrap() < price && price < ci[1].as_f64().unwrap());
    assert!((price - 9.530286028882).abs() < 4.0 * one["std_error"].as_f64().unwrap());
}

#[test]
fn put_with_a_target_standard_error() {
    let v = json(&[
        "price",
        "--json",
        "--option",
        "put",
        "--target-std-error",
        "0.005",
        "--seed",
        "2",
    ]);
    assert!(v["std_error"].as_f64().unwrap() <= 0.005, "{v}");
    assert_eq!(v["option"], "put");
    assert_eq!(v["max_paths_reached"], false);
}

/// ∂price/∂initial of the original sample's call, exact.
const EXACT_DELTA: f64 = 0.475_304_126_739_455_8;

#[test]
fn greeks_delta_adds_delta_and_its_error_to_the_result() {
    let exact = json(&["price", "--method", "exact", "--greeks", "delta", "--json"]);
    assert!(
        (exact["delta"].as_f64().unwrap() - EXACT_DELTA).abs() < 1e-12,
        "{exact}"
    );
    assert_eq!(exact["delta_std_error"], 0.0);
    let base = [
        "price", "--json", "--runs", "2e5", "--seed", "4", "--greeks", "delta",
    ];
    let one = json(&[&base[..], &["--threads", "1"]].concat());
    let two = json(&[&base[..], &["--threads", "2"]].concat());
    assert_eq!(one["delta"], two["delta"]);
    assert_eq!(one["delta_std_error"], two["delta_std_error"]);
    let (delta, error) = (
        one["delta"].as_f64().unwrap(),
        one["delta_std_error"].as_f64().unwrap(),
    );
    assert!(
        error > 0.0 && (delta - EXACT_DELTA).abs() < 4.0 * error,
        "{one}"
    );
    // Without the flag there is no delta, and the price is the same.
    let plain = json(&["price", "--json", "--runs", "2e5", "--seed", "4"]);
    assert!(plain.get("delta").is_none(), "{plain}");
    assert_eq!(plain["price"], one["price"]);

    let (ok, stdout, stderr) = run(&["price", "--runs", "1e4", "--greeks", "delta"]);
    assert!(
        ok && stdout.contains("delta ") && stdout.contains("±"),
        "{stdout}{stderr}"
    );
    let (ok, _, stderr) = run(&["price", "--greeks", "gamma"]);
    assert!(!ok && stderr.contains("--greeks"), "{stderr}");
    let (ok, _, stderr) = run(&["price", "--greeks", "delta,delta"]);
    assert!(
        !ok && stderr.contains("--greeks") && stderr.contains("more than once"),
        "{stderr}"
    );
}

#[test]
fn human_output_shows_price_interval_paths_and_speed() {
    let (ok, stdout, stderr) = run(&["price", "--runs", "100000", "--seed", "1"]);
    assert!(ok, "{stderr}");
    for needle in [
        "call price",
        "±",
        "95% interval",
        "paths",
        "100000",
        "seed 1",
        "path-steps/s",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
}

#[test]
fn invalid_inputs_name_the_flag_and_the_fix() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&["--down", "1.2"], "--down", "below interest"),
        (&["--up", "1.0"], "--up", "above interest"),
        (&["--initial", "-3"], "--initial", "greater than 0"),
        (&["--periods", "0"], "--periods", "at least 1"),
        (
            &["--periods", "50", "--method", "exact"],
            "--periods",
            "at most 40",
        ),
        (
            &["--runs", "10", "--target-std-error", "0.1"],
            "--runs",
            "not both",
        ),
        (
            &["--target-std-error", "-1"],
            "--target-std-error",
            "greater than 0",
        ),
        (&["--runs", "0"], "--runs", "at least"),
        (&["--interest", "nan"], "--interest", "finite"),
        (&["--initial", "abc"], "--initial", "invalid value"),
        (&["--option", "straddle"], "--option", "invalid value"),
        (&["--threads", "0"], "--threads", "0"),
        (&["--threads", "5000"], "--threads", "1..=1024"),
        (&["--runs", "-5"], "--runs", "invalid value"),
        (&["--runs", "20000000000"], "--runs", "at most"),
        (&["--periods", "1001"], "--periods", "at most 1000"),
        (&["--periods", "700"], "--up", "lower up or periods"),
        (&["--exercise", "-1"], "--exercise", "0 or more"),
        (
            &["--target-std-error", "nan"],
            "--target-std-error",
            "finite",
        ),
        (
            &["--target-std-error", "0"],
            "--target-std-error",
            "greater than 0",
        ),
        (&["--seed", "-1"], "--seed", "invalid value"),
        (&["--method", "mcmc"], "--method", "invalid value"),
    ];
    for (args, flag, fix) in cases {
        let (ok, _, stderr) = run(&[&["price"], *args].concat());
        assert!(!ok, "mcq price {args:?} succeeded");
        assert!(
            stderr.contains(flag) && stderr.contains(fix),
            "mcq price {args:?}: {stderr}"
        );
    }
}
