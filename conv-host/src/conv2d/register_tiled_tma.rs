//! The streaming kernels staged by Hopper's tensor copies (`Kernel::RegisterTiledTma`): when
//! they apply (their plan is `tensor_copy::plan`), the boxes of their tensor map, and the height of their blocks.

use super::register_tiled::square_kernel;
use super::{Mask2d, separable};
use crate::abi::{STREAM_COMPUTE_BOUND_FROM, STREAM_MASKS, StreamTmaLayout};
use crate::registry::{Family, KernelId};

/// Whether `Auto` runs a general `mask x mask` mask over an image of `pixels` pixels and
/// `channels` channels through these kernels where they apply, rather than the streaming
/// kernels that stage with the threads: from 7 x 7 on, where the copies free the issue slots
/// that bound the thread-staged pass, and 5 x 5 over several channels or on images smaller
/// than 1024^2 pixels. Over one channel on larger images two blocks per SM keep too few bytes
/// in flight, so the thread-staged kernel in steps of 16 rows stays faster (measured:
/// PERFORMANCE.md, How Auto decides, 2D rule 8).
pub(crate) fn auto_prefers(mask: usize, channels: usize, pixels: usize) -> bool {
    mask >= 7 || (mask == 5 && (channels > 1 || pixels < 1024 * 1024))
}

/// The tensor-copy streaming kernel for this mask over this many channels, or why none was
/// compiled for them: a square mask of 3, 5, 7 or 9 taps over 1, 3 or 4 channels (what the
/// device and the mode must allow besides: `tensor_copy::unsupported`).
pub(crate) fn kernel(mask: &Mask2d, channels: usize) -> std::result::Result<KernelId, String> {
    let (rows, cols) = (mask.rows, mask.cols);
    let family = Family::Conv2dStreamTma;
    let entry = square_kernel(family, (rows, cols), channels).ok_or_else(|| {
        format!(
            "compiled for square masks of {STREAM_MASKS:?} taps over 1, 3 or 4 channels; this \
             one is {rows} x {cols} over {channels}"
        )
    })?;
    Ok(entry)
}

/// The tensor map's box, `(elements, rows)`, for a square mask of `mask` taps over `channels`.
pub(crate) fn box_dims(mask: usize, channels: usize) -> (u32, u32) {
    let layout = StreamTmaLayout::new(mask as u64, channels as u64);
    (layout.box_width as u32, layout.box_rows as u32)
}

/// The most steps a block walks: taller blocks are the fastest almost nowhere, and one wave
/// of tall blocks loses to several waves of short ones (measured: PERFORMANCE.md, Block
/// heights).
const MAX_STEPS: u64 = 12;

/// The most steps a block walks for the masks bound by memory (below
/// [`STREAM_COMPUTE_BOUND_FROM`]), whose blocks, unlike the compute-bound ones, lose more to
/// their height than to a partial last wave: blocks of 2 or 3 steps are the fastest or close
/// to it on large images on both GPUs, and thread-staged blocks behave alike (measured:
/// PERFORMANCE.md, Block heights).
const MAX_STEPS_MEMORY_BOUND: u64 = 3;

/// The most steps a block walks for a mask `mask` rows tall.
fn max_steps(mask: usize) -> u64 {
    if mask < STREAM_COMPUTE_BOUND_FROM {
        MAX_STEPS_MEMORY_BOUND
    } else {
        MAX_STEPS
    }
}

/// Output rows per block for an image of `height` rows in `strips` column strips, a mask
/// `mask` rows tall and `chunk` input rows per step, where `sms` SMs run `per_sm` blocks each
/// at once: `chunk k - (mask - 1)` rows, with the `k` up to [`max_steps`] that minimises
/// `(per_sm x waves + tail) x (k + 1)`, the whole waves of blocks that take about the same
/// time each (their steps and a step's worth for the first copies, which no earlier step
/// hides) and a last, partial wave. An SM's blocks share it, so a full wave takes `per_sm`
/// units of a block's time; a last wave of at most one block per SM takes 1.25 (a block alone
/// on an SM cannot hide its own latency, so it takes longer than its share of a full wave), a
/// larger one a full wave's. Counting whole waves alone would miss those lone blocks and pick
/// one wave of tall blocks where short ones win (measured: PERFORMANCE.md, Block heights).
pub(crate) fn rows_per_block(
    height: u32,
    strips: u64,
    mask: usize,
    (sms, per_sm): (u64, u64),
    chunk: u32,
) -> u32 {
    let (sms, per_sm) = (sms.max(1), per_sm.max(1));
    let slots = sms * per_sm;
    // In quarters of a block's time, so that the lone wave's 1.25 stays an integer.
    let (full_wave, lone_wave) = (4 * per_sm, 5.min(4 * per_sm));
    let most = max_steps(mask);
    separable::rows_per_block_minimising(height, strips, mask, chunk, |blocks, steps| {
        if steps > most {
            return u64::MAX;
        }
        let (waves, rest) = (blocks / slots, blocks % slots);
        let tail = match rest {
            0 => 0,
            rest if rest <= sms => lone_wave,
            _ => full_wave,
        };
        (waves * full_wave + tail) * (steps + 1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{
        REGISTER_CHANNELS, SEPARABLE_WIDE_CHUNK_ROWS, STREAM_TMA_RING_ROWS,
        STREAM_TMA_SECOND_REGION,
    };
    use crate::conv2d::separable_tma::tests::centred;

    #[test]
    fn compiled_for_square_masks_of_3_to_9_over_1_3_or_4_channels() {
        for m in STREAM_MASKS {
            for c in REGISTER_CHANNELS {
                let entry = kernel(&centred(m as usize), c as usize).map(KernelId::entry_point);
                assert_eq!(
                    entry,
                    Ok(format!("conv2d_register_tiled_tma_m{m}_c{c}").as_str())
                );
            }
        }
        // What the device, the mode and the anchor must allow: `tensor_copy`'s tests.
        let mask = centred(9);
        assert!(kernel(&mask, 2).is_err());
        assert!(kernel(&centred(11), 1).is_err());
    }

    #[test]
    fn every_window_lies_in_its_region_and_boxes_land_aligned() {
        for m in STREAM_MASKS {
            for c in REGISTER_CHANNELS {
                let (m, c) = (u64::from(m), u64::from(c));
                let layout = StreamTmaLayout::new(m, c);
                let what = format!("mask {m}, {c} channels");
                // Copies start at 16-byte aligned elements: the strip's first input element
                // (`256 k - (m / 2) c`) less the skip.
                assert_eq!((m / 2 * c + layout.skip) % 4, 0, "{what}");
                assert!(layout.skip < 4);
                // A window: its 4 outputs' elements from `skip` on, within its quads.
                let window = layout.skip + 4 + (m - 1) * c;
                assert!(window <= 4 * layout.window_quads, "{what}");
                for thread in 0..64 {
                    let first = 4 * thread;
                    let end = first + 4 * layout.window_quads;
                    if thread < 32 {
                        assert!(end <= layout.box_width, "{what}, thread {thread}");
                    } else {
                        assert!(first >= STREAM_TMA_SECOND_REGION, "{what}");
                        assert!(end - STREAM_TMA_SECOND_REGION <= layout.box_width, "{what}");
                    }
                }
                // Boxes: at most 256 elements wide, 128-byte aligned one after another, never
                // across the ring's end (slots `32 s + k box_rows + m - 1`).
                assert!(layout.box_width <= 256, "{what}");
                assert_eq!(layout.box_rows * layout.box_width * 4 % 128, 0, "{what}");
                assert_eq!(layout.region_words * 4 % 128, 0, "{what}");
                for rows in [
                    m - 1,
                    u64::from(SEPARABLE_WIDE_CHUNK_ROWS),
                    STREAM_TMA_RING_ROWS,
                ] {
                    assert_eq!(rows % layout.box_rows, 0, "{what}");
                }
                // A pass reads 32 + m - 1 rows while the next step's 32 land.
                assert!(32 + m - 1 + 32 <= STREAM_TMA_RING_ROWS);
                assert_eq!(layout.barrier % 2, 0);
                assert!(2 * (layout.words * 4 + 1024) <= 228 * 1024, "{what}");
            }
        }
    }

    #[test]
    fn auto_prefers_tensor_copies_for_large_masks_channels_and_small_images() {
        let (large, small) = (8192 * 8192, 1024 * 1024);
        assert!(auto_prefers(7, 1, large) && auto_prefers(9, 4, large));
        assert!(auto_prefers(5, 3, large) && !auto_prefers(3, 3, large));
        assert!(!auto_prefers(5, 1, large) && !auto_prefers(5, 1, small));
        assert!(!auto_prefers(3, 1, 128 * 128) && !auto_prefers(3, 3, 128 * 128));
        assert!(auto_prefers(5, 1, small - 1) && auto_prefers(5, 1, 128 * 128));
    }

    #[test]
    fn blocks_fill_waves_and_stay_short() {
        let (chunk, h200) = (SEPARABLE_WIDE_CHUNK_ROWS, (132, 2));
        // 8192^2, 9 x 9, 32 strips: 11 steps, 768 blocks, two waves and 240 blocks (where 8
        // steps leave a last wave of 32 blocks, 1,088 in all, and 33 steps would fill one).
        assert_eq!(rows_per_block(8192, 32, 9, h200, chunk), 11 * 32 - 8);
        // 2048^2, 9 x 9, 8 strips: 112 blocks of 5 steps, each alone on its SM, rather than
        // 192 of 3 (two on 60 SMs).
        assert_eq!(rows_per_block(2048, 8, 9, h200, chunk), 5 * 32 - 8);
        // 4096^2 x 3, 5 x 5, 48 strips: 3 steps, where whole waves alone would take 12.
        assert_eq!(rows_per_block(4096, 48, 5, h200, chunk), 3 * 32 - 4);
        for (height, strips, mask, residency) in [
            (8192, 32, 9, h200),
            (8192, 32, 5, h200),
            (4096, 48, 5, h200),
            (1000, 4, 7, h200),
            (1, 1, 3, h200),
            (65535, 64, 9, (132, 1)),
            (300, 2, 3, (1, 1)),
        ] {
            let rows = u64::from(rows_per_block(height, strips, mask, residency, chunk));
            let staged = rows + mask as u64 - 1;
            assert_eq!(staged % u64::from(chunk), 0, "{height} {strips} {mask}");
            assert!(rows >= 1 && staged / u64::from(chunk) <= max_steps(mask));
        }
    }
}
