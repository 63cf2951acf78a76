//! `report.md`: the run's tables, warnings, environment and charts as one
//! Markdown page, ready to paste into a paper's notes or an issue.

use std::fmt::Write;

use crate::output::Summary;
use crate::table;

/// Renders the report of `summary`; `charts` are the SVG files written.
pub(crate) fn render(summary: &Summary, charts: &[String]) -> String {
    let s = &summary.settings;
    let e = &summary.environment;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# mcq bench compare: {} calls × {} runs\n",
        s.calls, s.runs
    );
    let _ = writeln!(
        out,
        "{}; link workers ↔ database: {}, client ↔ API: {}. Finished {}.\n",
        e.backend_version.as_deref().unwrap_or(&e.backend),
        e.link_db,
        e.link_client,
        summary.finished_at.format("%Y-%m-%d %H:%M UTC")
    );
    if !summary.warnings.is_empty() {
        out.push_str("## Warnings\n\n");
        for w in &summary.warnings {
            let _ = writeln!(out, "- **WARNING**: {w}");
        }
        out.push('\n');
    }
    out.push_str("## Results\n\n");
    let _ = writeln!(
        out,
        "{} trials per platform and level, the first cold; platforms shuffled every round \
         (seed {}). Brackets hold 95% intervals: order statistics for medians, a \
         fixed-seed bootstrap for ratios.\n",
        s.trials, s.seed
    );
    out.push_str(&table::render_markdown(&summary.levels));
    if let Some(analysis) = &summary.break_even {
        out.push_str("\n## Break-even\n\n");
        for line in table::render_break_even(analysis).lines() {
            let _ = writeln!(out, "- {line}");
        }
    }
    if let Some(cost) = &summary.cost {
        out.push_str("\n## Cost\n\n");
        out.push_str(&crate::cost::render_markdown(cost));
    }
    out.push_str("\n## Environment\n\n| what | value |\n|---|---|\n");
    out.push_str(&e.markdown_rows());
    let _ = writeln!(
        out,
        "| settings | --calls {} --runs {} --trials {} --seed {}, levels {:?}, local-all {} threads, service {} |",
        s.calls,
        s.runs,
        s.trials,
        s.seed,
        s.levels,
        s.local_all_threads,
        s.service.as_deref().unwrap_or("not run")
    );
    if !charts.is_empty() {
        out.push_str("\n## Charts\n\n");
        for chart in charts {
            let _ = writeln!(out, "![{chart}]({chart})\n");
        }
    }
    out
}
