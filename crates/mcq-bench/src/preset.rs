//! `--preset 2010`: the grid of the 2010 experiment (100 calls, 1M paths
//! per call and heavier, `local-1`, `local-all` and the service, 10 trials
//! with the first cold), measured with the service on loopback and over
//! the `wan-2010` link, and one table placing today's figures beside the
//! shape of the 2010 result.

use std::fmt::Write;

use crate::analysis::LevelSummary;
use crate::interval::Interval;
use crate::platform::Platform;
use crate::table::{interval_by, sig};

/// Calls per batch in 2010.
pub const CALLS: u32 = 100;
/// Paths per call: the light level of 2010 and a heavier one.
pub const LEVELS: [u64; 2] = [1_000_000, 10_000_000];
/// Trials per platform and level, the first cold.
pub const TRIALS: u32 = 10;

/// What 2010 found at a level, in words.
fn shape_2010(runs: u64) -> &'static str {
    match runs {
        1_000_000 => "cloud lost to the local loop (fixed overhead per request)",
        10_000_000 => "cloud beat the local loop by ≈ 200 s per batch",
        100_000_000 => "cloud beat the local loop",
        _ => "-",
    }
}

/// Whether the service beats `local-1`, judged by the speedup's interval.
fn verdict(service: Option<&LevelSummary>) -> &'static str {
    let Some(ci) = service.and_then(|s| s.speedup_interval) else {
        return "-";
    };
    if ci.low > 1.0 {
        "service wins"
    } else if ci.high < 1.0 {
        "service loses"
    } else {
        "cannot tell"
    }
}

fn find(levels: &[LevelSummary], platform: Platform, runs: u64) -> Option<&LevelSummary> {
    levels
        .iter()
        .find(|l| l.platform == platform && l.runs == runs)
}

fn wall(level: Option<&LevelSummary>) -> String {
    let scaled = |ci: Option<Interval>| ci.map(|c| c.scaled(1e-3));
    interval_by(
        level.and_then(|l| l.wall_ms.map(|s| s.p50 / 1e3)),
        level.and_then(|l| scaled(l.wall_p50_interval_ms)),
        sig,
    )
}

/// The comparison table in Markdown: per level, the median warm wall of
/// each platform with its 95% interval (local platforms from the loopback
/// run), the verdict on each link, and what 2010 saw.
pub fn table(loopback: &[LevelSummary], wan: &[LevelSummary]) -> String {
    let mut runs: Vec<u64> = loopback.iter().chain(wan).map(|l| l.runs).collect();
    runs.sort_unstable();
    runs.dedup();
    let mut out = String::from(
        "| runs per call | local-1 s | local-all s | service, loopback s | service, wan-2010 s \
         | today, loopback | today, wan-2010 | 2010 |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let service_lo = find(loopback, Platform::Service, r);
        let service_wan = find(wan, Platform::Service, r);
        let _ = writeln!(
            out,
            "| {r} | {} | {} | {} | {} | {} | {} | {} |",
            wall(find(loopback, Platform::Local1, r)),
            wall(find(loopback, Platform::LocalAll, r)),
            wall(service_lo),
            wall(service_wan),
            verdict(service_lo),
            verdict(service_wan),
            shape_2010(r)
        );
    }
    out.push_str(
        "\n\"wins\" and \"loses\" compare the service with local-1 (the 2010 local loop) and \
         hold only when the speedup's whole 95% interval lies above or below 1.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::summarise;
    use crate::record::TrialRecord;

    fn trials(service_extra_ms: f64) -> Vec<TrialRecord> {
        let mut out = Vec::new();
        for runs in LEVELS {
            for trial in 1..=TRIALS {
                let wobble = 1.0 + 0.01 * f64::from(trial % 3);
                let local = runs as f64 * 2e-4 * wobble;
                for (platform, slots, wall_ms) in [
                    (Platform::Local1, 1, local),
                    (Platform::LocalAll, 2, local / 2.0),
                    (
                        Platform::Service,
                        2,
                        local / 2.0 + service_extra_ms * wobble,
                    ),
                ] {
                    out.push(TrialRecord {
                        calls: CALLS,
                        succeeded: CALLS,
                        ..TrialRecord::timed(platform, runs, trial, slots, wall_ms)
                    });
                }
            }
        }
        out
    }

    #[test]
    fn the_table_puts_today_beside_2010() {
        // local-1 at 1M: 200 ms. Loopback service: +10 ms, so it wins at
        // both levels; over the WAN: +500 ms, losing at 1M (600 vs 200 ms)
        // and winning at 10M (1.5 s vs 2 s), the 2010 shape.
        let loopback = summarise(&trials(10.0), &[]);
        let wan = summarise(&trials(500.0), &[]);
        let text = table(&loopback, &wan);
        let row = |runs: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("| {runs} |")))
                .unwrap()
                .to_owned()
        };
        let light = row("1000000");
        assert!(
            light.contains("| service wins | service loses |"),
            "{light}"
        );
        assert!(light.contains("cloud lost"), "{light}");
        let heavy = row("10000000");
        assert!(heavy.contains("| service wins | service wins |"), "{heavy}");
        assert!(heavy.contains("≈ 200 s"), "{heavy}");
    }
}
