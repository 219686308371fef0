//! Streaming 2D kernels for square general masks, specialised at compile time on the mask size
//! `M` and the channel count `C`: a block walks down a strip of the image (see
//! [`strip`](crate::strip)), staging each step's `K` input rows once into a ring of `K + M - 1`
//! rows (rounded up to a multiple of 8) in shared memory, and every thread computes 4
//! consecutive elements x `K / 4` consecutive output rows from the ring. Steps are 32 rows
//! ([`stream`]), and for the memory-bound sizes (3 x 3 and 5 x 5) also 16 rows
//! ([`stream_short_steps`]; `STREAM_SHORT_STEP_MASKS` says which GPUs gain). The memory-bound
//! sizes ask L2 for the next step's rows before each pass ([`Strip::prefetch`]); from 7 x 7 on
//! ([`COMPUTE_BOUND_FROM`]) the pass takes its 8 rows 2 at a time.
//!
//! Per ring row a thread reads its window, `4 + (M - 1) C` elements, with 16-byte reads (the
//! 32 threads of a warp read consecutive quads of one row, free of bank conflicts), and feeds
//! each value to every accumulator it belongs to: up to `K / 4 x 4 x M` multiply-adds per row,
//! each tap a compile-time constant-memory operand, for `(4 + (M - 1) C) / 4` reads. Each
//! input element is loaded from global memory once per block (the design it replaced, a
//! thread walking down 16 rows with its windows in registers, loaded it once per window
//! covering it and the halo rows once per 16-row thread).
//!
//! Two barriers per step: after the staging (the pass reads the rows) and after the pass (the
//! next staging overwrites the rows it read). The ring holds a step's rows and the `M - 1`
//! before them: 25 to 29 KB in steps of 16 rows (four blocks per SM), 37 to 47 KB in steps of
//! 32 (three blocks).

use crate::abi::{Conv2dParams, STREAM_COMPUTE_BOUND_FROM, STREAM_SHORT_STEP_ROWS, StreamLayout};
use crate::gpu::{ConstantMask, Mask, sync_threads};
use crate::strip::{CHUNK, PassSums, Strip};
use crate::wide::accumulate_window_after;

/// The streaming design for an `M x M` mask over `C` channels, in steps of 32 rows (bands of 8
/// rows, from [`COMPUTE_BOUND_FROM`] on of 2).
///
/// # Safety
/// `input`/`output` are pitched images as `p` describes, not overlapping; `MASK` holds the
/// `M x M` taps row by row; `p.mask_h = p.mask_w = M`, `p.channels = C`; a `(256, 1)` block
/// with `StreamLayout::new(M, C, 32).words * 4` bytes of shared memory; `p.out_tile_h + M - 1`
/// a multiple of 32; `p.pitch` a multiple of 4 and the output buffer 16-byte aligned.
#[inline(always)]
unsafe fn stream<const M: usize, const C: usize>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    // SAFETY: forwarded contract.
    unsafe {
        if M >= COMPUTE_BOUND_FROM {
            walk::<M, C, CHUNK, 2>(input, output, p)
        } else {
            walk::<M, C, CHUNK, 8>(input, output, p)
        }
    }
}

/// The streaming design for a memory-bound `M x M` mask over `C` channels in steps of 16 rows:
/// each pass thread's 4 rows in one band.
///
/// # Safety
/// As [`stream`], with `StreamLayout::new(M, C, 16).words * 4` bytes of shared memory and
/// `p.out_tile_h + M - 1` a multiple of 16.
#[inline(always)]
unsafe fn stream_short_steps<const M: usize, const C: usize>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    const { assert!(M < COMPUTE_BOUND_FROM) };
    // SAFETY: forwarded contract.
    unsafe { walk::<M, C, STREAM_SHORT_STEP_ROWS, 4>(input, output, p) }
}

/// The walk of [`stream`] in steps of `K` rows, the pass in bands of `R` rows.
///
/// # Safety
/// As [`stream`], for `StreamLayout::new(M, C, K)` and `p.out_tile_h + M - 1` a multiple of
/// `K` (the ring the host sized the block's memory for, and the steps it sized the blocks'
/// heights in).
#[inline(always)]
unsafe fn walk<const M: usize, const C: usize, const K: u64, const R: usize>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    const { assert!(M >= 1 && M <= 9 && C >= 1 && C <= 4) };
    let layout = StreamLayout::new(M as u64, C as u64, K);
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let (strip, image) =
        unsafe { Strip::<K>::begin::<M, C>(input, p, layout.ring_rows, layout.column_table) };
    // Ring slots of input rows `K s` (step `s`'s first staged row) and `K s - (M - 1)` (the
    // first its pass reads): the block's row `h` sits in slot `(h + M - 1) mod ring_rows`, so
    // that every pass starts at a multiple of 8 (see `Strip::pass`).
    let mut step_slot = (M as u64 - 1) % layout.ring_rows;
    let mut pass_slot = 0;
    for step in 0..strip.steps::<M>() {
        // SAFETY: ring slots of `row_words` words; the table is filled.
        unsafe {
            strip.stage::<M, C>((input, image, p), step, |ry| {
                strip.advance(step_slot, ry) * layout.row_words
            })
        };
        if M < COMPUTE_BOUND_FROM {
            // SAFETY: `input` is the image `p` describes.
            unsafe { strip.prefetch::<M, C>((input, p), step + 1) };
        }
        sync_threads();
        // SAFETY: a window of `4 + (M - 1) C` elements from element `4c` lies within the
        // staged width rounded up to quads; forwarded contract of `output`.
        unsafe {
            let (at, ring, out) = (
                (step, pass_slot),
                (0, layout.row_words, window_quads(M, C)),
                (output, p),
            );
            pass::<M, C, R, 0, K>(strip, at, ring, out)
        };
        // The next step's rows overwrite the ones this pass read.
        sync_threads();
        step_slot = strip.advance(step_slot, K);
        pass_slot = strip.advance(pass_slot, K);
    }
}

/// Adds ring row `i` of a band, its window `quads` from element `SKIP` of the first quad on,
/// to the sums of the band's output rows `k` it belongs to (mask row `i - k`, each tap a
/// compile-time constant-memory operand).
#[inline(always)]
fn accumulate_rows<const M: usize, const C: usize, const R: usize, const SKIP: usize>(
    sums: &mut PassSums<R>,
    i: usize,
    quads: &[[f32; 4]; MAX_WINDOW_QUADS],
) {
    for (k, row_sums) in sums.iter_mut().enumerate() {
        if i >= k && i - k < M {
            let taps: [f32; M] =
                core::array::from_fn(|j| ConstantMask.tap(((i - k) * M + j) as u64));
            accumulate_window_after::<4, M, C>(row_sums, &taps, SKIP, |q| quads[q]);
        }
    }
}

/// The pass of `Strip::pass` with the windows of `accumulate_rows` (from element `SKIP` of
/// their first quad on), in bands of `R` rows, for steps of `K` rows.
///
/// # Safety
/// As `Strip::pass`, for windows of `(SKIP + 4 + (M - 1) C) / 4` quads, `quads` rounded up.
#[inline(always)]
pub(crate) unsafe fn pass<
    const M: usize,
    const C: usize,
    const R: usize,
    const SKIP: usize,
    const K: u64,
>(
    strip: Strip<K>,
    at: (u64, u64),
    ring: (u64, u64, usize),
    out: (*mut f32, &Conv2dParams),
) {
    // SAFETY: forwarded contract.
    unsafe { strip.pass::<M, MAX_WINDOW_QUADS, R>(at, ring, out, accumulate_rows::<M, C, R, SKIP>) }
}

/// [`STREAM_COMPUTE_BOUND_FROM`]: from it on, the pass runs in bands of 2 rows (7 x 7: 392
/// instead of 1,568 multiply-adds of code per band; the smaller masks take a pass thread's
/// rows in one band, which reads each ring row once), and the kernel does not prefetch the next step's rows (9 x
/// 9 measured 1% slower with it; 5 x 5 3% faster). Bands of 4 rows measured slower at 9 x 9
/// (0.299 against 0.285 ms, a band loop of 1,296 multiply-adds waits on instruction fetch) and
/// at 7 x 7 with the aligned ring (0.233 against 0.210 ms: register spills; 0.204 ms before
/// it).
pub(crate) const COMPUTE_BOUND_FROM: usize = STREAM_COMPUTE_BOUND_FROM;

/// 16-byte quads of a pass thread's window: its 4 elements and the `(M - 1) C` after them.
const fn window_quads(mask: usize, channels: usize) -> usize {
    (4 + (mask - 1) * channels).div_ceil(4)
}

/// The widest window, 9 x 9 over 4 channels (a window length cannot be a generic expression
/// of `M` and `C`; the quads past a kernel's own are zeros the optimiser drops).
const MAX_WINDOW_QUADS: usize = window_quads(9, 4);

specialised_entry_points!(
    stream, conv2d_stream_m, "Streaming 2D kernel, mask size and channels:":
    3, 5, 7, 9
);

specialised_entry_points!(
    stream_short_steps, conv2d_stream16_m,
    "Streaming 2D kernel in steps of 16 rows, mask size and channels:":
    3, 5
);
