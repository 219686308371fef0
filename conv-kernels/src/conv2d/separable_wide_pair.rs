//! Wide separable pair kernels: two rank-1 terms of one square mask size `M` over one image,
//! `first = column_a x row_a` and `second = column_b x row_b`, combined as `first + second`
//! or `sqrt(first^2 + second^2)` (a Gaussian Laplacian, a Gaussian gradient magnitude). They
//! read the image once and write the result once, where two wide separable kernels and a
//! combining one read it twice and move three more images through device memory.
//!
//! Block and tiling as [`separable_wide`](crate::conv2d::separable_wide), in steps of
//! [`SEPARABLE_WIDE_PAIR_STEP_ROWS`] = 16 input rows: 256 threads own a strip of 256 output
//! elements and walk down it. Each step stages its rows once and runs one row pass over both
//! row factors (each window read once; `row_a` into the first ring, `row_b` into the second);
//! one column pass reads both rings: each thread's 4 elements x 4 rows in one band, two sums
//! per output, one per term, combined before the store. The band reads `M + 3` quads of each
//! ring for 16 outputs. The rings and the staged rows take 83 KiB of shared memory at 17
//! taps, so two blocks run per SM up to 25 taps (one from 27, by shared memory), with up to
//! 128 registers: the taps are constant-memory operands, the compiler keeping a band's column
//! taps in uniform registers. Twice the multiply-adds of one separable kernel per output, for
//! the same memory traffic, so the pair takes well under the time of two (measured:
//! PERFORMANCE.md, N-D operations).

use crate::abi::{
    Conv2dParams, SEPARABLE_WIDE_PAIR_STEP_ROWS, SEPARABLE_WIDE_RING_ROW_WORDS,
    SeparableWidePairLayout, TERMS_MAGNITUDE, pair_combine_tap,
};
use crate::conv2d::separable_wide::{add_column_taps, plane_of, row_pass};
use crate::conv2d::strip::{PassSums, Strip};
use crate::conv2d::wide::OperandTaps;
use crate::element::{Real, approximate_sqrt};
use crate::gpu::{ConstantMask, Mask, sync_threads};

/// `a + b`, or `sqrt(a^2 + b^2)` for `magnitude`, the root by the hardware's approximation
/// (a dozen instructions and a branch fewer per output than the correctly rounded one).
#[inline(always)]
pub(crate) fn combine(a: f32, b: f32, magnitude: bool) -> f32 {
    if magnitude {
        approximate_sqrt(<f32 as Real>::fma(b, b, a * a))
    } else {
        a + b
    }
}

/// The wide separable pair design for two `M x M` rank-1 terms over one channel.
///
/// # Safety
/// `input`/`output` are pitched images as `p` describes, not overlapping; MASK holds `row_a`,
/// `row_b`, `column_a`, `column_b` (`M` taps each), then the combination
/// (`pair_combine_tap(M)`); `p.mask_h = p.mask_w = M`, `p.channels = C = 1`; a `(256, 1)`
/// block with `SeparableWidePairLayout::new(M).words * 4` bytes of shared memory; `p.pitch` a
/// multiple of 4 and the output buffer 16-byte aligned; both buffers hold `gridDim.z` such
/// images.
#[inline(always)]
unsafe fn separable_wide_pair<const M: usize, const C: usize>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    const { assert!(M >= 1 && M <= 31 && C == 1) };
    let combination: f32 = ConstantMask.tap(pair_combine_tap(M as u64));
    // The combination chosen once per block: read in the pass, it would cost a compare and a
    // branch per output.
    // SAFETY: forwarded contract.
    unsafe {
        if combination == TERMS_MAGNITUDE as f32 {
            walk::<M, C, true>(input, output, p)
        } else {
            walk::<M, C, false>(input, output, p)
        }
    }
}

/// The walk of [`separable_wide_pair`] with the terms combined as a root of squares
/// (`MAGNITUDE`) or a sum.
///
/// # Safety
/// As [`separable_wide_pair`].
#[inline(always)]
unsafe fn walk<const M: usize, const C: usize, const MAGNITUDE: bool>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    let layout = SeparableWidePairLayout::new(M as u64);
    // SAFETY: the grid's planes are images of the buffers (caller).
    let (input, output) = unsafe { plane_of(input, output, p) };
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let (strip, image) = unsafe {
        Strip::<STEP_ROWS>::begin::<M, C, f32>(input, p, layout.ring_rows, layout.column_table)
    };
    // The four factors' taps as constant-memory operands: held in registers across the
    // steps, with two sets of sums, they would spill at two blocks per SM.
    let taps = |factor: u64| OperandTaps(factor * M as u64);
    let (row_a, row_b, column_a, column_b) = (taps(0), taps(1), taps(2), taps(3));
    let ring_words = layout.ring_rows * SEPARABLE_WIDE_RING_ROW_WORDS;
    // Filtered row `h` sits in slot `(h + M - 1) mod ring_rows` of both rings (see
    // `separable_wide`).
    let mut step_slot = (M as u64 - 1) % layout.ring_rows;
    let mut column_slot = 0;
    for step in 0..strip.steps::<M>() {
        // SAFETY: the staged rows come first in shared memory; the table is filled.
        unsafe {
            strip
                .stage_step::<M, C, f32>((input, image, p), step, |ry| ry * layout.staged_row_words)
        };
        let staged_word = |row, x0| row * layout.staged_row_words + x0;
        let rings = [(layout.ring, row_a), (layout.ring + ring_words, row_b)];
        row_pass::<M, C, STEP_ROWS, 2>(strip, rings, step_slot, (0, staged_word));
        sync_threads();
        let pass = ColumnPass::<M, MAGNITUDE> {
            strip,
            at: (step, column_slot),
            rings: (layout.ring, ring_words),
            columns: (column_a, column_b),
        };
        // SAFETY: the rings were row-filtered before the barrier; `output` as the caller's
        // contract says.
        unsafe { pass.run((output, p)) };
        step_slot = strip.advance(step_slot, STEP_ROWS);
        column_slot = strip.advance(column_slot, STEP_ROWS);
    }
}

/// Input rows per step.
const STEP_ROWS: u64 = SEPARABLE_WIDE_PAIR_STEP_ROWS as u64;
/// Output rows of a column-pass band: all a pass thread's 4 rows.
const BAND_ROWS: usize = 4;

/// The column pass of one step over both rings: two sums per output, `columns.0` over the
/// first ring and `columns.1` over the second, combined (`MAGNITUDE`: root of squares; else
/// sum) and stored.
#[derive(Clone, Copy)]
struct ColumnPass<const M: usize, const MAGNITUDE: bool> {
    strip: Strip<STEP_ROWS>,
    /// The step and the ring slot of its first filtered row.
    at: (u64, u64),
    /// The first ring's word and the words from it to the second.
    rings: (u64, u64),
    columns: (OperandTaps, OperandTaps),
}

impl<const M: usize, const MAGNITUDE: bool> ColumnPass<M, MAGNITUDE> {
    /// Runs the pass in one band of a pass thread's rows.
    ///
    /// # Safety
    /// The rings' rows were row-filtered before the last barrier; `output` is a pitched image
    /// as `p` describes, `p.pitch` a multiple of 4 and the buffer 16-byte aligned.
    #[inline(always)]
    unsafe fn run(self, (output, p): (*mut f32, &Conv2dParams)) {
        let (ring, ring_words) = self.rings;
        let (column_a, column_b) = self.columns;
        // SAFETY: ring rows of 256 + 4 words, the second ring `ring_words` after the first;
        // forwarded contract of `output`.
        unsafe {
            self.strip
                .pass_combining::<M, 2, BAND_ROWS, f32, [PassSums<BAND_ROWS>; 2]>(
                    self.at,
                    (ring, SEPARABLE_WIDE_RING_ROW_WORDS, (2, ring_words)),
                    (output, p),
                    (
                        [[[0.0; 4]; BAND_ROWS]; 2],
                        |[first, second], i, &[quad_a, quad_b]| {
                            add_column_taps::<M, BAND_ROWS>(first, i, quad_a, column_a);
                            add_column_taps::<M, BAND_ROWS>(second, i, quad_b, column_b);
                        },
                        |[first, second]| {
                            core::array::from_fn(|k| {
                                core::array::from_fn(|e| {
                                    combine(first[k][e], second[k][e], MAGNITUDE)
                                })
                            })
                        },
                    ),
                )
        };
    }
}

separable_sizes!(specialised_entry_points!(
    separable_wide_pair, conv2d_separable_wide_pair_m,
    "Wide separable pair kernel, mask size and channels:", one channel:
));
