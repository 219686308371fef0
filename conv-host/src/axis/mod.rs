//! Axis passes: one 1D correlation along any axis of a contiguous N-D array on the device, the
//! pass the separable N-D filters are made of. Mirrors `conv-kernels/src/axis.rs`.

pub(crate) mod reference;

use crate::abi::{
    AXIS_RING_STRIPS, AXIS_THREADS, AxisParams, COMBINE_ADD, COMBINE_ADD_SQUARE,
    COMBINE_ADD_SQUARE_ROOT, COMBINE_STORE, SEPARABLE_WIDE_STRIP, axis_columns, axis_rows,
    axis_shared_elements,
};
use crate::conv2d::Along;
use crate::element::Real;
use crate::error::{ConvError, Result};
use crate::kernels::specialised;
use crate::options::BoundaryMode;
use crate::plan::for_each_grid;
use crate::registry::{Family, KernelId, Shape, Storage};
use crate::session::Session;
use cudarc::driver::{CudaView, CudaViewMut, DeviceRepr, LaunchConfig, PushKernelArg};
use std::any::Any;

// SAFETY: `AxisParams` is `repr(C)`, `Copy`, and made of plain integers and floats, exactly as
// the kernels declare their by-value parameter (it is the same source file).
unsafe impl DeviceRepr for AxisParams {}

/// One pass: `taps` in correlation order along `axis`, `left` of them before the output
/// position, ghost cells by `mode`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pass {
    pub(crate) axis: usize,
    pub(crate) taps: Vec<f64>,
    pub(crate) left: usize,
    pub(crate) mode: BoundaryMode,
}

/// How a pass's result `v` meets what the output holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    /// `out = v`.
    Store,
    /// `out += v`.
    Add,
    /// `out += v * v`.
    AddSquare,
    /// `out = sqrt(out + v * v)`.
    AddSquareRoot,
}

impl Combine {
    fn code(self) -> u32 {
        match self {
            Combine::Store => COMBINE_STORE,
            Combine::Add => COMBINE_ADD,
            Combine::AddSquare => COMBINE_ADD_SQUARE,
            Combine::AddSquareRoot => COMBINE_ADD_SQUARE_ROOT,
        }
    }
}

/// Positions along the axis each thread of the ring design computes for an axis of `len`:
/// the axis spread over the block's strips, at most 256 (longer axes take several tiles).
fn ring_strip(len: u64) -> u64 {
    len.div_ceil(u64::from(AXIS_RING_STRIPS)).min(256)
}

/// The array `shape` seen from `axis`: elements before it, its length, elements after it.
pub(crate) fn around_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

impl Session<'_> {
    /// Enqueues `pass` (`f32` `taps`) over the array `outer x len x inner` on a 2D kernel
    /// where one takes it, and returns whether one did: along a last axis (`inner = 1`), its
    /// lines are the rows of an image; along any other whose lines lie a strip or more abreast,
    /// the columns of `outer` images of `len` rows. The wide separable design's single passes
    /// come first, the wide register-tiled kernel (a mask one row high) takes the last-axis
    /// masks they are not compiled for.
    fn enqueue_image_pass(
        &self,
        (outer, len, inner): (usize, usize, usize),
        (taps, pass): (&[f32], &Pass),
        clamp: (f32, f32),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<bool> {
        let finish = (pass.mode, clamp);
        if inner == 1 {
            let rows = (Along::Rows, taps, pass.left);
            return Ok(
                self.enqueue_single_pass([1, outer, len], rows, finish, input, output)?
                    || self.enqueue_rows((outer, len), (taps, pass.left), finish, input, output)?,
            );
        }
        let columns = (Along::Columns, taps, pass.left);
        Ok(inner >= SEPARABLE_WIDE_STRIP as usize
            && self.enqueue_single_pass([outer, len, inner], columns, finish, input, output)?)
    }

    /// Enqueues `pass` over the array of `shape` (at least one element) on the engine's
    /// stream, from `input` into `output` (each holding the array's elements of `R`, as bytes),
    /// combined by `combine` and clamped to `clamp`.
    ///
    /// # Errors
    /// [`ConvError::InvalidLaunch`] for buffers smaller than the array, [`ConvError::Driver`],
    /// [`ConvError::OutOfMemory`] for the taps' buffer.
    pub(crate) fn enqueue_pass<R: Real>(
        &self,
        shape: &[usize],
        pass: &Pass,
        (combine, clamp): (Combine, (f32, f32)),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        let (outer, len, inner) = around_axis(shape, pass.axis);
        let bytes = outer * len * inner * size_of::<R>();
        if input.len() < bytes || output.len() < bytes || bytes == 0 {
            return Err(ConvError::InvalidLaunch {
                kernel: "axis",
                reason: format!(
                    "buffers of {} and {} bytes for {bytes}",
                    input.len(),
                    output.len()
                ),
            });
        }
        let taps: Vec<R> = pass.taps.iter().map(|&w| R::from_f64(w)).collect();
        if combine == Combine::Store
            && let Some(taps) = (&taps as &dyn Any).downcast_ref::<Vec<f32>>()
            && self.enqueue_image_pass((outer, len, inner), (taps, pass), clamp, input, output)?
        {
            return Ok(());
        }
        let columns = axis_columns(inner as u64);
        let shared = axis_shared_elements(columns, taps.len() as u64) * size_of::<R>() as u64;
        let staged = shared <= u64::from(self.device().max_shared_memory_per_block);
        let wide = size_of::<R>() == 8;
        // The ring design where its warps read whole 128-byte rows of lines, for the mask
        // lengths it is compiled for, in `f32`.
        let ring = (inner >= 32 && !wide)
            .then(|| {
                specialised(
                    Family::AxisRing,
                    Shape::Taps,
                    taps.len(),
                    None,
                    Storage::F32,
                )
            })
            .flatten();
        let family = if staged {
            Family::AxisStaged
        } else {
            Family::AxisDirect
        };
        let entry = ring.unwrap_or(KernelId::new(family, Shape::Any, None, R::STORAGE));
        let mask = if ring.is_some() {
            self.set_constant_mask(entry, &taps)?;
            None
        } else {
            Some(self.upload(&taps)?)
        };
        let (mode, cval) = pass.mode.code_and_cval();
        let column_tiles = (inner as u64).div_ceil(columns);
        let strip = ring_strip(len as u64);
        let tile_rows = if ring.is_some() {
            u64::from(AXIS_RING_STRIPS) * strip
        } else {
            axis_rows(columns)
        };
        let row_tiles = (len as u64).div_ceil(tile_rows);
        let params = |block_offset| AxisParams {
            outer: outer as u64,
            len: len as u64,
            inner: inner as u64,
            mask_len: taps.len() as u64,
            left: pass.left as u64,
            columns,
            column_tiles,
            row_tiles,
            block_offset,
            mode,
            cval,
            clamp_lo: clamp.0,
            clamp_hi: clamp.1,
            combine: combine.code(),
            strip,
        };
        let blocks = outer as u64 * column_tiles * row_tiles;
        let max_grid = u64::from(self.device().max_grid_dim.0);
        for_each_grid(blocks, max_grid, |offset, count| {
            let config = LaunchConfig {
                grid_dim: (count as u32, 1, 1),
                block_dim: (AXIS_THREADS, 1, 1),
                shared_mem_bytes: if staged && ring.is_none() {
                    shared as u32
                } else {
                    0
                },
            };
            let p = params(offset);
            // SAFETY: both buffers hold the array's `outer * len * inner` elements of `R`
            // (checked above; the callers pass distinct buffers), `mask` its taps, or MASK for
            // the ring design (written above on this stream, `inner >= 32`, `f32`, a compiled
            // length); `p` describes the array and this grid's blocks; 256 threads with the
            // staged design's shared memory, within the device's limit (checked above).
            unsafe {
                self.launch_async(self.stream(), entry, config, |args| {
                    args.arg(input);
                    if let Some(mask) = &mask {
                        args.arg(mask);
                    }
                    args.arg(&mut *output);
                    args.arg(&p);
                })
            }
        })
    }
}
