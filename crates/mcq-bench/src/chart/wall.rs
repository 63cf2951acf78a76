//! The distribution of wall times per platform at one level: every trial
//! as a dot (the cold one as a ring), the median as a bar and its 95%
//! interval as a band. Trials are independent measurements, so no line
//! joins them.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Chart, FAMILY, LEGEND_WIDTH, Swatch, colour, fail, header, headroom, legend};
use crate::interval::median_interval;
use crate::platform::Platform;
use crate::record::TrialRecord;
use crate::stats::median;

/// Wall time of every trial of one level, one column per platform.
#[derive(Debug)]
pub(crate) struct WallChart<'a> {
    /// Trials of the level to draw.
    pub trials: Vec<&'a TrialRecord>,
    /// Calls per batch (for the title).
    pub calls: u32,
    /// Paths per call (for the title).
    pub runs: u64,
    /// Backend and link, for the title.
    pub context: String,
}

/// A horizontal offset in [−0.15, 0.15] for the k-th dot of a column, so
/// equal times do not hide each other; the golden-ratio sequence spreads
/// any number of dots evenly and is the same on every run.
fn jitter(k: usize) -> f64 {
    ((k as f64 * 0.618_033_988_75).fract() - 0.5) * 0.3
}

impl Chart for WallChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let title = format!(
            "Wall time per batch: {} calls × {} runs",
            self.calls, self.runs
        );
        let root = &header(root, &title, &self.context)?;
        let (width, _) = root.dim_in_pixel();
        let (plot, panel) = root.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
        let columns: Vec<Platform> = Platform::ALL
            .into_iter()
            .filter(|p| self.trials.iter().any(|t| t.platform == *p))
            .collect();
        // Platforms far apart (a service over a slow link beside local
        // runs) get a panel each with its own axis from zero, so the
        // spread of the fast ones stays visible; otherwise one shared axis.
        let medians: Vec<f64> = columns
            .iter()
            .filter_map(|p| {
                let w: Vec<f64> = self
                    .trials
                    .iter()
                    .filter(|t| t.platform == *p)
                    .map(|t| t.wall_ms)
                    .collect();
                (!w.is_empty()).then(|| median(&w))
            })
            .collect();
        let (low, high) = medians
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &m| (l.min(m), h.max(m)));
        if columns.len() > 1 && low > 0.0 && high / low > 5.0 {
            let panels = plot.split_evenly((1, columns.len()));
            for (i, (area, platform)) in panels.iter().zip(&columns).enumerate() {
                self.draw_columns(area, &[*platform], i == 0)?;
            }
        } else {
            self.draw_columns(&plot, &columns, true)?;
        }
        let grey = RGBColor(90, 90, 90);
        legend(
            &panel,
            &[
                (Swatch::Dot(grey), "warm trial".to_owned()),
                (Swatch::Ring(grey), "cold (first) trial".to_owned()),
                (Swatch::Line(grey), "median of warm trials".to_owned()),
                (
                    Swatch::Block(RGBColor(205, 205, 205)),
                    "its 95% interval".to_owned(),
                ),
            ],
        )
    }
}

impl WallChart<'_> {
    /// One chart of `columns` on `area`, its axis from zero to just above
    /// their largest time; `first` carries the axis title.
    fn draw_columns<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        columns: &[Platform],
        first: bool,
    ) -> anyhow::Result<()> {
        let top = headroom(
            self.trials
                .iter()
                .filter(|t| columns.contains(&t.platform))
                .map(|t| t.wall_ms / 1e3)
                .fold(0.0, f64::max),
        );
        let mut chart = ChartBuilder::on(area)
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..columns.len() as f64 - 0.5, 0f64..top)
            .map_err(fail("the wall chart"))?;
        let names: Vec<&str> = columns.iter().map(|p| p.name()).collect();
        let label = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).copied().unwrap_or("").to_owned()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(columns.len() * 2 + 1)
            .x_label_formatter(&label)
            .x_desc("platform")
            .y_desc(if first {
                "wall time per batch, first submit to last result (s)"
            } else {
                ""
            })
            .y_label_formatter(&|y| super::short(*y))
            .label_style((FAMILY, 14))
            .axis_desc_style((FAMILY, 15))
            .draw()
            .map_err(fail("the wall chart"))?;
        for (i, &platform) in columns.iter().enumerate() {
            let x = i as f64;
            let c = colour(platform);
            let mine: Vec<&&TrialRecord> = self
                .trials
                .iter()
                .filter(|t| t.platform == platform)
                .collect();
            let warm: Vec<f64> = {
                let w: Vec<f64> = mine
                    .iter()
                    .filter(|t| !t.cold)
                    .map(|t| t.wall_ms / 1e3)
                    .collect();
                if w.is_empty() {
                    mine.iter().map(|t| t.wall_ms / 1e3).collect()
                } else {
                    w
                }
            };
            if let Some(ci) = median_interval(&warm) {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x - 0.28, ci.low), (x + 0.28, ci.high)],
                        c.mix(0.22).filled(),
                    )))
                    .map_err(fail("the wall chart"))?;
            }
            if !warm.is_empty() {
                let m = median(&warm);
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x - 0.32, m), (x + 0.32, m)],
                        c.stroke_width(3),
                    )))
                    .map_err(fail("the wall chart"))?;
            }
            let dots = mine.iter().enumerate().map(|(k, t)| {
                let p = (x + jitter(k), t.wall_ms / 1e3);
                if t.cold {
                    Circle::new(p, 6, c.stroke_width(2))
                } else {
                    Circle::new(p, 4, c.filled())
                }
            });
            chart.draw_series(dots).map_err(fail("the wall chart"))?;
        }
        Ok(())
    }
}
