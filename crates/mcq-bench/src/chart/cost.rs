//! Cost per batch against paths per call, per platform, on log-log axes,
//! with the 95% interval of each cost as a whisker and the cost
//! break-even marked over the band of its own interval.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    Chart, FAMILY, LEGEND_WIDTH, Swatch, colour, draw_crossing_band, fail, header, legend, tint,
};
use crate::breakeven::CrossingKind;
use crate::cost::CostSummary;
use crate::interval::Interval;
use crate::platform::Platform;

/// The costs to draw.
#[derive(Debug)]
pub(crate) struct CostChart<'a> {
    /// The cost analysis.
    pub cost: &'a CostSummary,
    /// Calls per batch, for the title.
    pub calls: u32,
    /// Backend and link, for the title.
    pub context: String,
}

impl Chart for CostChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let title = format!("Cost per batch of {} calls", self.calls);
        let root = &header(root, &title, &self.context)?;
        let (width, _) = root.dim_in_pixel();
        let (plot, panel) = root.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
        let rows = &self.cost.rows;
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for r in rows.iter().filter(|r| positive(r.per_batch)) {
            let (lo, hi) = r
                .per_batch_interval
                .map_or((r.per_batch, r.per_batch), |c| (c.low, c.high));
            let x = r.runs as f64;
            (x0, x1) = (x0.min(x), x1.max(x));
            (y0, y1) = (y0.min(lo.max(r.per_batch * 1e-3)), y1.max(hi));
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (1.0, 10.0, 1e-6, 1.0);
        }
        let m = &self.cost.model;
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(
                (x0 / 1.5..x1 * 1.5).log_scale(),
                (y0 / 1.5..y1 * 1.5).log_scale(),
            )
            .map_err(fail("the cost chart"))?;
        chart
            .configure_mesh()
            .x_desc("paths per call (runs)")
            .y_desc("cost per batch (price units), 95% interval")
            .x_label_formatter(&|x| super::log_label(*x, |v| format!("{v:.0e}")))
            .y_label_formatter(&|y| super::log_label(*y, |v| format!("{v:.0e}")))
            .label_style((FAMILY, 13))
            .axis_desc_style((FAMILY, 15))
            .draw()
            .map_err(fail("the cost chart"))?;
        let mut entries = Vec::new();
        for platform in Platform::ALL {
            let mine: Vec<_> = rows
                .iter()
                .filter(|r| r.platform == platform && positive(r.per_batch))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let c = colour(platform);
            chart
                .draw_series(LineSeries::new(
                    mine.iter().map(|r| (r.runs as f64, r.per_batch)),
                    c.stroke_width(2),
                ))
                .map_err(fail("the cost chart"))?;
            chart
                .draw_series(mine.iter().filter_map(|r| {
                    let ci = r.per_batch_interval?;
                    let x = r.runs as f64;
                    Some(PathElement::new(
                        vec![(x, ci.low.max(r.per_batch * 1e-3)), (x, ci.high)],
                        c.stroke_width(2),
                    ))
                }))
                .map_err(fail("the cost chart"))?;
            chart
                .draw_series(
                    mine.iter()
                        .map(|r| Circle::new((r.runs as f64, r.per_batch), 4, c.filled())),
                )
                .map_err(fail("the cost chart"))?;
            entries.push((Swatch::Line(c), platform.name().to_owned()));
        }
        if let Some(crossing) = self.cost.service_cheaper_than_local_1
            && crossing.kind != CrossingKind::NotReached
            && let Some(runs) = crossing.runs
        {
            if let Some(ci) = crossing.runs_interval {
                draw_crossing_band(&mut chart, ci, BLACK)?;
            }
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(runs, y0 / 1.5), (runs, y1 * 1.5)],
                    8,
                    6,
                    BLACK.stroke_width(2),
                ))
                .map_err(fail("the cost chart"))?;
            entries.push((Swatch::Dashed(BLACK), "service cheaper than".to_owned()));
            entries.push((Swatch::Dashed(BLACK), format!("local-1: {runs:.0} runs")));
            if let Some(ci) = crossing.runs_interval {
                entries.push((
                    Swatch::Block(tint(BLACK, 0.15)),
                    "band: 95% interval,".to_owned(),
                ));
                entries.push((Swatch::Block(RGBColor(255, 255, 255)), band_text(ci)));
            }
        }
        entries.push((
            Swatch::Block(RGBColor(255, 255, 255)),
            format!("local {}/core-h", m.local_per_core_hour),
        ));
        entries.push((
            Swatch::Block(RGBColor(255, 255, 255)),
            format!(
                "cloud {}/core-h per {} s",
                m.cloud_per_core_hour, m.cloud_granularity_s
            ),
        ));
        legend(&panel, &entries)
    }
}

/// The ends of a crossing's interval for the legend, short enough for its
/// panel at any level (`5.4e3 to 1.2e5 runs`; `∞` when open above).
fn band_text(ci: Interval) -> String {
    let high = if ci.high.is_finite() {
        format!("{:.1e}", ci.high)
    } else {
        "∞".to_owned()
    };
    format!("{:.1e} to {high} runs", ci.low)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breakeven::Crossing;
    use crate::cost::{CostModel, CostRow};
    use crate::interval::Method;

    #[test]
    fn the_cost_break_even_is_drawn_over_the_band_of_its_interval() {
        let row = |platform, runs: u64, per_batch| CostRow {
            platform,
            runs,
            slots: 1,
            per_batch,
            per_batch_interval: None,
        };
        let cost = CostSummary {
            model: CostModel {
                local_per_core_hour: 0.04,
                cloud_per_core_hour: 0.05,
                cloud_granularity_s: 1.0,
            },
            rows: vec![
                row(Platform::Local1, 1_000, 1e-4),
                row(Platform::Local1, 100_000, 1e-2),
                row(Platform::Service, 1_000, 1e-3),
                row(Platform::Service, 100_000, 1e-3),
            ],
            service_cheaper_than_local_1: Some(Crossing {
                kind: CrossingKind::Interpolated,
                runs: Some(1e4),
                compute_per_call_ms: None,
                runs_interval: Some(Interval {
                    low: 5_400.0,
                    high: f64::INFINITY,
                    confidence: 0.95,
                    method: Method::Bootstrap,
                }),
            }),
        };
        let chart = CostChart {
            cost: &cost,
            calls: 10,
            context: "service: SQLite (embedded), link loopback".to_owned(),
        };
        super::super::register_font().unwrap();
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, chart.size()).into_drawing_area();
            root.fill(&WHITE).unwrap();
            chart.draw(&root).unwrap();
            root.present().unwrap();
        }
        assert!(svg.contains("band: 95% interval,"), "{svg}");
        assert!(svg.contains("5.4e3 to ∞ runs"), "{svg}");
        // The band: the only faint black rectangle, and a wide one, since
        // an interval open above runs to the axis' right edge.
        let band = svg
            .lines()
            .find(|l| l.contains("<rect") && l.contains(r##"opacity="0.08" fill="#000000""##))
            .unwrap_or_else(|| panic!("no band in {svg}"));
        let width: f64 = band
            .split("width=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("{band}"));
        assert!(width > 100.0, "{band}");
    }
}
