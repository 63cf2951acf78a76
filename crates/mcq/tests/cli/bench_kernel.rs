//! `mcq bench kernel` as a user runs it: every section of a tiny run, and
//! bad flags rejected before any work, naming the flag and the fix.

use serde_json::Value;

use super::price::{json, run};

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
    assert_eq!(rows.len(), 13, "{v}");
    assert!(rows[0]["name"].as_str().unwrap().contains("faithful"));
    for key in [
        "ns_per_path_step",
        "median_ns_per_path_step",
        "speedup_vs_original",
    ] {
        assert!(rows.iter().all(|r| positive(&r[key])), "{key}: {v}");
    }
    assert!(rows.iter().any(|r| r["name"] == "kernel, plain"));
    assert!(
        rows.iter()
            .any(|r| r["name"] == "kernel, auto (both controls), with delta")
    );
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
    // Two-block paths, counted (12) and walked (17).
    assert!(shapes.iter().any(|s| s["periods"] == 12));
    assert!(shapes.iter().any(|s| s["periods"] == 17));
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

/// Every bad value is rejected up front (no benchmark runs), exits
/// non-zero, and names the flag and what to change. Values near 2^64 once
/// overflowed in the scaling run; a standard error of 0 or NaN once
/// silently skipped a section.
#[test]
fn bench_kernel_rejects_bad_flags_naming_the_flag_and_the_fix() {
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["--paths", "18446744073709551615"],
            "--paths",
            "not in 1..=2499936256",
        ),
        (&["--paths", "2499936257"], "--paths", "not in 1..="),
        (&["--paths", "0"], "--paths", "not in 1..="),
        (&["--paths", "-5"], "--paths", "invalid value"),
        (
            &["--target-std-error", "0"],
            "--target-std-error",
            "greater than 0",
        ),
        (
            &["--target-std-error", "-1"],
            "--target-std-error",
            "greater than 0",
        ),
        (
            &["--target-std-error", "nan"],
            "--target-std-error",
            "finite",
        ),
        (
            &["--target-std-error", "inf"],
            "--target-std-error",
            "finite",
        ),
        (
            &["--target-std-error", "abc"],
            "--target-std-error",
            "number",
        ),
        (&["--repeats", "0"], "--repeats", "not in 1..=1000"),
        (&["--repeats", "4294967295"], "--repeats", "not in 1..=1000"),
        (&["--periods", "0"], "--periods", "not in 1..=1000"),
        (&["--periods", "700"], "--periods", "lower up or periods"),
        (&["--max-threads", "0"], "--max-threads", "not in 1..=1024"),
        (
            &["--max-threads", "65535"],
            "--max-threads",
            "not in 1..=1024",
        ),
    ];
    for (args, flag, fix) in cases {
        let (ok, stdout, stderr) = run(&[&["bench", "kernel", "--json"], *args].concat());
        assert!(!ok, "mcq bench kernel {args:?} succeeded: {stdout}");
        assert!(stdout.is_empty(), "{args:?} printed a report: {stdout}");
        assert!(
            stderr.contains(flag) && stderr.contains(fix),
            "mcq bench kernel {args:?}: {stderr}"
        );
    }
}

/// `--no-target` is the way to skip the time-to-target section.
#[test]
fn bench_kernel_no_target_skips_only_that_section() {
    let v: Value = json(&[
        "bench",
        "kernel",
        "--paths",
        "65536",
        "--repeats",
        "1",
        "--max-threads",
        "1",
        "--no-shapes",
        "--no-target",
        "--json",
    ]);
    assert_eq!(v["to_target"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(v["scaling"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["single_thread"].as_array().map(Vec::len), Some(13), "{v}");
}
