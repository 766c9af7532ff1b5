//! The tour's chart, drawn with `plotters` into an SVG. One panel per limiter: above, the
//! requests of each second as a stacked bar (admitted below, rejected above) on the scale shared
//! by all panels (every limiter sees the same traffic); below it, in a strip of its own, the
//! limiter's level at the end of each second — its available permits (or, for the shaper, its
//! queue) — on its own axis, from 0 to exactly the limiter's capacity, so it is never read as
//! traffic.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use crate::chart::{page, Area, WIDTH};

/// One limiter's second-by-second results.
pub struct Panel<'a> {
    pub title: String,
    pub admitted: &'a [u32],
    pub rejected: &'a [u32],
    /// The level sampled at the end of each second.
    pub level: &'a [u64],
    /// The top of the level's axis: the limiter's capacity (its limit, burst or queue).
    pub level_max: u64,
    /// What the level is ("available permits", "queued requests").
    pub level_name: &'a str,
}

const ADMITTED: RGBColor = RGBColor(46, 160, 67);
const REJECTED: RGBColor = RGBColor(214, 39, 40);
const LEVEL: RGBColor = RGBColor(31, 119, 180);

const BARS_HEIGHT: u32 = 210;
const STRIP_HEIGHT: u32 = 95;

/// Draws `panels` one above the other into an SVG at `path`, under a title and a subtitle.
pub fn draw(
    path: &Path,
    title: &str,
    subtitle: &str,
    panels: &[Panel<'_>],
) -> Result<(), Box<dyn Error>> {
    let panel_height = BARS_HEIGHT + STRIP_HEIGHT;
    let (header, body) = page(path, panel_height * panels.len() as u32, title, subtitle)?;
    draw_legend(&header)?;

    // Every panel sees the same traffic, so they share the requests scale.
    let peak = panels
        .iter()
        .flat_map(|p| p.admitted.iter().zip(p.rejected).map(|(a, r)| a + r))
        .max()
        .unwrap_or(1);
    for (area, panel) in body.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let (bars, strip) = area.split_vertically(BARS_HEIGHT);
        draw_bars(&bars, panel, peak)?;
        draw_level(&strip, panel)?;
    }
    header.present()?;
    Ok(())
}

/// One legend for all panels, at the header's right.
fn draw_legend(area: &Area<'_>) -> Result<(), Box<dyn Error>> {
    let legend = ("sans-serif", 15);
    let mut x = WIDTH as i32 - 560;
    for (color, label) in [(ADMITTED, "admitted"), (REJECTED, "rejected")] {
        area.draw(&Rectangle::new([(x, 46), (x + 14, 60)], color.filled()))?;
        area.draw(&Text::new(label, (x + 20, 45), legend))?;
        x += 110;
    }
    area.draw(&PathElement::new(
        [(x, 53), (x + 24, 53)],
        LEVEL.stroke_width(3),
    ))?;
    area.draw(&Text::new(
        "the limiter's level, on its own scale (strip under each panel)",
        (x + 30, 45),
        legend,
    ))?;
    Ok(())
}

/// Time runs along x in minutes, so that the labels fall on whole and half minutes.
fn minutes(panel: &Panel<'_>) -> f64 {
    panel.admitted.len() as f64 / 60.0
}

fn x(second: usize, fraction: f64) -> f64 {
    (second as f64 + fraction) / 60.0
}

fn time_label(m: &f64) -> String {
    let s = (m * 60.0).round() as u32;
    format!("{}:{:02}", s / 60, s % 60)
}

fn draw_bars(area: &Area<'_>, panel: &Panel<'_>, peak: u32) -> Result<(), Box<dyn Error>> {
    // f64 axes: plotters' u32 key-point search can loop forever on some u32 ranges.
    let requests = 0.0..f64::from(peak + peak / 20 + 1);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 17))
        .margin_left(10)
        .margin_right(20)
        .x_label_area_size(0)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..minutes(panel), requests)?;
    chart
        .configure_mesh()
        .x_labels(9)
        .x_label_formatter(&time_label)
        .y_desc("requests / s")
        .y_labels(7)
        .y_label_formatter(&|n| format!("{n:.0}"))
        .max_light_lines(0)
        .bold_line_style(BLACK.mix(0.15))
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
    Ok(())
}

/// The level strip: its axis ends exactly at the capacity (5 for a concurrency limit of 5).
fn draw_level(area: &Area<'_>, panel: &Panel<'_>) -> Result<(), Box<dyn Error>> {
    let top = panel.level_max.max(1) as f64;
    // Whole-number ticks: every value for a small capacity, about four steps otherwise.
    let ticks = if panel.level_max <= 10 {
        panel.level_max as usize + 1
    } else {
        5
    };
    let mut chart = ChartBuilder::on(area)
        .margin_left(10)
        .margin_right(20)
        .margin_bottom(8)
        .x_label_area_size(24)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..minutes(panel), 0.0..top)?;
    chart
        .configure_mesh()
        .x_labels(9)
        .x_label_formatter(&time_label)
        .y_desc(format!("{} (of {})", panel.level_name, panel.level_max))
        .y_labels(ticks)
        .y_label_formatter(&|n| format!("{n:.0}"))
        .max_light_lines(0)
        .bold_line_style(BLACK.mix(0.1))
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 11))
        .draw()?;
    // A step line: the level sampled at the end of second t holds across that second.
    chart.draw_series(LineSeries::new(
        panel
            .level
            .iter()
            .enumerate()
            .flat_map(|(t, v)| [(x(t, 0.0), *v as f64), (x(t, 1.0), *v as f64)]),
        LEVEL.stroke_width(2),
    ))?;
    Ok(())
}
