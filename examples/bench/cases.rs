//! One measured case, 1D or 2D: its launch, its times, its check, and its CSV row.

use crate::Bench;
use crate::ceilings::Ceilings;
use crate::check::{check_1d, check_2d};
use crate::report::Row;
use crate::timing::measure;
use conv_host::ndimage::{NdOptions, Runs};
use conv_host::{BoundaryMode, ConvError, Engine, Kernel, LaunchPlan};
use ndarray::{Array1, Array2, Array3, Axis};

/// The benchmark's options: the textbook's zero border, `kernel` and `tile`.
pub(crate) fn zero_border(kernel: Kernel, tile: Option<(u32, u32)>) -> NdOptions {
    NdOptions {
        mode: BoundaryMode::Constant(0.0).into(),
        kernel,
        tile,
        ..Default::default()
    }
}

/// A 2D mask one channel deep, for images `H x W x C`.
pub(crate) fn image_mask(mask: &Array2<f32>) -> Array3<f32> {
    mask.clone().insert_axis(Axis(2))
}

/// The design a correlation of an input of `shape` with `weights` runs on.
///
/// # Errors
/// The call's error, or [`ConvError::InvalidDesign`] where the N-D kernels run it.
pub(crate) fn design<D: ndarray::Dimension>(
    engine: &Engine,
    shape: &[usize],
    weights: &ndarray::Array<f32, D>,
    options: &NdOptions,
) -> Result<LaunchPlan, ConvError> {
    match engine.ndimage().plan_correlate(shape, weights, options)? {
        Runs::Design(plan) => Ok(plan),
        _ => Err(ConvError::InvalidDesign {
            kernel: options.kernel,
            reason: "the benchmark's cases run on the designs",
        }),
    }
}

/// One 1D case to measure: a signal of `2^log2` elements.
pub(crate) struct Case1d<'a> {
    pub(crate) input: &'a Array1<f32>,
    pub(crate) mask: &'a Array1<f32>,
    pub(crate) log2: u32,
    pub(crate) options: NdOptions,
    pub(crate) cpu_ms: Option<f64>,
}

impl Case1d<'_> {
    /// Times the case on `bench`'s engine and checks its output with `bench`'s generator.
    pub(crate) fn measure(&self, bench: &mut Bench<'_>) -> Result<Row, String> {
        let (input, mask, options) = (self.input, self.mask, &self.options);
        let (engine, (n, taps)) = (bench.engine, (input.len(), mask.len()));
        let launch = design(engine, &[n], mask, options).map_err(|e| e.to_string())?;
        let nd = engine.ndimage();
        let (output, kernel_ms, end_to_end_ms) = measure(
            |runs| nd.time_correlate(input, mask, options, runs),
            || nd.correlate(input, mask, options).map(drop),
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
    pub(crate) options: NdOptions,
    pub(crate) cpu_ms: Option<f64>,
}

impl Case2d<'_> {
    /// Times the case on `bench`'s engine and checks its output with `bench`'s generator.
    pub(crate) fn measure(&self, bench: &mut Bench<'_>) -> Result<Row, String> {
        let (image, mask, options) = (self.image, self.mask, &self.options);
        let weights = image_mask(mask);
        let launch =
            design(bench.engine, image.shape(), &weights, options).map_err(|e| e.to_string())?;
        let nd = bench.engine.ndimage();
        let (output, kernel_ms, end_to_end_ms) = measure(
            |runs| nd.time_correlate(image, &weights, options, runs),
            || nd.correlate(image, &weights, options).map(drop),
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
            entry_point: self.launch.entry.entry_point(),
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
