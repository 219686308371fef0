//! The streaming 2D kernels staged by Hopper's tensor copies (sm_90; built only with `--cfg
//! conv_hopper`, into the second PTX module): [`stream`](crate::conv2d::register_tiled)'s pass down the columns,
//! with the input rows put in its ring by the tensor memory accelerator instead of the threads.
//!
//! Block and tiling as the streaming kernels (256 threads, a strip of 256 output elements,
//! steps of 32 input rows; each thread 4 elements x 8 output rows), for square masks of 3 to
//! 9 taps centred along the rows, over 1, 3 or 4 channels. The ring has 72 rows
//! ([`STREAM_TMA_RING_ROWS`]): the up to 40 that a step's pass reads and the next step's 32,
//! which land while the pass runs. It is split in two regions of `box_width` elements a row,
//! staged elements from 0 and from 128 ([`StreamTmaLayout`]), since a tensor copy's box is at
//! most 256 elements wide; threads `c < 32` read their windows from the first, the others from
//! the second, and a warp's 16-byte reads of 32 consecutive quads of one row are free of bank
//! conflicts. Tensor copies start at 16-byte aligned elements, so the regions begin `skip`
//! elements before the strip's first input element and the windows skip them. Elements outside
//! the image arrive as zeros: these kernels serve the zero border (`Constant(0.0)`) only.
//!
//! Per step `s`: wait for the step's copies (an `mbarrier` phase); barrier (every thread is
//! past the pass of step `s - 1`, whose slots step `s + 1`'s rows take); warp 0 asks for step
//! `s + 1`'s rows, one box per lane; the pass. One barrier per step instead of two, and no
//! thread spends instructions on staging or waits for device memory but at a block's first
//! step. Two blocks per SM (the ring takes 78 to 97 KB), so ptxas may keep the taps in
//! registers (up to 128).

use crate::abi::{Conv2dParams, STREAM_TMA_RING_ROWS, STREAM_TMA_SECOND_REGION, StreamTmaLayout};
use crate::conv2d::register_tiled::{COMPUTE_BOUND_FROM, pass};
use crate::conv2d::strip::{CHUNK, Strip};
use crate::gpu::{SharedTile, TransactionBarrier, sync_threads, tensor_copy_2d};

/// The tensor-copy streaming design for an `M x M` mask over `C` channels.
///
/// # Safety
/// `tensor_map` (declared `f32` as every 2D entry point's input) points to a tensor map (in global memory, 64-byte aligned, written before the
/// launch) of the input image as `p` describes: `width * channels x height` elements, rows
/// `p.pitch` elements apart, boxes of `StreamTmaLayout::new(M, C)`'s `box_width x box_rows`,
/// zeros outside; `output` a pitched image as `p` describes, not overlapping the input; `MASK`
/// holds the `M x M` taps row by row; `p.mask_h = p.mask_w = M`, `p.left = M / 2`,
/// `p.channels = C`, the border constant zero; a `(256, 1)` block with
/// `StreamTmaLayout::new(M, C).words * 4` bytes of shared memory; `p.out_tile_h + M - 1` a
/// multiple of 32; `p.pitch` a multiple of 4 and the output buffer 16-byte aligned.
#[inline(always)]
unsafe fn stream_tma<const M: usize, const C: usize>(
    tensor_map: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    const { assert!(M >= 3 && M <= 9 && M % 2 == 1 && C >= 1 && C <= 4) };
    let layout = StreamTmaLayout::new(M as u64, C as u64);
    // SAFETY: a block of 256 threads (caller). No step folds columns here, so the strip has no
    // column table (its word is never read).
    let strip = unsafe { Strip::new::<M, C, f32>(p, STREAM_TMA_RING_ROWS, layout.words) };
    let barrier = TransactionBarrier(SharedTile::address32(layout.barrier));
    if strip.lane == 0 && strip.warp == 0 {
        // SAFETY: the layout's barrier word, used for nothing else; one thread.
        unsafe { barrier.init() };
    }
    sync_threads();
    let steps = strip.steps::<M>();
    // Lane `l` of warp 0 copies box `l`: region `l % 2`, rows `box_rows (l / 2) ..` of a step.
    let copies = 2 * CHUNK / layout.box_rows;
    let copier = strip.warp == 0 && strip.lane < copies;
    let (region, box_row) = (strip.lane % 2, layout.box_rows * (strip.lane / 2));
    let x =
        (strip.first_e - layout.skip as i64 + (STREAM_TMA_SECOND_REGION * region) as i64) as i32;
    let stage = |step: u64| {
        if copier && step < steps {
            let y = (strip.first_y + (step * CHUNK + box_row) as i64) as i32;
            // Row `h` of the block in slot `(h + M - 1) mod ring` (a box never crosses the
            // ring's end: `box_rows` divides `M - 1`, 32 and the ring's 72 rows).
            let slot = (step * CHUNK + box_row + M as u64 - 1) % STREAM_TMA_RING_ROWS;
            let target =
                SharedTile::address32(region * layout.region_words + slot * layout.box_width);
            // SAFETY: initialised above; lane 0 arrives once per step, before its own copy,
            // and the phase cannot complete before it does; every box lands 128-byte aligned
            // (`box_rows x box_width` words a multiple of 32) in slots no pass reads until the
            // phase completes (the barrier before this call: every thread is past the pass
            // that read them).
            unsafe {
                if strip.lane == 0 {
                    barrier.arrive_expecting((2 * CHUNK * layout.box_width * 4) as u32);
                }
                tensor_copy_2d(tensor_map.cast(), target, (x, y), barrier);
            }
        }
    };
    stage(0);
    // Threads `c >= 32` read the second region: element `4c` of a staged row is word `4c -
    // 128` of its row there.
    let ring = if strip.warp % 2 == 0 {
        0
    } else {
        layout.region_words - STREAM_TMA_SECOND_REGION
    };
    let mut pass_slot = 0;
    for step in 0..steps {
        // SAFETY: initialised; the phase of parity `step % 2` completes when step `step`'s
        // boxes have landed.
        unsafe { barrier.wait((step % 2) as u32) };
        sync_threads();
        stage(step + 1);
        // SAFETY: windows `4c .. 4c + 4 window_quads` lie in the thread's region (its width is
        // `128 + 4 (window_quads - 1)` or more), landed before the wait above; the ring has 72
        // rows, a multiple of 8, and `pass_slot` is one; forwarded contract of `output`.
        unsafe {
            let (at, ring, out) = (
                (step, pass_slot),
                (ring, layout.box_width, layout.window_quads as usize),
                (output, p),
            );
            // The skip as a compile-time constant (`layout.skip`, a function of `M` and `C`).
            match layout.skip {
                0 => banded_pass::<M, C, 0>(strip, at, ring, out),
                1 => banded_pass::<M, C, 1>(strip, at, ring, out),
                2 => banded_pass::<M, C, 2>(strip, at, ring, out),
                _ => banded_pass::<M, C, 3>(strip, at, ring, out),
            }
        };
        pass_slot = strip.advance(pass_slot, CHUNK);
    }
}

/// The streaming pass in bands of 4 rows from [`COMPUTE_BOUND_FROM`] on (2 in the
/// thread-staged kernels, whose 80 registers bands of 4 overflow; here two blocks per SM leave
/// up to 128, and the band's 2 x 4 rows more reads cut its instructions per multiply-add),
/// else in one band of 8 (measured: PERFORMANCE.md, Designs: what bounds each, and its limits).
///
/// # Safety
/// As [`pass`].
#[inline(always)]
unsafe fn banded_pass<const M: usize, const C: usize, const SKIP: usize>(
    strip: Strip,
    at: (u64, u64),
    ring: (u64, u64, usize),
    out: (*mut f32, &Conv2dParams),
) {
    // SAFETY: forwarded contract.
    unsafe {
        if M >= COMPUTE_BOUND_FROM {
            pass::<M, C, 4, SKIP, CHUNK, f32>(strip, at, ring, out)
        } else {
            pass::<M, C, 8, SKIP, CHUNK, f32>(strip, at, ring, out)
        }
    }
}

stream_sizes!(specialised_entry_points!(
    stream_tma, conv2d_register_tiled_tma_m, "Tensor-copy streaming 2D kernel, mask size and channels:":
));
