//! 2D correlation and convolution of images: single-channel `H x W` arrays and interleaved
//! `H x W x C` arrays, one mask applied to every channel.

/// The table `(size, channels, name)` of a family of 2D entry points that `conv-kernels`
/// declares for the given sizes x `REGISTER_CHANNELS` (1, 3, 4), named
/// `{prefix}{size}_c{channels}` (a unit test checks the tables against the abi's sizes).
macro_rules! entry_point_table {
    ($prefix:literal: $($size:literal),+ $(,)?) => {
        [$(
            ($size, 1, concat!($prefix, stringify!($size), "_c1")),
            ($size, 3, concat!($prefix, stringify!($size), "_c3")),
            ($size, 4, concat!($prefix, stringify!($size), "_c4")),
        )+]
    };
}

pub(crate) mod reference;
mod separable;
mod separable_tma;
mod stream_tma;
mod tensor_copy;

#[cfg(test)]
pub(crate) use separable::SEPARABLE_ENTRY_POINTS;
pub use separable::SEPARABLE_TOLERANCE;
#[cfg(test)]
pub(crate) use separable_tma::ENTRY_POINTS as TMA_ENTRY_POINTS;
#[cfg(test)]
pub(crate) use stream_tma::ENTRY_POINTS as STREAM_TMA_ENTRY_POINTS;

use crate::abi::{
    Conv2dParams, MASK_CAPACITY, REGISTER_CHANNELS, SEPARABLE_CHUNK_ROWS, SEPARABLE_THREADS,
    SEPARABLE_WIDE_CHUNK_ROWS, SEPARABLE_WIDE_STRIP, STREAM_MASKS, STREAM_SHORT_STEP_ROWS,
    StreamLayout, TMA_BOX_WIDTH, WIDE_BLOCK, WIDE_MASK_WIDTHS, WIDE_OUTPUTS, WIDE_ROWS,
    wide_row_words,
};
use crate::engine::{DeviceInfo, Engine};
use crate::error::{ConvError, Result};
use crate::layout::{check_output, pack_pitched, unpack_pitched};
use crate::mask::anchor;
use crate::options::{BoundaryMode, Clamp, Kernel};
use crate::plan::{EntryPoints, Launch, LaunchPlan, check_block};
use cudarc::driver::{DeviceRepr, LaunchConfig};
use ndarray::{Array, ArrayBase, ArrayViewMut, Data, Dimension, Ix2, Ix3, RemoveAxis, s};

// SAFETY: `Conv2dParams` is `repr(C)`, `Copy`, plain integers and floats, declared identically
// by the kernels (same source file).
unsafe impl DeviceRepr for Conv2dParams {}

/// Threads per block (x along a row, y down the rows) when [`Conv2dOptions::tile`] is `None`.
pub const DEFAULT_TILE_2D: (u32, u32) = (32, 8);

/// Default block of the textbook tiled kernel, which covers the input tile (output tile plus
/// halo), so it is taller than the others.
pub const DEFAULT_TILE_2D_TILED: (u32, u32) = (32, 16);

/// Default block of the tiled kernel for masks wider or taller than 16, whose halo is at least
/// as wide as the block: the output tile is then the block, 16 x 16.
pub const LARGE_MASK_TILE_2D: (u32, u32) = (16, 16);

/// Row alignment of device images, in elements: 32 `f32` = 128 bytes, so every row starts on a
/// memory-transaction boundary (the textbook's padded format, Fig. 7.15).
const PITCH_ALIGNMENT: usize = 32;

const ENTRY_POINTS: EntryPoints = EntryPoints {
    basic: "conv2d_basic",
    constant: "conv2d_constant",
    tiled: "conv2d_tiled",
    tiled_global_mask: "conv2d_tiled_global_mask",
    tiled_l2: "conv2d_tiled_l2",
    tiled_l2_global_mask: "conv2d_tiled_l2_global_mask",
};

mod sealed {
    pub trait Sealed {}
    impl Sealed for ndarray::Ix2 {}
    impl Sealed for ndarray::Ix3 {}
}

/// The array shapes the 2D operations take: `Ix2` (`H x W`, one channel) and `Ix3`
/// (`H x W x C`, interleaved channels such as RGB or RGBA).
pub trait ImageDim: Dimension + RemoveAxis + sealed::Sealed {
    /// `(height, width, channels)` of an array of this shape.
    fn image_shape(shape: &[usize]) -> (usize, usize, usize);
}

impl ImageDim for Ix2 {
    fn image_shape(shape: &[usize]) -> (usize, usize, usize) {
        (shape[0], shape[1], 1)
    }
}

impl ImageDim for Ix3 {
    fn image_shape(shape: &[usize]) -> (usize, usize, usize) {
        (shape[0], shape[1], shape[2])
    }
}

/// Options of a 2D correlation or convolution.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Conv2dOptions {
    /// How the image continues past its edges (each axis extended independently).
    pub mode: BoundaryMode,
    /// SciPy's origin per axis, `[rows, columns]`.
    pub origin: [isize; 2],
    /// Kernel design; `Auto` picks one.
    pub kernel: Kernel,
    /// Threads per block `(x, y)`: x along a row (pixels x channels), y down the rows.
    pub tile: Option<(u32, u32)>,
    /// Clamp every output to a range.
    pub clamp: Option<Clamp>,
}

/// A mask in correlation order with its anchor.
pub(crate) struct Mask2d {
    pub(crate) values: Vec<f32>,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) top: usize,
    pub(crate) left: usize,
}

/// Validates the origins and orients the mask (flipped on both axes for convolution).
pub(crate) fn orient2d<T: Data<Elem = f32>>(
    mask: &ArrayBase<T, Ix2>,
    origin: [isize; 2],
    flip: bool,
) -> Result<Mask2d> {
    let (rows, cols) = mask.dim();
    let top = anchor(rows, origin[0], flip)?;
    let left = anchor(cols, origin[1], flip)?;
    let oriented = if flip {
        mask.slice(s![..;-1, ..;-1])
    } else {
        mask.view()
    };
    Ok(Mask2d {
        values: oriented.iter().copied().collect(),
        rows,
        cols,
        top,
        left,
    })
}

/// Chooses the entry point, block, output tile and shared memory for an image of `height x
/// width x channels`, and checks them.
fn plan(
    device: &DeviceInfo,
    mask: &Mask2d,
    (height, width, channels): (usize, usize, usize),
    (kernel, mode): (Kernel, BoundaryMode),
    tile: Option<(u32, u32)>,
) -> Result<LaunchPlan> {
    let (rows, cols) = (mask.rows, mask.cols);
    match kernel {
        Kernel::Separable | Kernel::SeparableTma if separable::factor(mask).is_none() => {
            return Err(ConvError::InvalidLaunch {
                kernel: "conv2d_separable",
                reason: format!(
                    "the {rows} x {cols} mask is not separable: no column x row product matches \
                     every tap within {SEPARABLE_TOLERANCE:e} relative"
                ),
            });
        }
        Kernel::Separable => return separable::plan(device, (rows, cols), channels, tile),
        Kernel::SeparableTma => {
            return tensor_copy::plan(device, kernel, mask, (channels, mode), tile);
        }
        Kernel::RegisterTiledTma => {
            return tensor_copy::plan(device, kernel, mask, (channels, mode), tile);
        }
        // A 1 x N or N x 1 mask gains nothing from two passes. The wide separable kernels
        // beat the register-tiled ones at every size they have (H200, 8192^2: 3 x 3 0.149
        // against 0.173 ms, 5 x 5 0.159 against 0.182, 9 x 9 0.168 against 0.334); the general
        // one only where no register-tiled kernel exists or the mask is large (see
        // `general_separable_wins`), and on images large enough that the seeds do not beat it
        // (`general_separable_pays_off`).
        Kernel::Auto
            if rows > 1
                && cols > 1
                && (separable::has_wide_kernel((rows, cols), channels)
                    || general_separable_wins(rows, cols)
                    || register_entry_point(device, (rows, cols), channels).is_none())
                && separable::factor(mask).is_some() =>
        {
            // Hopper, zero border: the same passes staged by tensor copies, where faster.
            if separable_tma::auto_prefers(rows, height.saturating_mul(width))
                && let Ok(plan) =
                    tensor_copy::plan(device, Kernel::SeparableTma, mask, (channels, mode), tile)
            {
                return Ok(plan);
            }
            if let Ok(plan) = separable::plan(device, (rows, cols), channels, tile)
                && (separable::is_wide(&plan)
                    || general_separable_pays_off(
                        height.saturating_mul(width).saturating_mul(channels),
                        rows.saturating_mul(cols),
                        device.multiprocessor_count,
                    ))
            {
                return Ok(plan);
            }
        }
        _ => {}
    }
    // Auto, general masks: the register-tiled kernels (the streaming design for square masks
    // up to 9 x 9, the wide design for masks 9 to 31 wide; 31 x 31 on an H200: 2.48 ms against
    // 17.9 ms for the tiled kernel) where the image fills the GPU (`wide_fills_device`); else
    // a seed design (`plan_seed`).
    if kernel == Kernel::RegisterTiled {
        return plan_register_tiled(device, (rows, cols), channels, tile);
    }
    if kernel == Kernel::Auto
        && let Ok(plan) = plan_register_tiled(device, (rows, cols), channels, tile)
        && (is_stream(&plan)
            || wide_fills_device(
                &plan,
                (height, width, channels),
                device.multiprocessor_count,
            ))
    {
        // Hopper, zero border: the streaming passes staged by tensor copies, where faster.
        if is_stream(&plan)
            && stream_tma::auto_prefers(rows, channels, height.saturating_mul(width))
            && let Ok(plan) = tensor_copy::plan(
                device,
                Kernel::RegisterTiledTma,
                mask,
                (channels, mode),
                tile,
            )
        {
            return Ok(plan);
        }
        return Ok(plan);
    }
    plan_seed(device, (rows, cols), channels, kernel, tile)
}

/// Whether the wide register-tiled `plan` launches enough blocks on an image of `height x width
/// x channels` to beat the tiled kernel: at least one per five SMs. Each of its threads computes
/// 32 outputs from up to 31 x 31 taps, so a block takes as long on a small image as on a large
/// one (H100, 31 x 31: 0.058 ms at 128^2, 0.066 ms at 1024^2), where the tiled kernel's time
/// grows with the image: with 132 SMs, the tiled kernel was faster at 4 to 24 wide blocks by
/// 1.1 to 2.2 times (128^2 to 384^2 with one channel; 15 x 15 at 384^2, 24 blocks, equal) and
/// slower from 32 blocks on, up to 1.6 times (15 x 15 at 512^2).
fn wide_fills_device(
    plan: &LaunchPlan,
    (height, width, channels): (usize, usize, usize),
    multiprocessors: u32,
) -> bool {
    let (tile_w, tile_h) = (plan.output_tile.0 as usize, plan.output_tile.1 as usize);
    let blocks = width
        .saturating_mul(channels)
        .div_ceil(tile_w.max(1))
        .saturating_mul(height.div_ceil(tile_h.max(1)));
    blocks.saturating_mul(5) >= multiprocessors as usize
}

/// Output elements of a tiled-kernel block of `block` threads for a halo of `halo` (elements,
/// rows): the block covers the input tile, so its output tile is the block less the halo, or
/// the whole block where the halo is at least as wide (the halo then loads in steps).
fn tiled_output_tile(block: (u32, u32), halo: (u64, u64)) -> (u32, u32) {
    let shrink = |threads: u32, halo: u64| {
        if u64::from(threads) > halo {
            threads - halo as u32
        } else {
            threads
        }
    };
    (shrink(block.0, halo.0), shrink(block.1, halo.1))
}

/// Masks of more taps than this that no faster design takes run on the tiled kernel under
/// `Auto`, smaller ones on the constant-mask kernel.
const AUTO_TILED_ABOVE_TAPS: usize = 25;

/// The tiled kernel's block when the caller names none: of [`DEFAULT_TILE_2D_TILED`],
/// [`DEFAULT_TILE_2D`] and [`LARGE_MASK_TILE_2D`], the one with the most outputs per thread
/// for this halo. A block just wider than the halo leaves a sliver of outputs (15 x 15 in 16 x
/// 16 threads: 2 x 2), which made the tiled kernel up to 20 times slower than with the best
/// of the three, and which of the three is best depends on the mask and channels (H100: 15 x
/// 15, one channel: 32 x 8; 31 x 31: 16 x 16; 5 x 11 over 3 channels, a halo 30 elements wide:
/// 16 x 16).
fn tiled_default_block(halo: (u64, u64)) -> (u32, u32) {
    let outputs = |block: (u32, u32)| {
        let (x, y) = tiled_output_tile(block, halo);
        u64::from(x) * u64::from(y)
    };
    let threads = |block: (u32, u32)| u64::from(block.0) * u64::from(block.1);
    [DEFAULT_TILE_2D_TILED, DEFAULT_TILE_2D, LARGE_MASK_TILE_2D]
        .into_iter()
        .reduce(|best, next| {
            if outputs(next) * threads(best) > outputs(best) * threads(next) {
                next
            } else {
                best
            }
        })
        .unwrap_or(DEFAULT_TILE_2D)
}

/// Plans one of the four seed designs (`Auto` stands for the tiled kernel for masks of more
/// than `AUTO_TILED_ABOVE_TAPS` taps, the constant-mask kernel up to it).
fn plan_seed(
    device: &DeviceInfo,
    (rows, cols): (usize, usize),
    channels: usize,
    kernel: Kernel,
    tile: Option<(u32, u32)>,
) -> Result<LaunchPlan> {
    let large = rows.saturating_mul(cols) > AUTO_TILED_ABOVE_TAPS;
    let fits = rows.saturating_mul(cols) <= MASK_CAPACITY;
    let (kernel, entry_point) = match kernel {
        Kernel::Auto if large => ENTRY_POINTS.select(Kernel::Tiled, fits),
        other => ENTRY_POINTS.select(other, fits),
    };
    let halo = ((cols as u64 - 1) * channels as u64, rows as u64 - 1);
    let block = tile.unwrap_or(match kernel {
        Kernel::Tiled => tiled_default_block(halo),
        _ => DEFAULT_TILE_2D,
    });
    // The textbook's design: output tile = block - halo, so each thread loads one element.
    let (output_tile, shared_floats) = match kernel {
        Kernel::Tiled => {
            let tile = tiled_output_tile(block, halo);
            (
                tile,
                (u64::from(tile.0) + halo.0) * (u64::from(tile.1) + halo.1),
            )
        }
        Kernel::TiledL2 => (block, u64::from(block.0) * u64::from(block.1)),
        _ => (block, 0),
    };
    check_block(device, entry_point, block, shared_floats * 4)?;
    Ok(LaunchPlan {
        kernel,
        entry_point,
        block,
        output_tile,
        shared_memory_bytes: (shared_floats * 4) as u32,
        mask_in_constant_memory: fits && entry_point != ENTRY_POINTS.basic,
    })
}

impl Engine {
    /// The kernel, block, output tile and shared memory that [`Engine::correlate2d`] with this
    /// mask and options would use on an image of `(height, width, channels)`, or the error it
    /// would return. `Auto`'s choice depends on all three: the mask's values (separable masks
    /// run as two passes) and the image's size (small images, which would leave most SMs idle
    /// under the wide register-tiled kernel, run on the tiled one).
    ///
    /// ```no_run
    /// use conv_host::{Conv2dOptions, Engine};
    /// let engine = Engine::new()?;
    /// let general = ndarray::Array2::from_shape_fn((15, 15), |(i, j)| (i * 15 + j) as f32);
    /// let small = engine.plan2d(&general, (128, 128, 1), &Conv2dOptions::default())?;
    /// let large = engine.plan2d(&general, (4096, 4096, 1), &Conv2dOptions::default())?;
    /// // On an H100: the tiled kernel at 128^2, the wide register-tiled one at 4096^2.
    /// println!("{} / {}", small.kernel, large.kernel);
    /// # Ok::<(), conv_host::ConvError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Engine::correlate2d`], for the mask and options.
    pub fn plan2d<T: Data<Elem = f32>>(
        &self,
        mask: &ArrayBase<T, Ix2>,
        (height, width, channels): (usize, usize, usize),
        options: &Conv2dOptions,
    ) -> Result<LaunchPlan> {
        let mask = orient2d(mask, options.origin, false)?;
        self.plan_oriented(&mask, (height, width, channels), options)
    }

    fn plan_oriented(
        &self,
        mask: &Mask2d,
        (height, width, channels): (usize, usize, usize),
        options: &Conv2dOptions,
    ) -> Result<LaunchPlan> {
        plan(
            self.device(),
            mask,
            (height, width, channels.max(1)),
            (options.kernel, options.mode),
            options.tile,
        )
    }

    /// 2D correlation on the GPU: `out[y, x, c] = sum_{i,j} mask[i, j] *
    /// in[y + i - rows/2 - origin[0], x + j - cols/2 - origin[1], c]`, ghost cells by
    /// `options.mode`. Takes `H x W` or interleaved `H x W x C` arrays of any layout.
    ///
    /// ```no_run
    /// use conv_host::{Conv2dOptions, Engine, BoundaryMode};
    /// let engine = Engine::new()?;
    /// let rgb = ndarray::Array3::<f32>::ones((480, 640, 3));
    /// let box3 = ndarray::Array2::from_elem((3, 3), 1.0 / 9.0);
    /// let options = Conv2dOptions { mode: BoundaryMode::Nearest, ..Default::default() };
    /// let blurred = engine.correlate2d(&rgb, &box3, &options)?;
    /// # Ok::<(), conv_host::ConvError>(())
    /// ```
    ///
    /// # Errors
    /// [`ConvError::EmptyMask`], [`ConvError::InvalidOrigin`], [`ConvError::InvalidClamp`],
    /// [`ConvError::InvalidLaunch`], [`ConvError::OutOfMemory`], [`ConvError::Driver`]. An empty
    /// image (any side 0, zero channels included) gives an empty output.
    pub fn correlate2d<S, T, D>(
        &self,
        image: &ArrayBase<S, D>,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
    ) -> Result<Array<f32, D>>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
        D: ImageDim,
    {
        let mut output = Array::zeros(image.raw_dim());
        self.filter2d(image, mask, options, false, output.view_mut(), 1)?;
        Ok(output)
    }

    /// [`Engine::correlate2d`] into a caller's view of the image's shape.
    ///
    /// # Errors
    /// As [`Engine::correlate2d`], plus [`ConvError::ShapeMismatch`] and
    /// [`ConvError::OverlappingOutput`].
    pub fn correlate2d_into<S, T, D>(
        &self,
        image: &ArrayBase<S, D>,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
        output: ArrayViewMut<'_, f32, D>,
    ) -> Result<()>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
        D: ImageDim,
    {
        self.filter2d(image, mask, options, false, output, 1)
            .map(drop)
    }

    /// 2D convolution on the GPU: correlation with the mask flipped on both axes, as
    /// `scipy.ndimage.convolve`.
    ///
    /// # Errors
    /// As [`Engine::correlate2d`].
    pub fn convolve2d<S, T, D>(
        &self,
        image: &ArrayBase<S, D>,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
    ) -> Result<Array<f32, D>>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
        D: ImageDim,
    {
        let mut output = Array::zeros(image.raw_dim());
        self.filter2d(image, mask, options, true, output.view_mut(), 1)?;
        Ok(output)
    }

    /// [`Engine::convolve2d`] into a caller's view of the image's shape.
    ///
    /// # Errors
    /// As [`Engine::correlate2d_into`].
    pub fn convolve2d_into<S, T, D>(
        &self,
        image: &ArrayBase<S, D>,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
        output: ArrayViewMut<'_, f32, D>,
    ) -> Result<()>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
        D: ImageDim,
    {
        self.filter2d(image, mask, options, true, output, 1)
            .map(drop)
    }

    /// Benchmark support: the correlation of [`Engine::correlate2d`], with the kernel run
    /// `runs` times on the same device buffers. Returns the output and each run's kernel time in
    /// milliseconds (CUDA events); the output buffer is poisoned with NaN once, before the runs.
    ///
    /// # Errors
    /// As [`Engine::correlate2d`].
    pub fn time_correlate2d<S, T, D>(
        &self,
        image: &ArrayBase<S, D>,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
        runs: usize,
    ) -> Result<(Array<f32, D>, Vec<f32>)>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
        D: ImageDim,
    {
        let mut output = Array::zeros(image.raw_dim());
        let times = self.filter2d(image, mask, options, false, output.view_mut(), runs.max(1))?;
        Ok((output, times))
    }

    fn filter2d<S, T, D>(
        &self,
        image: &ArrayBase<S, D>,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
        flip: bool,
        output: ArrayViewMut<'_, f32, D>,
        runs: usize,
    ) -> Result<Vec<f32>>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
        D: ImageDim,
    {
        check_output(image, &output)?;
        let mut mask = orient2d(mask, options.origin, flip)?;
        let (height, width, channels) = D::image_shape(image.shape());
        let plan = self.plan_oriented(&mask, (height, width, channels), options)?;
        if matches!(plan.kernel, Kernel::Separable | Kernel::SeparableTma) {
            // The kernel reads the factors in place of the taps (the plan found them).
            mask.values = separable::factor(&mask).ok_or(ConvError::InvalidLaunch {
                kernel: plan.entry_point,
                reason: "the mask is not separable".into(),
            })?;
        }
        let launch = Launch::new(&plan, options.mode, options.clamp, runs)?;
        if image.is_empty() {
            return Ok(Vec::new());
        }
        let pitch = (width * channels).next_multiple_of(PITCH_ALIGNMENT);
        let mask_bytes = if plan.mask_in_constant_memory {
            0
        } else {
            mask.values.len() * 4
        };
        self.ensure_free_memory(
            height
                .saturating_mul(pitch)
                .saturating_mul(8)
                .saturating_add(mask_bytes),
        )?;
        let packed = pack_pitched(image, pitch);
        let mut result = vec![0.0f32; height * pitch];
        let shape = ImageShape {
            height,
            width,
            channels,
            pitch,
        };
        let times = self.launch2d(&packed, shape, &mask, launch, &mut result)?;
        unpack_pitched(&result, pitch, output);
        Ok(times)
    }

    /// Uploads a pitched image, launches the plan `runs` times over as many grids as the height
    /// needs, and downloads the pitched result into `out`; returns each run's kernel time.
    fn launch2d(
        &self,
        image: &[f32],
        shape: ImageShape,
        mask: &Mask2d,
        launch: Launch<'_>,
        out: &mut [f32],
    ) -> Result<Vec<f32>> {
        let (plan, (clamp_lo, clamp_hi)) = (launch.plan, launch.clamp);
        let to_u32 =
            |v: usize| u32::try_from(v).map_err(|_| ConvError::TooLarge { len: image.len() });
        let (height, width, channels) = (
            to_u32(shape.height)?,
            to_u32(shape.width)?,
            to_u32(shape.channels)?,
        );
        let (mask_h, mask_w) = (to_u32(mask.rows)?, to_u32(mask.cols)?);
        let session = self.session()?;
        let device = session.device();
        let elements = (shape.width * shape.channels) as u64;
        let blocks_x = elements.div_ceil(u64::from(plan.output_tile.0));
        let sms = device.multiprocessor_count;
        let tensor_copies = matches!(plan.kernel, Kernel::SeparableTma | Kernel::RegisterTiledTma);
        let strip_step = if let Some(rows) = stream_step_rows(plan.entry_point) {
            Some(rows)
        } else if separable::is_wide(plan) || tensor_copies {
            Some(SEPARABLE_WIDE_CHUNK_ROWS)
        } else if plan.kernel == Kernel::Separable {
            Some(SEPARABLE_CHUNK_ROWS)
        } else {
            None
        };
        let (tile_h, block, shared_memory_bytes) = match strip_step {
            // The strip designs: blocks as tall as their cost model says for this image.
            Some(step) => {
                let (sms, per_sm) = (u64::from(sms), u64::from(session.resident_blocks(plan)?));
                let (strips, slots) = (blocks_x, sms * per_sm);
                let rows_per_block = match plan.kernel {
                    Kernel::SeparableTma => {
                        separable_tma::rows_per_block(height, strips, mask.rows, slots, step)
                    }
                    Kernel::RegisterTiledTma => {
                        stream_tma::rows_per_block(height, strips, mask.rows, (sms, per_sm), step)
                    }
                    _ => separable::strip_rows_per_block(height, strips, mask.rows, slots, step),
                };
                (rows_per_block, plan.block, plan.shared_memory_bytes)
            }
            // Full blocks whatever the image size: fewer rows of threads for small images
            // made the wide register-tiled kernels slower (H200, 1024^2 31x31: 0.207 ms with 2
            // rows of threads, 0.064 ms with 16), as each block then stages a 30-row halo for
            // 4 rows.
            None => (plan.output_tile.1, plan.block, plan.shared_memory_bytes),
        };
        let blocks_y = u64::from(height).div_ceil(u64::from(tile_h));
        if blocks_x > u64::from(device.max_grid_dim.0) {
            return Err(ConvError::TooLarge { len: image.len() });
        }
        let (mode, cval) = launch.mode.code_and_cval();
        let mut buffers = session.stage(plan, image, &mask.values)?;
        if tensor_copies {
            // Contract of the tensor-copy kernels: the map describes the input buffer as
            // uploaded (`height` rows of `width * channels` elements, `pitch` apart) in the
            // boxes the kernel's layout lands.
            let box_dims = if plan.kernel == Kernel::SeparableTma {
                (TMA_BOX_WIDTH as u32, SEPARABLE_WIDE_CHUNK_ROWS)
            } else {
                stream_tma::box_dims(mask.rows, shape.channels)
            };
            session.set_tensor_map(
                &mut buffers,
                (elements, u64::from(height), shape.pitch as u64),
                box_dims,
            )?;
        }
        let max_grid_y = u64::from(device.max_grid_dim.1);
        session.run_conv(
            plan.entry_point,
            &mut buffers,
            blocks_y,
            max_grid_y,
            launch.runs,
            out,
            |block_offset_y, count| {
                // Contract of every conv2d kernel: both buffers hold `height` rows of `pitch >=
                // width * channels` elements (uploaded and allocated above), the mask holds
                // `mask_h * mask_w` taps (in MASK or `device_mask`), shared memory and output
                // tile as `plan` computed for this design, `top < mask_h` and `left < mask_w`.
                let params = Conv2dParams {
                    pitch: shape.pitch as u64,
                    height,
                    width,
                    channels,
                    mask_h,
                    mask_w,
                    top: mask.top as u32,
                    left: mask.left as u32,
                    out_tile_w: plan.output_tile.0,
                    out_tile_h: tile_h,
                    block_offset_y: block_offset_y as u32,
                    mode,
                    cval,
                    clamp_lo,
                    clamp_hi,
                };
                let config = LaunchConfig {
                    grid_dim: (blocks_x as u32, count as u32, 1),
                    block_dim: (block.0, block.1, 1),
                    shared_mem_bytes: shared_memory_bytes,
                };
                (config, params)
            },
        )
    }
}

/// Whether the general separable kernel beats the register-tiled one on a rank-1 `rows x cols`
/// mask that no wide separable kernel covers: above 50 taps. Measured through both kernels on
/// an H100 (one run, one channel, 28 shapes from 3 x 9 to 45 x 31, with the general kernel's
/// blocks sized by `strip_rows_per_block`): at 8192^2 the register-tiled kernel was faster at
/// 3 x 9, 5 x 9, 3 x 11, 3 x 13 and 3 x 15 (at most 45 taps; 3 x 9 0.276 against 0.306 ms)
/// and 7 x 9 (0.324 against 0.331 ms, the one shape this rule puts on its slower side), the
/// separable one at every other (5 x 11 0.321 against 0.333 ms, 9 x 11 0.351 against 0.405,
/// 15 x 31 0.468 against 1.237); at 4096^2 the rule's misses are within 3% (3 x 15 0.107
/// against 0.104 ms).
pub(crate) fn general_separable_wins(rows: usize, cols: usize) -> bool {
    rows.saturating_mul(cols) > 50
}

/// Whether the general separable kernel beats the seeds on an image of `outputs` elements with
/// a rank-1 mask of `taps` taps: where the tiled kernel would do at least 30,000 multiply-adds
/// per SM. The general kernel takes about 0.013 ms on any image up to 512^2 (H100 and H200), the
/// tiled kernel less where its work is small: on both, at 128^2 (one and three channels) and
/// 256^2 (one) with 5 x 7 to 21 x 7 masks, up to 1.4 times faster below the line (5 x 7 at
/// 128^2 x 3: 0.0095 against 0.0133 ms) and at most 1.1 times slower above it (9 x 11 at 128^2
/// x 3); 1.4 times slower or more from 384^2 on.
fn general_separable_pays_off(outputs: usize, taps: usize, multiprocessors: u32) -> bool {
    outputs.saturating_mul(taps) >= 30_000 * multiprocessors as usize
}

/// Geometry of a pitched, interleaved image.
#[derive(Clone, Copy)]
struct ImageShape {
    height: usize,
    width: usize,
    channels: usize,
    pitch: usize,
}

/// The wide register-tiled entry points: `(mask width, channels, name)`, as `conv-kernels`
/// declares them for `WIDE_MASK_WIDTHS x REGISTER_CHANNELS`.
pub(crate) const WIDE_ENTRY_POINTS: &[(u32, u32, &str)] = &entry_point_table!(
    "conv2d_wide_w": 1, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
);

/// The register-tiled entry point for this mask and channel count on `device`, if one was
/// compiled: the streaming design for square masks of `STREAM_MASKS` (in steps of 16 rows where
/// `short_stream_steps_pay_off`), else the wide design for masks of `WIDE_MASK_WIDTHS` columns
/// (any height).
fn register_entry_point(
    device: &DeviceInfo,
    mask: (usize, usize),
    channels: usize,
) -> Option<&'static str> {
    short_stream_steps_pay_off(device)
        .then(|| square_entry_point(STREAM16_ENTRY_POINTS, mask, channels))
        .flatten()
        .or_else(|| square_entry_point(STREAM_ENTRY_POINTS, mask, channels))
        .or_else(|| {
            WIDE_ENTRY_POINTS
                .iter()
                .find(|&&(w, c, _)| mask.1 == w as usize && channels == c as usize)
                .map(|&(_, _, name)| name)
        })
}

/// The streaming entry points in steps of 32 rows: `(mask size, channels, name)`, as
/// `conv-kernels` declares them for `STREAM_MASKS x REGISTER_CHANNELS`.
pub(crate) const STREAM_ENTRY_POINTS: &[(u32, u32, &str)] =
    &entry_point_table!("conv2d_stream_m": 3, 5, 7, 9);

/// The streaming entry points in steps of 16 rows, for `STREAM_SHORT_STEP_MASKS x
/// REGISTER_CHANNELS`.
pub(crate) const STREAM16_ENTRY_POINTS: &[(u32, u32, &str)] =
    &entry_point_table!("conv2d_stream16_m": 3, 5);

/// Input rows per step of the streaming kernel `entry_point`, or `None` for another kernel.
fn stream_step_rows(entry_point: &str) -> Option<u32> {
    let listed = |table: &[(u32, u32, &str)]| table.iter().any(|&(_, _, name)| name == entry_point);
    if listed(STREAM16_ENTRY_POINTS) {
        Some(STREAM_SHORT_STEP_ROWS as u32)
    } else {
        listed(STREAM_ENTRY_POINTS).then_some(SEPARABLE_WIDE_CHUNK_ROWS)
    }
}

/// Whether `plan` runs a streaming kernel.
fn is_stream(plan: &LaunchPlan) -> bool {
    stream_step_rows(plan.entry_point).is_some()
}

/// Device-memory bytes per SM and SM clock cycle, at their peaks, from which the 3 x 3 and 5 x
/// 5 streaming kernels walk steps of 16 rows, four blocks per SM, instead of 32 rows and three
/// blocks: where memory is fast for the SMs, the passes' multiply-adds show unless more blocks
/// cover them; where it is slower, the short steps' extra reads and barriers cost more than
/// they hide. H200 (4.81 TB/s, 132 SMs at 1.98 GHz: 18.4 bytes a cycle), 8192^2 5 x 5: 0.145 to
/// 0.149 against 0.150 ms (`bench --targets`, twenty-sixth session), RGB 4096^2 x 3 0.114 to
/// 0.115 against 0.118 to 0.120; H100 (3.35 TB/s: 12.8 bytes): 0.200 to 0.204 against 0.195 to
/// 0.199 ms, RGB 0.152 to 0.161 against 0.150 to 0.151. Other GPUs are placed by the same
/// figure; none between the two has been measured.
const SHORT_STREAM_STEPS_FROM_BYTES_PER_SM_CYCLE: f64 = 16.0;

/// Whether `device` runs the 3 x 3 and 5 x 5 streaming kernels in steps of 16 rows (see
/// [`SHORT_STREAM_STEPS_FROM_BYTES_PER_SM_CYCLE`]).
fn short_stream_steps_pay_off(device: &DeviceInfo) -> bool {
    let sm_cycles = f64::from(device.multiprocessor_count) * f64::from(device.clock_rate_khz) * 1e3;
    device.peak_memory_bandwidth() >= SHORT_STREAM_STEPS_FROM_BYTES_PER_SM_CYCLE * sm_cycles
}

/// Most shared memory a wide register-tiled block should take, so that two fit on an SM of
/// 228 KiB (Hopper; one fits on smaller ones, and `check_block` rejects what does not).
const WIDE_SHARED_BYTES_TARGET: u64 = 100 * 1024;

/// Shared memory of a wide register-tiled block of `threads_y` rows of threads: its output rows
/// and the mask's `rows - 1` halo rows, staged rows as `wide_row_words` lays them out.
fn wide_shared_bytes(threads_y: u32, rows: usize, cols: usize, channels: usize) -> u64 {
    let staged_rows = u64::from(threads_y * WIDE_ROWS) + rows as u64 - 1;
    staged_rows * wide_row_words(cols as u64, channels as u64) * 4
}

/// The entry point of `table` (`(mask size, channels, name)`) for a square mask of that size and
/// that channel count.
pub(crate) fn square_entry_point(
    table: &[(u32, u32, &'static str)],
    (rows, cols): (usize, usize),
    channels: usize,
) -> Option<&'static str> {
    table
        .iter()
        .find(|&&(m, c, _)| rows == m as usize && cols == m as usize && channels == c as usize)
        .map(|&(_, _, name)| name)
}

/// Plans the register-tiled design, or explains why it does not apply.
fn plan_register_tiled(
    device: &DeviceInfo,
    (rows, cols): (usize, usize),
    channels: usize,
    tile: Option<(u32, u32)>,
) -> Result<LaunchPlan> {
    let invalid = ConvError::invalid_launch("conv2d_register");
    let entry_point = register_entry_point(device, (rows, cols), channels).ok_or_else(|| {
        invalid(format!(
            "no register-tiled kernel for a {rows} x {cols} mask with {channels} channel(s): it is \
             compiled for square masks of {STREAM_MASKS:?} and masks {WIDE_MASK_WIDTHS:?} \
             wide, with {REGISTER_CHANNELS:?} channels"
        ))
    })?;
    let stream_steps = stream_step_rows(entry_point);
    let block = if stream_steps.is_some() {
        (SEPARABLE_THREADS, 1)
    } else {
        // Fewer rows of threads where the staged region would leave one block per SM.
        let mut threads_y = WIDE_BLOCK.1;
        while threads_y > 2
            && wide_shared_bytes(threads_y, rows, cols, channels) > WIDE_SHARED_BYTES_TARGET
        {
            threads_y /= 2;
        }
        (WIDE_BLOCK.0, threads_y)
    };
    if tile.is_some_and(|t| t != block) {
        return Err(invalid(format!(
            "the register-tiled kernel for this mask uses a fixed {block:?} block"
        )));
    }
    if rows * cols > MASK_CAPACITY {
        return Err(invalid(format!(
            "the {rows} x {cols} mask has more than the {MASK_CAPACITY} taps constant memory holds"
        )));
    }
    let (output_tile, shared_bytes) = if let Some(steps) = stream_steps {
        let layout = StreamLayout::new(rows as u64, channels as u64, u64::from(steps));
        (
            (SEPARABLE_WIDE_STRIP, separable::ROWS_PER_BLOCK),
            layout.words * 4,
        )
    } else {
        let bytes = wide_shared_bytes(block.1, rows, cols, channels);
        ((block.0 * WIDE_OUTPUTS, block.1 * WIDE_ROWS), bytes)
    };
    check_block(device, entry_point, block, shared_bytes)?;
    Ok(LaunchPlan {
        kernel: Kernel::RegisterTiled,
        entry_point,
        block,
        output_tile,
        shared_memory_bytes: shared_bytes as u32,
        mask_in_constant_memory: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::STREAM_SHORT_STEP_MASKS;

    /// The entry-point tables are written out (the plan hands out `&'static str` names); they
    /// must list exactly the kernels `conv-kernels` declares for the abi's sizes, by its names.
    #[test]
    fn entry_point_tables_match_the_compiled_sizes() {
        let expected = |sizes: &[u32], prefix: &str| -> Vec<(u32, u32, String)> {
            sizes
                .iter()
                .flat_map(|&m| REGISTER_CHANNELS.iter().map(move |&c| (m, c)))
                .map(|(m, c)| (m, c, format!("conv2d_{prefix}{m}_c{c}")))
                .collect()
        };
        let listed = |table: &[(u32, u32, &str)]| -> Vec<(u32, u32, String)> {
            table
                .iter()
                .map(|&(m, c, n)| (m, c, n.to_string()))
                .collect()
        };
        assert_eq!(
            listed(WIDE_ENTRY_POINTS),
            expected(&WIDE_MASK_WIDTHS, "wide_w")
        );
        assert_eq!(
            listed(STREAM_ENTRY_POINTS),
            expected(&STREAM_MASKS, "stream_m")
        );
        assert_eq!(
            listed(STREAM16_ENTRY_POINTS),
            expected(&STREAM_SHORT_STEP_MASKS, "stream16_m")
        );
        assert_eq!(
            listed(SEPARABLE_ENTRY_POINTS),
            expected(&crate::abi::SEPARABLE_MASKS, "separable_wide_m")
        );
        assert_eq!(
            listed(STREAM_TMA_ENTRY_POINTS),
            expected(&STREAM_MASKS, "stream_tma_m")
        );
    }

    /// The tiled kernel's default block leaves no sliver of outputs (H100 measurements in
    /// `tiled_default_block`'s description).
    #[test]
    fn tiled_default_block_has_the_most_outputs_per_thread() {
        // (halo in elements, halo in rows) -> block
        let cases = [
            ((2, 2), DEFAULT_TILE_2D_TILED),  // 3 x 3
            ((4, 4), DEFAULT_TILE_2D_TILED),  // 5 x 5: 28 x 12 outputs of 512 threads
            ((8, 8), DEFAULT_TILE_2D),        // 9 x 9: 24 x 8 of 256
            ((14, 14), DEFAULT_TILE_2D),      // 15 x 15: 18 x 8 (16 x 16 would leave 2 x 2)
            ((16, 16), LARGE_MASK_TILE_2D),   // 17 x 17: the whole block
            ((30, 30), LARGE_MASK_TILE_2D),   // 31 x 31 (32 x 8 would leave 2 x 8)
            ((30, 4), LARGE_MASK_TILE_2D),    // 5 x 11 over 3 channels (32 x 16: 2 x 12)
            ((18, 20), LARGE_MASK_TILE_2D),   // 21 x 7 over 3 channels
            ((6, 20), DEFAULT_TILE_2D_TILED), // 21 x 7, one channel: 26 x 16 of 512
        ];
        for (halo, block) in cases {
            assert_eq!(tiled_default_block(halo), block, "halo {halo:?}");
        }
    }

    /// Auto leaves the wide register-tiled kernel for images that give it fewer blocks than a
    /// fifth of the SMs.
    #[test]
    fn wide_kernel_needs_a_block_per_five_sms() {
        let wide = LaunchPlan {
            kernel: Kernel::RegisterTiled,
            entry_point: "conv2d_wide_w31_c1",
            block: WIDE_BLOCK,
            output_tile: (WIDE_BLOCK.0 * WIDE_OUTPUTS, WIDE_BLOCK.1 * WIDE_ROWS),
            shared_memory_bytes: 0,
            mask_in_constant_memory: true,
        };
        assert_eq!(wide.output_tile, (256, 32));
        // 132 SMs: 384^2 gives 2 x 12 = 24 blocks, 512^2 32, 256^2 x 3 channels 24.
        assert!(!wide_fills_device(&wide, (384, 384, 1), 132));
        assert!(wide_fills_device(&wide, (512, 512, 1), 132));
        assert!(!wide_fills_device(&wide, (256, 256, 3), 132));
        assert!(wide_fills_device(&wide, (256, 256, 3), 120));
        assert!(!wide_fills_device(&wide, (0, 0, 1), 1));
        assert!(wide_fills_device(
            &wide,
            (usize::MAX, usize::MAX, 4),
            u32::MAX
        ));
    }

    /// Small images with rank-1 masks no wide separable kernel covers go to the seeds (132
    /// SMs: the line is 3.96 million multiply-adds of the tiled kernel).
    #[test]
    fn general_separable_needs_work_for_the_tiled_kernel_to_lose() {
        let sms = 132;
        assert!(!general_separable_pays_off(128 * 128 * 3, 5 * 7, sms));
        assert!(!general_separable_pays_off(256 * 256, 5 * 11, sms));
        assert!(general_separable_pays_off(256 * 256, 9 * 11, sms));
        assert!(general_separable_pays_off(384 * 384, 5 * 7, sms));
        assert!(general_separable_pays_off(128 * 128, 45 * 31, sms));
        assert!(general_separable_pays_off(usize::MAX, usize::MAX, u32::MAX));
    }

    /// The measured shapes `general_separable_wins` was fitted on (H100, 8192^2), each on the
    /// side of its faster kernel but 7 x 9 (2% slower on the separable side).
    #[test]
    fn general_separable_wins_only_for_large_masks() {
        let register_faster = [(3, 9), (5, 9), (3, 11), (3, 13), (3, 15)];
        for (rows, cols) in register_faster {
            assert!(!general_separable_wins(rows, cols), "{rows} x {cols}");
        }
        let separable_faster = [
            (5, 11),
            (5, 13),
            (7, 11),
            (5, 15),
            (7, 13),
            (3, 31),
            (5, 21),
            (9, 11),
            (11, 9),
            (7, 15),
            (13, 9),
            (9, 15),
            (13, 11),
            (11, 15),
            (9, 21),
            (21, 9),
            (7, 31),
            (11, 21),
            (9, 31),
            (15, 31),
            (21, 31),
            (45, 31),
            (61, 61),
        ];
        for (rows, cols) in separable_faster {
            assert!(general_separable_wins(rows, cols), "{rows} x {cols}");
        }
    }

    /// A streaming pass thread `c < 64` reads the quads of its window (elements from `4c` on,
    /// `4 + (M - 1) C` of them, rounded up to quads) from a ring row: they must lie within the
    /// row, cover the window, and the blocks per SM that the build asks for (four in steps of
    /// 16 rows, three in steps of 32) must fit a Hopper SM (228 KiB) with their ring and
    /// column table.
    #[test]
    fn stream_windows_stay_in_their_rows() {
        let steps_of = |mask: u32| {
            let short = STREAM_SHORT_STEP_MASKS.contains(&mask);
            [Some(32), short.then_some(STREAM_SHORT_STEP_ROWS)]
        };
        for &mask in &STREAM_MASKS {
            for step in steps_of(mask).into_iter().flatten() {
                for &channels in &REGISTER_CHANNELS {
                    let (mask, channels) = (u64::from(mask), u64::from(channels));
                    let layout = StreamLayout::new(mask, channels, step);
                    let window = 4 + (mask - 1) * channels;
                    let last_thread = 63;
                    assert!(4 * last_thread + 4 * window.div_ceil(4) <= layout.row_words);
                    assert!(layout.row_words >= u64::from(SEPARABLE_WIDE_STRIP) + window - 4);
                    // A step's rows and the halo, rounded up to whole groups of 8 for the pass.
                    assert_eq!(layout.ring_rows, (step + mask - 1).next_multiple_of(8));
                    assert!(layout.column_table >= layout.ring_rows * layout.row_words);
                    let blocks = if step == 16 { 4 } else { 3 };
                    let what = format!("{mask} x {channels}, steps of {step}");
                    assert!(blocks * layout.words * 4 <= 228 * 1024, "{what}");
                }
            }
        }
    }

    /// The 3 x 3 and 5 x 5 masks run in steps of 16 rows on an H200, in steps of 32 on an H100
    /// and on a GPU whose driver does not give the memory's clock; the other sizes always in
    /// steps of 32.
    #[test]
    fn short_stream_steps_follow_the_memory_speed() {
        let h100 = crate::conv2d::separable_tma::tests::device((9, 0));
        let h200 = DeviceInfo {
            memory_clock_rate_khz: 3_130_000,
            memory_bus_width_bits: 6144,
            ..h100.clone()
        };
        let unknown = DeviceInfo {
            memory_clock_rate_khz: 0,
            ..h200.clone()
        };
        assert!((h100.peak_memory_bandwidth() - 3.35e12).abs() < 0.01e12);
        assert!((h200.peak_memory_bandwidth() - 4.81e12).abs() < 0.01e12);
        let steps = |device: &DeviceInfo, m: usize, c: usize| {
            stream_step_rows(register_entry_point(device, (m, m), c).unwrap())
        };
        for c in [1, 3, 4] {
            for m in [3, 5] {
                assert_eq!(steps(&h200, m, c), Some(16));
                assert_eq!(steps(&h100, m, c), Some(32));
                assert_eq!(steps(&unknown, m, c), Some(32));
            }
            for m in [7, 9] {
                assert_eq!(steps(&h200, m, c), Some(32));
            }
        }
        assert_eq!(steps(&h200, 11, 1), None);
    }

    /// The wide kernel reads quad `q` of thread `t`'s window (first element `16 t`) at
    /// `wide_word(16 t) + 4 q + 4 (q / 4)` and stages element `lane + 32 k` at
    /// `wide_word(lane) + 40 k`: both must be the elements' own words, the 8 threads of a
    /// quarter-warp must read 8 different groups of 4 banks, and every read stays in the row.
    #[test]
    fn wide_rows_give_compile_time_offsets_and_no_bank_conflicts() {
        use crate::abi::wide_word;
        for (width, channels) in [(1u64, 1u64), (9, 1), (9, 4), (31, 3), (31, 4)] {
            let row_words = wide_row_words(width, channels);
            let window = u64::from(WIDE_OUTPUTS) + (width - 1) * channels;
            for q in 0..window.div_ceil(4) {
                for first_thread in [0u64, 8] {
                    let mut groups: Vec<u64> = (first_thread..first_thread + 8)
                        .map(|t| {
                            let word = wide_word(16 * t) + 4 * q + 4 * (q / 4);
                            assert_eq!(word, wide_word(16 * t + 4 * q));
                            assert!(word + 4 <= row_words, "{width} x {channels}");
                            (word / 4) % 8
                        })
                        .collect();
                    groups.sort_unstable();
                    groups.dedup();
                    assert_eq!(groups.len(), 8, "{width} x {channels}, quad {q}");
                }
            }
            let staged = u64::from(WIDE_BLOCK.0 * WIDE_OUTPUTS) + (width - 1) * channels;
            for rx in 0..staged {
                let (lane, k) = (rx % 32, rx / 32);
                assert_eq!(wide_word(rx), wide_word(lane) + 40 * k);
                assert!(wide_word(rx) < row_words);
            }
        }
    }
}
