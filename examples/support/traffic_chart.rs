//! The tour's chart, drawn with `plotters` into an SVG: one panel per limiter, the requests of
//! each second as a stacked bar (admitted below, rejected above), and the permits available at
//! the end of each second as a step line on the right-hand axis.

use std::error::Error;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

/// One limiter's second-by-second results.
pub struct Panel<'a> {
    pub title: String,
    pub admitted: &'a [u32],
    pub rejected: &'a [u32],
    pub available: &'a [u64],
    /// The top of the "available permits" axis: the limiter's limit.
    pub capacity: u64,
}

const ADMITTED: RGBColor = RGBColor(46, 160, 67);
const REJECTED: RGBColor = RGBColor(214, 39, 40);
const AVAILABLE: RGBColor = RGBColor(31, 119, 180);

const WIDTH: u32 = 1280;
const PANEL_HEIGHT: u32 = 250;
const HEADER_HEIGHT: u32 = 80;

type Area<'b> = DrawingArea<SVGBackend<'b>, Shift>;

/// Draws `panels` one above the other into an SVG at `path`, under a title and a subtitle.
pub fn draw(
    path: &Path,
    title: &str,
    subtitle: &str,
    panels: &[Panel<'_>],
) -> Result<(), Box<dyn Error>> {
    let height = HEADER_HEIGHT + PANEL_HEIGHT * panels.len() as u32;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(HEADER_HEIGHT);
    draw_header(&header, title, subtitle)?;

    // Every panel sees the same traffic, so they share the left-hand scale.
    let peak = panels
        .iter()
        .flat_map(|p| p.admitted.iter().zip(p.rejected).map(|(a, r)| a + r))
        .max()
        .unwrap_or(1);
    for (area, panel) in body.split_evenly((panels.len(), 1)).iter().zip(panels) {
        draw_panel(area, panel, peak)?;
    }
    root.present()?;
    Ok(())
}

/// The title, the subtitle, and one legend for all panels.
fn draw_header(area: &Area<'_>, title: &str, subtitle: &str) -> Result<(), Box<dyn Error>> {
    let bold = ("sans-serif", 22).into_font().style(FontStyle::Bold);
    area.draw(&Text::new(title, (20, 12), bold))?;
    area.draw(&Text::new(subtitle, (20, 44), ("sans-serif", 15)))?;

    let legend = ("sans-serif", 15);
    let mut x = WIDTH as i32 - 520;
    for (color, label) in [(ADMITTED, "admitted"), (REJECTED, "rejected")] {
        area.draw(&Rectangle::new([(x, 46), (x + 14, 60)], color.filled()))?;
        area.draw(&Text::new(label, (x + 20, 45), legend))?;
        x += 110;
    }
    area.draw(&PathElement::new(
        [(x, 53), (x + 24, 53)],
        AVAILABLE.stroke_width(3),
    ))?;
    area.draw(&Text::new(
        "available permits (right axis)",
        (x + 30, 45),
        legend,
    ))?;
    Ok(())
}

fn draw_panel(area: &Area<'_>, panel: &Panel<'_>, peak: u32) -> Result<(), Box<dyn Error>> {
    // Time runs along x in minutes, so that the labels fall on whole and half minutes.
    let minutes = panel.admitted.len() as f64 / 60.0;
    let x = |second: usize, fraction: f64| (second as f64 + fraction) / 60.0;
    // f64 axes: plotters' u32 key-point search can loop forever on some u32 ranges.
    let requests = 0.0..f64::from(peak + peak / 20 + 1);
    let permits = 0.0..(panel.capacity + panel.capacity / 20 + 1) as f64;

    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 17))
        .margin_left(10)
        .margin_right(10)
        .margin_bottom(5)
        .x_label_area_size(28)
        .y_label_area_size(55)
        .right_y_label_area_size(55)
        .build_cartesian_2d(0.0..minutes, requests)?
        .set_secondary_coord(0.0..minutes, permits);

    chart
        .configure_mesh()
        .x_labels(9)
        .x_label_formatter(&|m| {
            let s = (m * 60.0).round() as u32;
            format!("{}:{:02}", s / 60, s % 60)
        })
        .y_desc("requests / s")
        .y_labels(7)
        .y_label_formatter(&|n| format!("{n:.0}"))
        .max_light_lines(0)
        .bold_line_style(BLACK.mix(0.15))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc("available permits")
        .y_labels(6)
        .y_label_formatter(&|n| format!("{n:.0}"))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;

    let bar = |t: usize, from: u32, to: u32, color: RGBColor| {
        Rectangle::new(
            [(x(t, 0.1), f64::from(from)), (x(t, 0.9), f64::from(to))],
            color.filled(),
        )
    };
    let seconds = panel.admitted.iter().zip(panel.rejected).enumerate();
    chart.draw_series(
        seconds
            .clone()
            .filter(|(_, (a, _))| **a > 0)
            .map(|(t, (a, _))| bar(t, 0, *a, ADMITTED)),
    )?;
    chart.draw_series(
        seconds
            .filter(|(_, (_, r))| **r > 0)
            .map(|(t, (a, r))| bar(t, *a, a + r, REJECTED)),
    )?;
    // A step line: the count sampled at the end of second t holds across that second.
    chart.draw_secondary_series(LineSeries::new(
        panel
            .available
            .iter()
            .enumerate()
            .flat_map(|(t, v)| [(x(t, 0.0), *v as f64), (x(t, 1.0), *v as f64)]),
        AVAILABLE.stroke_width(2),
    ))?;
    Ok(())
}
