//! What the tour's charts share: an SVG page of a fixed width whose header holds a title and a
//! subtitle, above a body each chart splits into its panels.

use std::error::Error;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

/// The width of every chart.
pub const WIDTH: u32 = 1280;
/// The height of the header (title, subtitle, legend).
const HEADER_HEIGHT: u32 = 80;

/// A part of a chart.
pub type Area<'b> = DrawingArea<SVGBackend<'b>, Shift>;

/// A white page at `path` whose body is `body_height` high, under a header with `title` and
/// `subtitle` drawn (the legend's room at its right, from `y` 44): the header and the body.
pub fn page<'b>(
    path: &'b Path,
    body_height: u32,
    title: &str,
    subtitle: &str,
) -> Result<(Area<'b>, Area<'b>), Box<dyn Error>> {
    let root = SVGBackend::new(path, (WIDTH, HEADER_HEIGHT + body_height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(HEADER_HEIGHT);
    let bold = ("sans-serif", 22).into_font().style(FontStyle::Bold);
    header.draw(&Text::new(title, (20, 12), bold))?;
    header.draw(&Text::new(subtitle, (20, 44), ("sans-serif", 15)))?;
    Ok((header, body))
}
