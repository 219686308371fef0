//! PNG plots of a benchmark CSV: GB/s and % of the copy roofline against size, one line per
//! kernel (best tile per point), for the 7-tap 1D mask and the 5 x 5 2D mask.

use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Registers a system font for the labels (plotters draws text with it).
fn register_font() -> Result<(), String> {
    let path = FONTS
        .iter()
        .find(|p| Path::new(p).exists())
        .ok_or("no DejaVuSans.ttf font found for the labels")?;
    let bytes: &'static [u8] = Box::leak(
        std::fs::read(path)
            .map_err(|e| e.to_string())?
            .into_boxed_slice(),
    );
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| "cannot load the font".to_string())
}

/// `(kernel -> [(size, gbps, roofline %)])`, best tile per size.
type Series = BTreeMap<String, Vec<(f64, f64, f64)>>;

fn series(csv: &str, dims: &str, mask: &str, shape_filter: &str) -> Series {
    let mut header: Vec<&str> = Vec::new();
    let mut best: BTreeMap<(String, u64), (f64, f64)> = BTreeMap::new();
    for line in csv.lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split(',').collect();
        if header.is_empty() {
            header = fields;
            continue;
        }
        let get = |name: &str| {
            header
                .iter()
                .position(|h| *h == name)
                .map(|i| fields[i])
                .unwrap_or("")
        };
        if get("dims") != dims || get("mask") != mask || !get("name").contains(shape_filter) {
            continue;
        }
        let (kernel, elements) = (
            get("kernel").to_string(),
            get("elements").parse::<u64>().unwrap_or(0),
        );
        let (gbps, roof) = (
            get("gbps").parse().unwrap_or(0.0),
            get("roofline_pct").parse().unwrap_or(0.0),
        );
        let entry = best.entry((kernel, elements)).or_insert((gbps, roof));
        if gbps > entry.0 {
            *entry = (gbps, roof);
        }
    }
    let mut out = Series::new();
    for ((kernel, elements), (gbps, roof)) in best {
        out.entry(kernel)
            .or_default()
            .push((elements as f64, gbps, roof));
    }
    out
}

fn draw(
    series: &Series,
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    roofline: bool,
) -> Result<(), String> {
    let error = |e: &dyn std::fmt::Display| e.to_string();
    let points = series.values().flatten();
    let x_max = points.clone().map(|p| p.0).fold(1.0, f64::max);
    let x_min = points.clone().map(|p| p.0).fold(f64::MAX, f64::min);
    let y_max = if roofline {
        110.0
    } else {
        points.map(|p| p.1).fold(1.0, f64::max) * 1.15
    };
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| error(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x_min..x_max * 1.0001).log_scale(), 0.0..y_max)
        .map_err(|e| error(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|x| format!("2^{:.0}", x.log2()))
        .draw()
        .map_err(|e| error(&e))?;
    for (index, (kernel, points)) in series.iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        let line = points
            .iter()
            .map(|&(x, gbps, roof)| (x, if roofline { roof } else { gbps }));
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
            .map_err(|e| error(&e))?
            .label(kernel.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(line.map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| error(&e))?;
    }
    if roofline {
        chart
            .draw_series(LineSeries::new(
                [(x_min, 100.0), (x_max, 100.0)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| error(&e))?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| error(&e))?;
    root.present().map_err(|e| error(&e))
}

/// Writes `1d_gbps.png`, `1d_roofline.png`, `2d_gbps.png`, `2d_roofline.png` into `dir`.
pub fn plot_csv(csv_path: &Path, dir: &Path) -> Result<(), String> {
    register_font()?;
    let csv =
        std::fs::read_to_string(csv_path).map_err(|e| format!("{}: {e}", csv_path.display()))?;
    let one = series(&csv, "1", "7", "");
    let two = series(&csv, "2", "5x5", "x1/m");
    for (series, dims, what, x_label) in [
        (&one, "1d", "1D, 7 taps", "elements"),
        (&two, "2d", "2D single channel, 5x5", "pixels"),
    ] {
        if series.is_empty() {
            continue;
        }
        draw(
            series,
            &dir.join(format!("{dims}_gbps.png")),
            &format!("{what}: effective bandwidth"),
            x_label,
            "GB/s (input read + output written)",
            false,
        )?;
        draw(
            series,
            &dir.join(format!("{dims}_roofline.png")),
            &format!("{what}: % of the copy roofline"),
            x_label,
            "% of device-to-device copy bandwidth",
            true,
        )?;
    }
    println!("plots written to {}", dir.display());
    Ok(())
}
