//! The fused separable kernels staged by Hopper's tensor copies (`Kernel::SeparableTma`): when
//! they apply (their plan is `tensor_copy::plan`), and the height of their blocks.

use super::register_tiled::square_kernel;
use super::{Mask2d, separable};
use crate::abi::SEPARABLE_MASKS;
use crate::registry::{Family, KernelId};

/// Whether `Auto` runs a rank-1 `mask x mask` mask over an image of `elements` elements
/// through these kernels where they apply, rather than the wide separable kernels that stage
/// with the threads: from 11 x 11 on, where staging and issue bind the thread-staged kernel,
/// and every size on images up to 4096^2. On larger images the smaller masks stay memory-bound
/// and the thread-staged kernel is as fast or faster (measured: PERFORMANCE.md, How Auto
/// decides, 2D rule 3).
pub(crate) fn auto_prefers(mask: usize, elements: usize) -> bool {
    mask >= 11 || elements <= 4096 * 4096
}

/// The tensor-copy kernel for this mask over this many channels, or why none was compiled for
/// them: one channel and a square rank-1 mask of `SEPARABLE_MASKS` (what the device and the
/// mode must allow besides: `tensor_copy::unsupported`).
pub(crate) fn kernel(mask: &Mask2d, channels: usize) -> std::result::Result<KernelId, String> {
    let (rows, cols) = (mask.rows, mask.cols);
    let entry = square_kernel(Family::Conv2dSeparableTma, (rows, cols), 1).ok_or_else(|| {
        format!(
            "compiled for square masks of {SEPARABLE_MASKS:?} taps; this one is {rows} x {cols}"
        )
    })?;
    if channels != 1 {
        return Err(format!(
            "compiled for one channel; this image has {channels}"
        ));
    }
    Ok(entry)
}

/// Output rows per block for an image of `height` rows in `strips` column strips, a mask
/// `mask` rows tall and `chunk` input rows per step, where `slots` blocks run at once on the
/// device: `chunk k - (mask - 1)` rows, with the `k` that minimises `ceil(blocks / slots) x (2
/// chunk k - (mask - 1) + 2 chunk)`: the waves of blocks times the rows a block filters (its
/// `chunk k` staged rows along the row, its output rows down the columns) plus a step's worth
/// for its start, whose first copies no earlier step hides. The thread-staged kernels' model
/// (`separable::strip_rows_per_block`) adds a block of tail for their slower border strips;
/// here every block takes about the same time, so whole waves are what counts. Without the
/// start's step the model would pick one-step blocks for large masks on small images (two
/// output rows each), which lose to two-step ones (measured: PERFORMANCE.md, Block heights).
pub(crate) fn rows_per_block(height: u32, strips: u64, mask: usize, slots: u64, chunk: u32) -> u32 {
    let (halo, slots, chunk_rows) = (mask as u64 - 1, slots.max(1), u64::from(chunk));
    separable::rows_per_block_minimising(height, strips, mask, chunk, |blocks, steps| {
        blocks.div_ceil(slots) * (2 * steps * chunk_rows - halo + 2 * chunk_rows)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::abi::SeparableTmaLayout;
    use crate::abi::{
        SEPARABLE_MASKS, SEPARABLE_WIDE_CHUNK_ROWS, TMA_BOX_WIDTH, TMA_SECOND_REGION,
    };
    use crate::device::DeviceInfo;

    pub(crate) fn device(compute_capability: (i32, i32)) -> DeviceInfo {
        DeviceInfo {
            ordinal: 0,
            name: "test".into(),
            compute_capability,
            max_threads_per_block: 1024,
            max_shared_memory_per_block: 227 * 1024,
            max_block_dim: (1024, 1024),
            max_grid_dim: (i32::MAX as u32, 65535),
            multiprocessor_count: 132,
            clock_rate_khz: 1_980_000,
            memory_clock_rate_khz: 2_619_000,
            memory_bus_width_bits: 5120,
            total_memory: 80 << 30,
        }
    }

    pub(crate) fn centred(m: usize) -> Mask2d {
        Mask2d {
            values: vec![1.0; m * m],
            rows: m,
            cols: m,
            top: m / 2,
            left: m / 2,
        }
    }

    #[test]
    fn compiled_for_one_channel_and_square_odd_masks_of_3_to_31() {
        for m in SEPARABLE_MASKS {
            let entry = kernel(&centred(m as usize), 1).map(KernelId::entry_point);
            assert_eq!(entry, Ok(format!("conv2d_separable_tma_m{m}_c1").as_str()));
        }
        // What the device, the mode and the anchor must allow: `tensor_copy`'s tests.
        let mask = centred(31);
        assert!(kernel(&mask, 3).is_err());
        let wide = Mask2d {
            values: vec![1.0; 31 * 5],
            rows: 5,
            cols: 31,
            top: 2,
            left: 15,
        };
        assert!(kernel(&wide, 1).is_err());
    }

    #[test]
    fn every_row_pass_window_lies_in_one_region_and_two_blocks_fit_an_sm() {
        for m in SEPARABLE_MASKS {
            let m = u64::from(m);
            let skip = (4 - (m / 2) % 4) % 4;
            // Segment `x0` (16 outputs) reads words `x0 .. x0 + skip + 16 + m - 1`.
            for x0 in (0..256).step_by(16) {
                let end = x0 + skip + 16 + m - 1;
                if x0 < TMA_SECOND_REGION {
                    assert!(end <= TMA_BOX_WIDTH, "mask {m}, segment {x0}");
                } else {
                    assert!(end - TMA_SECOND_REGION <= TMA_BOX_WIDTH, "mask {m}, {x0}");
                }
            }
            let layout = SeparableTmaLayout::new(m);
            // Boxes land 128-byte aligned; the barrier is 8-byte aligned.
            assert_eq!(layout.region_words * 4 % 128, 0);
            assert_eq!(layout.barrier % 2, 0);
            assert!(2 * (layout.words * 4 + 1024) <= 228 * 1024, "mask {m}");
        }
        // 45 quads a row: 8 rows' quads at the same element fall on 8 bank groups.
        assert_eq!(TMA_BOX_WIDTH % 8, 4);
    }

    #[test]
    fn auto_prefers_tensor_copies_from_11_x_11_and_on_images_up_to_4096_squared() {
        assert!(auto_prefers(11, 8192 * 8192) && auto_prefers(31, 8192 * 8192));
        assert!(!auto_prefers(9, 8192 * 8192) && !auto_prefers(5, 4096 * 4097));
        assert!(auto_prefers(3, 4096 * 4096) && auto_prefers(7, 128 * 128));
    }

    #[test]
    fn blocks_fill_whole_waves() {
        let chunk = SEPARABLE_WIDE_CHUNK_ROWS;
        // 8192^2, 31 x 31, 32 strips, 264 slots: 33 steps, 8 block rows, 256 blocks, one
        // wave (17 steps: two; 25 steps: 352 blocks, a wave and a third).
        assert_eq!(rows_per_block(8192, 32, 31, 264, chunk), 33 * 32 - 30);
        // 2048^2: 3 steps, 256 blocks; 512^2: 2 steps, 32 blocks rather than 512 of one.
        assert_eq!(rows_per_block(2048, 8, 31, 264, chunk), 3 * 32 - 30);
        assert_eq!(rows_per_block(512, 2, 31, 264, chunk), 2 * 32 - 30);
        // A small image: one step (2 rows) per block, 64 blocks, one wave.
        assert_eq!(rows_per_block(128, 1, 31, 264, chunk), 2);
        for (height, strips, mask) in [(8192, 32, 31), (4096, 16, 9), (1000, 4, 17), (1, 1, 3)] {
            let rows = rows_per_block(height, strips, mask, 264, chunk);
            assert_eq!((u64::from(rows) + mask as u64 - 1) % u64::from(chunk), 0);
            assert!(rows >= 1);
        }
    }
}
