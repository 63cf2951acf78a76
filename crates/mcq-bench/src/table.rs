//! The terminal table printed at the end of a run.

use std::fmt::Write;

use crate::analysis::LevelSummary;
use crate::breakeven::{BreakEven, Crossing, CrossingKind};
use crate::interval::Interval;

fn num(value: Option<f64>, decimals: usize) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "-".to_owned(),
    }
}

/// `value` with four significant digits and no exponent for the
/// magnitudes of wall times in seconds (0.0004123, 12.35).
pub(crate) fn sig(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let digits = (3 - value.abs().log10().floor() as i32).max(0) as usize;
    format!("{value:.digits$}")
}

/// A value and its 95% interval: `1.234 [1.200, 1.300]`; an open upper
/// end prints as `∞`.
pub(crate) fn with_interval(value: Option<f64>, ci: Option<Interval>, decimals: usize) -> String {
    interval_by(value, ci, |v| format!("{v:.decimals$}"))
}

/// As [`with_interval`], each number written by `show`.
pub(crate) fn interval_by(
    value: Option<f64>,
    ci: Option<Interval>,
    show: impl Fn(f64) -> String,
) -> String {
    let Some(v) = value.filter(|v| v.is_finite()) else {
        return "-".to_owned();
    };
    match ci {
        Some(ci) => {
            let high = if ci.high.is_infinite() {
                "∞".to_owned()
            } else {
                show(ci.high)
            };
            format!("{} [{}, {high}]", show(v), show(ci.low))
        }
        None => show(v),
    }
}

fn cells(levels: &[LevelSummary]) -> ([&'static str; 14], Vec<[String; 14]>) {
    let header = [
        "platform",
        "runs",
        "slots",
        "cold s",
        "warm p50 s [95% CI]",
        "min s",
        "speedup [95% CI]",
        "eff vs all [95% CI]",
        "eff paired [95% CI]",
        "ovh/job ms",
        "queue p50",
        "dispatch p50",
        "latency p50",
        "same prices",
    ];
    let rows: Vec<[String; 14]> = levels
        .iter()
        .map(|l| {
            let p50 = |s: Option<crate::stats::Summary>| num(s.map(|s| s.p50), 2);
            [
                l.platform.to_string(),
                format!("{}", l.runs),
                l.slots.to_string(),
                interval_by(Some(l.cold_wall_ms / 1e3), None, sig),
                interval_by(
                    l.wall_ms.map(|s| s.p50 / 1e3),
                    l.wall_p50_interval_ms.map(|c| c.scaled(1e-3)),
                    sig,
                ),
                interval_by(l.wall_ms.map(|s| s.min / 1e3), None, sig),
                with_interval(l.speedup_vs_local_1, l.speedup_interval, 2),
                with_interval(l.efficiency_vs_local_all, l.efficiency_interval, 2),
                with_interval(
                    l.efficiency_paired_vs_local_all,
                    l.efficiency_paired_interval,
                    3,
                ),
                num(l.overhead_per_job_ms.map(|s| s.p50), 3),
                p50(l.jobs.queue_wait_ms),
                num(l.jobs.dispatch_ms.map(|s| s.p50), 3),
                p50(l.jobs.result_latency_ms),
                match l.price_mismatches_vs_local_1 {
                    None => "-".to_owned(),
                    Some(0) => "yes".to_owned(),
                    Some(n) => format!("NO ({n})"),
                },
            ]
        })
        .collect();
    (header, rows)
}

/// The table as Markdown, ready to paste.
pub(crate) fn render_markdown(levels: &[LevelSummary]) -> String {
    let (header, rows) = cells(levels);
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}\n", ["---|"; 14].concat()));
    for row in &rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// One row per platform and level: wall times, ratios, overhead and the
/// median of each part of a job's time.
pub(crate) fn render(levels: &[LevelSummary]) -> String {
    let (header, rows) = cells(levels);
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        for (i, (cell, w)) in cells.zip(widths).enumerate() {
            // Text left, numbers right: the first column is the only text one.
            let _ = if i == 0 {
                write!(out, "{cell:<w$}  ")
            } else {
                write!(out, "{cell:>w$}  ")
            };
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(&mut out, &mut header.iter().copied());
    for row in &rows {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    out
}

pub(crate) fn describe(crossing: Option<&Crossing>) -> String {
    match crossing {
        None => "not measured (needs the platforms to compare)".to_owned(),
        Some(c) => {
            let runs = c.runs.map_or("-".to_owned(), |r| format!("{r:.0}"));
            // The cost break-even knows no kernel time: say nothing then.
            let compute = c.compute_per_call_ms.filter(|ms| ms.is_finite());
            let ci = c.runs_interval.map_or(String::new(), |ci| {
                let high = if ci.high.is_infinite() {
                    "beyond the largest level".to_owned()
                } else {
                    format!("{:.0}", ci.high)
                };
                format!(", 95% CI [{:.0}, {high}]", ci.low)
            });
            match c.kind {
                CrossingKind::Interpolated => match compute {
                    Some(ms) => {
                        format!("≈ {runs} runs per call{ci} (≈ {ms:.3} ms of compute per call)")
                    }
                    None => format!("≈ {runs} runs per call{ci}"),
                },
                CrossingKind::AtOrBelowSmallest => match compute {
                    Some(ms) => {
                        format!("at or below the smallest level, {runs} runs ({ms:.3} ms per call)")
                    }
                    None => format!("at or below the smallest level, {runs} runs"),
                },
                CrossingKind::NotReached => "not reached at the largest level measured".to_owned(),
            }
        }
    }
}

/// The break-even lines printed after the table.
pub(crate) fn render_break_even(analysis: &BreakEven) -> String {
    format!(
        "break-even, service beats local-1: {}\nservice reaches 90% of local-all: {}\n",
        describe(analysis.service_beats_local_1.as_ref()),
        describe(analysis.service_reaches_90pct_of_local_all.as_ref())
    )
}
