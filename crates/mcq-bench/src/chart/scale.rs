//! The scale curve: throughput against fleet size beside the ideal
//! (workers × slots / task time) and 90% of it, on log-log axes, with the
//! minimal queue's throughput where it ran; and the database's CPU per
//! task against fleet size, mcq's beside the minimal queue's.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Chart, FAMILY, LEGEND_WIDTH, Swatch, fail, header, legend};
use crate::scale::{KEEPS_UP, SizeRow};

/// The sizes to draw.
#[derive(Debug)]
pub(crate) struct ScaleChart<'a> {
    /// One row per size.
    pub rows: &'a [SizeRow],
    /// Backend and link, for the title.
    pub context: String,
}

/// Both axes logarithmic.
type LogLog = Cartesian2d<LogCoord<f64>, LogCoord<f64>>;

/// Log-log axes of fleet size (x) against `y_desc`, with a margin around
/// the data's extent `(x0, x1, y0, y1)`, drawn with their grid.
fn against_workers<'a, DB: DrawingBackend>(
    plot: &'a DrawingArea<DB, Shift>,
    (x0, x1, y0, y1): (f64, f64, f64, f64),
    y_desc: &str,
    what: &str,
) -> anyhow::Result<ChartContext<'a, DB, LogLog>> {
    let mut chart = ChartBuilder::on(plot)
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (x0 / 1.4..x1 * 1.4).log_scale(),
            (y0 / 1.5..y1 * 1.5).log_scale(),
        )
        .map_err(fail(what))?;
    chart
        .configure_mesh()
        .x_desc("simulated workers")
        .y_desc(y_desc)
        .x_label_formatter(&|x| super::log_label(*x, |v| format!("{v:.0}")))
        .y_label_formatter(&|y| super::log_label(*y, super::short))
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 15))
        .draw()
        .map_err(fail(what))?;
    Ok(chart)
}

const MEASURED: RGBColor = RGBColor(31, 119, 180);
const IDEAL: RGBColor = RGBColor(60, 60, 60);
const MARK: RGBColor = RGBColor(214, 39, 40);
const FLOOR: RGBColor = RGBColor(255, 127, 14);

impl Chart for ScaleChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let (slots, task_ms) = self.rows.first().map_or((1, 0.0), |r| (r.slots, r.task_ms));
        let title = format!(
            "Throughput against workers ({slots} slot{} each, {task_ms:.0} ms tasks)",
            if slots == 1 { "" } else { "s" }
        );
        let root = &header(root, &title, &self.context)?;
        let (width, _) = root.dim_in_pixel();
        let (plot, panel) = root.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
        let mut rows: Vec<&SizeRow> = self.rows.iter().collect();
        rows.sort_by_key(|r| r.workers);
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for r in &rows {
            let x = r.workers as f64;
            let low = r.throughput_per_s.min(r.ideal_per_s * KEEPS_UP).max(1e-3);
            (x0, x1) = (x0.min(x), x1.max(x));
            (y0, y1) = (y0.min(low), y1.max(r.throughput_per_s.max(r.ideal_per_s)));
            if let Some(f) = r.floor_per_s {
                (y0, y1) = (y0.min(f.max(1e-3)), y1.max(f));
            }
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (1.0, 10.0, 1.0, 100.0);
        }
        let mut chart = against_workers(
            &plot,
            (x0, x1, y0, y1),
            "tasks per second",
            "the scale chart",
        )?;
        let ideal: Vec<(f64, f64)> = rows
            .iter()
            .map(|r| (r.workers as f64, r.ideal_per_s))
            .collect();
        chart
            .draw_series(LineSeries::new(
                ideal.iter().copied(),
                IDEAL.stroke_width(2),
            ))
            .map_err(fail("the scale chart"))?;
        chart
            .draw_series(DashedLineSeries::new(
                ideal.iter().map(|&(x, y)| (x, y * KEEPS_UP)),
                8,
                6,
                MARK.stroke_width(2),
            ))
            .map_err(fail("the scale chart"))?;
        // Sizes are measured separately; the line only guides the eye
        // from one size to the next.
        chart
            .draw_series(LineSeries::new(
                rows.iter().map(|r| (r.workers as f64, r.throughput_per_s)),
                MEASURED.mix(0.5).stroke_width(2),
            ))
            .map_err(fail("the scale chart"))?;
        chart
            .draw_series(
                rows.iter().map(|r| {
                    Circle::new((r.workers as f64, r.throughput_per_s), 5, MEASURED.filled())
                }),
            )
            .map_err(fail("the scale chart"))?;
        let floor: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| r.floor_per_s.map(|f| (r.workers as f64, f)))
            .collect();
        chart
            .draw_series(
                floor
                    .iter()
                    .map(|&p| Circle::new(p, 4, FLOOR.stroke_width(2))),
            )
            .map_err(fail("the scale chart"))?;
        let mut entries = vec![
            (Swatch::Dot(MEASURED), "mcq".to_owned()),
            (
                Swatch::Line(IDEAL),
                "ideal: workers × slots / task".to_owned(),
            ),
            (
                Swatch::Dashed(MARK),
                format!("{:.0}% of ideal", KEEPS_UP * 100.0),
            ),
        ];
        if !floor.is_empty() {
            entries.push((Swatch::Ring(FLOOR), "minimal SKIP LOCKED queue".to_owned()));
        }
        legend(&panel, &entries)
    }
}

/// The database's CPU per task against fleet size: mcq's and the minimal
/// queue's, on log-log axes.
#[derive(Debug)]
pub(crate) struct ScaleCpuChart<'a> {
    /// One row per size.
    pub rows: &'a [SizeRow],
    /// Backend and link, for the title.
    pub context: String,
}

impl Chart for ScaleCpuChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let root = &header(root, "Database CPU per task against workers", &self.context)?;
        let (width, _) = root.dim_in_pixel();
        let (plot, panel) = root.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
        let mut rows: Vec<&SizeRow> = self.rows.iter().collect();
        rows.sort_by_key(|r| r.workers);
        let mcq: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| r.db_cpu_per_task_us.map(|c| (r.workers as f64, c.max(1.0))))
            .collect();
        let floor: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| {
                r.floor_db_cpu_per_task_us
                    .map(|c| (r.workers as f64, c.max(1.0)))
            })
            .collect();
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in mcq.iter().chain(&floor) {
            (x0, x1) = (x0.min(x), x1.max(x));
            (y0, y1) = (y0.min(y), y1.max(y));
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (1.0, 10.0, 10.0, 1000.0);
        }
        let mut chart = against_workers(
            &plot,
            (x0, x1, y0, y1),
            "database CPU per task, µs",
            "the CPU chart",
        )?;
        for (points, colour) in [(&mcq, MEASURED), (&floor, FLOOR)] {
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    colour.mix(0.5).stroke_width(2),
                ))
                .map_err(fail("the CPU chart"))?;
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 5, colour.filled())))
                .map_err(fail("the CPU chart"))?;
        }
        legend(
            &panel,
            &[
                (Swatch::Dot(MEASURED), "mcq".to_owned()),
                (Swatch::Dot(FLOOR), "minimal SKIP LOCKED queue".to_owned()),
            ],
        )
    }
}
