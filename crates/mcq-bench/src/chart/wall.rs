//! Wall time per trial per platform: the chart of the original experiment.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Chart, FAMILY, colour, fail, headroom};
use crate::platform::Platform;
use crate::record::TrialRecord;

/// Wall time of every trial of one level, one line per platform.
#[derive(Debug)]
pub(crate) struct WallChart<'a> {
    /// Trials of the level to draw.
    pub trials: Vec<&'a TrialRecord>,
    /// Calls per batch (for the title).
    pub calls: u32,
    /// Paths per call (for the title).
    pub runs: u64,
}

impl Chart for WallChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let last_trial = self.trials.iter().map(|t| t.trial).max().unwrap_or(1);
        let top = headroom(
            self.trials
                .iter()
                .map(|t| t.wall_ms / 1e3)
                .fold(0.0, f64::max),
        );
        let title = format!(
            "Wall time per trial: {} calls × {} runs (trial 1 is cold)",
            self.calls, self.runs
        );
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FAMILY, 24))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(0.5f64..f64::from(last_trial) + 0.5, 0f64..top)
            .map_err(fail("the wall chart"))?;
        chart
            .configure_mesh()
            .x_desc("trial")
            .y_desc("wall time, first submit to last result (s)")
            .x_labels(last_trial.min(20) as usize)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .label_style((FAMILY, 14))
            .axis_desc_style((FAMILY, 16))
            .draw()
            .map_err(fail("the wall chart"))?;
        for platform in Platform::ALL {
            let mut points: Vec<(f64, f64)> = self
                .trials
                .iter()
                .filter(|t| t.platform == platform)
                .map(|t| (f64::from(t.trial), t.wall_ms / 1e3))
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let c = colour(platform);
            chart
                .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
                .map_err(fail("the wall chart"))?
                .label(platform.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3))
                });
            chart
                .draw_series(points.into_iter().map(|p| Circle::new(p, 4, c.filled())))
                .map_err(fail("the wall chart"))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FAMILY, 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(fail("the wall chart"))?;
        Ok(())
    }
}
