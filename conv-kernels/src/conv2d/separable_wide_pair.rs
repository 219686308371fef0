//! Wide separable pair kernels: two rank-1 terms of one square mask size `M` over one image,
//! `first = column_a x row_a` and `second = column_b x row_b`, combined as `first + second`
//! or `sqrt(first^2 + second^2)` (a Gaussian Laplacian, a Gaussian gradient magnitude). They
//! read the image once and write the result once, where two wide separable kernels and a
//! combining one read it twice and move three more images through device memory.
//!
//! Block and tiling as [`separable_wide`](crate::conv2d::separable_wide): 256 threads own a
//! strip of 256 output elements and walk down it 32 input rows per step. Each step stages its
//! rows once, runs the row pass twice (`row_a` into the first ring, `row_b` into the second),
//! and one column pass reads both rings: each thread's 4 elements x 8 rows hold two sums, one
//! per term, combined before the store. Both rings and the staged rows take 133 KiB of shared
//! memory for 17 taps, so one block runs per SM, with up to 255 registers (from 19 taps the
//! column pass runs in two bands of 4 rows); twice the multiply-adds of one separable kernel
//! per output, for the same memory traffic.

use crate::abi::{
    Conv2dParams, SEPARABLE_WIDE_RING_ROW_WORDS, SeparableWidePairLayout, TERMS_MAGNITUDE,
    pair_combine_tap,
};
use crate::conv2d::separable_wide::{add_column_taps, plane_of, row_pass};
use crate::conv2d::strip::{CHUNK, PASS_ROWS, PassSums, Strip};
use crate::element::Real;
use crate::gpu::{ConstantMask, Mask, sync_threads};

/// `a + b`, or `sqrt(a^2 + b^2)` for `magnitude`.
#[inline(always)]
pub(crate) fn combine(a: f32, b: f32, magnitude: bool) -> f32 {
    if magnitude {
        Real::sqrt(<f32 as Real>::fma(b, b, a * a))
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
    let layout = SeparableWidePairLayout::new(M as u64);
    // SAFETY: the grid's planes are images of the buffers (caller).
    let (input, output) = unsafe { plane_of(input, output, p) };
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let (strip, image) =
        unsafe { Strip::begin::<M, C, f32>(input, p, layout.ring_rows, layout.column_table) };
    let taps = |factor: usize| -> [f32; M] {
        core::array::from_fn(|j| ConstantMask.tap((factor * M + j) as u64))
    };
    // Four arrays of compile-time indices, never indexed by term: a term loop over arrays of
    // them left them in local memory.
    let (row_a, row_b, column_a, column_b) = (taps(0), taps(1), taps(2), taps(3));
    let combination: f32 = ConstantMask.tap(pair_combine_tap(M as u64));
    let magnitude = combination == TERMS_MAGNITUDE as f32;
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
        row_pass::<M, C>(strip, (layout.ring, &row_a), step_slot, (0, staged_word));
        let second_ring = layout.ring + ring_words;
        row_pass::<M, C>(strip, (second_ring, &row_b), step_slot, (0, staged_word));
        sync_threads();
        let pass = ColumnPass {
            strip,
            at: (step, column_slot),
            rings: (layout.ring, ring_words),
            columns: (&column_a, &column_b),
            magnitude,
        };
        // SAFETY: the rings were row-filtered before the barrier; `output` as the caller's
        // contract says.
        unsafe {
            if M <= ONE_BAND_MASKS {
                pass.run::<PASS_ROWS>((output, p));
            } else {
                pass.run::<BAND_ROWS>((output, p));
            }
        }
        step_slot = strip.advance(step_slot, CHUNK);
        column_slot = strip.advance(column_slot, CHUNK);
    }
}

/// The largest mask whose column pass runs in one band of 8 rows; larger ones run two bands
/// of [`BAND_ROWS`], where two sets of 8 rows' sums spilled (19 taps and more, at 255
/// registers).
const ONE_BAND_MASKS: usize = 17;
/// Rows of a band of the larger masks' column pass.
const BAND_ROWS: usize = 4;

/// The column pass of one step over both rings: two sums per output, `columns.0` over the
/// first ring and `columns.1` over the second, combined (`magnitude`: root of squares; else
/// sum) and stored.
#[derive(Clone, Copy)]
struct ColumnPass<'a, const M: usize> {
    strip: Strip,
    /// The step and the ring slot of its first filtered row.
    at: (u64, u64),
    /// The first ring's word and the words from it to the second.
    rings: (u64, u64),
    columns: (&'a [f32; M], &'a [f32; M]),
    magnitude: bool,
}

impl<const M: usize> ColumnPass<'_, M> {
    /// Runs the pass in bands of `R` rows.
    ///
    /// # Safety
    /// The rings' rows were row-filtered before the last barrier; `output` is a pitched image
    /// as `p` describes, `p.pitch` a multiple of 4 and the buffer 16-byte aligned.
    #[inline(always)]
    unsafe fn run<const R: usize>(self, (output, p): (*mut f32, &Conv2dParams)) {
        let (ring, ring_words) = self.rings;
        let (column_a, column_b) = self.columns;
        let magnitude = self.magnitude;
        // SAFETY: ring rows of 256 + 4 words, the second ring `ring_words` after the first;
        // forwarded contract of `output`.
        unsafe {
            self.strip.pass_combining::<M, 2, R, f32, [PassSums<R>; 2]>(
                self.at,
                (ring, SEPARABLE_WIDE_RING_ROW_WORDS, (2, ring_words)),
                (output, p),
                (
                    [[[0.0; 4]; R]; 2],
                    |[first, second], i, &[quad_a, quad_b]| {
                        add_column_taps(first, i, quad_a, column_a);
                        add_column_taps(second, i, quad_b, column_b);
                    },
                    |[first, second]| {
                        core::array::from_fn(|k| {
                            core::array::from_fn(|e| combine(first[k][e], second[k][e], magnitude))
                        })
                    },
                ),
            )
        };
    }
}

specialised_entry_points!(
    separable_wide_pair, conv2d_separable_wide_pair_m,
    "Wide separable pair kernel, mask size and channels:", one channel:
    3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
);
