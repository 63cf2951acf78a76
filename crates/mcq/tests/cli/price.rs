//! `mcq price` and `mcq bench kernel` as a user runs them.

use serde_json::Value;

use super::mcq;

/// Runs `mcq` with `args`; returns (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    let out = mcq().args(args).output().expect("run mcq");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> Value {
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

/// A tiny `mcq bench kernel` run: every section is there and parses. No
/// timing is asserted beyond being a positive number.
#[test]
fn bench_kernel_reports_every_section_as_json() {
    let v = json(&[
        "bench",
        "kernel",
        "--paths",
        "65536",
        "--repeats",
        "1",
        "--max-threads",
        "2",
        "--target-std-error",
        "0.005",
        "--json",
    ]);
    let positive = |x: &Value| x.as_f64().is_some_and(|x| x > 0.0 && x.is_finite());

    let rows = v["single_thread"].as_array().unwrap();
    assert_eq!(rows.len(), 8, "{v}");
    assert!(rows[0]["name"].as_str().unwrap().contains("faithful"));
    for key in [
        "ns_per_path_step",
        "median_ns_per_path_step",
        "speedup_vs_original",
    ] {
        assert!(rows.iter().all(|r| positive(&r[key])), "{key}: {v}");
    }
    assert!(rows.iter().any(|r| r["name"] == "kernel, plain"));
    assert!(positive(&v["ratio_plain_vs_original"]));
    assert!(positive(&v["ratio_plain_vs_original_medians"]));

    let shapes = v["shapes"].as_array().unwrap();
    assert!(shapes.len() >= 5, "{v}");
    for shape in shapes {
        let ns = &shape["ns_per_path_step"];
        for estimator in ["none", "arithmetic", "geometric", "auto", "antithetic"] {
            assert!(positive(&ns[estimator]["best"]), "{estimator}: {shape}");
            assert!(positive(&ns[estimator]["median"]), "{estimator}: {shape}");
        }
    }
    assert!(shapes.iter().any(|s| s["periods"] == 1));
    assert!(shapes.iter().any(|s| s["put"] == true));
    assert!(positive(&v["worst_shape_ns_per_path_step"]));

    let scaling = v["scaling"].as_array().unwrap();
    assert_eq!(scaling.len(), 2, "{v}");
    assert_eq!(scaling[0]["threads"], 1);
    assert_eq!(scaling[0]["speedup"], 1.0);
    for s in scaling {
        assert_eq!(s["same_bits_as_one_thread"], true, "{v}");
        assert!(positive(&s["speedup"]) && positive(&s["efficiency"]), "{s}");
    }

    let to_target = v["to_target"].as_array().unwrap();
    assert_eq!(to_target.len(), 2, "{v}");
    assert_eq!(to_target[0]["variance_reduction"], "none");
    for t in to_target {
        assert!(t["std_error"].as_f64().unwrap() <= 0.005, "{t}");
        assert_eq!(t["max_paths_reached"], false);
        assert!(t["paths"].as_u64().unwrap() > 0);
        assert!(positive(&t["ms"]) && positive(&t["median_ms"]), "{t}");
    }
    // The best control needs fewer paths for the same target.
    assert!(to_target[1]["paths"].as_u64() < to_target[0]["paths"].as_u64());
}

#[test]
fn bench_kernel_text_has_every_table() {
    let (ok, stdout, stderr) = run(&[
        "bench",
        "kernel",
        "--paths",
        "65536",
        "--repeats",
        "1",
        "--no-shapes",
        "--target-std-error",
        "0.05",
    ]);
    assert!(ok, "{stderr}");
    for needle in [
        "(faithful)",
        "kernel plain vs the faithful original loop",
        "threads",
        "efficiency",
        "time to a standard error of",
        "control variate speed-up",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("other inputs"), "{stdout}");
}
