//! The adaptive section's chart, drawn with `plotters` into an SVG: one panel per algorithm,
//! the limit and the requests in flight over time against the server's true capacity (a
//! dashed step), and below it, in a strip of its own, the mean latency against the unloaded
//! one.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use crate::chart::{page, Area, WIDTH};

/// One algorithm's run, sampled every window.
pub struct Run<'a> {
    pub title: String,
    /// Seconds from the start, per sample.
    pub at: &'a [f64],
    pub limit: &'a [u32],
    pub in_flight: &'a [u32],
    pub capacity: &'a [u32],
    /// Mean latency of the requests that ended in the window, in ms.
    pub latency_ms: &'a [f64],
    pub unloaded_ms: f64,
}

const LIMIT: RGBColor = RGBColor(31, 119, 180);
const IN_FLIGHT: RGBColor = RGBColor(46, 160, 67);
const CAPACITY: RGBColor = RGBColor(80, 80, 80);
const LATENCY: RGBColor = RGBColor(214, 39, 40);

const MAIN_HEIGHT: u32 = 230;
const STRIP_HEIGHT: u32 = 110;

/// Draws `runs` one above the other into an SVG at `path`.
pub fn draw(
    path: &Path,
    title: &str,
    subtitle: &str,
    runs: &[Run<'_>],
) -> Result<(), Box<dyn Error>> {
    let body_height = (MAIN_HEIGHT + STRIP_HEIGHT) * runs.len() as u32;
    let (header, body) = page(path, body_height, title, subtitle)?;
    let mut x = WIDTH as i32 - 640;
    for (color, label) in [
        (LIMIT, "limit"),
        (IN_FLIGHT, "in flight"),
        (CAPACITY, "true capacity"),
        (LATENCY, "mean latency (ms)"),
    ] {
        header.draw(&Rectangle::new([(x, 50), (x + 14, 54)], color.filled()))?;
        header.draw(&Text::new(label, (x + 20, 44), ("sans-serif", 15)))?;
        x += 150;
    }
    let peak = runs
        .iter()
        .flat_map(|r| r.limit.iter().chain(r.in_flight).chain(r.capacity))
        .copied()
        .max()
        .unwrap_or(1);
    let end = runs
        .iter()
        .flat_map(|r| r.at.last())
        .copied()
        .fold(1.0, f64::max);
    for (area, run) in body.split_evenly((runs.len(), 1)).iter().zip(runs) {
        let (main, strip) = area.split_vertically(MAIN_HEIGHT);
        draw_main(&main, run, peak, end)?;
        draw_latency(&strip, run, end)?;
    }
    header.present()?;
    Ok(())
}

fn draw_main(area: &Area<'_>, run: &Run<'_>, peak: u32, end: f64) -> Result<(), Box<dyn Error>> {
    let mut chart = ChartBuilder::on(area)
        .caption(&run.title, ("sans-serif", 17))
        .margin(8)
        .x_label_area_size(0)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..end, 0u32..peak + peak / 10)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("requests")
        .draw()?;
    let series = |values: &[u32]| -> Vec<(f64, u32)> {
        run.at.iter().copied().zip(values.iter().copied()).collect()
    };
    chart.draw_series(LineSeries::new(
        series(run.capacity),
        CAPACITY.stroke_width(1),
    ))?;
    chart.draw_series(LineSeries::new(
        series(run.in_flight),
        IN_FLIGHT.stroke_width(1),
    ))?;
    chart.draw_series(LineSeries::new(series(run.limit), LIMIT.stroke_width(2)))?;
    Ok(())
}

fn draw_latency(area: &Area<'_>, run: &Run<'_>, end: f64) -> Result<(), Box<dyn Error>> {
    let top = run
        .latency_ms
        .iter()
        .copied()
        .fold(run.unloaded_ms * 2.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .x_label_area_size(25)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..end, 0.0..top * 1.1)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("seconds")
        .y_desc("ms")
        .draw()?;
    chart.draw_series(LineSeries::new(
        [(0.0, run.unloaded_ms), (end, run.unloaded_ms)],
        CAPACITY.stroke_width(1),
    ))?;
    chart.draw_series(LineSeries::new(
        run.at.iter().copied().zip(run.latency_ms.iter().copied()),
        LATENCY.stroke_width(1),
    ))?;
    Ok(())
}
