//! The warnings a comparison prints loudly: a machine too busy to measure
//! on, too few trials for a 95% interval, and platforms whose intervals
//! overlap so that the run cannot tell them apart.

use crate::analysis::LevelSummary;
use crate::environment::Environment;
use crate::interval::CONFIDENCE;

/// Every warning of a run, most serious first.
pub(crate) fn warnings(environment: &Environment, levels: &[LevelSummary]) -> Vec<String> {
    let mut out: Vec<String> = environment.busy_warning().into_iter().collect();
    let thin: Vec<&LevelSummary> = levels
        .iter()
        .filter(|l| {
            l.wall_p50_interval_ms
                .is_some_and(|ci| ci.confidence < CONFIDENCE)
        })
        .collect();
    if let Some(first) = thin.first() {
        let ci = first.wall_p50_interval_ms.map_or(0.0, |c| c.confidence);
        out.push(format!(
            "too few warm trials for a 95% interval of the median: {} warm trials give \
             {:.0}% ({} of {} platform-levels); use --trials 7 or more",
            first.wall_ms.map_or(0, |s| s.count),
            ci * 100.0,
            thin.len(),
            levels.len()
        ));
    }
    let mut runs: Vec<u64> = levels.iter().map(|l| l.runs).collect();
    runs.sort_unstable();
    runs.dedup();
    for r in runs {
        let at: Vec<&LevelSummary> = levels.iter().filter(|l| l.runs == r).collect();
        for (i, a) in at.iter().enumerate() {
            for b in &at[i + 1..] {
                if let (Some(x), Some(y)) = (a.wall_p50_interval_ms, b.wall_p50_interval_ms)
                    && x.overlaps(&y)
                {
                    out.push(format!(
                        "at {r} runs per call the 95% intervals of the median wall time of \
                         {} and {} overlap: this run cannot tell them apart \
                         (more trials or a quieter machine may)",
                        a.platform, b.platform
                    ));
                }
            }
        }
    }
    out
}

/// The warnings as loud lines for the terminal.
pub(crate) fn render(warnings: &[String]) -> String {
    warnings.iter().map(|w| format!("WARNING: {w}\n")).collect()
}
