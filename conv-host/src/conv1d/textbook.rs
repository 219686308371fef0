//! The four textbook designs in 1D: their entry points and tiles, and which one `Auto` takes
//! for masks without a register-tiled kernel. Kernels: `conv-kernels/src/conv1d/textbook.rs`.

use crate::abi::MASK_CAPACITY;
use crate::device::DeviceInfo;
use crate::error::Result;
use crate::options::Kernel;
use crate::plan::{EntryPoints, LaunchPlan, check_block, has_f64_kernels};

/// Threads per block when the options' tile is `None`.
pub const DEFAULT_TILE_1D: u32 = 256;

const ENTRY_POINTS: EntryPoints = EntryPoints {
    basic: "conv1d_basic",
    constant: "conv1d_constant_mask",
    tiled: "conv1d_tiled",
    tiled_global_mask: "conv1d_tiled_global_mask",
    tiled_l2: "conv1d_tiled_l2",
    tiled_l2_global_mask: "conv1d_tiled_l2_global_mask",
};

/// The same designs' `f64` instantiations.
const ENTRY_POINTS_F64: EntryPoints = EntryPoints {
    basic: "conv1d_basic_f64",
    constant: "conv1d_constant_mask_f64",
    tiled: "conv1d_tiled_f64",
    tiled_global_mask: "conv1d_tiled_global_mask_f64",
    tiled_l2: "conv1d_tiled_l2_f64",
    tiled_l2_global_mask: "conv1d_tiled_l2_global_mask_f64",
};

/// Plans an `f64` operation: the textbook designs are the ones with `f64` kernels, `Auto`
/// choosing among them as for `f32`.
///
/// # Errors
/// [`ConvError::InvalidLaunch`] for another design, and as [`plan`].
pub(super) fn plan_f64(
    device: &DeviceInfo,
    mask_len: usize,
    kernel: Kernel,
    tile: Option<u32>,
) -> Result<LaunchPlan> {
    has_f64_kernels(kernel, "conv1d")?;
    plan_typed(device, mask_len, kernel, tile, (&ENTRY_POINTS_F64, 8))
}

/// Plans a textbook design for a mask of `mask_len` taps (`Auto`: the tiled kernel from 10 taps
/// on where its span fits in shared memory, else the constant-mask kernel).
pub(super) fn plan(
    device: &DeviceInfo,
    mask_len: usize,
    kernel: Kernel,
    tile: Option<u32>,
) -> Result<LaunchPlan> {
    plan_typed(device, mask_len, kernel, tile, (&ENTRY_POINTS, 4))
}

/// [`plan`] for the entry points `table` of elements of `bytes` bytes.
fn plan_typed(
    device: &DeviceInfo,
    mask_len: usize,
    kernel: Kernel,
    tile: Option<u32>,
    (table, bytes): (&EntryPoints, u64),
) -> Result<LaunchPlan> {
    let fits = mask_len.saturating_mul(bytes as usize) <= MASK_CAPACITY * 4;
    let tile = tile.unwrap_or(DEFAULT_TILE_1D);
    let tiled_shared_bytes = (u64::from(tile) + mask_len as u64 - 1) * bytes;
    // Auto, masks without a register-tiled kernel: the tiled kernel from 10 taps on, where its
    // span fits in shared memory (H100, 2^22 elements: 11 taps 0.037 against 0.045 ms for the
    // constant-mask kernel, 21 taps 0.040 against 0.072, 63 taps 0.059 against 0.184; faster
    // at every length from 2^10 elements on; at 7 taps the constant-mask kernel was faster,
    // 0.032 against 0.034 ms) (PERFORMANCE.md).
    let kernel = match kernel {
        Kernel::Auto
            if mask_len > 9
                && tiled_shared_bytes <= u64::from(device.max_shared_memory_per_block) =>
        {
            Kernel::Tiled
        }
        other => other,
    };
    let (kernel, entry_point) = table.select(kernel, fits);
    let shared_elements = match kernel {
        Kernel::Tiled => u64::from(tile) + mask_len as u64 - 1,
        Kernel::TiledL2 => u64::from(tile),
        _ => 0,
    };
    check_block(device, entry_point, (tile, 1), shared_elements * bytes)?;
    Ok(LaunchPlan {
        kernel,
        entry_point,
        block: (tile, 1),
        output_tile: (tile, 1),
        shared_memory_bytes: (shared_elements * bytes) as u32,
        mask_in_constant_memory: fits && entry_point != table.basic,
    })
}
