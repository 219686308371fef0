//! 3D correlation of volumes (and of batches of images, with a mask one slice deep) on the
//! device. Mirrors `conv-kernels/src/conv3d.rs`.

pub(crate) mod reference;

use crate::abi::{CONV3D_BLOCK, CONV3D_SLICES, Conv3dParams, conv3d_shared_elements};
use crate::element::Real;
use crate::error::{ConvError, Result};
use crate::options::BoundaryMode;
use crate::plan::for_each_grid;
use crate::session::Session;
use cudarc::driver::{CudaView, CudaViewMut, DeviceRepr, LaunchConfig, PushKernelArg};

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

impl Session<'_> {
    /// Enqueues the correlation of the volume of `shape` (at least one element) with `mask` on
    /// the engine's stream, from `input` into `output` (each holding the volume's elements of
    /// `R`, as bytes), clamped to `clamp`.
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
        let shared = conv3d_shared_elements(mask_h, mask_w, channels) * size_of::<R>() as u64;
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
        let device_mask = self.upload(&taps)?;
        let (mode, cval) = mode.code_and_cval();
        let x_tiles = (width * channels).div_ceil(u64::from(CONV3D_BLOCK.0));
        let y_tiles = height.div_ceil(u64::from(CONV3D_BLOCK.1));
        let z_tiles = depth.div_ceil(u64::from(CONV3D_SLICES));
        let [front, top, left] = mask.anchors.map(|n| n as u64);
        let params = |block_offset| Conv3dParams {
            depth,
            height,
            width,
            channels,
            mask_d,
            mask_h,
            mask_w,
            front,
            top,
            left,
            x_tiles,
            y_tiles,
            z_tiles,
            block_offset,
            mode,
            cval,
            clamp_lo: clamp.0,
            clamp_hi: clamp.1,
        };
        let side = if mask_h == mask_w { mask_h } else { 0 };
        let entry_point = match (side, size_of::<R>() == 8) {
            (3, false) => "conv3d_tiled_m3",
            (5, false) => "conv3d_tiled_m5",
            (_, false) => "conv3d_tiled",
            (3, true) => "conv3d_tiled_m3_f64",
            (5, true) => "conv3d_tiled_m5_f64",
            (_, true) => "conv3d_tiled_f64",
        };
        let max_grid = u64::from(self.device().max_grid_dim.0);
        for_each_grid(x_tiles * y_tiles * z_tiles, max_grid, |offset, count| {
            let config = LaunchConfig {
                grid_dim: (count as u32, 1, 1),
                block_dim: (CONV3D_BLOCK.0 * CONV3D_BLOCK.1, 1, 1),
                shared_mem_bytes: shared as u32,
            };
            let p = params(offset);
            // SAFETY: both buffers hold the volume's elements of `R` (checked above; the
            // callers pass distinct buffers), `device_mask` its taps; `p` describes the volume
            // and this grid's blocks; 256 threads with the staged slice's shared memory, within
            // the device's limit (checked above).
            unsafe {
                self.launch_async(self.stream(), entry_point, config, |args| {
                    args.arg(input);
                    args.arg(&device_mask);
                    args.arg(&mut *output);
                    args.arg(&p);
                })
            }
        })
    }
}
