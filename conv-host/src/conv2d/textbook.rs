//! The four textbook designs in 2D (basic, constant mask, tiled, tiled through L2): their
//! entry points, default blocks and output tiles. Kernels: `conv-kernels/src/conv2d/textbook.rs`.

use crate::abi::MASK_CAPACITY;
use crate::device::DeviceInfo;
use crate::error::Result;
use crate::options::Kernel;
use crate::plan::{LaunchPlan, check_block, has_f64_kernels, select_textbook};
use crate::registry::{Family, Storage, Textbook};

/// Threads per block (x along a row, y down the rows) when the options' tile is `None`.
pub const DEFAULT_TILE_2D: (u32, u32) = (32, 8);

/// Default block of the textbook tiled kernel, which covers the input tile (output tile plus
/// halo), so it is taller than the others.
pub const DEFAULT_TILE_2D_TILED: (u32, u32) = (32, 16);

/// Default block of the tiled kernel for masks wider or taller than 16, whose halo is at least
/// as wide as the block: the output tile is then the block, 16 x 16.
pub const LARGE_MASK_TILE_2D: (u32, u32) = (16, 16);

/// Plans an `f64` operation: the textbook designs are the ones with `f64` kernels, `Auto`
/// choosing among them as for `f32`.
///
/// # Errors
/// [`ConvError::InvalidLaunch`] for another design, and as [`plan`].
pub(super) fn plan_f64(
    device: &DeviceInfo,
    mask: (usize, usize),
    channels: usize,
    kernel: Kernel,
    tile: Option<(u32, u32)>,
) -> Result<LaunchPlan> {
    has_f64_kernels(kernel, "conv2d")?;
    plan_typed(device, mask, channels, kernel, tile, (Storage::F64, 8))
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

/// The tiled kernel's block when the caller names none: of [`DEFAULT_TILE_2D_TILED`],
/// [`DEFAULT_TILE_2D`] and [`LARGE_MASK_TILE_2D`], the one with the most outputs per thread
/// for this halo. A block just wider than the halo leaves a sliver of outputs (15 x 15 in 16 x
/// 16 threads: 2 x 2), which makes the tiled kernel far slower than the best of the three, and
/// which of the three is best depends on the mask and channels (measured: PERFORMANCE.md, How
/// Auto decides, 2D rule 10).
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

/// Plans one of the four textbook designs (`Auto` stands for the tiled kernel for masks of more
/// than [`AUTO_TILED_ABOVE_TAPS`] taps, the constant-mask kernel up to it).
pub(super) fn plan(
    device: &DeviceInfo,
    mask: (usize, usize),
    channels: usize,
    kernel: Kernel,
    tile: Option<(u32, u32)>,
) -> Result<LaunchPlan> {
    plan_typed(device, mask, channels, kernel, tile, (Storage::F32, 4))
}

/// [`plan`] for kernels over `storage`, elements of `bytes` bytes.
fn plan_typed(
    device: &DeviceInfo,
    (rows, cols): (usize, usize),
    channels: usize,
    kernel: Kernel,
    tile: Option<(u32, u32)>,
    (storage, bytes): (Storage, u64),
) -> Result<LaunchPlan> {
    let large = rows.saturating_mul(cols) > AUTO_TILED_ABOVE_TAPS;
    let fits = rows.saturating_mul(cols).saturating_mul(bytes as usize) <= MASK_CAPACITY * 4;
    let (kernel, entry) = match kernel {
        Kernel::Auto if large => select_textbook(Family::Conv2d, storage, Kernel::Tiled, fits),
        other => select_textbook(Family::Conv2d, storage, other, fits),
    };
    let halo = ((cols as u64 - 1) * channels as u64, rows as u64 - 1);
    let block = tile.unwrap_or(match kernel {
        Kernel::Tiled => tiled_default_block(halo),
        _ => DEFAULT_TILE_2D,
    });
    // The textbook's design: output tile = block - halo, so each thread loads one element.
    let (output_tile, shared_elements) = match kernel {
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
    check_block(device, entry, block, shared_elements * bytes)?;
    Ok(LaunchPlan {
        kernel,
        entry,
        block,
        output_tile,
        shared_memory_bytes: (shared_elements * bytes) as u32,
        mask_in_constant_memory: fits && entry.family() != Family::Conv2d(Textbook::Basic),
    })
}

/// Masks of more taps than this that no faster design takes run on the tiled kernel under
/// `Auto`, smaller ones on the constant-mask kernel.
pub(super) const AUTO_TILED_ABOVE_TAPS: usize = 25;

#[cfg(test)]
mod tests {
    use super::*;

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
}
