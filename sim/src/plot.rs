//! Plots: time series written as SVG, because people would rather look than read.

use crate::error::SimError;
use plotters::prelude::*;
use std::path::Path;

/// One line on a plot.
#[derive(Debug, Clone)]
pub struct Series {
    /// Its name in the legend.
    pub name: String,
    /// Its points, `(x, y)`.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (a theoretical line) rather than solid (a measured one).
    pub dashed: bool,
}

impl Series {
    /// A solid line.
    pub fn measured(name: &str, points: Vec<(f64, f64)>) -> Self {
        Self { name: name.to_owned(), points, dashed: false }
    }

    /// A dashed line.
    pub fn theory(name: &str, points: Vec<(f64, f64)>) -> Self {
        Self { name: name.to_owned(), points, dashed: true }
    }
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Writes `series` as an SVG line chart at `path`.
pub fn time_series(path: &Path, title: &str, x_label: &str, y_label: &str, series: &[Series]) -> Result<(), SimError> {
    let failed = |e: String| SimError::Output { what: path.display().to_string(), message: e };
    let points = series.iter().flat_map(|s| s.points.iter());
    let (mut x_max, mut y_max, mut y_min) = (f64::MIN, f64::MIN, f64::MAX);
    let mut x_min = f64::MAX;
    for &(x, y) in points {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if x_min > x_max {
        return Err(failed("there is nothing to plot".to_owned()));
    }
    let pad = ((y_max - y_min) * 0.05).max(1e-9);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_min..x_max.max(x_min + 1e-9), (y_min - pad)..(y_max + pad))
        .map_err(|e| failed(e.to_string()))?;
    chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(|e| failed(e.to_string()))?;
    for (i, line) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let style = ShapeStyle { color: colour.to_rgba(), filled: false, stroke_width: 2 };
        let drawn = if line.dashed {
            chart.draw_series(DashedLineSeries::new(line.points.iter().copied(), 8, 6, style))
        } else {
            chart.draw_series(LineSeries::new(line.points.iter().copied(), style))
        };
        drawn
            .map_err(|e| failed(e.to_string()))?
            .label(line.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| failed(e.to_string()))?;
    root.present().map_err(|e| failed(e.to_string()))
}
