//! The break-even plot of `--sweep-runs`: batch wall time against paths per
//! call, per platform, on log-log axes, with the two crossings marked.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Chart, FAMILY, colour, fail};
use crate::breakeven::{BreakEven, CrossingKind};
use crate::platform::Platform;

/// The sweep to draw.
#[derive(Debug)]
pub(crate) struct BreakEvenChart<'a> {
    /// The analysis.
    pub analysis: &'a BreakEven,
    /// Calls per batch, for the title.
    pub calls: u32,
}

impl Chart for BreakEvenChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let points = &self.analysis.points;
        let series: Vec<(Platform, Vec<(f64, f64)>)> = Platform::ALL
            .into_iter()
            .map(|p| {
                let values = points
                    .iter()
                    .filter_map(|pt| {
                        let ms = match p {
                            Platform::Local1 => pt.local_1_ms,
                            Platform::LocalAll => pt.local_all_ms,
                            Platform::Service => pt.service_ms,
                        }?;
                        (ms > 0.0).then_some((pt.runs as f64, ms / 1e3))
                    })
                    .collect();
                (p, values)
            })
            .filter(|(_, v): &(Platform, Vec<(f64, f64)>)| !v.is_empty())
            .collect();
        let all = series.iter().flat_map(|(_, v)| v.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in all {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (1.0, 10.0, 0.001, 1.0);
        }
        // Log axes need a non-empty range; pad by a factor either side.
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "Break-even: batch of {} calls, wall time vs paths per call",
                    self.calls
                ),
                (FAMILY, 22),
            )
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
            .y_desc("median warm wall time per batch (s)")
            .x_label_formatter(&|x| format!("{x:.0e}"))
            .y_label_formatter(&|y| super::short(*y))
            .label_style((FAMILY, 13))
            .axis_desc_style((FAMILY, 15))
            .draw()
            .map_err(fail("the break-even chart"))?;
        for (platform, values) in &series {
            let c = colour(*platform);
            chart
                .draw_series(LineSeries::new(values.clone(), c.stroke_width(2)))
                .map_err(fail("the break-even chart"))?
                .label(platform.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3))
                });
            chart
                .draw_series(values.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(fail("the break-even chart"))?;
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
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(runs, y0 / 1.5), (runs, y1 * 1.5)],
                    8,
                    6,
                    style,
                ))
                .map_err(fail("the break-even chart"))?
                .label(match crossing.compute_per_call_ms {
                    Some(ms) => format!("{text}: {runs:.0} runs ({ms:.3} ms/call)"),
                    None => format!("{text}: {runs:.0} runs"),
                })
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
            // Stagger the two labels so they do not overlap when the marks are close.
            let y = y1 * if i == 0 { 1.3 } else { 1.1 };
            chart
                .draw_series(std::iter::once(Text::new(
                    format!(" {text}"),
                    (runs, y),
                    (FAMILY, 13).into_font().color(&c),
                )))
                .map_err(fail("the break-even chart"))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FAMILY, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(fail("the break-even chart"))?;
        Ok(())
    }
}
