//! `mcq bench compare` end to end on a small configuration: all three
//! platforms, a private server with one embedded worker, a two-level sweep.
//! Checks that every output exists and parses, and that each service job's
//! time breakdown is consistent with the timestamps the server recorded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::mcq;

/// A scratch directory removed when the test ends (also on failure).
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!("mcq-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Rows of a CSV file we wrote (no quoting needed: no field has a comma).
fn read_csv(path: &Path) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .expect("a header row")
        .split(',')
        .map(str::to_owned)
        .collect();
    let rows = lines
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            assert_eq!(
                cells.len(),
                header.len(),
                "row {line:?} of {}",
                path.display()
            );
            header
                .iter()
                .cloned()
                .zip(cells.into_iter().map(str::to_owned))
                .collect()
        })
        .collect();
    (header, rows)
}

fn num(row: &HashMap<String, String>, column: &str) -> f64 {
    row[column]
        .parse()
        .unwrap_or_else(|e| panic!("{column} = {:?}: {e}", row[column]))
}

#[test]
fn compare_runs_end_to_end_and_writes_every_output() {
    let scratch = Scratch::new("bench-compare");
    let out_dir = scratch.0.join("out");
    // An earlier run's files: its own must go, anything else must stay.
    std::fs::create_dir_all(out_dir.join("service")).unwrap();
    for stale in ["report.md", "cost.svg", "service/worker-7.log", "keep.txt"] {
        std::fs::write(out_dir.join(stale), "from an earlier run").unwrap();
    }
    let output = mcq()
        .current_dir(&scratch.0)
        .args([
            "bench",
            "compare",
            "--calls",
            "3",
            "--runs",
            "2e4",
            "--sweep-runs",
            "2_000",
            "--trials",
            "2",
        ])
        .args([
            "--platforms",
            "local-1,local-all,service",
            "--workers",
            "1",
            // Long polls of the batch, answered when it is done.
            "--wait-ms",
            "500",
            "--seed",
            "7",
            "--cost-local",
            "0.03",
            "--cost-cloud",
            "0.05,granularity=1min",
        ])
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run mcq bench compare");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "mcq bench compare failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for platform in ["local-1", "local-all", "service"] {
        assert!(
            stdout.contains(platform),
            "the table does not list {platform}:\n{stdout}"
        );
    }

    // Every trial: 2 levels × 2 trials × 3 platforms.
    let (header, trials) = read_csv(&out_dir.join("trials.csv"));
    for column in [
        "platform",
        "runs",
        "trial",
        "cold",
        "calls",
        "slots",
        "wall_ms",
        "compute_ms",
        "overhead_per_job_ms",
    ] {
        assert!(
            header.iter().any(|h| h == column),
            "trials.csv lacks {column}: {header:?}"
        );
    }
    assert_eq!(trials.len(), 12);
    for row in &trials {
        assert!(
            num(row, "wall_ms") > 0.0 && num(row, "compute_ms") > 0.0,
            "{row:?}"
        );
        assert_eq!(row["cold"], (row["trial"] == "1").to_string());
    }

    // Every job, and its breakdown.
    let (header, jobs) = read_csv(&out_dir.join("jobs.csv"));
    for column in [
        "platform",
        "job_id",
        "price",
        "queue_wait_ms",
        "compute_ms",
        "dispatch_ms",
        "result_latency_ms",
        "end_to_end_ms",
    ] {
        assert!(
            header.iter().any(|h| h == column),
            "jobs.csv lacks {column}: {header:?}"
        );
    }
    assert_eq!(jobs.len(), 36);
    // Identities between derived columns hold to rounding; comparisons of a
    // server timestamp with the client's clock or with a measured duration
    // hold to the timestamps' resolution (SQLite stores milliseconds).
    let rounding = 1e-6;
    let resolution = 1.0;
    let service: Vec<_> = jobs.iter().filter(|j| j["platform"] == "service").collect();
    assert_eq!(service.len(), 12);
    for job in &service {
        assert!(!job["job_id"].is_empty());
        let (submitted, started, finished, seen) = (
            num(job, "submitted_ms"),
            num(job, "started_ms"),
            num(job, "finished_ms"),
            num(job, "seen_ms"),
        );
        assert!(
            submitted >= -resolution,
            "submitted before the client sent the batch: {job:?}"
        );
        assert!(
            submitted <= started && started <= finished && finished <= seen,
            "timestamps out of order: {job:?}"
        );
        let (queue, compute, dispatch, latency) = (
            num(job, "queue_wait_ms"),
            num(job, "compute_ms"),
            num(job, "dispatch_ms"),
            num(job, "result_latency_ms"),
        );
        assert!((queue - (started - submitted)).abs() <= rounding, "{job:?}");
        // The server's own queue wait agrees with its timestamps.
        assert!(
            (num(job, "server_queue_wait_ms") - queue).abs() <= resolution,
            "{job:?}"
        );
        assert!((latency - (seen - finished)).abs() <= rounding, "{job:?}");
        // 20,000 paths are one task: its kernel time fits between claim and result.
        assert!(
            compute > 0.0 && compute <= finished - started + resolution,
            "compute outside its span: {job:?}"
        );
        assert!(dispatch >= -resolution, "{job:?}");
        let e2e = num(job, "end_to_end_ms");
        assert!(
            (queue + compute + dispatch + latency - e2e).abs() <= rounding,
            "parts do not add up: {job:?}"
        );
        assert!((e2e - (seen - submitted)).abs() <= rounding, "{job:?}");
        // The measured phases of the job, in order, from submission to the
        // recorded result (all the server's timestamps, on one clock).
        assert_eq!(job["phases_measured"], "true", "{job:?}");
        let phases = [
            "submitted_ms",
            "claimed_ms",
            "compute_started_ms",
            "compute_finished_ms",
            "recorded_ms",
        ]
        .map(|column| num(job, column));
        assert!(phases.is_sorted(), "phases out of order: {job:?}");
        assert_eq!(phases[4], finished, "recorded is the finish: {job:?}");
        assert!(
            (num(job, "claim_ms") - (phases[2] - phases[1])).abs() <= rounding
                && (num(job, "record_ms") - (phases[4] - phases[3])).abs() <= rounding,
            "{job:?}"
        );
    }
    // Same seeds on every platform: the same prices. The contract is bit for
    // bit, but the worker's path currently differs from `ValidSpec::price`
    // in the last bit for some calls (reported in `price_mismatches_vs_local_1`
    // and docs/bench.md); here we insist on agreement to rounding only.
    for job in &jobs {
        let reference = jobs
            .iter()
            .find(|r| {
                r["platform"] == "local-1"
                    && r["runs"] == job["runs"]
                    && r["trial"] == job["trial"]
                    && r["index"] == job["index"]
            })
            .unwrap();
        let (price, expected) = (num(job, "price"), num(reference, "price"));
        assert!(
            (price - expected).abs() <= 1e-12 * expected.abs(),
            "{job:?} vs {reference:?}"
        );
    }

    // The summary.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["settings"]["calls"], 3);
    assert_eq!(
        summary["settings"]["levels"],
        serde_json::json!([2000, 20000])
    );
    let levels = summary["levels"].as_array().expect("levels");
    assert_eq!(levels.len(), 6);
    for level in levels {
        for field in [
            "platform",
            "runs",
            "slots",
            "cold_wall_ms",
            "wall_ms",
            "speedup_vs_local_1",
            "efficiency_vs_local_all",
            "efficiency_paired_vs_local_all",
            "overhead_per_job_ms",
            "jobs",
        ] {
            assert!(
                level.get(field).is_some(),
                "summary level lacks {field}: {level}"
            );
        }
        assert!(level["price_mismatches_vs_local_1"].is_u64(), "{level}");
    }
    let break_even = &summary["break_even"];
    assert_eq!(break_even["points"].as_array().map(Vec::len), Some(2));
    assert!(
        break_even["service_beats_local_1"]["kind"].is_string(),
        "{break_even}"
    );

    // The charts.
    for name in ["wall-per-trial", "job-breakdown", "break-even"] {
        let png = std::fs::read(out_dir.join(format!("{name}.png"))).unwrap();
        assert!(
            png.len() > 1000 && png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{name}.png is not a PNG"
        );
        let svg = std::fs::read_to_string(out_dir.join(format!("{name}.svg"))).unwrap();
        let root = svg.trim_start().trim_start_matches(|c| c != '<');
        assert!(
            root.starts_with("<svg") || root.starts_with("<?xml"),
            "{name}.svg: {}",
            &svg[..svg.len().min(80)]
        );
        assert!(
            svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
            "{name}.svg is not an SVG document"
        );
        assert!(svg.contains("<text"), "{name}.svg has no text");
    }
    for file in summary["files"].as_array().unwrap() {
        assert!(
            out_dir.join(file.as_str().unwrap()).exists(),
            "{file} listed but missing"
        );
    }
    // The folder holds exactly the listed files, plus the file that is not ours.
    let mut present = Vec::new();
    for entry in std::fs::read_dir(&out_dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            for inner in std::fs::read_dir(entry.path()).unwrap() {
                present.push(format!(
                    "{name}/{}",
                    inner.unwrap().file_name().to_string_lossy()
                ));
            }
        } else if name != "keep.txt" {
            present.push(name);
        }
    }
    present.sort();
    let listed: Vec<String> = summary["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(present, listed);
    assert!(!out_dir.join("service/worker-7.log").exists());
    assert!(out_dir.join("keep.txt").exists());

    // The environment record, the cost and the intervals.
    let env = &summary["environment"];
    for field in [
        "cpu_model",
        "cores",
        "kernel",
        "mcq_version",
        "mcq_commit",
        "link_db",
    ] {
        assert!(!env[field].is_null(), "environment lacks {field}: {env}");
    }
    assert!(
        env["backend_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("SQLite 3.")),
        "{env}"
    );
    assert!(summary["warnings"].is_array());
    let service = levels.iter().find(|l| l["platform"] == "service").unwrap();
    let ci = &service["wall_p50_interval_ms"];
    assert!(
        ci["low"].as_f64().unwrap() <= ci["high"].as_f64().unwrap(),
        "{ci}"
    );
    // One warm trial: an interval of one point that covers nothing, and a warning.
    assert_eq!(ci["confidence"], 0.0);
    assert!(stdout.contains("WARNING: too few warm trials"), "{stdout}");
    let cost = &summary["cost"];
    assert_eq!(cost["model"]["cloud_granularity_s"], 60.0);
    assert_eq!(cost["rows"].as_array().map(Vec::len), Some(6));
    // The cost break-even carries its bootstrap interval, as the time one does.
    assert_eq!(
        cost["service_cheaper_than_local_1"]["runs_interval"]["method"], "bootstrap",
        "{cost}"
    );
    assert!(stdout.contains("cost per batch"), "{stdout}");
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    for part in [
        "| platform |",
        "## Environment",
        "SQLite 3.",
        "## Cost",
        "](break-even.svg)",
    ] {
        assert!(report.contains(part), "report.md lacks {part:?}:\n{report}");
    }
}

#[test]
fn bad_flags_are_rejected_with_a_clear_message() {
    for (args, expected) in [
        (&["--runs", "1.5"][..], "whole number"),
        (&["--runs", "abc"][..], "not a count"),
        (&["--platforms", "gpu"][..], "unknown platform"),
        (&["--calls", "0"][..], "calls"),
        (
            &["--server", "http://x", "--workers", "2"][..],
            "cannot be used with",
        ),
        (&["--poll-ms", "NaN"][..], "poll-ms"),
        (&["--wait-ms", "NaN"][..], "wait-ms"),
        (&["--wait-ms=-5"][..], "wait-ms"),
        (&["--wait-ms", "61000"][..], "wait-ms"),
        (&["--cost-local", "0.03"][..], "--cost-cloud"),
        (&["--link", "moon"][..], "unknown link profile"),
        (&["--link", "same-az,moon"][..], "unknown link profile"),
        (
            &["--link", "same-az", "--link", "loopback,same-az"][..],
            "given twice",
        ),
        (&["--preset", "1999"][..], "2010"),
        (
            &["--preset", "2010", "--calls", "3"][..],
            "cannot be used with",
        ),
        (&["--link-client", "rtt=5"][..], "needs a unit"),
        (
            &["--link-db", "cross-az"][..],
            "--link-db needs --database-url",
        ),
        (
            &["--link", "cross-az", "--link-db", "same-az"][..],
            "cannot be used with",
        ),
        (
            &[
                "--cost-local",
                "0.03",
                "--cost-cloud",
                "0.05,granularity=2h",
            ][..],
            "1s, 1min or 1h",
        ),
    ] {
        let output = mcq()
            .args(["bench", "compare"])
            .args(args)
            .output()
            .expect("run mcq");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in\n{stderr}"
        );
    }
}

#[test]
fn a_client_link_adds_its_round_trips_to_every_service_trial() {
    let scratch = Scratch::new("bench-link");
    let out_dir = scratch.0.join("out");
    let output = mcq()
        .current_dir(&scratch.0)
        .args([
            "bench", "compare", "--calls", "2", "--runs", "1e3", "--trials", "2",
        ])
        .args([
            "--platforms",
            "service",
            "--workers",
            "1",
            "--wait-ms",
            "500",
        ])
        .args(["--link", "rtt=50ms"])
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run mcq bench compare");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let (_, trials) = read_csv(&out_dir.join("trials.csv"));
    assert_eq!(trials.len(), 2);
    // A trial is at least a submit and one poll, each a round trip of the
    // link: 100 ms is a floor no loaded machine can undercut.
    for row in &trials {
        assert!(num(row, "wall_ms") >= 100.0, "{row:?}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    let env = &summary["environment"];
    assert!(
        env["link_client"].as_str().unwrap().contains("rtt 50 ms"),
        "{env}"
    );
    assert!(
        env["link_db"].as_str().unwrap().starts_with("in-process"),
        "{env}"
    );
}

#[test]
fn several_links_give_one_run_each_and_the_break_even_against_rtt() {
    let scratch = Scratch::new("bench-links");
    let out_dir = scratch.0.join("out");
    let output = mcq()
        .current_dir(&scratch.0)
        .args(["bench", "compare", "--calls", "2", "--runs", "1e3"])
        .args(["--sweep-runs", "1e4", "--trials", "2", "--workers", "1"])
        .args(["--threads", "1", "--wait-ms", "500"])
        .args(["--cost-local", "0.04", "--cost-cloud", "0.02"])
        .args(["--link", "rtt=20ms", "--link", "loopback"])
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run mcq bench compare");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let read = |path: PathBuf| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let sweep = read(out_dir.join("links.json"));
    let links = sweep["links"].as_array().unwrap();
    // Sorted by RTT, each with its own complete run.
    let names: Vec<&str> = links
        .iter()
        .map(|l| l["profile"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["loopback", "custom"]);
    for link in links {
        let dir = link["dir"].as_str().unwrap();
        let summary = read(out_dir.join(dir).join("summary.json"));
        // The sweep's crossings are the run's own, to the last digit.
        for mark in [
            "service_beats_local_1",
            "service_reaches_90pct_of_local_all",
        ] {
            assert_eq!(link[mark], summary["break_even"][mark], "{dir} {mark}");
        }
        assert_eq!(
            link["service_cheaper_than_local_1"], summary["cost"]["service_cheaper_than_local_1"],
            "{dir}"
        );
        let env = &summary["environment"];
        let expected = if dir == "loopback" {
            "loopback"
        } else {
            "rtt 20 ms"
        };
        assert!(
            env["link_client"].as_str().unwrap().contains(expected),
            "{dir}: {env}"
        );
        let (_, trials) = read_csv(&out_dir.join(dir).join("trials.csv"));
        assert_eq!(trials.len(), 2 * 2 * 3, "{dir}");
    }
    let mut files: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let listed: Vec<&str> = sweep["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(files, listed);
    for chart in ["break-even-rtt", "speedup-by-link"] {
        assert!(
            listed.contains(&format!("{chart}.png").as_str()),
            "{listed:?}"
        );
    }
    let (_, rows) = read_csv(&out_dir.join("links.csv"));
    assert_eq!(rows.len(), 2 * 3);
    assert!(stdout.contains("| custom | 20 |"), "{stdout}");
}
