//! The launch of a planned 2D operation on one pitched image in device memory: block heights
//! for the strip designs, tensor maps for the tensor-copy designs, and the grids, as many as
//! the image's height needs.

use super::separable::Along;
use super::{Mask2d, register_tiled, register_tiled_tma, separable, separable_tma};
use crate::abi::{
    Conv2dParams, Conv3dParams, SEPARABLE_CHUNK_ROWS, SEPARABLE_WIDE_CHUNK_ROWS,
    SEPARABLE_WIDE_PAIR_STEP_ROWS, TMA_BOX_WIDTH, WIDE_MASK_WIDTHS,
};
use crate::conv3d::image;
use crate::device_array::DeviceDim;
use crate::engine::Engine;
use crate::error::{ConvError, Result};
use crate::options::{BoundaryMode, Kernel};
use crate::plan::{Launch, LaunchPlan, for_each_grid};
use crate::registry::Family;
use crate::session::Session;
use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DeviceRepr, LaunchConfig,
    PushKernelArg,
};
use std::sync::Arc;

/// Geometry of a pitched, interleaved image.
#[derive(Clone, Copy)]
pub(super) struct ImageShape {
    pub(super) height: usize,
    pub(super) width: usize,
    pub(super) channels: usize,
    pub(super) pitch: usize,
}

impl ImageShape {
    /// An image of `height` rows of `width` elements of one channel, without padding.
    fn unpadded(height: usize, width: usize) -> Self {
        Self {
            height,
            width,
            channels: 1,
            pitch: width,
        }
    }

    /// The device layout of an image of `(height, width, channels)` and shape type `D`: rows
    /// `D::pitch` elements apart.
    pub(super) fn of<D: DeviceDim>((height, width, channels): (usize, usize, usize)) -> Self {
        Self {
            height,
            width,
            channels,
            pitch: D::pitch(width * channels),
        }
    }
}

/// The grids of one planned launch over one image: blocks along a row and down the image,
/// block shape, rows per block, shared memory, and the launch parameters they share.
pub(super) struct Grid2d {
    /// Images of a batch, one per grid plane (the streaming kernels only; 1 for the others).
    planes: u64,
    blocks_x: u64,
    pub(super) blocks_y: u64,
    pub(super) max_grid_y: u64,
    block: (u32, u32),
    shared_memory_bytes: u32,
    params: Conv2dParams,
}

impl Grid2d {
    /// The grids of `launch` over an image of `shape` with `mask`, on `session`'s device.
    ///
    /// # Errors
    /// [`ConvError::TooLarge`] for an image whose sides or blocks exceed the kernels' indexing or
    /// the device's grid; driver errors of the occupancy query.
    pub(super) fn new<R>(
        session: &Session<'_>,
        shape: ImageShape,
        mask: &Mask2d<R>,
        launch: Launch<'_>,
    ) -> Result<Self> {
        Self::planes(session, (1, shape), mask, launch)
    }

    /// [`Grid2d::new`] for a batch of `planes` images of `shape`, one per grid plane (the
    /// streaming register-tiled kernels take batches), the blocks' heights chosen for all.
    fn planes<R>(
        session: &Session<'_>,
        (planes, shape): (u64, ImageShape),
        mask: &Mask2d<R>,
        launch: Launch<'_>,
    ) -> Result<Self> {
        let plan = launch.plan;
        let too_large = || ConvError::TooLarge {
            len: shape.height.saturating_mul(shape.pitch),
        };
        let to_u32 = |v: usize| u32::try_from(v).map_err(|_| too_large());
        let (height, width, channels) = (
            to_u32(shape.height)?,
            to_u32(shape.width)?,
            to_u32(shape.channels)?,
        );
        let device = session.device();
        let elements = (shape.width * shape.channels) as u64;
        let blocks_x = elements.div_ceil(u64::from(plan.output_tile.0));
        if blocks_x > u64::from(device.max_grid_dim.0) {
            return Err(too_large());
        }
        let tile_h = match strip_step(plan) {
            // The strip designs: blocks as tall as their cost model says for this image.
            Some(step) => {
                let sms = u64::from(device.multiprocessor_count);
                let per_sm = u64::from(session.resident_blocks(plan)?);
                let (strips, slots) = (blocks_x * planes, sms * per_sm);
                match plan.kernel {
                    Kernel::SeparableTma => {
                        separable_tma::rows_per_block(height, strips, mask.rows, slots, step)
                    }
                    Kernel::RegisterTiledTma => register_tiled_tma::rows_per_block(
                        height,
                        strips,
                        mask.rows,
                        (sms, per_sm),
                        step,
                    ),
                    _ => separable::strip_rows_per_block(height, strips, mask.rows, slots, step),
                }
            }
            // Full blocks whatever the image size: with fewer rows of threads for small
            // images each wide register-tiled block would stage a 30-row halo for 4 rows
            // (measured: PERFORMANCE.md, Approaches measured and not kept).
            None => plan.output_tile.1,
        };
        let (mode, cval) = launch.mode.code_and_cval();
        let (clamp_lo, clamp_hi) = launch.clamp;
        Ok(Self {
            planes,
            blocks_x,
            blocks_y: u64::from(height).div_ceil(u64::from(tile_h)),
            max_grid_y: u64::from(device.max_grid_dim.1),
            block: plan.block,
            shared_memory_bytes: plan.shared_memory_bytes,
            params: Conv2dParams {
                pitch: shape.pitch as u64,
                height,
                width,
                channels,
                mask_h: to_u32(mask.rows)?,
                mask_w: to_u32(mask.cols)?,
                top: mask.top as u32,
                left: mask.left as u32,
                out_tile_w: plan.output_tile.0,
                out_tile_h: tile_h,
                block_offset_y: 0,
                mode,
                cval,
                clamp_lo,
                clamp_hi,
            },
        })
    }

    /// The configuration and parameters of the grid of `count` block rows from `offset` on.
    ///
    /// Contract of every conv2d kernel, which the caller's buffers complete: both buffers hold
    /// `height` rows of `pitch >= width * channels` elements, the mask holds `mask_h * mask_w`
    /// taps (in MASK or a device buffer), shared memory and output tile as the plan computed
    /// for its design, `top < mask_h` and `left < mask_w`.
    pub(super) fn grid(&self, offset: u64, count: u64) -> (LaunchConfig, Conv2dParams) {
        let config = LaunchConfig {
            grid_dim: (self.blocks_x as u32, count as u32, self.planes as u32),
            block_dim: (self.block.0, self.block.1, 1),
            shared_mem_bytes: self.shared_memory_bytes,
        };
        let params = Conv2dParams {
            block_offset_y: offset as u32,
            ..self.params
        };
        (config, params)
    }
}

/// Input rows per step of the strip designs, `None` for the others.
fn strip_step(plan: &LaunchPlan) -> Option<u32> {
    // A native kernel's steps are its `f32` kernel's: the family says them.
    if let Some(rows) = register_tiled::stream_step_rows(plan.entry) {
        Some(rows)
    } else if separable::is_pair(plan) {
        Some(SEPARABLE_WIDE_PAIR_STEP_ROWS)
    } else if separable::is_wide(plan) || uses_tensor_copies(plan) {
        Some(SEPARABLE_WIDE_CHUNK_ROWS)
    } else if plan.kernel == Kernel::Separable {
        Some(SEPARABLE_CHUNK_ROWS)
    } else {
        None
    }
}

/// Whether `plan`'s kernel takes a tensor map of its input in the input's place.
pub(super) fn uses_tensor_copies(plan: &LaunchPlan) -> bool {
    matches!(plan.kernel, Kernel::SeparableTma | Kernel::RegisterTiledTma)
}

/// The tensor map a tensor-copy plan's kernel takes in `input`'s place, `None` for the other
/// designs: `input` as an image of `shape` (`height` rows of `width * channels` elements,
/// `pitch` apart) in the boxes the kernel's layout lands, uploaded on `stream`.
pub(super) fn input_map<T, R>(
    session: &Session<'_>,
    stream: &Arc<CudaStream>,
    (plan, mask): (&LaunchPlan, &Mask2d<R>),
    shape: ImageShape,
    input: &impl DevicePtr<T>,
) -> Result<Option<CudaSlice<u64>>> {
    if !uses_tensor_copies(plan) {
        return Ok(None);
    }
    let boxes = if plan.kernel == Kernel::SeparableTma {
        (TMA_BOX_WIDTH as u32, SEPARABLE_WIDE_CHUNK_ROWS)
    } else {
        register_tiled_tma::box_dims(mask.rows, shape.channels)
    };
    let row = (shape.width * shape.channels) as u64;
    let dims = (row, shape.height as u64, shape.pitch as u64);
    session.tensor_map(stream, input, dims, boxes).map(Some)
}

/// Enqueues the grids of `grid` on `stream`: `plan`'s kernel reading `input` (or `map`, its
/// tensor map) and `mask` (the global-mask kernels), writing `output`. Returns without waiting.
///
/// # Safety
/// `input` and `output` are distinct buffers holding the image `grid` was made for (its
/// `height` rows, `pitch` apart); the mask is where `plan` reads it (in MASK, or in `mask`),
/// written before in `stream`'s order; `map`, given for the tensor-copy kernels, describes
/// `input` ([`input_map`]).
pub(super) unsafe fn enqueue2d<R: DeviceRepr>(
    session: &Session<'_>,
    stream: &Arc<CudaStream>,
    (plan, grid): (&LaunchPlan, &Grid2d),
    (input, map): (&CudaView<'_, u8>, Option<&CudaSlice<u64>>),
    mask: Option<&CudaSlice<R>>,
    output: &mut CudaViewMut<'_, u8>,
) -> Result<()> {
    if image::runs_as_slice(plan) {
        let (volume, blocks) = image::launch_params(
            plan,
            &grid.params,
            (grid.blocks_x, grid.blocks_y),
            session.device().multiprocessor_count,
        );
        let taps = mask.map(CudaSlice::as_view);
        // SAFETY: the 3D kernel over the image as one slice (`launch_params`), its blocks
        // those that cover the grid's tiles and its shared memory the plan's; buffers, mask and stream order as the
        // caller's contract says.
        return unsafe {
            session.launch_volume(
                stream,
                plan.entry,
                (blocks, u64::from(grid.shared_memory_bytes)),
                taps.as_ref(),
                |block_offset| Conv3dParams {
                    block_offset,
                    ..volume
                },
                input,
                output,
            )
        };
    }
    for_each_grid(grid.blocks_y, grid.max_grid_y, |offset, count| {
        let (config, params) = grid.grid(offset, count);
        // SAFETY: the grid meets the conv2d kernels' contract (`Grid2d::grid`), and the
        // buffers, mask and map are as the caller's contract says.
        unsafe {
            session.launch_async(stream, plan.entry, config, |args| {
                match map {
                    Some(map) => args.arg(map),
                    None => args.arg(input),
                };
                if let Some(mask) = mask {
                    args.arg(mask);
                }
                args.arg(&mut *output);
                args.arg(&params);
            })
        }
    })
}

impl Session<'_> {
    /// Enqueues on the session's stream the correlation of each of `rows` contiguous rows of
    /// `len` `f32`, on its own, with `taps` (`left` of them before the output position), ghost
    /// cells by `mode`, clamped to `clamp`: the wide register-tiled kernel with a mask one row
    /// high, from `input` into `output` (both of `rows * len` `f32`). The N-D passes along a
    /// last axis take it: its blocks read whole rows, where the axis kernels leave most of
    /// their threads idle on short lines (measured: PERFORMANCE.md, N-D operations). Returns
    /// `false`, enqueuing nothing, where no wide kernel is compiled for that many taps or `len`
    /// is not a multiple of 4 (the kernel's 16-byte stores).
    ///
    /// # Errors
    /// As [`Session::enqueue_planned`].
    pub(crate) fn enqueue_rows(
        &self,
        (rows, len): (usize, usize),
        (taps, left): (&[f32], usize),
        (mode, clamp): (BoundaryMode, (f32, f32)),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<bool> {
        if !WIDE_MASK_WIDTHS.contains(&(taps.len() as u32)) {
            return Ok(false);
        }
        let mask = Mask2d {
            values: taps.to_vec(),
            rows: 1,
            cols: taps.len(),
            top: 0,
            left,
        };
        let shape = ImageShape::unpadded(rows, len);
        let plan = register_tiled::plan(self.device(), (1, taps.len()), 1, None)?;
        self.enqueue_planned(&plan, (1, shape), &mask, (mode, clamp), input, output)
    }

    /// Enqueues on the session's stream the correlation of each of the `images` of `height`
    /// rows of `width` pixels of `channels` (`f32`, rows without padding, one image after the
    /// other), on its own, with the square `mask`: the streaming register-tiled kernel, one
    /// grid plane per image, from `input` into `output`. A batch `N x H x W (x C)` with a mask
    /// one image deep takes it: the 3D kernel stays far from the copy roofline there
    /// (measured: PERFORMANCE.md, N-D operations). Returns `false`, enqueuing nothing, where
    /// no streaming kernel is compiled for the mask and channels, a row's length is not a
    /// multiple of 4 or the batch exceeds a grid's planes.
    ///
    /// # Errors
    /// As [`Session::enqueue_planned`].
    pub(crate) fn enqueue_planes(
        &self,
        [images, height, width, channels]: [usize; 4],
        mask: &Mask2d<f32>,
        (mode, clamp): (BoundaryMode, (f32, f32)),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<bool> {
        let square = (mask.rows, mask.cols);
        let stream = register_tiled::square_kernel(Family::Conv2dStream, square, channels);
        if stream.is_none() || images > MAX_GRID_PLANES {
            return Ok(false);
        }
        let shape = ImageShape {
            height,
            width,
            channels,
            pitch: width * channels,
        };
        let plan = register_tiled::plan(self.device(), square, channels, None)?;
        self.enqueue_planned(&plan, (images, shape), mask, (mode, clamp), input, output)
    }

    /// Enqueues on the session's stream the correlation of each of the `images` of `height x
    /// width` with `channels` interleaved channels (`f32`, rows without padding, one image
    /// after the other), each channel on its own, with the
    /// rank-1 square mask `column x row` (taps in correlation order, `top` and `left` of them
    /// before the output position): the wide separable kernel, both passes fused, one grid
    /// plane per image, from `input` into `output`. The N-D filters' terms along the last two
    /// axes take it (a Gaussian, Sobel, uniform filter) instead of two axis passes through a
    /// temporary. Returns `false`, enqueuing nothing, where no wide separable kernel is
    /// compiled for the taps and channels, a row is not a multiple of 4 elements or the images
    /// exceed a grid's planes.
    ///
    /// # Errors
    /// As [`Session::enqueue_planned`].
    pub(crate) fn enqueue_separable(
        &self,
        ([images, height, width], channels): ([usize; 3], usize),
        [(column, top), (row, left)]: [(&[f32], usize); 2],
        (mode, clamp): (BoundaryMode, (f32, f32)),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<bool> {
        let side = column.len();
        if row.len() != side
            || !separable::has_wide_kernel((side, side), channels)
            || images > MAX_GRID_PLANES
        {
            return Ok(false);
        }
        // The kernel reads the row factor, then the column factor, in place of the taps.
        let mask = Mask2d {
            values: row.iter().chain(column).copied().collect(),
            rows: side,
            cols: side,
            top,
            left,
        };
        let shape = ImageShape {
            channels,
            pitch: width * channels,
            ..ImageShape::unpadded(height, width)
        };
        let plan = separable::plan(self.device(), (side, side), channels, None)?;
        self.enqueue_planned(&plan, (images, shape), &mask, (mode, clamp), input, output)
    }

    /// Enqueues on the session's stream two rank-1 terms of each of the `images` of `height x
    /// width` (`f32`, rows without padding, one image after the other), `column x row` for
    /// each of `terms` (square, as many taps in all four factors, `top` and `left` of them
    /// before the output position), combined by `combination` (`TERMS_SUM` or
    /// `TERMS_MAGNITUDE`): the wide separable pair kernel, one grid plane per image, from
    /// `input` into `output`. The 2D Laplacians and gradient magnitudes of Gaussians take it.
    /// Returns `false`, enqueuing nothing, where no pair kernel is compiled for the taps,
    /// `width` is not a multiple of 4 or the images exceed a grid's planes.
    ///
    /// # Errors
    /// As [`Session::enqueue_planned`].
    pub(crate) fn enqueue_separable_pair(
        &self,
        [images, height, width]: [usize; 3],
        (terms, (top, left)): ([[&[f32]; 2]; 2], (usize, usize)),
        (combination, mode, clamp): (u32, BoundaryMode, (f32, f32)),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<bool> {
        let side = terms[0][0].len();
        let square = terms.iter().flatten().all(|factor| factor.len() == side);
        if !square || images > MAX_GRID_PLANES {
            return Ok(false);
        }
        let Some(plan) = separable::pair_plan(self.device(), side).transpose()? else {
            return Ok(false);
        };
        // The kernel reads both row factors, both column factors, then the combination.
        let [[column_a, row_a], [column_b, row_b]] = terms;
        let values = [row_a, row_b, column_a, column_b]
            .into_iter()
            .flatten()
            .copied()
            .chain([combination as f32])
            .collect();
        let mask = Mask2d {
            values,
            rows: side,
            cols: side,
            top,
            left,
        };
        let shape = ImageShape::unpadded(height, width);
        self.enqueue_planned(&plan, (images, shape), &mask, (mode, clamp), input, output)
    }

    /// Enqueues on the session's stream the correlation of each of the `images` of `height x
    /// width` (`f32`, rows without padding, one image after the other), on its own, with
    /// `taps` along `along` (`before` of them before the output position): one pass of the
    /// wide separable design alone, one grid plane per image, from `input` into `output`. The
    /// N-D passes take it: along the last axis, over rows; along any other whose lines lie at
    /// least a strip abreast, down columns. Each block reads and writes whole rows of its
    /// strip, where the axis kernels hold one block per SM for the long masks and the wide
    /// register-tiled kernel filters short rows in tiles wider than them (measured:
    /// PERFORMANCE.md, N-D operations).
    /// Returns `false`, enqueuing nothing, where no such kernel is compiled for that many
    /// taps, `width` is not a multiple of 4, or the images exceed a grid's planes or the
    /// kernel's 32-bit sides.
    ///
    /// # Errors
    /// As [`Session::enqueue_planned`].
    pub(crate) fn enqueue_single_pass(
        &self,
        [images, height, width]: [usize; 3],
        (along, taps, before): (Along, &[f32], usize),
        (mode, clamp): (BoundaryMode, (f32, f32)),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<bool> {
        let sides_fit = u32::try_from(height).is_ok() && u32::try_from(width).is_ok();
        if images > MAX_GRID_PLANES || !sides_fit {
            return Ok(false);
        }
        let Some(plan) =
            separable::single_pass_plan(self.device(), (along, taps.len())).transpose()?
        else {
            return Ok(false);
        };
        let mask = match along {
            // The row factor, then a column factor of one tap.
            Along::Rows => Mask2d {
                values: taps.iter().copied().chain([1.0]).collect(),
                rows: 1,
                cols: taps.len(),
                top: 0,
                left: before,
            },
            Along::Columns => Mask2d {
                values: taps.to_vec(),
                rows: taps.len(),
                cols: 1,
                top: before,
                left: 0,
            },
        };
        let shape = ImageShape::unpadded(height, width);
        self.enqueue_planned(&plan, (images, shape), &mask, (mode, clamp), input, output)
    }

    /// `plan`'s kernel (a thread-staged one, reading its mask from MASK) for `mask` over
    /// `planes` images of `shape` (`f32`; more than one only for the streaming and wide
    /// separable kernels), one grid plane per image: the launches of
    /// [`Session::enqueue_rows`], [`Session::enqueue_planes`], [`Session::enqueue_separable`],
    /// [`Session::enqueue_separable_pair`] and [`Session::enqueue_single_pass`]. Returns `false`, enqueuing nothing, where the rows'
    /// pitch is not a multiple of 4 (the kernels' 16-byte stores).
    ///
    /// # Errors
    /// [`ConvError::InvalidLaunch`] for buffers smaller than the images or a mask no kernel
    /// takes, [`ConvError::TooLarge`], [`ConvError::Driver`].
    fn enqueue_planned(
        &self,
        plan: &LaunchPlan,
        (planes, shape): (usize, ImageShape),
        mask: &Mask2d<f32>,
        (mode, clamp): (BoundaryMode, (f32, f32)),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<bool> {
        if !shape.pitch.is_multiple_of(4) {
            return Ok(false);
        }
        let bytes = planes * shape.height * shape.pitch * size_of::<f32>();
        if input.len() < bytes || output.len() < bytes {
            return Err(ConvError::invalid_launch(plan.entry.entry_point())(
                format!(
                    "buffers of {} and {} bytes for {bytes}",
                    input.len(),
                    output.len()
                ),
            ));
        }
        let launch = Launch { plan, mode, clamp };
        let grid = Grid2d::planes(self, (planes as u64, shape), mask, launch)?;
        self.place_mask(plan, &mask.values)?;
        // SAFETY: both buffers hold the `planes` images of `height` rows of `pitch` elements
        // (checked above), pitch a multiple of 4, in 256-byte aligned allocations; distinct
        // buffers (the caller's); the mask is in MASK (these plans read it there), written on
        // this stream just before; these kernels take no tensor map, and the streaming and
        // wide separable ones a grid of `planes` planes (the only ones given more than one).
        unsafe {
            enqueue2d::<f32>(
                self,
                self.stream(),
                (plan, &grid),
                (input, None),
                None,
                output,
            )
        }?;
        Ok(true)
    }
}

/// Planes of a grid (`gridDim.z`) every CUDA GPU takes.
pub(crate) const MAX_GRID_PLANES: usize = 65_535;

impl Engine {
    /// Benchmark support: uploads a pitched image, launches the plan `runs` times over as many grids as the height
    /// needs, and downloads the pitched result into `out`; returns each run's kernel time.
    #[cfg(feature = "bench")]
    pub(super) fn launch2d(
        &self,
        image: &[f32],
        shape: ImageShape,
        mask: &Mask2d,
        (launch, runs): (Launch<'_>, usize),
        out: &mut [f32],
    ) -> Result<Vec<f32>> {
        let plan = launch.plan;
        let session = self.session()?;
        let grid = Grid2d::new(&session, shape, mask, launch)?;
        let mut buffers = session.stage(plan, image, &mask.values)?;
        buffers.tensor_map =
            input_map(&session, &self.stream, (plan, mask), shape, &buffers.input)?;
        // SAFETY: every grid meets the conv2d kernels' contract (`Grid2d::grid`): the buffers
        // staged above hold the image's rows, the mask is where the plan put it, and for the
        // tensor-copy kernels the map set above describes the input buffer.
        unsafe {
            session.run_conv(
                plan.entry,
                &mut buffers,
                grid.blocks_y,
                grid.max_grid_y,
                runs,
                out,
                |offset, count| grid.grid(offset, count),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Storage;

    /// Every kernel that reads and writes a narrow type itself walks its image in the steps of
    /// its `f32` kernel, so that its blocks are as tall.
    #[test]
    fn native_kernels_walk_in_their_f32_kernels_steps() {
        let plan = |kernel, entry| LaunchPlan {
            kernel,
            entry,
            block: (256, 1),
            output_tile: (256, 1),
            shared_memory_bytes: 0,
            mask_in_constant_memory: true,
        };
        let kernel = |family| match family {
            Family::Conv2dSeparableWide => Some(Kernel::Separable),
            Family::Conv2dStream | Family::Conv2dStream16 => Some(Kernel::RegisterTiled),
            _ => None,
        };
        let mut native = 0;
        for entry in crate::kernels::entries() {
            let id = entry.id;
            let Some(kernel) = kernel(id.family()) else {
                continue;
            };
            let step = strip_step(&plan(kernel, id.with_storage(Storage::F32)));
            assert!(step.is_some(), "{}", entry.name);
            if id.storage() != Storage::F32 {
                assert_eq!(strip_step(&plan(kernel, id)), step, "{}", entry.name);
                native += 1;
            }
        }
        assert!(native >= 48, "{native} native kernels");
    }
}
