//! Where a job's time goes: a timeline of every job of one trial, drawn
//! from its measured phases (queue wait, claim, compute, record, result
//! latency), and, below it, the mean of each part per platform.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Chart, FAMILY, LEGEND_WIDTH, Swatch, fail, header, headroom, legend};
use crate::platform::Platform;
use crate::record::JobRecord;
use crate::stats::mean;

const QUEUE: RGBColor = RGBColor(170, 170, 170);
const CLAIM: RGBColor = RGBColor(255, 127, 14);
const COMPUTE: RGBColor = RGBColor(31, 119, 180);
const RECORD: RGBColor = RGBColor(148, 103, 189);
const LATENCY: RGBColor = RGBColor(214, 39, 40);

/// The parts, in the order of a job's life, with their legend names.
const PARTS: [(RGBColor, &str); 5] = [
    (QUEUE, "queue wait"),
    (CLAIM, "claim"),
    (COMPUTE, "compute"),
    (RECORD, "record"),
    (LATENCY, "result latency"),
];

/// The breakdown chart.
#[derive(Debug)]
pub(crate) struct TimelineChart<'a> {
    /// Jobs of the trial drawn as a timeline, in batch order.
    pub trial_jobs: Vec<&'a JobRecord>,
    /// What that trial was, for the title.
    pub trial_title: String,
    /// Jobs of the warm trials of every platform, for the mean bars.
    pub warm_jobs: Vec<&'a JobRecord>,
}

/// The five parts of a job's time, from its phases, in the order of
/// [`PARTS`]: submitted → claimed → compute started → compute finished →
/// recorded → seen.
fn parts(job: &JobRecord) -> [(f64, f64); 5] {
    [
        (job.submitted_ms, job.claimed_ms),
        (job.claimed_ms, job.compute_started_ms),
        (job.compute_started_ms, job.compute_finished_ms),
        (job.compute_finished_ms, job.recorded_ms),
        (job.recorded_ms, job.seen_ms),
    ]
}

impl Chart for TimelineChart<'_> {
    fn size(&self) -> (u32, u32) {
        (1000, 820)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let subtitle = if self
            .trial_jobs
            .iter()
            .chain(&self.warm_jobs)
            .all(|j| j.phases_measured)
        {
            self.trial_title.clone()
        } else {
            format!(
                "{} · phases assumed: the server records none",
                self.trial_title
            )
        };
        let root = &header(root, "Where a job's time goes", &subtitle)?;
        let (width, _) = root.dim_in_pixel();
        let (plots, panel) = root.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
        let (upper, lower) = plots.split_vertically(480);
        self.draw_timeline(&upper)?;
        self.draw_means(&lower)?;
        let entries: Vec<(Swatch, String)> = PARTS
            .iter()
            .map(|(colour, name)| (Swatch::Block(*colour), (*name).to_owned()))
            .collect();
        legend(&panel, &entries)
    }
}

impl TimelineChart<'_> {
    fn draw_timeline<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> anyhow::Result<()> {
        let n = self.trial_jobs.len().max(1) as f64;
        let right = headroom(
            self.trial_jobs
                .iter()
                .map(|j| j.seen_ms.max(j.finished_ms))
                .fold(0.0, f64::max),
        );
        let mut chart = ChartBuilder::on(area)
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..right, -0.5f64..n - 0.5)
            .map_err(fail("the timeline"))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("ms since the first submit")
            .y_desc("job (batch order)")
            // Only whole positions are jobs; other ticks stay unlabelled.
            .y_label_formatter(&|y| {
                if (y - y.round()).abs() < 1e-6 && *y >= 0.0 {
                    format!("{y:.0}")
                } else {
                    String::new()
                }
            })
            .label_style((FAMILY, 13))
            .axis_desc_style((FAMILY, 15))
            .draw()
            .map_err(fail("the timeline"))?;
        let bars = self.trial_jobs.iter().enumerate().flat_map(|(i, job)| {
            let y = i as f64;
            parts(job)
                .into_iter()
                .zip(PARTS)
                .filter(|((from, to), _)| to > from)
                .map(move |((from, to), (c, _))| {
                    Rectangle::new([(from, y - 0.4), (to, y + 0.4)], c.filled())
                })
        });
        chart.draw_series(bars).map_err(fail("the timeline"))?;
        Ok(())
    }

    fn draw_means<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let rows: Vec<(Platform, [f64; 5])> = Platform::ALL
            .into_iter()
            .filter_map(|p| {
                let jobs: Vec<&&JobRecord> =
                    self.warm_jobs.iter().filter(|j| j.platform == p).collect();
                if jobs.is_empty() {
                    return None;
                }
                let avg = |part: usize| {
                    mean(
                        &jobs
                            .iter()
                            .map(|j| {
                                let (from, to) = parts(j)[part];
                                to - from
                            })
                            .collect::<Vec<_>>(),
                    )
                    .max(0.0)
                };
                Some((p, [avg(0), avg(1), avg(2), avg(3), avg(4)]))
            })
            .collect();
        let right = headroom(
            rows.iter()
                .map(|(_, v)| v.iter().sum::<f64>())
                .fold(0.0, f64::max),
        );
        let count = rows.len().max(1) as f64;
        let mut chart = ChartBuilder::on(area)
            .caption("Mean per job over the warm trials", (FAMILY, 18))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(90)
            .build_cartesian_2d(0f64..right, -0.5f64..count - 0.5)
            .map_err(fail("the mean bars"))?;
        let names: Vec<&str> = rows.iter().map(|(p, _)| p.name()).collect();
        let label = |y: &f64| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).copied().unwrap_or("").to_owned()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows.len().max(1) * 2 + 1)
            .y_label_formatter(&label)
            .x_desc("ms per job (queue wait, claim, compute, record, result latency)")
            .label_style((FAMILY, 13))
            .axis_desc_style((FAMILY, 15))
            .draw()
            .map_err(fail("the mean bars"))?;
        let bars = rows.iter().enumerate().flat_map(|(i, (_, values))| {
            let y = i as f64;
            let mut left = 0.0;
            values.iter().zip(PARTS).map(move |(v, (c, _))| {
                let rect = Rectangle::new([(left, y - 0.35), (left + v, y + 0.35)], c.filled());
                left += v;
                rect
            })
        });
        chart.draw_series(bars).map_err(fail("the mean bars"))?;
        Ok(())
    }
}
