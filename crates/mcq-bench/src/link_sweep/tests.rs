use std::path::PathBuf;

use super::*;
use crate::analysis::summarise;
use crate::breakeven::{self, CrossingKind};
use crate::cost::{self, CostModel};
use crate::environment::Environment;
use crate::link::parse_link;
use crate::output::{Machine, Settings};
use crate::record::TrialRecord;

const CALLS: u32 = 20;
const LEVELS: [u64; 5] = [1_000, 10_000, 100_000, 1_000_000, 10_000_000];

/// A run over `link` shaped like the real thing: `local-1` takes 1 µs per
/// path, `local-all` half that, the service half that plus a fixed 50 ms
/// per batch and ten round trips of the link; each trial scattered ±5%.
fn run(link: &str) -> LinkRun {
    let profile = parse_link(link).unwrap();
    let fixed_ms = 50.0 + 10.0 * profile.rtt.as_secs_f64() * 1e3;
    let mut trials = Vec::new();
    for runs in LEVELS {
        let local_ms = f64::from(CALLS) * runs as f64 * 1e-3;
        for trial in 1..=9u32 {
            let noise = 1.0 + 0.05 * ((f64::from(trial) * 0.618).fract() - 0.5) * 2.0;
            for (platform, slots, wall_ms) in [
                (Platform::Local1, 1, local_ms),
                (Platform::LocalAll, 2, local_ms / 2.0),
                (Platform::Service, 2, local_ms / 2.0 + fixed_ms),
            ] {
                trials.push(TrialRecord {
                    calls: CALLS,
                    succeeded: CALLS,
                    compute_ms: local_ms,
                    ..TrialRecord::timed(platform, runs, trial, slots, wall_ms * noise)
                });
            }
        }
    }
    let levels = summarise(&trials, &[]);
    let model = CostModel {
        local_per_core_hour: 0.04,
        cloud_per_core_hour: 0.02,
        cloud_granularity_s: 1.0,
    };
    let summary = Summary {
        finished_at: chrono::Utc::now(),
        settings: Settings {
            calls: CALLS,
            runs: LEVELS[0],
            levels: LEVELS.to_vec(),
            trials: 9,
            platforms: Platform::ALL.to_vec(),
            seed: 1,
            local_all_threads: 2,
            service: None,
            poll_interval_ms: 5.0,
            poll_wait_ms: 1000.0,
        },
        machine: Machine::current(),
        environment: Environment::current(
            "SQLite (embedded)".to_owned(),
            None,
            "in-process".to_owned(),
            profile.to_string(),
        ),
        warnings: vec![format!("a warning of the {link} run")],
        break_even: Some(breakeven::analyse(&trials, &[])),
        cost: Some(cost::analyse(model, &levels, &trials)),
        levels,
        files: Vec::new(),
    };
    let dir = run_dirs(std::slice::from_ref(&profile)).unwrap().remove(0);
    LinkRun {
        profile,
        dir,
        summary,
    }
}

#[test]
fn crossings_move_with_the_rtt_and_match_each_run() {
    // Given out of order: the sweep sorts by RTT.
    let runs = [run("cross-region"), run("loopback"), run("same-az")];
    let sweep = analyse(&runs);
    let names: Vec<&str> = sweep
        .links
        .iter()
        .map(|p| p.profile.name.as_str())
        .collect();
    assert_eq!(names, ["loopback", "same-az", "cross-region"]);
    let beats: Vec<f64> = sweep
        .links
        .iter()
        .map(|p| {
            let c = p.service_beats_local_1.unwrap();
            assert_eq!(c.kind, CrossingKind::Interpolated, "{}", p.profile.name);
            c.runs.unwrap()
        })
        .collect();
    // Service and local-1 are equal where 10 µs·r = fixed: r = 5,000 on
    // loopback (50 ms), 5,500 at 0.5 ms RTT, 75,000 at 70 ms; the
    // interpolation on log(runs) stays between the levels around each.
    assert!((1_000.0..10_000.0).contains(&beats[0]), "{beats:?}");
    assert!(beats[0] < beats[1] && beats[1] < beats[2], "{beats:?}");
    assert!((10_000.0..100_000.0).contains(&beats[2]), "{beats:?}");
    // Each point is exactly its run's analysis, interval included.
    for p in &sweep.links {
        let own = runs.iter().find(|r| r.profile == p.profile).unwrap();
        let be = own.summary.break_even.as_ref().unwrap();
        assert_eq!(p.service_beats_local_1, be.service_beats_local_1);
        assert_eq!(
            p.service_reaches_90pct_of_local_all,
            be.service_reaches_90pct_of_local_all
        );
        assert_eq!(
            p.service_cheaper_than_local_1,
            own.summary
                .cost
                .as_ref()
                .unwrap()
                .service_cheaper_than_local_1
        );
        for crossing in [p.service_beats_local_1, p.service_cheaper_than_local_1] {
            let (r, ci) = crossing.and_then(|c| c.runs.zip(c.runs_interval)).unwrap();
            assert!(ci.low <= r && r <= ci.high, "{ci:?} around {r}");
        }
        assert_eq!(p.speedups.len(), LEVELS.len());
    }
    // 90% of local-all needs the fixed part at most 1/9 of the compute:
    // 10× further out than beating local-1.
    let ninety = sweep.links[0].service_reaches_90pct_of_local_all.unwrap();
    assert!(ninety.runs.unwrap() > beats[0] * 5.0, "{ninety:?}");
}

#[test]
fn the_sweep_writes_its_files_and_lists_exactly_them() {
    let dir = std::env::var_os("MCQ_BENCH_CHART_DIR").map_or_else(
        || std::env::temp_dir().join(format!("mcq-link-sweep-{}", std::process::id())),
        |d| PathBuf::from(d).join("links"),
    );
    std::fs::create_dir_all(&dir).unwrap();
    // An earlier sweep's chart and someone else's notes.
    std::fs::write(dir.join("break-even-rtt.png"), "old").unwrap();
    std::fs::write(dir.join("notes.txt"), "keep").unwrap();
    let runs = [run("loopback"), run("cross-az"), run("cross-region")];
    let report = write(&runs, &dir).unwrap();
    let mut expected: Vec<String> = LINK_CHARTS
        .iter()
        .flat_map(|c| [format!("{c}.png"), format!("{c}.svg")])
        .collect();
    expected.extend([LINKS_CSV, LINKS_JSON, LINKS_MD].map(str::to_owned));
    expected.sort();
    assert_eq!(report.sweep.files, expected);
    let mut on_disk = output::list_files(&dir).unwrap();
    on_disk.retain(|f| f != "notes.txt");
    assert_eq!(on_disk, expected);
    assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"keep");
    let png = std::fs::read(dir.join("break-even-rtt.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    let svg = std::fs::read_to_string(dir.join("speedup-by-link.svg")).unwrap();
    assert!(svg.contains("cross-region"), "the legend names every link");

    // The CSV: one row per link and mark, its numbers those of the JSON.
    let mut csv = csv::Reader::from_path(dir.join(LINKS_CSV)).unwrap();
    let rows: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 3 * 3);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(LINKS_JSON)).unwrap()).unwrap();
    let first = &json["links"][0]["service_beats_local_1"]["runs"];
    assert_eq!(rows[0][0].to_owned(), "loopback");
    assert_eq!(rows[0][5].to_owned(), "service_beats_local_1");
    assert_eq!(rows[0][7].parse::<f64>().unwrap(), first.as_f64().unwrap());
    assert_eq!(json["links"][2]["profile"]["rtt"], 70.0);
    // The cost break-even's interval sits in the CSV as the time ones' do.
    let cheaper = &json["links"][0]["service_cheaper_than_local_1"]["runs_interval"];
    assert_eq!(rows[2][5].to_owned(), "service_cheaper_than_local_1");
    assert_eq!(
        rows[2][8].parse::<f64>().unwrap(),
        cheaper["low"].as_f64().unwrap()
    );

    // The table says where each link's service wins, with the warnings.
    let md = std::fs::read_to_string(dir.join(LINKS_MD)).unwrap();
    assert!(md.contains(&report.table));
    let line = report
        .table
        .lines()
        .find(|l| l.starts_with("| cross-region | 70 |"))
        .unwrap();
    let runs_text = format!(
        "≈ {:.0} runs per call",
        report.sweep.links[2]
            .service_beats_local_1
            .unwrap()
            .runs
            .unwrap()
    );
    assert!(line.contains(&runs_text), "{line}");
    assert!(report.table.contains("a warning of the cross-az run"));
    if std::env::var_os("MCQ_BENCH_CHART_DIR").is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn run_folders_are_named_for_their_links_and_a_repeat_is_refused() {
    let profiles = ["loopback", "rtt=5ms", "wan-2010", "rtt=9ms"].map(|p| parse_link(p).unwrap());
    assert_eq!(
        run_dirs(&profiles).unwrap(),
        ["loopback", "custom-1", "wan-2010", "custom-2"]
    );
    let twice = ["same-az", "same-az"].map(|p| parse_link(p).unwrap());
    assert!(run_dirs(&twice).unwrap_err().contains("twice"));
}
