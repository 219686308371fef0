//! The register-tiled 2D designs: every thread keeps several outputs in registers and reuses
//! each input value it reads for all of them, every tap a compile-time constant-memory operand.
//!
//! - [`register_wide`], for masks 1 or 9 to 31 taps wide (any height): 16 outputs x 2 rows per
//!   thread, the block's whole input region staged once in shared memory;
//! - the streaming kernels, below, for square masks of 3 to 9 taps.
//!
//! Streaming kernels for square general masks, specialised at compile time on the mask size
//! `M` and the channel count `C`: a block walks down a strip of the image (see
//! [`strip`](crate::conv2d::strip)), staging each step's `K` input rows once into a ring of `K + M - 1`
//! rows (rounded up to a multiple of 8) in shared memory, and every thread computes 4
//! consecutive elements x `K / 4` consecutive output rows from the ring. Steps are 32 rows
//! ([`stream`]), and for the memory-bound sizes (3 x 3 and 5 x 5) also 16 rows
//! ([`stream_short_steps`]; `STREAM_SHORT_STEP_MASKS` says which GPUs gain). The memory-bound
//! sizes ask L2 for the next step's rows before each pass ([`Strip::prefetch`]; narrow images
//! for the first one too, before the block's setup); from 7 x 7 on
//! ([`COMPUTE_BOUND_FROM`]) the pass takes its 8 rows 2 at a time.
//!
//! Per ring row a thread reads its window, `4 + (M - 1) C` elements, with 16-byte reads (the
//! 32 threads of a warp read consecutive quads of one row, free of bank conflicts), and feeds
//! each value to every accumulator it belongs to: up to `K / 4 x 4 x M` multiply-adds per row,
//! each tap a compile-time constant-memory operand, for `(4 + (M - 1) C) / 4` reads. Each
//! input element is loaded from global memory once per block.
//!
//! Two barriers per step: after the staging (the pass reads the rows) and after the pass (the
//! next staging overwrites the rows it read). The ring holds a step's rows and the `M - 1`
//! before them: 25 to 29 KB in steps of 16 rows (four blocks per SM), 37 to 47 KB in steps of
//! 32 (three blocks).

use super::row_elements;
use super::strip::{CHUNK, PassSums, Strip};
use super::wide::{
    Padded, Staging, accumulate_window, accumulate_window_after, store_segment, with_finish,
};
use crate::abi::{Conv2dParams, STREAM_COMPUTE_BOUND_FROM, STREAM_SHORT_STEP_ROWS, StreamLayout};
use crate::boundary::Plane;
use crate::element::{Bf16, Element, Half};
use crate::gpu::{
    ConstantMask, Mask, SharedTile, block_dim_y, block_idx_x, block_idx_y, block_idx_z,
    sync_threads, thread_idx_x, thread_idx_y,
};
use core::marker::PhantomData;

/// The streaming design for an `M x M` mask over `C` channels, in steps of 32 rows (bands of 8
/// rows, from [`COMPUTE_BOUND_FROM`] on of 2).
///
/// # Safety
/// `input`/`output` are pitched images as `p` describes, not overlapping; `MASK` holds the
/// `M x M` taps row by row; `p.mask_h = p.mask_w = M`, `p.channels = C`; a `(256, 1)` block
/// with `StreamLayout::new(M, C, 32).words * 4` bytes of shared memory; `p.out_tile_h + M - 1`
/// a multiple of 32; `p.pitch` a multiple of 4 and the output buffer 16-byte aligned. A grid
/// of `Z` planes (`gridDim.z`) filters a batch of `Z` such images, each on its own, the next
/// `p.height * p.pitch` elements after the previous one in both buffers.
#[inline(always)]
unsafe fn stream<S: Element<Real = f32>, const M: usize, const C: usize>(
    input: *const S,
    output: *mut S,
    p: &Conv2dParams,
) {
    // SAFETY: forwarded contract.
    unsafe {
        if M >= COMPUTE_BOUND_FROM {
            walk::<M, C, CHUNK, 2, S>(input, output, p)
        } else {
            walk::<M, C, CHUNK, 8, S>(input, output, p)
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
unsafe fn stream_short_steps<S: Element<Real = f32>, const M: usize, const C: usize>(
    input: *const S,
    output: *mut S,
    p: &Conv2dParams,
) {
    const { assert!(M < COMPUTE_BOUND_FROM) };
    // SAFETY: forwarded contract.
    unsafe { walk::<M, C, STREAM_SHORT_STEP_ROWS, 4, S>(input, output, p) }
}

/// The walk of [`stream`] in steps of `K` rows, the pass in bands of `R` rows.
///
/// # Safety
/// As [`stream`], for `StreamLayout::new(M, C, K)` and `p.out_tile_h + M - 1` a multiple of
/// `K` (the ring the host sized the block's memory for, and the steps it sized the blocks'
/// heights in).
#[inline(always)]
unsafe fn walk<
    const M: usize,
    const C: usize,
    const K: u64,
    const R: usize,
    S: Element<Real = f32>,
>(
    input: *const S,
    output: *mut S,
    p: &Conv2dParams,
) {
    const { assert!(M >= 1 && M <= 9 && C >= 1 && C <= 4) };
    let layout = StreamLayout::new(M as u64, C as u64, K);
    let plane = (block_idx_z() * u64::from(p.height) * p.pitch) as usize;
    // SAFETY: the grid's planes are images of the buffers (caller).
    let (input, output) = unsafe { (input.add(plane), output.add(plane)) };
    // Narrow images ask L2 for the first step's rows before the block's setup (its column
    // table), as each step does for the next: their kernels wait on latency more than on
    // memory (measured: PERFORMANCE.md, Approaches measured and not kept).
    if M < COMPUTE_BOUND_FROM && size_of::<S>() < size_of::<f32>() {
        // SAFETY: a block of 256 threads; `input` is a pitched image as `p` describes (caller).
        unsafe {
            Strip::<K>::new::<M, C, S>(p, layout.ring_rows, layout.column_table)
                .prefetch::<M, C, S>((input, p), 0)
        };
    }
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let (strip, image) =
        unsafe { Strip::<K>::begin::<M, C, S>(input, p, layout.ring_rows, layout.column_table) };
    // Ring slots of input rows `K s` (step `s`'s first staged row) and `K s - (M - 1)` (the
    // first its pass reads): the block's row `h` sits in slot `(h + M - 1) mod ring_rows`, so
    // that every pass starts at a multiple of 8 (see `Strip::pass`).
    let mut step_slot = (M as u64 - 1) % layout.ring_rows;
    let mut pass_slot = 0;
    for step in 0..strip.steps::<M>() {
        // SAFETY: ring slots of `row_words` words; the table is filled.
        unsafe {
            strip.stage::<M, C, S>((input, image, p), step, |ry| {
                strip.advance(step_slot, ry) * layout.row_words
            })
        };
        if M < COMPUTE_BOUND_FROM {
            // SAFETY: `input` is the image `p` describes.
            unsafe { strip.prefetch::<M, C, S>((input, p), step + 1) };
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
            pass::<M, C, R, 0, K, S>(strip, at, ring, out)
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
    S: Element<Real = f32>,
>(
    strip: Strip<K>,
    at: (u64, u64),
    ring: (u64, u64, usize),
    out: (*mut S, &Conv2dParams),
) {
    // SAFETY: forwarded contract.
    unsafe {
        strip.pass::<M, MAX_WINDOW_QUADS, R, S>(at, ring, out, accumulate_rows::<M, C, R, SKIP>)
    }
}

/// [`STREAM_COMPUTE_BOUND_FROM`]: from it on, the pass runs in bands of 2 rows (7 x 7: 392
/// instead of 1,568 multiply-adds of code per band; the smaller masks take a pass thread's
/// rows in one band, which reads each ring row once), and the kernel does not prefetch the
/// next step's rows, which only the memory-bound masks gain from. Bands of 4 rows lose: at
/// 9 x 9 a band loop of 1,296 multiply-adds waits on instruction fetch, at 7 x 7 the sums
/// spill registers (measured: PERFORMANCE.md, Approaches measured and not kept).
pub(crate) const COMPUTE_BOUND_FROM: usize = STREAM_COMPUTE_BOUND_FROM;

/// 16-byte quads of a pass thread's window: its 4 elements and the `(M - 1) C` after them.
const fn window_quads(mask: usize, channels: usize) -> usize {
    (4 + (mask - 1) * channels).div_ceil(4)
}

/// The widest window, 9 x 9 over 4 channels (a window length cannot be a generic expression
/// of `M` and `C`; the quads past a kernel's own are zeros the optimiser drops).
const MAX_WINDOW_QUADS: usize = window_quads(9, 4);

stream_sizes!(specialised_entry_points!(
    stream[f32], conv2d_register_tiled_stream_m, "Streaming 2D kernel, mask size and channels:":
));

stream_short_step_sizes!(specialised_entry_points!(
    stream_short_steps[f32], conv2d_register_tiled_stream16_m,
    "Streaming 2D kernel in steps of 16 rows, mask size and channels:":
));

/// Declares the streaming kernels of the memory-bound masks (`STREAM_NATIVE_MASKS`) on images
/// of the narrow type `$t` (entry points suffixed `$suffix`): input and output in that type,
/// sums in `f32`.
macro_rules! narrow_stream_entry_points {
    ($($t:ty: $suffix:ident),+) => {$(
        stream_short_step_sizes!(specialised_entry_points!(
            stream[$t], conv2d_register_tiled_stream_m, $suffix,
            "Streaming 2D kernel on narrow images, mask size and channels:":
        ));
        stream_short_step_sizes!(specialised_entry_points!(
            stream_short_steps[$t], conv2d_register_tiled_stream16_m, $suffix,
            "Streaming 2D kernel on narrow images in steps of 16 rows, mask size and channels:":
        ));
    )+};
}

narrow_stream_entry_points!(u8: u8, u16: u16, Half: f16, Bf16: bf16);

/// Wide register-tiled design for wide masks, specialised at compile time on the mask width `W`
/// and the channel count `C` (any mask height). A block of 16 x `threads_y` threads
/// (`WIDE_BLOCK`; fewer rows only where the staged region would not leave two blocks per SM)
/// owns 256 elements x `2 threads_y` rows of outputs and stages their input region (plus the
/// halo, ghost cells by the boundary mode) in shared memory warp by warp, each staged row
/// padded by [`wide_word`] against bank conflicts; one barrier. Thread `(tx, ty)` then owns
/// the `WIDE_OUTPUTS` = 16 consecutive elements `16 tx ..` of the `WIDE_ROWS` = 2 output rows
/// `ty` and `ty + threads_y`: for each mask row it holds the row's `W` taps in registers and
/// streams both windows (16 elements plus the `(W - 1) * C` halo) through 16-byte shared-memory
/// reads, each value feeding every accumulator it belongs to, so a mask row costs `32 W`
/// multiply-adds for `W` tap loads and `2 (16 + (W - 1) C) / 4` shared reads.
///
/// # Safety
/// As [`direct`]; `p.mask_w = W`, `p.channels = C`, the mask in `MASK`, blocks of 16 x
/// `threads_y` threads (`threads_y` even: staging goes by whole warps) with `p.out_tile_h =
/// 2 threads_y`, and the launch reserves
/// `(2 threads_y + mask_h - 1) * wide_row_words(W, C) * 4` bytes of shared memory; `p.pitch` a
/// multiple of 4 and the output buffer 16-byte aligned.
///
/// [`wide_word`]: crate::abi::wide_word
#[inline(always)]
unsafe fn register_wide<const W: usize, const C: usize>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    use crate::abi::{WIDE_BLOCK, WIDE_OUTPUTS, WIDE_ROWS, wide_row_words, wide_word};
    const N: usize = WIDE_OUTPUTS as usize;
    const R: usize = WIDE_ROWS as usize;
    const { assert!(N.is_multiple_of(16)) };
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let threads = u64::from(WIDE_BLOCK.0) * block_dim_y();
    let tile_w = u64::from(WIDE_BLOCK.0) * N as u64;
    let tile_h = block_dim_y() * R as u64;
    let e0 = block_idx_x() * tile_w;
    let y0 = (u64::from(p.block_offset_y) + block_idx_y()) * tile_h;
    let mask_h = u64::from(p.mask_h);
    let region_w = tile_w + (W as u64 - 1) * C as u64;
    let region_h = tile_h + mask_h - 1;
    let row_words = wide_row_words(W as u64, C as u64);
    let first_e = e0 as i64 - i64::from(p.left) * C as i64;
    let first_y = y0 as i64 - i64::from(p.top);
    let elements = row_elements(p);
    let height = u64::from(p.height);
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let image = unsafe { Plane::new(input, p) };
    // The same in the whole block: the region lies inside the image, so no element needs the
    // boundary mode.
    let interior = first_e >= 0
        && first_e as u64 + region_w <= elements
        && first_y >= 0
        && first_y as u64 + region_h <= height;
    let thread = ty * u64::from(WIDE_BLOCK.0) + tx;
    let staging = Staging::<Padded> {
        rows: region_h,
        row_words,
        lane: thread % 32,
        warp: thread / 32,
        warps: threads / 32,
        layout: PhantomData,
    };
    if interior {
        // SAFETY: inside the image (`interior`).
        staging.interior::<W, C, 1, _>(
            |ry| (first_y as u64 + ry) * p.pitch + first_e as u64 + staging.lane,
            |row, k| unsafe { *input.add((row + 32 * k as u64) as usize) },
        );
    } else {
        staging.border(region_w, |ry, rx| {
            let e = first_e + rx as i64;
            let x = e.div_euclid(C as i64);
            image.in_row(image.row(first_y + ry as i64), x, (e - x * C as i64) as u64)
        });
    }
    sync_threads();
    // Every thread computes (the region covers all of them); stores are predicated on the image.
    let x0 = tx * N as u64;
    let mut acc = [[0.0f32; N]; R];
    let mut row = ty * row_words + wide_word(x0);
    let row_step = block_dim_y() * row_words;
    for i in 0..mask_h {
        let taps: [f32; W] = core::array::from_fn(|j| ConstantMask.tap(i * W as u64 + j as u64));
        for (r, acc) in acc.iter_mut().enumerate() {
            let window = row + r as u64 * row_step;
            accumulate_window::<N, W, C>(acc, &taps, |q| {
                // `x0` is a multiple of 16, so element `x0 + 4q` sits `4q + 4 (q / 4)` words on.
                // SAFETY: row `ty + r * threads_y + i < region_h`; the quad lies inside the
                // row's words (rounded up to 16 elements), stored before the barrier or in the
                // padding, whose values feed nothing.
                unsafe { SharedTile::load4(window + (4 * q + 4 * (q / 4)) as u64) }
            });
        }
        row += row_words;
    }
    // 16-byte stores where the thread's 16 elements lie inside the row.
    with_finish(p, |finish| {
        let e = e0 + x0;
        for (r, sums) in acc.iter().enumerate() {
            let y = y0 + ty + r as u64 * block_dim_y();
            if y < height && e < elements {
                let at = output.wrapping_add((y * p.pitch + e) as usize);
                // SAFETY: row `y < height`, element `e < width * channels <= pitch`; 16-byte
                // aligned (`e`, the pitch and the buffer are).
                unsafe { store_segment(at, sums, (e, elements), |sum| finish(sum, p)) };
            }
        }
    });
}

wide_widths!(specialised_entry_points!(
    register_wide, conv2d_register_tiled_wide_w, "Wide register-tiled 2D kernel, mask width and channels:":
));
