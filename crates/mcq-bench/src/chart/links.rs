//! The charts of a link sweep: where the cloud wins (each crossing's
//! paths per call against the link's RTT) and the service's speedup over
//! `local-1` against paths per call, one series per link.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Chart, FAMILY, LEGEND_WIDTH, Swatch, fail, header, legend};
use crate::breakeven::{Crossing, CrossingKind};
use crate::link_sweep::{LinkSweep, marks};

/// Where a loopback link (no added RTT) sits on the log RTT axis.
const LOOPBACK_MS: f64 = 0.01;

/// Colours of the three marks: the time crossings as in the break-even
/// chart, the cost crossing apart.
const MARK_COLOURS: [RGBColor; 3] = [BLACK, RGBColor(148, 103, 189), RGBColor(255, 127, 14)];
const MARK_NAMES: [&str; 3] = [
    "service beats local-1",
    "service at 90% of local-all",
    "service cheaper than local-1",
];

/// One colour per link of the speedup chart, in ascending RTT.
const LINK_COLOURS: [RGBColor; 6] = [
    RGBColor(44, 160, 44),
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// The link's RTT in ms as drawn: loopback at [`LOOPBACK_MS`].
fn rtt_x(rtt_ms: f64) -> f64 {
    rtt_ms.max(LOOPBACK_MS)
}

/// A decade label of the RTT axis; the loopback position says so.
fn rtt_label(x: f64) -> String {
    if (x / LOOPBACK_MS - 1.0).abs() < 1e-6 {
        return "loopback".to_owned();
    }
    let mantissa = x / 10f64.powf(x.log10().floor());
    if (mantissa - 1.0).abs() < 1e-6 || (mantissa - 10.0).abs() < 1e-5 {
        super::short(x)
    } else {
        String::new()
    }
}

/// Crossings against RTT.
#[derive(Debug)]
pub(crate) struct RttChart<'a> {
    /// The sweep.
    pub sweep: &'a LinkSweep,
    /// Backend and batch, for the subtitle.
    pub context: String,
}

/// How one crossing is drawn: (y, whisker low, whisker high, open above,
/// shape) where shape is 0 for a measured point, 1 for "at or below the
/// smallest level", 2 for "not reached".
fn placed(c: &Crossing, bottom: f64, top: f64) -> (f64, f64, f64, bool, u8) {
    match (c.kind, c.runs) {
        (CrossingKind::NotReached, _) | (_, None) => (top, top, top, false, 2),
        (CrossingKind::AtOrBelowSmallest, Some(r)) => (r, r, r, false, 1),
        (CrossingKind::Interpolated, Some(r)) => {
            let (lo, hi, open) = c.runs_interval.map_or((r, r, false), |ci| {
                let open = !ci.high.is_finite() || ci.high > top;
                (ci.low.max(bottom), if open { top } else { ci.high }, open)
            });
            (r, lo, hi, open, 0)
        }
    }
}

impl Chart for RttChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let what = "the break-even against RTT";
        let root = &header(
            root,
            "Where the cloud wins: break-even paths per call against the link's RTT",
            &self.context,
        )?;
        let (width, _) = root.dim_in_pixel();
        let (plot, panel) = root.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
        let links = &self.sweep.links;
        let levels = &self.sweep.levels;
        let smallest = levels.first().copied().unwrap_or(1) as f64;
        let largest = levels.last().copied().unwrap_or(10) as f64;
        // "Not reached" sits in a band above the largest level, the links'
        // names above it, all inside the plot.
        let (bottom, top, ceiling) = (smallest / 3.0, largest * 1.6, largest * 6.0);
        let rtts: Vec<f64> = links
            .iter()
            .map(|p| rtt_x(p.profile.rtt.as_secs_f64() * 1e3))
            .collect();
        let x0 = rtts
            .iter()
            .copied()
            .fold(f64::MAX, f64::min)
            .min(LOOPBACK_MS);
        let x1 = rtts.iter().copied().fold(1.0, f64::max);
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (x0 / 1.8..x1 * 2.5).log_scale(),
                (bottom..ceiling).log_scale(),
            )
            .map_err(fail(what))?;
        chart
            .configure_mesh()
            .x_desc("round-trip time added by the link (ms)")
            .y_desc("paths per call at the crossing (runs), 95% interval")
            .x_label_formatter(&|x| rtt_label(*x))
            .y_label_formatter(&|y| super::log_label(*y, |v| format!("{v:.0e}")))
            .label_style((FAMILY, 13))
            .axis_desc_style((FAMILY, 15))
            .draw()
            .map_err(fail(what))?;
        // The levels measured bound what a crossing can say: shade outside.
        for (lo, hi) in [(bottom, smallest), (largest, ceiling)] {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0 / 1.8, lo), (x1 * 2.5, hi)],
                    RGBColor(235, 235, 235).filled(),
                )))
                .map_err(fail(what))?;
        }
        let mut entries = Vec::new();
        for (m, (name, colour)) in MARK_NAMES.iter().zip(MARK_COLOURS).enumerate() {
            // Side by side around the link's RTT, so whiskers never overlap.
            let shift = [0.9, 1.0, 1.1][m];
            let points: Vec<(f64, Crossing)> = links
                .iter()
                .zip(&rtts)
                .filter_map(|(p, &x)| marks(p)[m].1.map(|c| (x * shift, c)))
                .collect();
            if points.is_empty() {
                continue;
            }
            let style = colour.stroke_width(2);
            let drawn: Vec<_> = points
                .iter()
                .map(|(x, c)| (*x, placed(c, bottom, top)))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    drawn.iter().map(|&(x, (y, ..))| (x, y)),
                    colour.mix(0.5).stroke_width(1),
                ))
                .map_err(fail(what))?;
            for &(x, (y, lo, hi, open, shape)) in &drawn {
                let (left, right) = (x / 1.04, x * 1.04);
                let mut parts = vec![PathElement::new(vec![(x, lo), (x, hi)], style)];
                parts.push(PathElement::new(vec![(left, lo), (right, lo)], style));
                if !open {
                    parts.push(PathElement::new(vec![(left, hi), (right, hi)], style));
                }
                chart.draw_series(parts).map_err(fail(what))?;
                match shape {
                    0 => {
                        chart.draw_series(std::iter::once(Circle::new((x, y), 5, colour.filled())))
                    }
                    // A ring: the crossing lies at this level or below it.
                    1 => chart.draw_series(std::iter::once(Circle::new(
                        (x, y),
                        6,
                        colour.stroke_width(2),
                    ))),
                    // Pointing up: the crossing lies beyond the levels.
                    _ => chart.draw_series(std::iter::once(TriangleMarker::new(
                        (x, y),
                        7,
                        colour.filled(),
                    ))),
                }
                .map_err(fail(what))?;
            }
            entries.push((Swatch::Dot(colour), (*name).to_owned()));
        }
        // Each link's name above the plot's top band, staggered when close.
        for (i, (p, &x)) in links.iter().zip(&rtts).enumerate() {
            let y = largest * if i % 2 == 0 { 4.4 } else { 2.9 };
            chart
                .draw_series(std::iter::once(Text::new(
                    p.profile.name.clone(),
                    (x / 1.25, y),
                    (FAMILY, 13).into_font().color(&RGBColor(70, 70, 70)),
                )))
                .map_err(fail(what))?;
        }
        entries.push((Swatch::Line(BLACK), "whisker: 95% interval".to_owned()));
        entries.push((
            Swatch::Block(RGBColor(235, 235, 235)),
            "outside the levels measured".to_owned(),
        ));
        entries.push((
            Swatch::Block(RGBColor(255, 255, 255)),
            "▲ top band: not reached".to_owned(),
        ));
        entries.push((
            Swatch::Block(RGBColor(255, 255, 255)),
            "ring: at or below the smallest".to_owned(),
        ));
        entries.push((
            Swatch::Block(RGBColor(255, 255, 255)),
            format!("levels {smallest:.0e}–{largest:.0e} runs"),
        ));
        legend(&panel, &entries)
    }
}

/// The service's speedup over `local-1`, per link.
#[derive(Debug)]
pub(crate) struct SpeedupChart<'a> {
    /// The sweep.
    pub sweep: &'a LinkSweep,
    /// Backend and batch, for the subtitle.
    pub context: String,
}

impl Chart for SpeedupChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
        let what = "the speedup per link";
        let root = &header(
            root,
            "Service speedup over local-1 against paths per call, per link",
            &self.context,
        )?;
        let (width, _) = root.dim_in_pixel();
        let (plot, panel) = root.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
        let links = &self.sweep.links;
        // (runs, speedup, low, high) per link.
        let series: Vec<Vec<(f64, f64, f64, f64)>> = links
            .iter()
            .map(|p| {
                p.speedups
                    .iter()
                    .filter_map(|s| {
                        let v = s.speedup.filter(|v| v.is_finite() && *v > 0.0)?;
                        let (lo, hi) = s.interval.map_or((v, v), |ci| (ci.low, ci.high));
                        Some((s.runs as f64, v, lo.max(v * 1e-3), hi.max(v)))
                    })
                    .collect()
            })
            .collect();
        let all = series.iter().flatten();
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 1.0f64, 1.0f64);
        for &(x, _, lo, hi) in all {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(lo), y1.max(hi));
        }
        if x0 > x1 {
            (x0, x1) = (1.0, 10.0);
        }
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (x0 / 2.0..x1 * 2.0).log_scale(),
                (y0 / 1.5..y1 * 1.5).log_scale(),
            )
            .map_err(fail(what))?;
        chart
            .configure_mesh()
            .x_desc("paths per call (runs)")
            .y_desc("speedup over local-1 (×), 95% interval")
            .x_label_formatter(&|x| super::log_label(*x, |v| format!("{v:.0e}")))
            .y_label_formatter(&|y| super::log_label(*y, super::short))
            .label_style((FAMILY, 13))
            .axis_desc_style((FAMILY, 15))
            .draw()
            .map_err(fail(what))?;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x0 / 2.0, 1.0), (x1 * 2.0, 1.0)],
                8,
                6,
                BLACK.stroke_width(1),
            ))
            .map_err(fail(what))?;
        let mut entries = vec![(Swatch::Dashed(BLACK), "1×: as fast as local-1".to_owned())];
        let n = series.len().max(1) as f64;
        for (i, (p, values)) in links.iter().zip(&series).enumerate() {
            if values.is_empty() {
                continue;
            }
            let c = LINK_COLOURS[i % LINK_COLOURS.len()];
            // Links side by side around each level, so whiskers never overlap.
            let shift = 1.12f64.powf(i as f64 - (n - 1.0) / 2.0);
            // The line joins one link's medians across levels (how its
            // speedup grows with the work), never trials.
            chart
                .draw_series(LineSeries::new(
                    values.iter().map(|&(x, v, _, _)| (x * shift, v)),
                    c.stroke_width(2),
                ))
                .map_err(fail(what))?;
            chart
                .draw_series(values.iter().flat_map(|&(x, _, lo, hi)| {
                    let x = x * shift;
                    let (left, right) = (x / 1.04, x * 1.04);
                    [
                        PathElement::new(vec![(x, lo), (x, hi)], c.stroke_width(2)),
                        PathElement::new(vec![(left, lo), (right, lo)], c.stroke_width(2)),
                        PathElement::new(vec![(left, hi), (right, hi)], c.stroke_width(2)),
                    ]
                }))
                .map_err(fail(what))?;
            chart
                .draw_series(
                    values
                        .iter()
                        .map(|&(x, v, _, _)| Circle::new((x * shift, v), 4, c.filled())),
                )
                .map_err(fail(what))?;
            entries.push((
                Swatch::Line(c),
                format!(
                    "{} ({} ms)",
                    p.profile.name,
                    p.profile.rtt.as_secs_f64() * 1e3
                ),
            ));
        }
        entries.push((Swatch::Line(BLACK), "whisker: 95% interval".to_owned()));
        legend(&panel, &entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rtt_axis_names_loopback_and_labels_decades() {
        assert_eq!(rtt_label(LOOPBACK_MS), "loopback");
        assert_eq!(rtt_label(0.1), "0.1");
        assert_eq!(rtt_label(10.0), "10");
        assert_eq!(rtt_label(100.0), "100");
        assert_eq!(rtt_label(20.0), "");
        assert_eq!(rtt_x(0.0), LOOPBACK_MS);
        assert_eq!(rtt_x(70.0), 70.0);
    }
}
