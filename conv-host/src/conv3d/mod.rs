//! 3D correlation of volumes (and of batches of images, with a mask one slice deep) on the
//! device. Mirrors `conv-kernels/src/conv3d/`.

pub(crate) mod image;
mod launch;
pub(crate) mod reference;
pub(crate) mod separable;

pub(crate) use separable::has_separable3d_kernel;

use crate::abi::{
    CONV3D_ASYNC_SLICES, CONV3D_RING, CONV3D_THREADS, Conv3dParams, conv3d_copy_elements,
    conv3d_row_words, conv3d_rows, conv3d_shared_elements,
};
use crate::conv2d::Mask2d;
use crate::element::Real;
use crate::error::{ConvError, Result};
use crate::kernels::compiled;
use crate::options::BoundaryMode;
use crate::registry::{Family, KernelId, Shape, Storage};
use crate::session::Session;
use cudarc::driver::{CudaView, CudaViewMut, DeviceRepr};

// SAFETY: `Conv3dParams` is `repr(C)`, `Copy`, and made of plain integers and floats, exactly as
// the kernels declare their by-value parameter (it is the same source file).
unsafe impl DeviceRepr for Conv3dParams {}

/// A volume's depth, height, width and interleaved channels.
pub(crate) type VolumeShape = [usize; 4];

/// A 3D mask: taps in correlation order (slices, rows, columns, row-major), its extents and the
/// taps before the output position along each axis.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Mask3d {
    pub(crate) taps: Vec<f64>,
    pub(crate) dims: [usize; 3],
    pub(crate) anchors: [usize; 3],
}

/// Output slices per block: enough blocks for eight a multiprocessor, at most 32 slices or 16
/// per slice of the ring's first `mask_d - 1`, which are staged for no output of their own,
/// and at least `2 (mask_d - 1)`, so that those slices stay under a third of the staged ones
/// (measured: PERFORMANCE.md, How Auto decides).
pub(super) fn slices_per_block(
    depth: u64,
    plane_tiles: u64,
    mask_d: u64,
    multiprocessors: u32,
) -> u64 {
    let target_blocks = u64::from(multiprocessors.max(1)) * 8;
    let spread = (depth * plane_tiles).div_ceil(target_blocks);
    let most = (16 * mask_d.saturating_sub(1)).max(32);
    spread.clamp(1, most).max(2 * (mask_d - 1)).min(depth)
}

/// The kernel for a mask of `dims` over `channels` channels of `R` on a device of compute
/// capability `major.x`, whether its shape is compiled in (taps in constant memory), and the
/// slices it stages at once. Devices of compute capability 9.0 or more stage cubic `f32`
/// masks by asynchronous copies, one channel by kernels that compile it in (measured:
/// PERFORMANCE.md, N-D operations).
fn volume_kernel<R: Real>(dims: [u64; 3], channels: u64, major: i32) -> (KernelId, bool, u64) {
    let side = u32::try_from(dims[1]).unwrap_or(0);
    let shape = match dims {
        [d, h, w] if d == h && h == w => Shape::Cube(side),
        [1, h, w] if h == w => Shape::Plane(side),
        _ => Shape::Any,
    };
    if R::STORAGE == Storage::F32 && major >= 9 && matches!(shape, Shape::Cube(_)) {
        let asynchronous = |channels| {
            compiled(KernelId::new(
                Family::Conv3dTiledAsync,
                shape,
                channels,
                Storage::F32,
            ))
        };
        let one = u32::try_from(channels)
            .ok()
            .and_then(|c| asynchronous(Some(c)));
        if let Some(entry) = one.or_else(|| asynchronous(None)) {
            return (entry, true, CONV3D_ASYNC_SLICES);
        }
    }
    match compiled(KernelId::new(Family::Conv3dTiled, shape, None, R::STORAGE)) {
        Some(entry) if shape != Shape::Any => (entry, true, 2),
        _ => (
            KernelId::new(Family::Conv3dTiled, Shape::Any, None, R::STORAGE),
            false,
            2,
        ),
    }
}

impl Session<'_> {
    /// Enqueues the correlation of the volume of `shape` (at least one element) with `mask` on
    /// the session's stream, from `input` into `output` (each holding the volume's elements of
    /// `R`, as bytes), clamped to `clamp`. Masks of a compiled shape run from constant memory;
    /// others deeper than `CONV3D_RING` slices run as one launch per `CONV3D_RING` slices, each
    /// adding its share to the output.
    ///
    /// # Errors
    /// [`ConvError::InvalidLaunch`] for a mask whose staged slice exceeds the device's shared
    /// memory or buffers smaller than the volume, [`ConvError::Driver`],
    /// [`ConvError::OutOfMemory`] for the taps' buffer.
    pub(crate) fn enqueue_conv3d<R: Real>(
        &self,
        shape: VolumeShape,
        mask: &Mask3d,
        (mode, clamp): (BoundaryMode, (f32, f32)),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        let [depth, height, width, channels] = shape.map(|n| n as u64);
        let [mask_d, mask_h, mask_w] = mask.dims.map(|n| n as u64);
        let bytes = shape.iter().product::<usize>() * size_of::<R>();
        if input.len() < bytes || output.len() < bytes || bytes == 0 {
            return Err(ConvError::InvalidLaunch {
                kernel: "conv3d",
                reason: format!(
                    "buffers of {} and {} bytes for {bytes}",
                    input.len(),
                    output.len()
                ),
            });
        }
        if mask_d == 1 && R::STORAGE == Storage::F32 {
            // A batch of images: the 2D streaming kernel, one grid plane per image.
            let plane = Mask2d {
                values: mask.taps.iter().map(|&w| w as f32).collect(),
                rows: mask.dims[1],
                cols: mask.dims[2],
                top: mask.anchors[1],
                left: mask.anchors[2],
            };
            if self.enqueue_planes(shape, &plane, (mode, clamp), input, output)? {
                return Ok(());
            }
        }
        let major = self.device().compute_capability.0;
        let (entry, shaped, staged_slices) =
            volume_kernel::<R>([mask_d, mask_h, mask_w], channels, major);
        let side = if shaped { mask_h } else { 0 };
        let asynchronous = staged_slices == CONV3D_ASYNC_SLICES;
        let rows = conv3d_rows(mask_d, side, size_of::<R>() as u64, asynchronous);
        let copy_elements = conv3d_copy_elements(size_of::<R>() as u64, asynchronous);
        let row_words = conv3d_row_words(mask_w, channels, copy_elements);
        let shared =
            conv3d_shared_elements(staged_slices, rows, mask_h, row_words) * size_of::<R>() as u64;
        let limit = self.device().max_shared_memory_per_block;
        if shared > u64::from(limit) {
            return Err(ConvError::InvalidLaunch {
                kernel: "conv3d",
                reason: format!(
                    "a {mask_h} x {mask_w} mask slice over {channels} channels stages {shared} \
                     bytes of shared memory per block; the device has {limit} (separable masks \
                     run as axis passes instead)"
                ),
            });
        }
        let taps: Vec<R> = mask.taps.iter().map(|&w| R::from_f64(w)).collect();
        let device_mask = if shaped {
            self.set_constant_mask(entry, &taps)?;
            None
        } else {
            Some(self.upload(&taps)?)
        };
        let (mode, cval) = mode.code_and_cval();
        let x_tiles = (width * channels).div_ceil(u64::from(CONV3D_THREADS.0));
        let y_tiles = height.div_ceil(u64::from(CONV3D_THREADS.1) * rows);
        let ring = if shaped { mask_d } else { CONV3D_RING as u64 };
        let slices = slices_per_block(
            depth,
            x_tiles * y_tiles,
            mask_d.min(ring),
            self.device().multiprocessor_count,
        );
        let z_tiles = depth.div_ceil(slices);
        let [front, top, left] = mask.anchors.map(|n| n as u64);
        let slice_taps = (mask_h * mask_w) as usize;
        // One launch per `ring` mask slices; the later ones add to the output, and only the
        // last clamps.
        for first_slice in (0..mask_d).step_by(ring as usize) {
            let chunk_d = (mask_d - first_slice).min(ring);
            let last = first_slice + chunk_d == mask_d;
            let params = |block_offset| Conv3dParams {
                depth,
                height,
                width,
                channels,
                pitch: width * channels,
                mask_d: chunk_d,
                mask_h,
                mask_w,
                front: front as i64 - first_slice as i64,
                top,
                left,
                x_tiles,
                y_tiles,
                slices,
                block_offset,
                mode,
                cval,
                clamp_lo: if last { clamp.0 } else { f32::NEG_INFINITY },
                clamp_hi: if last { clamp.1 } else { f32::INFINITY },
                accumulate: u32::from(first_slice > 0),
            };
            let chunk_taps = device_mask
                .as_ref()
                .map(|taps| taps.slice(first_slice as usize * slice_taps..));
            // SAFETY: both buffers hold the volume's elements of `R` (checked above; the
            // callers pass distinct buffers); the chunk's taps are in `chunk_taps` or, for
            // compiled shapes, in MASK (written above on this stream), `chunk_d <= ring`;
            // `params` describes the volume, its blocks and tiles of `rows` rows a thread;
            // the staged slices' shared memory, within the device's limit (checked above).
            unsafe {
                self.launch_volume(
                    self.stream(),
                    entry,
                    (x_tiles * y_tiles * z_tiles, shared),
                    chunk_taps.as_ref(),
                    params,
                    input,
                    output,
                )
            }?;
        }
        Ok(())
    }
}
