//! Separable (rank-1) 2D masks: detection, and the plan of the fused two-pass kernel.

use super::Mask2d;
use super::register_tiled::square_kernel;
use crate::abi::{
    MASK_CAPACITY, SEPARABLE_THREADS, SEPARABLE_WIDE_STRIP, SeparableLayout,
    SeparableWideColumnLayout, SeparableWideLayout, SeparableWidePairLayout, separable_strip,
};
use crate::device::DeviceInfo;
use crate::element::Real;
use crate::error::{ConvError, Result};
use crate::kernels::specialised;
use crate::options::Kernel;
use crate::plan::{LaunchPlan, check_block};
use crate::registry::{Family, KernelId, Shape, Storage};

/// How close to rank 1 a mask must be for [`Kernel::Auto`] to run it as a separable filter:
/// every tap must equal `column[i] * row[j]` within this relative error (4 units in the last
/// place of an `f32`). Masks built as outer products in `f32` or `f64` (Gaussian, box, Sobel
/// factors) pass; the factored result then differs from the direct one by rounding only.
pub const SEPARABLE_TOLERANCE: f64 = 4.0 * f32::EPSILON as f64;

/// Output rows per block the plans report as the most (`LaunchPlan::output_tile`); the launch
/// sizes blocks for the image with [`strip_rows_per_block`].
pub(crate) const ROWS_PER_BLOCK: u32 = 256;

/// Output rows per block of a strip kernel (the separable and streaming designs) that walks
/// down its strip `chunk` input rows per step, for an image of `height` rows, `strips` column
/// strips and a mask `mask` rows tall, where `slots` blocks run at once on the device: `chunk
/// k - (mask - 1)` rows, so that every one of a block's `k` steps is output or halo, with the
/// `k` that minimises the estimated time `(blocks / slots + 1) x (chunk k + mask - 1)`: the
/// waves of blocks plus about one block of tail (blocks at the image's sides run longer, and an
/// SM left with nothing to do waits for them), times a block's input rows plus a fixed cost as
/// large as its halo (the rows it stages for outputs of the block above). Its picks are the
/// fastest height or close to it for the images and masks timed at forced heights (measured:
/// PERFORMANCE.md, Block heights).
pub(crate) fn strip_rows_per_block(
    height: u32,
    strips: u64,
    mask: usize,
    slots: u64,
    chunk: u32,
) -> u32 {
    let (halo, slots) = (mask as u64 - 1, slots.max(1));
    // `(blocks / slots + 1) x (chunk k + halo)`, scaled by `slots`.
    rows_per_block_minimising(height, strips, mask, chunk, |blocks, steps| {
        (blocks + slots) * (steps * u64::from(chunk) + halo)
    })
}

/// Output rows per block of a strip kernel, `chunk k - (mask - 1)` with whole steps `k`, for
/// the `k` whose `cost(blocks, k)` is least (`blocks` the blocks of that height that cover an
/// image of `height` rows in `strips` strips); ties go to fewer steps.
pub(crate) fn rows_per_block_minimising(
    height: u32,
    strips: u64,
    mask: usize,
    chunk: u32,
    cost: impl Fn(u64, u64) -> u64,
) -> u32 {
    let chunk = u64::from(chunk.max(1));
    let (height, halo) = (u64::from(height).max(1), mask as u64 - 1);
    let steps_for_all = (height + halo).div_ceil(chunk);
    let steps = (1..=steps_for_all)
        .filter(|&steps| steps * chunk > halo)
        .min_by_key(|&steps| {
            let blocks = strips.max(1) * height.div_ceil(steps * chunk - halo);
            (cost(blocks, steps), steps)
        })
        .unwrap_or(steps_for_all);
    (steps * chunk - halo).min(u64::from(u32::MAX)) as u32
}

/// The factors of a rank-1 mask, `mask[i][j] = column[i] * row[j]`, in the order the kernel
/// reads them from constant memory: the row factor, then the column factor.
pub(crate) fn factor<R: Real>(mask: &Mask2d<R>) -> Option<Vec<R>> {
    let (rows, cols) = (mask.rows, mask.cols);
    let at = |i: usize, j: usize| mask.values[i * cols + j].to_f64();
    // The largest tap as pivot: its row and column carry the factors with the least rounding.
    let pivot = (0..rows * cols).max_by(|&a, &b| {
        let (a, b) = (at(a / cols, a % cols).abs(), at(b / cols, b % cols).abs());
        a.total_cmp(&b)
    })?;
    let (pi, pj) = (pivot / cols, pivot % cols);
    let scale = at(pi, pj);
    if scale == 0.0 || !scale.is_finite() {
        return None;
    }
    let column: Vec<f64> = (0..rows).map(|i| at(i, pj)).collect();
    let row: Vec<f64> = (0..cols).map(|j| at(pi, j) / scale).collect();
    let rank_one = (0..rows).all(|i| {
        (0..cols).all(|j| {
            let tap = at(i, j);
            tap.is_finite() && (tap - column[i] * row[j]).abs() <= SEPARABLE_TOLERANCE * tap.abs()
        })
    });
    rank_one.then(|| row.iter().chain(&column).map(|&v| R::from_f64(v)).collect())
}

/// The separable kernel: the wide kernel specialised for square masks and channel counts,
/// else the general one.
fn separable_kernel(mask: (usize, usize), channels: usize) -> KernelId {
    square_kernel(Family::Conv2dSeparableWide, mask, channels)
        .unwrap_or(KernelId::plain(Family::Conv2dSeparable))
}

/// Whether a wide separable kernel covers a `mask` over `channels` channels.
pub(crate) fn has_wide_kernel(mask: (usize, usize), channels: usize) -> bool {
    square_kernel(Family::Conv2dSeparableWide, mask, channels).is_some()
}

/// Whether `plan` runs a wide separable kernel (both passes, one alone, or a pair of terms).
pub(crate) fn is_wide(plan: &LaunchPlan) -> bool {
    matches!(
        plan.entry.family(),
        Family::Conv2dSeparableWide
            | Family::Conv2dSeparableWideRow
            | Family::Conv2dSeparableWideColumn
            | Family::Conv2dSeparableWidePair
    )
}

/// Whether `plan` runs a wide separable pair kernel.
pub(crate) fn is_pair(plan: &LaunchPlan) -> bool {
    plan.entry.family() == Family::Conv2dSeparableWidePair
}

/// The direction of a 1D correlation over an image: along its rows or down its columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Along {
    Rows,
    Columns,
}

/// Plans one pass of the wide separable design alone, of `taps` along `along` over one
/// channel, `None` where no kernel is compiled for that many taps.
pub(crate) fn single_pass_plan(
    device: &DeviceInfo,
    (along, taps): (Along, usize),
) -> Option<Result<LaunchPlan>> {
    let (family, words) = match along {
        Along::Rows => (
            Family::Conv2dSeparableWideRow,
            SeparableWideLayout::rectangular((1, taps as u64), 1).words,
        ),
        Along::Columns => (
            Family::Conv2dSeparableWideColumn,
            SeparableWideColumnLayout::new(taps as u64).words,
        ),
    };
    one_channel_plan(device, family, taps, words)
}

/// Plans the wide separable pair kernel for two terms of square masks `taps` a side over one
/// channel, `None` where none is compiled for that size.
pub(crate) fn pair_plan(device: &DeviceInfo, taps: usize) -> Option<Result<LaunchPlan>> {
    let words = SeparableWidePairLayout::new(taps as u64).words;
    one_channel_plan(device, Family::Conv2dSeparableWidePair, taps, words)
}

/// The plan of `family`'s kernel for `taps`, a block of `words` words of shared memory.
fn one_channel_plan(
    device: &DeviceInfo,
    family: Family,
    taps: usize,
    words: u64,
) -> Option<Result<LaunchPlan>> {
    let entry = specialised(family, Shape::Taps, taps, None, Storage::F32)?;
    let block = (SEPARABLE_THREADS, 1);
    Some(
        check_block(device, entry, block, words * 4).map(|()| LaunchPlan {
            kernel: Kernel::Separable,
            entry,
            block,
            output_tile: (SEPARABLE_WIDE_STRIP, ROWS_PER_BLOCK),
            shared_memory_bytes: (words * 4) as u32,
            mask_in_constant_memory: true,
        }),
    )
}

/// Plans the fused separable kernel for a mask `factor` accepted, or explains why it cannot run.
pub(crate) fn plan(
    device: &DeviceInfo,
    (rows, cols): (usize, usize),
    channels: usize,
    tile: Option<(u32, u32)>,
) -> Result<LaunchPlan> {
    let entry = separable_kernel((rows, cols), channels);
    let invalid = ConvError::invalid_launch(entry.entry_point());
    let block = (SEPARABLE_THREADS, 1);
    if tile.is_some_and(|t| t != block) {
        return Err(invalid(format!(
            "the separable kernels use a fixed {block:?} block"
        )));
    }
    if rows + cols > MASK_CAPACITY {
        return Err(invalid(format!(
            "{rows} + {cols} factor taps exceed the {MASK_CAPACITY} of constant memory"
        )));
    }
    let wide = entry.family() == Family::Conv2dSeparableWide;
    let (words, strip) = if wide {
        let layout = SeparableWideLayout::new(rows as u64, channels as u64);
        (layout.words, u64::from(SEPARABLE_WIDE_STRIP))
    } else {
        let layout = SeparableLayout::new(rows as u64, cols as u64, channels as u64);
        (layout.words, separable_strip(channels as u64))
    };
    check_block(device, entry, block, words * 4)?;
    Ok(LaunchPlan {
        kernel: Kernel::Separable,
        entry,
        block,
        output_tile: (strip as u32, ROWS_PER_BLOCK),
        shared_memory_bytes: (words * 4) as u32,
        mask_in_constant_memory: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{
        REGISTER_CHANNELS, SEPARABLE_MASKS, SEPARABLE_WIDE_CHUNK_ROWS,
        SEPARABLE_WIDE_PAIR_STEP_ROWS, SEPARABLE_WIDE_RING_ROW_WORDS,
    };

    fn mask(rows: usize, cols: usize, values: Vec<f32>) -> Mask2d {
        Mask2d {
            values,
            rows,
            cols,
            top: rows / 2,
            left: cols / 2,
        }
    }

    #[test]
    fn outer_products_factor_exactly() {
        let (column, row) = ([1.0f32, 2.0, 1.0], [-1.0f32, 0.0, 1.0, 3.0]);
        let values = column
            .iter()
            .flat_map(|c| row.iter().map(move |r| c * r))
            .collect();
        let factors = factor(&mask(3, 4, values)).expect("rank 1");
        // Row factor scaled so the pivot's row is exact; the product is the mask.
        let (r, c) = factors.split_at(4);
        for i in 0..3 {
            for j in 0..4 {
                assert_eq!(c[i] * r[j], column[i] * row[j]);
            }
        }
    }

    #[test]
    fn rank_two_and_degenerate_masks_are_not_separable() {
        let rank_two = mask(2, 2, vec![1.0, 0.0, 0.0, 1.0]);
        assert!(factor(&rank_two).is_none());
        let nudged = mask(2, 2, vec![1.0, 2.0, 2.0, 4.0 + 1e-5]);
        assert!(factor(&nudged).is_none());
        assert!(factor(&mask(2, 2, vec![0.0; 4])).is_none());
        assert!(factor(&mask(1, 3, vec![1.0, f32::NAN, 1.0])).is_none());
        assert!(factor(&mask(1, 3, vec![1.0, 2.0, 3.0])).is_some());
    }

    #[test]
    fn strip_blocks_cover_whole_steps_and_balance_waves_against_halo() {
        let wide = SEPARABLE_WIDE_CHUNK_ROWS;
        // 8192^2, 31 x 31, 32 strips, 264 slots (2 blocks on 132 SMs): 9 steps of 32 rows,
        // 258 output rows and the 30-row halo; 32 block rows make 1,024 blocks.
        assert_eq!(strip_rows_per_block(8192, 32, 31, 264, wide), 9 * 32 - 30);
        // 5 x 5 with 396 slots (3 blocks per SM): short blocks, 2 steps.
        assert_eq!(strip_rows_per_block(8192, 32, 5, 396, wide), 2 * 32 - 4);
        // A small image: one step per block, 16 rows, 80 blocks.
        assert_eq!(strip_rows_per_block(256, 5, 17, 264, wide), 16);
        // The general kernel's 16-row steps: 4096^2 over 32 strips of 128 elements, 9 x 11,
        // 396 slots: 5 steps (72 rows, 57 block rows, 1,824 blocks: 4.6 waves) rather than
        // 256 rows in 512 blocks (one wave and a third).
        assert_eq!(strip_rows_per_block(4096, 32, 9, 396, 16), 5 * 16 - 8);
        for (height, strips, mask, slots, chunk) in [
            (8192, 32, 5, 396, wide),
            (8192, 32, 9, 264, wide),
            (256, 5, 17, 264, wide),
            (1, 1, 31, 264, wide),
            (4000, 1, 9, 132, wide),
            (8192, 64, 11, 396, 16),
            (4096, 32, 61, 264, 16),
            (300, 3, 3, 396, 16),
        ] {
            let rows = strip_rows_per_block(height, strips, mask, slots, chunk);
            let chunk = u64::from(chunk);
            assert_eq!(
                (u64::from(rows) + mask as u64 - 1) % chunk,
                0,
                "{height} {strips} {mask}"
            );
            let halo = mask as u64 - 1;
            let cost =
                |rows: u64| (strips * u64::from(height).div_ceil(rows) + slots) * (rows + 2 * halo);
            // No other whole-step block height costs less.
            for other in 1..=(u64::from(height) + halo) / chunk + 1 {
                if other * chunk > halo {
                    assert!(cost(u64::from(rows)) <= cost(other * chunk - halo));
                }
            }
        }
    }

    #[test]
    fn wide_layout_spreads_quarter_warps_over_the_banks() {
        for mask in SEPARABLE_MASKS {
            for channels in REGISTER_CHANNELS {
                let layout = SeparableWideLayout::new(u64::from(mask), u64::from(channels));
                let staged = 256 + u64::from((mask - 1) * channels);
                // A quarter-warp's 16-byte accesses: the same element of 8 consecutive rows,
                // staged or in the ring; rows an odd number of quads apart hit 8 bank groups.
                for row_words in [layout.staged_row_words, SEPARABLE_WIDE_RING_ROW_WORDS] {
                    let groups: std::collections::HashSet<u64> =
                        (0..8).map(|r| (r * row_words / 4) % 8).collect();
                    assert_eq!(groups.len(), 8, "mask {mask}, channels {channels}");
                }
                // The windows' last quads stay in their row; ring, table and total in order.
                assert!(layout.staged_row_words >= staged.next_multiple_of(4));
                // A step's rows and the halo, rounded up to whole groups of 8 for the pass
                // where two blocks still fit (all but 31 x 31 over 4 channels).
                let halo_rows = 32 + u64::from(mask) - 1;
                let rounded = mask != 31 || channels != 4;
                let expected = if rounded {
                    halo_rows.next_multiple_of(8)
                } else {
                    halo_rows
                };
                assert_eq!(
                    layout.ring_rows, expected,
                    "mask {mask}, channels {channels}"
                );
                let chunk = u64::from(SEPARABLE_WIDE_CHUNK_ROWS);
                assert_eq!(
                    layout.column_table,
                    chunk * layout.staged_row_words
                        + layout.ring_rows * SEPARABLE_WIDE_RING_ROW_WORDS
                );
                assert!(layout.words >= layout.column_table + staged);
                // Two blocks fit in an H100/H200 SM (228 KiB, 1 KiB reserved per block).
                assert!(2 * (layout.words * 4 + 1024) <= 228 * 1024);
            }
        }
    }

    /// The general kernel's row pass reads its window through `sliding_sums`: the first 8
    /// values, then 8 more per chunk of 8 taps, so up to `8 ((taps - 1) / 8) + 15` values from
    /// its first, `channels` elements apart, some past the staged width. From the last staged
    /// row those reads must stay short of the ring, which other threads are writing.
    #[test]
    fn general_row_pass_reads_stop_short_of_the_ring() {
        use crate::abi::{SEPARABLE_CHUNK_ROWS, SEPARABLE_OUTPUTS, separable_swizzle};
        let mut tight = 0;
        for channels in 1..=17u64 {
            let strip = separable_strip(channels);
            for mask_w in [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 61, 64, 100] {
                let layout = SeparableLayout::new(9, mask_w, channels);
                let last_read = 8 * ((mask_w - 1) / 8) + 15;
                let last_row = u64::from(SEPARABLE_CHUNK_ROWS) - 1;
                for group in 0..strip / u64::from(SEPARABLE_OUTPUTS) {
                    let (pixels, channel) = (group / channels, group % channels);
                    let first = pixels * u64::from(SEPARABLE_OUTPUTS) * channels + channel;
                    let word = last_row * layout.row_words
                        + separable_swizzle(first + last_read * channels);
                    assert!(
                        word < layout.ring_offset,
                        "{channels} channels, {mask_w} wide: word {word}, ring at {}",
                        layout.ring_offset
                    );
                    // Reads that leave the staged rows (the reserved words are needed).
                    if word >= u64::from(SEPARABLE_CHUNK_ROWS) * layout.row_words {
                        tight += 1;
                    }
                }
                assert!(layout.words >= layout.ring_offset + layout.ring_rows * strip);
            }
        }
        assert!(
            tight > 0,
            "no case reads past the staged rows: the test checks nothing"
        );
    }

    /// The single passes' and pair kernels' regions do not overlap, and every kernel
    /// compiled fits the shared memory of one block on an sm_90 SM (227 KiB).
    #[test]
    fn single_pass_and_pair_layouts_fit() {
        use crate::abi::{SEPARABLE_WIDE_RING_ROW_WORDS, strip_row_words};
        let most = 227 * 1024 / 4;
        for &mask in &SEPARABLE_MASKS {
            let mask = u64::from(mask);
            let column = SeparableWideColumnLayout::new(mask);
            assert!(column.ring_rows >= u64::from(SEPARABLE_WIDE_CHUNK_ROWS) + mask - 1);
            assert!(column.words <= most);
            let row = SeparableWideLayout::rectangular((1, mask), 1);
            assert_eq!(row.staged_row_words, strip_row_words(mask, 1));
            assert!(row.words <= most);
        }
        for &mask in &SEPARABLE_MASKS {
            let pair = SeparableWidePairLayout::new(u64::from(mask));
            let staged = u64::from(SEPARABLE_WIDE_PAIR_STEP_ROWS) * pair.staged_row_words;
            assert!(pair.ring >= staged);
            let rings = 2 * pair.ring_rows * SEPARABLE_WIDE_RING_ROW_WORDS;
            assert!(pair.column_table >= pair.ring + rings);
            assert!(pair.words <= most, "{mask}: {} words", pair.words);
        }
    }

    #[test]
    fn every_channel_count_and_odd_shape_has_an_entry_point() {
        let name = |mask, channels| separable_kernel(mask, channels).entry_point();
        assert_eq!(name((31, 31), 1), "conv2d_separable_wide_m31_c1");
        assert_eq!(name((5, 7), 1), "conv2d_separable");
        assert_eq!(name((5, 5), 2), "conv2d_separable");
        for mask in SEPARABLE_MASKS {
            for channels in REGISTER_CHANNELS {
                let mask = (mask as usize, mask as usize);
                assert!(has_wide_kernel(mask, channels as usize), "{mask:?}");
            }
        }
    }
}
