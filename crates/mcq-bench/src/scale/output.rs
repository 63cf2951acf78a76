//! The files of `mcq bench scale`: one CSV row per size, the JSON summary,
//! the chart and `report.md`, and the terminal table.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use super::ScaleSummary;
use crate::chart::{self, ScaleChart, ScaleCpuChart};
use crate::output::{REPORT_MD, list_files, write_csv, write_json};

/// One row per size.
pub const SCALE_CSV: &str = "scale.csv";
/// The summary.
pub const SCALE_JSON: &str = "scale.json";
/// Base name of the chart (`.png` and `.svg`).
pub const SCALE_CHART: &str = "scale-throughput";
/// Base name of the chart of the database's CPU per task.
pub const SCALE_CPU_CHART: &str = "scale-cpu";

fn ours() -> [String; 7] {
    [
        SCALE_CSV.to_owned(),
        SCALE_JSON.to_owned(),
        REPORT_MD.to_owned(),
        format!("{SCALE_CHART}.png"),
        format!("{SCALE_CHART}.svg"),
        format!("{SCALE_CPU_CHART}.png"),
        format!("{SCALE_CPU_CHART}.svg"),
    ]
}

/// Removes an earlier run's files (only the names this command writes).
pub(crate) fn remove_stale(dir: &Path) -> anyhow::Result<()> {
    for name in ours() {
        let path = dir.join(name);
        if path.is_file() {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// Writes every file into `dir` and records their names in `summary`.
pub(crate) fn write(summary: &mut ScaleSummary, dir: &Path) -> anyhow::Result<()> {
    write_csv(&dir.join(SCALE_CSV), &summary.sizes)?;
    let e = &summary.environment;
    let context = format!(
        "{}, link workers ↔ database: {}, {} cores",
        e.backend_version.as_deref().unwrap_or(&e.backend),
        e.link_db,
        e.cores
    );
    let [_, svg] = chart::save(
        &ScaleChart {
            rows: &summary.sizes,
            context: context.clone(),
        },
        dir,
        SCALE_CHART,
    )?;
    let [_, cpu_svg] = chart::save(
        &ScaleCpuChart {
            rows: &summary.sizes,
            context,
        },
        dir,
        SCALE_CPU_CHART,
    )?;
    std::fs::write(dir.join(REPORT_MD), report(summary, &[svg, cpu_svg]))
        .with_context(|| format!("writing {REPORT_MD}"))?;
    // The JSON is written last, listing itself, so that the list matches the folder.
    let mut files: Vec<String> = list_files(dir)?
        .into_iter()
        .filter(|f| ours().contains(f))
        .collect();
    if !files.iter().any(|f| f == SCALE_JSON) {
        files.push(SCALE_JSON.to_owned());
        files.sort();
    }
    summary.files = files;
    write_json(&dir.join(SCALE_JSON), summary)
}

fn opt(value: Option<f64>, digits: usize) -> String {
    value.map_or("–".to_owned(), |v| format!("{v:.digits$}"))
}

/// A 95% interval in milliseconds: both ends, only the lower one (too
/// few samples for an upper end), or none.
fn span(low: Option<f64>, high: Option<f64>) -> String {
    match (low, high) {
        (Some(low), Some(high)) => format!("{low:.1}–{high:.1}"),
        (Some(low), None) => format!("≥ {low:.1}"),
        _ => "–".to_owned(),
    }
}

/// The table's rows as cells.
fn cells(summary: &ScaleSummary) -> Vec<[String; 25]> {
    summary
        .sizes
        .iter()
        .map(|r| {
            [
                r.workers.to_string(),
                r.tasks.to_string(),
                format!("{:.0}", r.ideal_per_s),
                format!("{:.0}", r.throughput_per_s),
                format!("{:.1}%", r.efficiency * 100.0),
                opt(r.pickup_p50_ms, 2),
                opt(r.pickup_p99_ms, 1),
                opt(r.visible_p50_ms, 2),
                opt(r.visible_p99_ms, 1),
                span(r.visible_p99_low_ms, r.visible_p99_high_ms),
                opt(r.db_cpu_per_task_us, 0),
                opt(r.floor_db_cpu_per_task_us, 0),
                opt(r.db_cpu_ratio, 2),
                r.floor_efficiency
                    .map_or("–".to_owned(), |e| format!("{:.1}%", e * 100.0)),
                opt(r.floor_visible_p50_ms, 2),
                opt(r.floor_visible_p99_ms, 1),
                span(r.floor_visible_p99_low_ms, r.floor_visible_p99_high_ms),
                opt(r.db_cores, 2),
                opt(r.bench_cores, 2),
                opt(r.other_cores, 2),
                r.db_connections.to_string(),
                opt(r.warm_up_db_ms_per_worker, 1),
                opt(r.idle_pickup_p50_ms, 2),
                opt(r.idle_db_ms_per_job, 2),
                r.contended.to_string(),
            ]
        })
        .collect()
}

const HEADERS: [&str; 25] = [
    "workers",
    "tasks",
    "ideal/s",
    "tasks/s",
    "of ideal",
    "pickup p50 ms",
    "pickup p99 ms",
    "visible p50 ms",
    "visible p99 ms",
    "p99 95% interval",
    "DB CPU µs/task",
    "floor µs/task",
    "ratio",
    "floor of ideal",
    "floor visible p50 ms",
    "floor visible p99 ms",
    "floor p99 95% interval",
    "DB cores",
    "fleet cores",
    "other cores",
    "connections",
    "warm-up DB ms/worker",
    "idle pickup p50 ms",
    "idle DB ms/job",
    "contended claims",
];

/// The terminal table, with the saturation line below.
pub(crate) fn table(summary: &ScaleSummary) -> String {
    let rows = cells(summary);
    let widths: Vec<usize> = (0..HEADERS.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([HEADERS[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned() + "\n"
    };
    let mut out = line(&HEADERS.map(str::to_owned));
    for row in &rows {
        out.push_str(&line(row));
    }
    let _ = writeln!(out, "\n{}", summary.saturation.explanation);
    out
}

fn report(summary: &ScaleSummary, charts: &[String]) -> String {
    let s = &summary.settings;
    let e = &summary.environment;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# mcq bench scale: {} ms tasks, {} slot(s) per worker\n",
        s.task_ms, s.slots
    );
    let _ = writeln!(
        out,
        "{}; link workers ↔ database: {}. Finished {}.\n",
        e.backend_version.as_deref().unwrap_or(&e.backend),
        e.link_db,
        summary.finished_at.format("%Y-%m-%d %H:%M UTC")
    );
    for w in &summary.warnings {
        let _ = writeln!(out, "- **WARNING**: {w}");
    }
    out.push_str("## Results\n\n");
    let _ = writeln!(out, "| {} |", HEADERS.join(" | "));
    let _ = writeln!(out, "|{}", "---:|".repeat(HEADERS.len()));
    for row in cells(summary) {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    let _ = writeln!(out, "\n{}\n", summary.saturation.explanation);
    out.push_str("## Environment\n\n| what | value |\n|---|---|\n");
    out.push_str(&e.markdown_rows());
    let _ = writeln!(
        out,
        "| settings | sizes {:?}, {} slot(s), {} ms tasks, {} rounds, pool {} per worker ({} mode, {}), poll {} ms, prefetch {} ms, seed {}, minimal queue {} |",
        s.sizes,
        s.slots,
        s.task_ms,
        s.rounds,
        s.pool_size,
        s.pool_mode,
        if s.through_pooler {
            "through a pooler"
        } else {
            "direct"
        },
        s.poll_ms,
        s.prefetch_ms,
        s.seed,
        if s.floor {
            "beside each size"
        } else {
            "not run"
        }
    );
    out.push_str("\n## Charts\n");
    for svg in charts {
        let _ = writeln!(out, "\n![{svg}]({svg})");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::span;

    #[test]
    fn an_interval_shows_the_ends_the_sample_gives() {
        assert_eq!(span(Some(2.04), Some(13.96)), "2.0–14.0");
        assert_eq!(span(Some(2.04), None), "≥ 2.0");
        assert_eq!(span(None, None), "–");
    }
}
