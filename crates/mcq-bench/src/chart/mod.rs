//! Charts drawn by the binary itself with plotters, each written as PNG and
//! SVG. The font is compiled in, so no system font or external tool is needed.

mod breakeven;
mod cost;
mod links;
mod scale;
mod timeline;
mod wall;

use std::path::Path;
use std::sync::Once;

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;

pub(crate) use breakeven::BreakEvenChart;
pub(crate) use cost::CostChart;
pub(crate) use links::{RttChart, SpeedupChart};
pub(crate) use scale::{ScaleChart, ScaleCpuChart};
pub(crate) use timeline::TimelineChart;
pub(crate) use wall::WallChart;

use crate::interval::Interval;
use crate::platform::Platform;

/// DejaVu Sans (see `assets/DejaVuSans-LICENSE.txt`): the only font the charts use.
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Family name under which the bundled font is registered.
pub(crate) const FAMILY: &str = "sans-serif";

/// Registers the bundled font with plotters once per process.
fn register_font() -> anyhow::Result<()> {
    static ONCE: Once = Once::new();
    let mut outcome = Ok(());
    ONCE.call_once(|| {
        outcome = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| anyhow!("the bundled font could not be loaded"));
    });
    outcome
}

/// A chart that can draw itself on any plotters backend.
pub(crate) trait Chart {
    /// Pixel size (PNG) and user units (SVG).
    fn size(&self) -> (u32, u32) {
        (1000, 600)
    }

    /// Draws on `root`, which is already filled white.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>;
}

/// Writes `chart` to `dir/name.png` and `dir/name.svg`; returns the two file names.
pub(crate) fn save<C: Chart>(chart: &C, dir: &Path, name: &str) -> anyhow::Result<[String; 2]> {
    register_font()?;
    let png = format!("{name}.png");
    let svg = format!("{name}.svg");
    {
        let path = dir.join(&png);
        let root = BitMapBackend::new(&path, chart.size()).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| anyhow!("drawing {png}: {e}"))?;
        chart.draw(&root)?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    }
    {
        let path = dir.join(&svg);
        let root = SVGBackend::new(&path, chart.size()).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| anyhow!("drawing {svg}: {e}"))?;
        chart.draw(&root)?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    }
    Ok([png, svg])
}

/// Turns a plotters error (whose type depends on the backend) into ours.
pub(crate) fn fail<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> anyhow::Error + '_ {
    move |e| anyhow!("drawing {what}: {e}")
}

/// One colour per platform, the same in every chart.
pub(crate) fn colour(platform: Platform) -> RGBColor {
    match platform {
        Platform::Local1 => RGBColor(214, 39, 40),
        Platform::LocalAll => RGBColor(31, 119, 180),
        Platform::Service => RGBColor(44, 160, 44),
    }
}

/// Width of the legend panel right of a chart's plotting area: legends
/// live there, never on top of data.
pub(crate) const LEGEND_WIDTH: u32 = 230;

/// The symbol drawn before a legend entry.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Swatch {
    /// A line (a series or a mark).
    Line(RGBColor),
    /// A dashed line (a crossing).
    Dashed(RGBColor),
    /// A filled dot (one measurement).
    Dot(RGBColor),
    /// A hollow ring (a cold measurement).
    Ring(RGBColor),
    /// A filled box (an interval or a part of a bar).
    Block(RGBColor),
}

/// Draws `entries` top to bottom in `panel`, which sits beside the plot.
pub(crate) fn legend<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    entries: &[(Swatch, String)],
) -> anyhow::Result<()> {
    let font = (FAMILY, 14).into_font();
    for (i, (swatch, text)) in entries.iter().enumerate() {
        let y = 70 + 26 * i32::try_from(i).unwrap_or(0);
        let (x0, x1) = (8, 32);
        let drawn = match *swatch {
            Swatch::Line(c) => {
                panel.draw(&PathElement::new(vec![(x0, y), (x1, y)], c.stroke_width(3)))
            }
            Swatch::Dashed(c) => panel
                .draw(&PathElement::new(
                    vec![(x0, y), (x0 + 9, y)],
                    c.stroke_width(2),
                ))
                .and_then(|()| {
                    panel.draw(&PathElement::new(
                        vec![(x0 + 15, y), (x1, y)],
                        c.stroke_width(2),
                    ))
                }),
            Swatch::Dot(c) => panel.draw(&Circle::new((x0 + 12, y), 4, c.filled())),
            Swatch::Ring(c) => panel.draw(&Circle::new((x0 + 12, y), 6, c.stroke_width(2))),
            Swatch::Block(c) => panel.draw(&Rectangle::new([(x0, y - 6), (x1, y + 6)], c.filled())),
        };
        drawn.map_err(fail("a legend"))?;
        panel
            .draw(&Text::new(text.clone(), (x1 + 8, y - 8), font.clone()))
            .map_err(fail("a legend"))?;
    }
    Ok(())
}

/// Height of the title block above every chart.
const HEADER: u32 = 62;

/// Writes `title` and, below it in a smaller font, `subtitle` (backend and
/// link) across the top of `root`, and returns the area below. Two lines
/// keep long contexts from running off the edge, as one caption would.
pub(crate) fn header<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
) -> anyhow::Result<DrawingArea<DB, Shift>> {
    let (top, rest) = root.split_vertically(HEADER);
    top.draw(&Text::new(
        title.to_owned(),
        (16, 10),
        (FAMILY, 21).into_font(),
    ))
    .map_err(fail("a title"))?;
    top.draw(&Text::new(
        subtitle.to_owned(),
        (16, 38),
        (FAMILY, 15).into_font().color(&RGBColor(70, 70, 70)),
    ))
    .map_err(fail("a title"))?;
    Ok(rest)
}

/// `c` blended with white, `amount` of the colour: the opaque look of
/// `c.mix(amount)` on a white background, for legend swatches.
pub(crate) fn tint(c: RGBColor, amount: f64) -> RGBColor {
    let blend = |v: u8| (255.0 - (255.0 - f64::from(v)) * amount).round() as u8;
    RGBColor(blend(c.0), blend(c.1), blend(c.2))
}

/// Draws the 95% interval `ci` of a crossing's paths per call as a faint
/// band of `c` over the whole height of `chart`, clipped to its x axis: an
/// interval open above runs to the right edge.
pub(crate) fn draw_crossing_band<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    ci: Interval,
    c: RGBColor,
) -> anyhow::Result<()>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let (x, y) = (chart.x_range(), chart.y_range());
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(ci.low.max(x.start), y.start), (ci.high.min(x.end), y.end)],
            c.mix(0.08).filled(),
        )))
        .map_err(fail("a crossing's interval"))?;
    Ok(())
}

/// Upper end of an axis starting at zero: a bit above the largest value.
pub(crate) fn headroom(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.12
    } else {
        1.0
    }
}

/// A log-axis tick label: every decade, and 2 and 5 within it; the other
/// ticks stay unlabelled so that labels never run into each other.
pub(crate) fn log_label(value: f64, show: impl Fn(f64) -> String) -> String {
    if !(value.is_finite() && value > 0.0) {
        return String::new();
    }
    let mantissa = value / 10f64.powf(value.log10().floor());
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 * m)
    {
        show(value)
    } else {
        String::new()
    }
}

/// A tick label with at most three significant digits and no exponent for the
/// magnitudes a benchmark produces (0.0004 s, 12.5 s).
pub(crate) fn short(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let digits = (2 - value.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{value:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_font_loads() {
        register_font().unwrap();
        // A second call must not fail either.
        register_font().unwrap();
    }

    #[test]
    fn log_axes_label_decades_and_their_halves() {
        let show = |v: f64| format!("{v:.0e}");
        assert_eq!(log_label(1000.0, show), "1e3");
        assert_eq!(log_label(5000.0, show), "5e3");
        assert_eq!(log_label(3000.0, show), "");
        assert_eq!(log_label(0.0, show), "");
    }

    #[test]
    fn short_labels_keep_three_significant_digits() {
        assert_eq!(short(0.0004), "0.0004");
        assert_eq!(short(0.00123456), "0.00123");
        assert_eq!(short(0.01), "0.01");
        assert_eq!(short(12.5), "12.5");
        assert_eq!(short(1500.0), "1500");
    }
}
