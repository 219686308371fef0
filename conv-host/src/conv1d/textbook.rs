//! The four textbook designs in 1D: their entry points and tiles, and which one `Auto` takes
//! for masks without a register-tiled kernel. Kernels: `conv-kernels/src/conv1d/textbook.rs`.

use crate::abi::MASK_CAPACITY;
use crate::device::DeviceInfo;
use crate::error::Result;
use crate::options::Kernel;
use crate::plan::{LaunchPlan, check_block, has_f64_kernels, select_textbook};
use crate::registry::{Family, Storage, Textbook};

/// Threads per block when the options' tile is `None`.
pub const DEFAULT_TILE_1D: u32 = 256;

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
    plan_typed(device, mask_len, kernel, tile, (Storage::F64, 8))
}

/// Plans a textbook design for a mask of `mask_len` taps (`Auto`: the tiled kernel from 10 taps
/// on where its span fits in shared memory, else the constant-mask kernel).
pub(super) fn plan(
    device: &DeviceInfo,
    mask_len: usize,
    kernel: Kernel,
    tile: Option<u32>,
) -> Result<LaunchPlan> {
    plan_typed(device, mask_len, kernel, tile, (Storage::F32, 4))
}

/// [`plan`] for kernels over `storage`, elements of `bytes` bytes.
fn plan_typed(
    device: &DeviceInfo,
    mask_len: usize,
    kernel: Kernel,
    tile: Option<u32>,
    (storage, bytes): (Storage, u64),
) -> Result<LaunchPlan> {
    let fits = mask_len.saturating_mul(bytes as usize) <= MASK_CAPACITY * 4;
    let tile = tile.unwrap_or(DEFAULT_TILE_1D);
    let tiled_shared_bytes = (u64::from(tile) + mask_len as u64 - 1) * bytes;
    // Auto, masks without a register-tiled kernel: the tiled kernel from 10 taps on, where its
    // span fits in shared memory; the constant-mask kernel is the faster one below (measured:
    // PERFORMANCE.md, How Auto decides, 1D rule 2).
    let kernel = match kernel {
        Kernel::Auto
            if mask_len > 9
                && tiled_shared_bytes <= u64::from(device.max_shared_memory_per_block) =>
        {
            Kernel::Tiled
        }
        other => other,
    };
    let (kernel, entry) = select_textbook(Family::Conv1d, storage, kernel, fits);
    let shared_elements = match kernel {
        Kernel::Tiled => u64::from(tile) + mask_len as u64 - 1,
        Kernel::TiledL2 => u64::from(tile),
        _ => 0,
    };
    check_block(device, entry, (tile, 1), shared_elements * bytes)?;
    Ok(LaunchPlan {
        kernel,
        entry,
        block: (tile, 1),
        output_tile: (tile, 1),
        shared_memory_bytes: (shared_elements * bytes) as u32,
        mask_in_constant_memory: fits && entry.family() != Family::Conv1d(Textbook::Basic),
    })
}
