//! One measured case, 1D or 2D: its launch, its times, its check, and its CSV row.

use crate::Bench;
use crate::ceilings::Ceilings;
use crate::check::{check_1d, check_2d};
use crate::report::Row;
use crate::timing::measure;
use conv_host::{Conv1dOptions, Conv2dOptions, Kernel, LaunchPlan};
use ndarray::{Array1, Array2, Array3};

/// One 1D case to measure: a signal of `2^log2` elements.
pub(crate) struct Case1d<'a> {
    pub(crate) input: &'a Array1<f32>,
    pub(crate) mask: &'a Array1<f32>,
    pub(crate) log2: u32,
    pub(crate) options: Conv1dOptions,
    pub(crate) cpu_ms: Option<f64>,
}

impl Case1d<'_> {
    /// Times the case on `bench`'s engine and checks its output with `bench`'s generator.
    pub(crate) fn measure(&self, bench: &mut Bench<'_>) -> Result<Row, String> {
        let (input, mask, options) = (self.input, self.mask, &self.options);
        let (engine, (n, taps)) = (bench.engine, (input.len(), mask.len()));
        let launch = engine.plan1d(n, taps, options).map_err(|e| e.to_string())?;
        let (output, kernel_ms, end_to_end_ms) = measure(
            |runs| engine.time_correlate1d(input, mask, options, runs),
            || engine.correlate1d(input, mask, options).map(drop),
        )?;
        let tile = launch.block.0;
        let measured = Measured {
            name: format!("1d/{}/n2^{}/m{taps}/t{tile}", options.kernel, self.log2),
            dims: 1,
            elements: n,
            taps,
            mask: taps.to_string(),
            tile: tile.to_string(),
            kernel_ms,
            end_to_end_ms,
            cpu_ms: self.cpu_ms,
            reduction: predicted_reduction(&launch, (1, taps), 1),
            max_error: check_1d(input.view(), mask.view(), output.view(), &mut bench.rng),
            launch,
        };
        Ok(measured.into_row(&bench.ceilings))
    }
}

/// One 2D case to measure.
pub(crate) struct Case2d<'a> {
    pub(crate) image: &'a Array3<f32>,
    pub(crate) mask: &'a Array2<f32>,
    pub(crate) options: Conv2dOptions,
    pub(crate) cpu_ms: Option<f64>,
}

impl Case2d<'_> {
    /// Times the case on `bench`'s engine and checks its output with `bench`'s generator.
    pub(crate) fn measure(&self, bench: &mut Bench<'_>) -> Result<Row, String> {
        let (image, mask, options) = (self.image, self.mask, &self.options);
        let launch = bench
            .engine
            .plan2d(mask, image.dim(), options)
            .map_err(|e| e.to_string())?;
        let (output, kernel_ms, end_to_end_ms) = measure(
            |runs| bench.engine.time_correlate2d(image, mask, options, runs),
            || bench.engine.correlate2d(image, mask, options).map(drop),
        )?;
        let (side, channels) = (image.dim().0, image.dim().2);
        let mask_name = format!("{}x{}", mask.dim().0, mask.dim().1);
        let tile_name = format!("{}x{}", launch.block.0, launch.block.1);
        let measured = Measured {
            name: format!(
                "2d/{}/{side}x{side}x{channels}/m{mask_name}/t{tile_name}",
                options.kernel
            ),
            dims: 2,
            elements: image.len(),
            taps: mask.len(),
            mask: mask_name,
            tile: tile_name,
            kernel_ms,
            end_to_end_ms,
            cpu_ms: self.cpu_ms,
            reduction: predicted_reduction(&launch, mask.dim(), channels),
            max_error: check_2d(image.view(), mask, output.view(), &mut bench.rng),
            launch,
        };
        Ok(measured.into_row(&bench.ceilings))
    }
}

/// One case: what identifies it and what was measured.
struct Measured {
    name: String,
    dims: u8,
    elements: usize,
    taps: usize,
    mask: String,
    tile: String,
    kernel_ms: f64,
    end_to_end_ms: f64,
    cpu_ms: Option<f64>,
    reduction: Option<f64>,
    max_error: f64,
    launch: LaunchPlan,
}

impl Measured {
    /// The CSV row, with bandwidth and FLOP rate against this run's ceilings.
    fn into_row(self, ceilings: &Ceilings) -> Row {
        let gbps = 2.0 * 4.0 * self.elements as f64 / (self.kernel_ms * 1e6);
        let gflops = 2.0 * self.taps as f64 * self.elements as f64 / (self.kernel_ms * 1e6);
        Row {
            name: self.name,
            dims: self.dims,
            kernel: self.launch.kernel,
            entry_point: self.launch.entry_point,
            elements: self.elements,
            taps: self.taps,
            mask: self.mask,
            tile: self.tile,
            kernel_ms: self.kernel_ms,
            gbps,
            roofline_pct: 100.0 * gbps / ceilings.copy_gbps,
            gflops,
            fma_pct: 100.0 * gflops / ceilings.fma_gflops,
            end_to_end_ms: self.end_to_end_ms,
            cpu_ms: self.cpu_ms,
            reduction: self.reduction,
            max_error: self.max_error,
        }
    }
}

/// The textbook's predicted reduction of global-memory reads for the tiled designs
/// (Fig. 7.22): reads of the basic kernel over reads of the tiled one, for an interior block.
fn predicted_reduction(plan: &LaunchPlan, mask: (usize, usize), channels: usize) -> Option<f64> {
    if !matches!(plan.kernel, Kernel::Tiled | Kernel::TiledL2) {
        return None;
    }
    let (ox, oy) = (
        plan.output_tile.0 as f64 / channels as f64,
        f64::from(plan.output_tile.1),
    );
    let (mh, mw) = (mask.0 as f64, mask.1 as f64);
    Some(ox * oy * mh * mw / ((ox + mw - 1.0) * (oy + mh - 1.0)))
}
