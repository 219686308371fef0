//! The one-pass separable 3D kernels (`conv3d_separable_async_m{M}`): the three axis passes
//! of a cubic rank-1 mask over an `f32` volume in one kernel, which reads and writes the volume
//! once. Mirrors `conv-kernels/src/conv3d/separable.rs`.

use crate::abi::{Conv3dParams, SEPARABLE3D_TILE, separable3d_shared_words};
use crate::error::Result;
use crate::kernels::specialised;
use crate::options::BoundaryMode;
use crate::registry::{Family, KernelId, Shape, Storage};
use crate::session::Session;
use cudarc::driver::{CudaView, CudaViewMut};

/// The one-pass separable kernel for `taps` taps a side, if one is compiled.
fn separable3d_kernel(taps: usize) -> Option<KernelId> {
    specialised(
        Family::Conv3dSeparableAsync,
        Shape::Cube,
        taps,
        None,
        Storage::F32,
    )
}

/// Whether a one-pass separable kernel runs `taps` taps a side on a device of compute
/// capability `major.x` (9.0 or later: the kernels stage by asynchronous copies and are built
/// for sm_90). Masks of 11 taps and more run as two kernels (measured: PERFORMANCE.md, N-D
/// operations).
pub(crate) fn has_separable3d_kernel(taps: usize, major: i32) -> bool {
    major >= 9 && separable3d_kernel(taps).is_some()
}

/// The most output slices of a one-pass separable block per extra slice it stages (`taps -
/// 1`). Blocks that walk long columns drift apart, lose the halos their neighbours leave in L2
/// and finish unevenly, so one wave of deep blocks loses to several waves of shallower ones
/// (measured: PERFORMANCE.md, N-D operations).
const SLICES_PER_EXTRA_SLICE: u64 = 10;

/// Groups of slices a volume's tiles are cut into: of the counts whose blocks are at most
/// `SLICES_PER_EXTRA_SLICE (taps - 1)` slices deep, the one that finishes soonest, each group
/// staging its `taps - 1` extra slices, with `resident` blocks at a time.
fn depth_groups(depth: u64, plane_tiles: u64, taps: u64, resident: u64) -> u64 {
    let time = |groups: u64| {
        let waves = (plane_tiles * groups).div_ceil(resident.max(1));
        waves * (depth.div_ceil(groups) + taps - 1)
    };
    let deepest = (SLICES_PER_EXTRA_SLICE * taps.saturating_sub(1)).max(1);
    let depth = depth.max(1);
    (depth.div_ceil(deepest)..=depth)
        .min_by_key(|&groups| time(groups))
        .unwrap_or(1)
}

impl Session<'_> {
    /// Enqueues the correlation of the `f32` volume of `shape` (depth, height, width; one
    /// channel, at least one element) with the rank-1 mask of `factors` (depth, column and row
    /// factors, as many taps each, anchored `anchors` taps before the output), extended by
    /// `mode` and clamped to `clamp`, from `input` into `output`; returns `false`, enqueuing
    /// nothing, where no kernel takes it ([`has_separable3d_kernel`]).
    ///
    /// # Errors
    /// [`crate::ConvError::TooLarge`] for a slice of `2^32 - 1` elements or more,
    /// [`crate::ConvError::Driver`].
    pub(crate) fn enqueue_separable3d(
        &self,
        shape: [usize; 3],
        (factors, anchors): ([&[f32]; 3], [usize; 3]),
        (mode, clamp): (BoundaryMode, (f32, f32)),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<bool> {
        let taps = factors[0].len();
        let major = self.device().compute_capability.0;
        let (Some(entry), true) = (
            separable3d_kernel(taps),
            has_separable3d_kernel(taps, major),
        ) else {
            return Ok(false);
        };
        if factors.iter().any(|factor| factor.len() != taps) {
            return Ok(false);
        }
        let [depth, height, width] = shape.map(|n| n as u64);
        let bytes = shape.iter().product::<usize>() * size_of::<f32>();
        if bytes == 0 || input.len() < bytes || output.len() < bytes {
            return Ok(false);
        }
        // MASK: the row factor, the column factor, then the depth factor.
        let mask: Vec<f32> = [factors[2], factors[1], factors[0]].concat();
        self.set_constant_mask(entry, &mask)?;
        let (mode, cval) = mode.code_and_cval();
        let x_tiles = width.div_ceil(SEPARABLE3D_TILE);
        let y_tiles = height.div_ceil(SEPARABLE3D_TILE);
        // The blocks resident at once: the registry's bound on their registers.
        let blocks_per_sm = entry.bounds().blocks_per_sm.unwrap_or(1);
        let resident = u64::from(self.device().multiprocessor_count) * u64::from(blocks_per_sm);
        let groups = depth_groups(depth, x_tiles * y_tiles, taps as u64, resident);
        let slices = depth.div_ceil(groups);
        let [front, top, left] = anchors.map(|n| n as u64);
        let side = taps as u64;
        let params = |block_offset| Conv3dParams {
            depth,
            height,
            width,
            channels: 1,
            pitch: width,
            mask_d: side,
            mask_h: side,
            mask_w: side,
            front: front as i64,
            top,
            left,
            x_tiles,
            y_tiles,
            slices,
            block_offset,
            mode,
            cval,
            clamp_lo: clamp.0,
            clamp_hi: clamp.1,
            accumulate: 0,
        };
        let blocks = x_tiles * y_tiles * depth.div_ceil(slices);
        let shared = separable3d_shared_words(side) * size_of::<f32>() as u64;
        // SAFETY: both buffers hold the volume's `f32` elements (checked above; the callers
        // pass distinct buffers); the three factors are in MASK (written above on this
        // stream); `params` describes the volume, its tiles of 32 x 32 and groups of `slices`
        // slices, which `blocks` covers; the kernel's shared memory for `taps` taps (39 KiB
        // at most, under every device's 48 KiB).
        unsafe {
            self.launch_volume::<f32>(
                self.stream(),
                entry,
                (blocks, shared),
                None,
                params,
                input,
                output,
            )
        }?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_groups_weigh_waves_against_the_extra_slices() {
        // 512^3 on 132 SMs, 256 tiles: blocks at most ten slices deep per extra slice, the
        // count of groups that fills its last wave best.
        assert_eq!(depth_groups(512, 256, 3, 528), 26);
        assert_eq!(depth_groups(512, 256, 5, 528), 14);
        assert_eq!(depth_groups(512, 256, 9, 264), 7);
        // 64 tiles: 16 groups of 32 slices fill two waves.
        assert_eq!(depth_groups(512, 64, 5, 528), 16);
        // Tiles of two whole waves: the fewest groups the depth allows.
        assert_eq!(depth_groups(512, 792, 7, 396), 9);
        // One tile: as many groups as resident blocks allow, each at least a slice.
        let groups = depth_groups(100, 1, 3, 264);
        assert_eq!(groups, 100);
        assert_eq!(depth_groups(1, 9, 17, 264), 1);
    }

    #[test]
    fn kernels_need_compute_capability_9_and_a_compiled_side() {
        assert!(has_separable3d_kernel(9, 9));
        assert!(!has_separable3d_kernel(3, 8));
        assert!(!has_separable3d_kernel(11, 9));
        assert!(!has_separable3d_kernel(4, 9));
    }
}
