//! Wide fused separable kernels for square rank-1 masks, `mask[i][j] = column[i] * row[j]`,
//! specialised at compile time on the mask size `M` and the channel count `C`: the row pass and
//! the column pass of [`separable`](crate::conv2d::separable) with the wide register-tiled kernels'
//! ingredients (16 outputs per thread, windows through 16-byte shared reads, every tap a
//! compile-time constant-memory operand), so that nearly every instruction is a multiply-add.
//!
//! Block and tiling: 256 threads own a strip of `SEPARABLE_WIDE_STRIP` = 256 output elements
//! and `out_tile_h` output rows, and walk down them `SEPARABLE_WIDE_CHUNK_ROWS` = 32 input rows
//! per step:
//!
//! 1. staging ([`Strip::stage`]): the step's 32 input rows, strip plus `(M - 1) C` halo
//!    elements, into shared memory, warp by warp (the boundary mode only in steps that reach
//!    past the image), then a request to L2 for the next step's rows ([`Strip::prefetch`]),
//!    which arrive while the passes run;
//! 2. row pass: each thread filters 16 consecutive outputs of a staged row along the row, twice
//!    (512 row segments per step), and writes them to a ring of row-filtered rows, slot
//!    `(h + M - 1) mod ring_rows` for the block's filtered row `h`. The 8 threads of a quarter-warp take
//!    the same segment of 8 consecutive rows, and both the staged rows and the ring rows hold
//!    an odd number of 16-byte quads, so their 16-byte reads and writes fall on 8 different
//!    groups of banks;
//! 3. column pass ([`Strip::pass`]): each thread filters 4 consecutive elements x 8
//!    consecutive output rows down the columns: it streams the `8 + M - 1` ring rows through
//!    16-byte reads, each feeding every accumulator it belongs to (32 M multiply-adds for
//!    `8 + M - 1` reads), and stores the rows that lie in the block with 16-byte stores.
//!
//! The ring holds a step's 32 rows and the `M - 1` before them, so two barriers per step
//! suffice: after the staging (the row pass reads it, and the previous column pass is done with
//! the slots it overwrites) and after the row pass. A block of `out_tile_h` rows does
//! `(out_tile_h + M - 1) / out_tile_h * M + M` multiply-adds per output; the host picks
//! `out_tile_h + M - 1` a multiple of 32. A grid of `Z` planes (`gridDim.z`) filters a batch
//! of `Z` images, one after the other in both buffers, each on its own. The fused kernels
//! also read and write `u8` and `u16` images themselves (entry points suffixed `_u8`, `_u16`),
//! widened as they are staged and narrowed as they are stored.
//!
//! [`separable_wide_row`] is the row pass alone (a 1D correlation along the rows of an image,
//! or along the last axis of an N-D array), a column pass of one tap storing its rows.
//! [`separable_wide_column`] is the column pass alone, a mask `M` rows tall and one column
//! wide: a 1D correlation along the first axis of an image, or along any axis but the last of
//! an N-D array seen as a batch of images. Each step's input rows go straight into the ring
//! (no halo across the row), so a step is staging, barrier, column pass, barrier: `M`
//! multiply-adds per output, bound by memory.

use crate::abi::{
    Conv2dParams, SEPARABLE_WIDE_RING_ROW_WORDS, SeparableWideColumnLayout, SeparableWideLayout,
    strip_row_words,
};
use crate::conv2d::strip::{CHUNK, PASS_ROWS, PassSums, Strip};
use crate::conv2d::wide::{Taps, accumulate_window_after};
use crate::element::Element;
use crate::gpu::{ConstantMask, Mask, SharedTile, block_idx_z, fma, sync_threads};

/// Outputs of a row-pass segment.
const SEGMENT: usize = 16;

/// The wide fused separable design for an `M x M` rank-1 mask over `C` channels.
///
/// # Safety
/// As [`separable_wide_rectangular`] for `M x M`.
#[inline(always)]
unsafe fn separable_wide<S: Element<Real = f32>, const M: usize, const C: usize>(
    input: *const S,
    output: *mut S,
    p: &Conv2dParams,
) {
    // SAFETY: forwarded contract.
    unsafe { separable_wide_rectangular::<S, M, M, C>(input, output, p) }
}

/// The row pass alone of the wide separable design: the correlation with the `1 x M` mask
/// whose taps are in MASK, followed by the tap 1 there (a column pass of one tap, which
/// stores the ring's rows through coalesced 16-byte stores).
///
/// # Safety
/// As [`separable_wide_rectangular`] for `1 x M`.
#[inline(always)]
unsafe fn separable_wide_row<const M: usize, const C: usize>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    // SAFETY: forwarded contract.
    unsafe { separable_wide_rectangular::<f32, 1, M, C>(input, output, p) }
}

/// The wide fused separable design for a rank-1 mask `H` rows tall and `W` columns wide over
/// `C` channels, on images of `S` (staged and added in `f32`).
///
/// # Safety
/// `input`/`output` are pitched images as `p` describes, not overlapping; `MASK` holds the row
/// factor (`W` taps) then the column factor (`H`); `p.mask_h = H`, `p.mask_w = W`, `p.channels
/// = C`; a `(256, 1)` block with `SeparableWideLayout::rectangular((H, W), C).words * 4` bytes
/// of shared memory; `p.pitch` a multiple of 4 and the output buffer 16-byte aligned; both
/// buffers hold `gridDim.z` such images.
#[inline(always)]
unsafe fn separable_wide_rectangular<
    S: Element<Real = f32>,
    const H: usize,
    const W: usize,
    const C: usize,
>(
    input: *const S,
    output: *mut S,
    p: &Conv2dParams,
) {
    const { assert!(H >= 1 && H <= 31 && W >= 1 && W <= 31 && C >= 1 && C <= 4) };
    let layout = SeparableWideLayout::rectangular((H as u64, W as u64), C as u64);
    // SAFETY: the grid's planes are images of the buffers (caller).
    let (input, output) = unsafe { plane_of(input, output, p) };
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let (strip, image) =
        unsafe { Strip::begin::<W, C, S>(input, p, layout.ring_rows, layout.column_table) };
    let ring = CHUNK * layout.staged_row_words;
    let row_taps: [f32; W] = core::array::from_fn(|j| ConstantMask.tap(j as u64));
    let column_taps: [f32; H] = core::array::from_fn(|i| ConstantMask.tap((W + i) as u64));
    // Ring slots of filtered rows `32 s` (the step's first) and `32 s - (H - 1)` (the first
    // its column pass reads): filtered row `h` sits in slot `(h + H - 1) mod ring_rows`, so
    // that every column pass starts at a multiple of 8 (see `Strip::pass`).
    let mut step_slot = (H as u64 - 1) % layout.ring_rows;
    let mut column_slot = 0;
    for step in 0..strip.steps::<H>() {
        // SAFETY: the staged rows come first in shared memory; the table is filled.
        unsafe {
            strip.stage_step::<W, C, S>((input, image, p), step, |ry| ry * layout.staged_row_words)
        };
        row_pass::<W, C, CHUNK, 1>(
            strip,
            [(ring, &row_taps)],
            step_slot,
            (0, |row, x0| row * layout.staged_row_words + x0),
        );
        sync_threads();
        // SAFETY: forwarded contract of `output`.
        unsafe { column_pass::<H, S>(strip, (step, column_slot), ring, &column_taps, (output, p)) };
        step_slot = strip.advance(step_slot, CHUNK);
        column_slot = strip.advance(column_slot, CHUNK);
    }
}

/// The column pass alone of the wide separable design: the correlation with the `M x 1` mask
/// whose taps are in MASK, each step's input rows staged straight into the ring.
///
/// # Safety
/// `input`/`output` are pitched images as `p` describes, not overlapping; `p.mask_h = M`,
/// `p.mask_w = 1`, `p.channels = C = 1`; a `(256, 1)` block with
/// `SeparableWideColumnLayout::new(M).words * 4` bytes of shared memory; `p.pitch` a multiple
/// of 4 and the output buffer 16-byte aligned; both buffers hold `gridDim.z` such images.
#[inline(always)]
unsafe fn separable_wide_column<const M: usize, const C: usize>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    const {
        assert!(M >= 1 && M <= 31 && C == 1);
        // A staged row (the strip, no halo) fills a ring row.
        assert!(strip_row_words(1, 1) == SEPARABLE_WIDE_RING_ROW_WORDS);
    };
    let layout = SeparableWideColumnLayout::new(M as u64);
    // SAFETY: the grid's planes are images of the buffers (caller).
    let (input, output) = unsafe { plane_of(input, output, p) };
    // SAFETY: `input` is a pitched image as `p` describes (caller); no halo across the row.
    let (strip, image) =
        unsafe { Strip::begin::<1, C, f32>(input, p, layout.ring_rows, layout.column_table) };
    let taps: [f32; M] = core::array::from_fn(|i| ConstantMask.tap(i as u64));
    // The block's row `h` sits in slot `(h + M - 1) mod ring_rows` (see `separable_wide`).
    let mut step_slot = (M as u64 - 1) % layout.ring_rows;
    let mut column_slot = 0;
    for step in 0..strip.steps::<M>() {
        // SAFETY: ring slots of `SEPARABLE_WIDE_RING_ROW_WORDS` words, the staged row's
        // (asserted above); the previous pass read them before the last barrier; the table is
        // filled.
        unsafe {
            strip.stage_step::<1, C, f32>((input, image, p), step, |ry| {
                strip.advance(step_slot, ry) * SEPARABLE_WIDE_RING_ROW_WORDS
            })
        };
        // SAFETY: forwarded contract of `output`.
        unsafe { column_pass::<M, f32>(strip, (step, column_slot), 0, &taps, (output, p)) };
        // The next staging overwrites slots this pass reads.
        sync_threads();
        step_slot = strip.advance(step_slot, CHUNK);
        column_slot = strip.advance(column_slot, CHUNK);
    }
}

/// `input` and `output` advanced to image `blockIdx.z` of a batch of images as `p` describes.
///
/// # Safety
/// Both buffers hold `gridDim.z` images of `p.height` rows `p.pitch` elements apart.
#[inline(always)]
pub(crate) unsafe fn plane_of<S>(
    input: *const S,
    output: *mut S,
    p: &Conv2dParams,
) -> (*const S, *mut S) {
    let plane = (block_idx_z() * u64::from(p.height) * p.pitch) as usize;
    // SAFETY: image `blockIdx.z` of the buffers (caller).
    unsafe { (input.add(plane), output.add(plane)) }
}

/// The column pass of step `step` over the ring at word `ring` (see [`Strip::pass`]).
///
/// # Safety
/// The ring's rows were row-filtered before the last barrier; `output` is a pitched image as
/// `p` describes, `p.pitch` a multiple of 4 and the buffer 16-byte aligned.
#[inline(always)]
pub(crate) unsafe fn column_pass<const M: usize, S: Element<Real = f32>>(
    strip: Strip,
    (step, column_slot): (u64, u64),
    ring: u64,
    column_taps: &[f32; M],
    (output, p): (*mut S, &Conv2dParams),
) {
    // SAFETY: ring rows of 256 + 4 words; forwarded contract of `output`.
    unsafe {
        strip.pass::<M, 1, PASS_ROWS, S>(
            (step, column_slot),
            (ring, SEPARABLE_WIDE_RING_ROW_WORDS, 1),
            (output, p),
            |sums: &mut PassSums<PASS_ROWS>, i, &[quad]| {
                add_column_taps::<M, PASS_ROWS>(sums, i, quad, column_taps)
            },
        )
    };
}

/// Adds ring row `i` of a column pass, `quad`, into the sums of the output rows it feeds: row
/// `k` takes it with tap `i - k`.
#[inline(always)]
pub(crate) fn add_column_taps<const M: usize, const R: usize>(
    sums: &mut PassSums<R>,
    i: usize,
    quad: [f32; 4],
    column_taps: impl Taps,
) {
    for (k, row_sums) in sums.iter_mut().enumerate() {
        if i >= k && i - k < M {
            for (sum, &value) in row_sums.iter_mut().zip(&quad) {
                *sum = fma(column_taps.tap(i - k), value, *sum);
            }
        }
    }
}

/// Filters the step's `K` staged rows (32 or 16) along the row into the rings of `terms`
/// (each a ring's first word and the taps filtering into it; the pair kernels' two terms read
/// each window once): each thread `K / 16` segments of 16 outputs, row `lane % 8 + 8 (warp %
/// (K / 8))`, segments `lane / 8 + 4 (warp / (K / 8))` and, in steps of 32 rows, 8 more, so a
/// quarter-warp's 8 threads read and write the same elements of 8 consecutive rows.
#[inline(always)]
pub(crate) fn row_pass<const M: usize, const C: usize, const K: u64, const N: usize>(
    strip: Strip<K>,
    terms: [(u64, impl Taps); N],
    step_slot: u64,
    (skip, staged_word): (usize, impl Fn(u64, u64) -> u64),
) {
    // Groups of 8 rows in a step, and segments a sweep of the block's threads filters.
    let row_groups = K / 8;
    let sweep_segments = 4 * (8 / row_groups);
    let row = strip.lane % 8 + 8 * (strip.warp % row_groups);
    let ring_row = strip.advance(step_slot, row) * SEPARABLE_WIDE_RING_ROW_WORDS;
    for sweep in 0..K / 16 {
        let segment = strip.lane / 8 + 4 * (strip.warp / row_groups) + sweep_segments * sweep;
        let x0 = SEGMENT as u64 * segment;
        let staged = staged_word(row, x0);
        // Every term's sums before any store, so that the terms share the window's reads.
        let sums = terms.map(|(_, taps)| {
            let mut acc = [0.0f32; SEGMENT];
            accumulate_window_after::<SEGMENT, M, C>(&mut acc, taps, skip, |q| {
                // SAFETY: row `row < K`; `x0 + 4q + 4 <= staged_row_words` (the window's
                // quads lie within the strip and halo rounded up to quads), stored before the
                // barrier or beyond the staged width, whose values feed nothing.
                unsafe { SharedTile::load4(staged + 4 * q as u64) }
            });
            acc
        });
        for (&(ring, _), acc) in terms.iter().zip(&sums) {
            for (q, quad) in acc.chunks_exact(4).enumerate() {
                let quad = [quad[0], quad[1], quad[2], quad[3]];
                // SAFETY: a ring slot, elements `x0 + 4q .. x0 + 4q + 4 <= 256`: inside the
                // ring.
                unsafe { SharedTile::store4(ring + ring_row + x0 + 4 * q as u64, quad) };
            }
        }
    }
}

separable_sizes!(specialised_entry_points!(
    separable_wide_column, conv2d_separable_wide_column_m,
    "Wide separable column pass, mask height and channels:", one channel:
));

separable_sizes!(specialised_entry_points!(
    separable_wide_row, conv2d_separable_wide_row_m,
    "Wide separable row pass, mask width and channels:", one channel:
));

separable_sizes!(specialised_entry_points!(
    separable_wide[f32], conv2d_separable_wide_m,
    "Wide fused separable 2D kernel, mask size and channels:":
));

/// Declares the wide fused separable kernels on images of the narrow type `$t` (entry points
/// suffixed `$suffix`): input and output in that type, staging and sums in `f32`.
macro_rules! narrow_separable_entry_points {
    ($($t:ty: $suffix:ident),+) => {$(
        separable_sizes!(specialised_entry_points!(
            separable_wide[$t], conv2d_separable_wide_m, $suffix,
            "Wide fused separable 2D kernel on narrow images, mask size and channels:":
        ));
    )+};
}

narrow_separable_entry_points!(u8: u8, u16: u16);
