//! 2D `f64` images through the 3D design: an image is a volume one slice deep, a 2D mask a
//! mask one slice deep. Its kernels for square masks of 3 and 5 taps in `f64` compute several
//! rows a thread, reusing every staged value for the sums of all the rows it reaches, where
//! the textbook designs (the other `f64` kernels) compute one output a thread and read every
//! tap from shared memory (PERFORMANCE.md: element types).

use super::slices_per_block;
use crate::abi::{
    CONV3D_ASYNC_SLICES, CONV3D_THREADS, Conv2dParams, Conv3dParams, conv3d_copy_elements,
    conv3d_row_words, conv3d_rows, conv3d_shared_elements,
};
use crate::device::DeviceInfo;
use crate::device_array::PITCH_ALIGNMENT;
use crate::kernels::specialised;
use crate::options::Kernel;
use crate::plan::LaunchPlan;
use crate::registry::{Family, KernelId, Shape, Storage};

/// The `f64` kernel of the 3D design for a square mask `side` a side one slice deep over
/// `channels` channels: on devices of compute capability 9.0 on, the one staged by
/// asynchronous copies with the channel count compiled in, which holds no staged values in
/// registers (room for 8 rows a thread at two blocks per SM) and walks a block down the rows,
/// three tiles' copies in flight while it computes one; else the one staged through registers.
fn slice_kernel(device: &DeviceInfo, side: usize, channels: usize) -> Option<KernelId> {
    let copied = (device.compute_capability.0 >= 9)
        .then(|| {
            let family = Family::Conv3dTiledAsync;
            specialised(
                family,
                Shape::Plane,
                side,
                Some(channels.max(1)),
                Storage::F64,
            )
        })
        .flatten();
    copied.or_else(|| specialised(Family::Conv3dTiled, Shape::Plane, side, None, Storage::F64))
}

/// The plan of the 3D design for a 2D `f64` image of `(height, width, channels)` and a mask of
/// `(rows, cols)`, where `kernel` is `Auto` or `RegisterTiled`, a kernel is compiled for the
/// mask, the staged tile fits the device's shared memory and the image's offsets fit the
/// kernel's 32 bits; `None` otherwise. The plan names `RegisterTiled`: each thread keeps the
/// sums of several rows and reuses each value it reads for all of them.
pub(crate) fn plan(
    device: &DeviceInfo,
    (rows, cols): (usize, usize),
    (height, width, channels): (usize, usize, usize),
    kernel: Kernel,
) -> Option<LaunchPlan> {
    if !matches!(kernel, Kernel::Auto | Kernel::RegisterTiled) || rows != cols {
        return None;
    }
    let entry = slice_kernel(device, rows, channels)?;
    let asynchronous = entry.family() == Family::Conv3dTiledAsync;
    let side = rows as u64;
    let thread_rows = conv3d_rows(1, side, 8, asynchronous);
    // A block of the register staging computes one tile: one staged buffer.
    let buffers = if asynchronous { CONV3D_ASYNC_SLICES } else { 1 };
    let row_words = conv3d_row_words(
        side,
        channels.max(1) as u64,
        conv3d_copy_elements(8, asynchronous),
    );
    let shared = conv3d_shared_elements(buffers, thread_rows, side, row_words) * 8;
    let pitch = width
        .checked_mul(channels.max(1))?
        .checked_next_multiple_of(PITCH_ALIGNMENT)?;
    let offsets_fit = height
        .checked_mul(pitch)
        .is_some_and(|slice| slice < u32::MAX as usize);
    if shared > u64::from(device.max_shared_memory_per_block) || !offsets_fit {
        return None;
    }
    Some(LaunchPlan {
        kernel: Kernel::RegisterTiled,
        entry,
        block: (CONV3D_THREADS.0 * CONV3D_THREADS.1, 1),
        output_tile: (CONV3D_THREADS.0, CONV3D_THREADS.1 * thread_rows as u32),
        shared_memory_bytes: shared as u32,
        mask_in_constant_memory: true,
    })
}

/// Whether `plan` runs the 3D design on a 2D image.
pub(crate) fn runs_as_slice(plan: &LaunchPlan) -> bool {
    matches!(
        plan.entry.family(),
        Family::Conv3dTiled | Family::Conv3dTiledAsync
    )
}

/// The 3D parameters of the 2D launch `p` of a plan of [`plan`] over `tiles` (tiles along a
/// row, down the rows) and the blocks it takes, one slice deep with a mask one slice deep. A
/// kernel staged by asynchronous copies walks each block down several tiles (as many as a 3D
/// block walks slices), the others compute one tile a block.
pub(crate) fn launch_params(
    plan: &LaunchPlan,
    p: &Conv2dParams,
    (x_tiles, y_tiles): (u64, u64),
    multiprocessors: u32,
) -> (Conv3dParams, u64) {
    let walks = plan.entry.family() == Family::Conv3dTiledAsync;
    let steps = if walks {
        slices_per_block(y_tiles, x_tiles, 1, multiprocessors)
    } else {
        1
    };
    let groups = y_tiles.div_ceil(steps);
    let params = Conv3dParams {
        depth: 1,
        height: u64::from(p.height),
        width: u64::from(p.width),
        channels: u64::from(p.channels),
        pitch: p.pitch,
        mask_d: 1,
        mask_h: u64::from(p.mask_h),
        mask_w: u64::from(p.mask_w),
        front: 0,
        top: u64::from(p.top),
        left: u64::from(p.left),
        x_tiles,
        y_tiles: groups,
        slices: steps,
        block_offset: 0,
        mode: p.mode,
        cval: p.cval,
        clamp_lo: p.clamp_lo,
        clamp_hi: p.clamp_hi,
        accumulate: 0,
    };
    (params, x_tiles * groups)
}
