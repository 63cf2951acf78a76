//! The break-even plot of `--sweep-runs`: batch wall time against paths per
//! call, per platform, on log-log axes, with the two crossings marked.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    Chart, FAMILY, LEGEND_WIDTH, Swatch, colour, draw_crossing_band, fail, header, legend, tint,
};
use crate::breakeven::{BreakEven, CrossingKind};
use crate::platform::Platform;

/// The sweep to draw.
#[derive(Debug)]
pub(crate) struct BreakEvenChart<'a> {
    /// The analysis.
    pub analysis: &'a BreakEven,
    /// Calls per batch, for the title.
    pub calls: u32,
    /// Backend and link, for the title.
    pub context: String,
}

impl Chart for BreakEvenChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let title = format!(
            "Break-even: wall time per batch of {} calls against paths per call",
            self.calls
        );
        let root = &header(root, &title, &self.context)?;
        let (width, _) = root.dim_in_pixel();
        let (plot, panel) = root.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
        let root = &plot;
        let points = &self.analysis.points;
        // (runs, median s, interval low s, interval high s) per platform.
        type Point = (f64, f64, f64, f64);
        let series: Vec<(Platform, Vec<Point>)> = Platform::ALL
            .into_iter()
            .map(|p| {
                let values = points
                    .iter()
                    .filter_map(|pt| {
                        let (ms, ci) = match p {
                            Platform::Local1 => (pt.local_1_ms, pt.local_1_interval_ms),
                            Platform::LocalAll => (pt.local_all_ms, pt.local_all_interval_ms),
                            Platform::Service => (pt.service_ms, pt.service_interval_ms),
                        };
                        let ms = ms.filter(|ms| *ms > 0.0)?;
                        let (lo, hi) = ci.map_or((ms, ms), |ci| (ci.low.max(ms * 1e-3), ci.high));
                        Some((pt.runs as f64, ms / 1e3, lo / 1e3, hi / 1e3))
                    })
                    .collect();
                (p, values)
            })
            .filter(|(_, v): &(Platform, Vec<Point>)| !v.is_empty())
            .collect();
        let all = series.iter().flat_map(|(_, v)| v.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, _, lo, hi) in all {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(lo), y1.max(hi));
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (1.0, 10.0, 0.001, 1.0);
        }
        // Log axes need a non-empty range; pad by a factor either side.
        let mut chart = ChartBuilder::on(root)
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (x0 / 1.5..x1 * 1.5).log_scale(),
                (y0 / 1.5..y1 * 1.5).log_scale(),
            )
            .map_err(fail("the break-even chart"))?;
        chart
            .configure_mesh()
            .x_desc("paths per call (runs)")
            .y_desc("median warm wall time per batch (s), 95% interval")
            .x_label_formatter(&|x| super::log_label(*x, |v| format!("{v:.0e}")))
            .y_label_formatter(&|y| super::log_label(*y, super::short))
            .label_style((FAMILY, 13))
            .axis_desc_style((FAMILY, 15))
            .draw()
            .map_err(fail("the break-even chart"))?;
        let mut entries = Vec::new();
        for (platform, values) in &series {
            let c = colour(*platform);
            // The line joins medians of one platform across levels, a
            // model of how its time grows with the work, not a trial order.
            chart
                .draw_series(LineSeries::new(
                    values.iter().map(|&(x, m, _, _)| (x, m)),
                    c.stroke_width(2),
                ))
                .map_err(fail("the break-even chart"))?;
            chart
                .draw_series(values.iter().flat_map(|&(x, _, lo, hi)| {
                    // A whisker with caps; on a log axis a cap is a fixed ratio wide.
                    let (left, right) = (x / 1.06, x * 1.06);
                    [
                        PathElement::new(vec![(x, lo), (x, hi)], c.stroke_width(2)),
                        PathElement::new(vec![(left, lo), (right, lo)], c.stroke_width(2)),
                        PathElement::new(vec![(left, hi), (right, hi)], c.stroke_width(2)),
                    ]
                }))
                .map_err(fail("the break-even chart"))?;
            chart
                .draw_series(
                    values
                        .iter()
                        .map(|&(x, m, _, _)| Circle::new((x, m), 4, c.filled())),
                )
                .map_err(fail("the break-even chart"))?;
            entries.push((Swatch::Line(c), platform.name().to_owned()));
        }
        let marks = [
            (
                self.analysis.service_beats_local_1,
                "service beats local-1",
                BLACK,
            ),
            (
                self.analysis.service_reaches_90pct_of_local_all,
                "service at 90% of local-all",
                RGBColor(148, 103, 189),
            ),
        ];
        for (i, (crossing, text, c)) in marks.into_iter().enumerate() {
            let Some(crossing) = crossing else { continue };
            let Some(runs) = crossing
                .runs
                .filter(|_| crossing.kind != CrossingKind::NotReached)
            else {
                continue;
            };
            let style = c.stroke_width(2);
            if let Some(ci) = crossing.runs_interval {
                draw_crossing_band(&mut chart, ci, c)?;
            }
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(runs, y0 / 1.5), (runs, y1 * 1.5)],
                    8,
                    6,
                    style,
                ))
                .map_err(fail("the break-even chart"))?;
            entries.push((Swatch::Dashed(c), format!("{text}:")));
            entries.push((
                Swatch::Block(tint(c, 0.15)),
                match crossing.compute_per_call_ms {
                    Some(ms) => format!("{runs:.0} runs ({ms:.3} ms/call)"),
                    None => format!("{runs:.0} runs"),
                },
            ));
            // Stagger the two labels so they do not overlap when the marks are close.
            let y = y1 * if i == 0 { 1.3 } else { 1.1 };
            // In the right half of the axis the label runs leftwards from
            // the mark, so it is never cut off at the plot's edge.
            let right_half = runs.ln() > ((x0 / 1.5).ln() + (x1 * 1.5).ln()) / 2.0;
            let (label, anchor) = if right_half {
                (format!("{text} "), Pos::new(HPos::Right, VPos::Top))
            } else {
                (format!(" {text}"), Pos::new(HPos::Left, VPos::Top))
            };
            chart
                .draw_series(std::iter::once(Text::new(
                    label,
                    (runs, y),
                    (FAMILY, 13).into_font().color(&c).pos(anchor),
                )))
                .map_err(fail("the break-even chart"))?;
        }
        entries.push((
            Swatch::Block(RGBColor(225, 225, 225)),
            "band: 95% interval".to_owned(),
        ));
        legend(&panel, &entries)
    }
}
