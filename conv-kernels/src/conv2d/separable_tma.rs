//! The wide fused separable kernels staged by Hopper's tensor copies (sm_90; built only with
//! `--cfg conv_hopper`, into the second PTX module): [`separable_wide`](crate::conv2d::separable_wide)'s
//! row and column passes, with the staging handed to the tensor memory accelerator.
//!
//! Block and tiling as the wide separable kernels (256 threads, a strip of 256 outputs, steps
//! of 32 input rows), for one channel and square masks of 3 to 31 taps. The step's input rows
//! land in two regions of 32 rows x `TMA_BOX_WIDTH` = 180 elements, one tensor copy each:
//! staged elements from 0 and from `TMA_SECOND_REGION` = 112, so that every row-pass window
//! (16 outputs and their halo) lies in one region; 180 elements are 45 16-byte quads, an odd
//! number, so a quarter-warp's reads of 8 rows stay free of bank conflicts. Tensor copies start
//! at 16-byte aligned elements (an unaligned start is an illegal instruction), so the regions
//! begin `skip = (4 - (M / 2) mod 4) mod 4` elements before the strip's first input element,
//! and the row pass skips them. Elements outside the image arrive as zeros: the kernels serve
//! the zero border (`Constant(0.0)`) only, and a centred mask (`left = M / 2`).
//!
//! Per step: wait for the step's copies (an `mbarrier` phase), barrier, row pass, barrier; then
//! one thread asks for step `s + 1`'s rows, which land in the staged regions (free since the
//! row pass) while the column pass of step `s` runs. No thread spends instructions on staging,
//! and none waits for device memory but at a block's first step.

use crate::abi::{Conv2dParams, SeparableTmaLayout, TMA_BOX_WIDTH, TMA_SECOND_REGION};
use crate::conv2d::separable_wide::{column_pass, row_pass};
use crate::conv2d::strip::{CHUNK, Strip};
use crate::gpu::{
    ConstantMask, Mask, SharedTile, TransactionBarrier, sync_threads, tensor_copy_2d,
};

/// The tensor-copy fused separable design for an `M x M` rank-1 mask over one channel.
///
/// # Safety
/// `tensor_map` points to a tensor map (in global memory, 64-byte aligned, written before the
/// launch) of the input image as `p` describes: `width x height` elements, rows `p.pitch`
/// elements apart, boxes of `TMA_BOX_WIDTH x 32`, zeros outside; `output` a pitched image as `p`
/// describes, not overlapping the input; `MASK` holds the row factor then the column factor;
/// `p.mask_h = p.mask_w = M`, `p.left = M / 2`, `p.channels = 1`, the border constant zero; a
/// `(256, 1)` block with `SeparableTmaLayout::new(M).words * 4` bytes of shared memory; `p.pitch`
/// a multiple of 4 and the output buffer 16-byte aligned.
#[inline(always)]
unsafe fn separable_tma<const M: usize>(
    tensor_map: *const u64,
    output: *mut f32,
    p: &Conv2dParams,
) {
    const { assert!(M >= 3 && M <= 31 && M % 2 == 1) };
    let layout = SeparableTmaLayout::new(M as u64);
    // SAFETY: a block of 256 threads (caller). No border step folds columns here, so the
    // strip has no column table (its word is never read).
    let strip = unsafe { Strip::new::<M, 1, f32>(p, layout.ring_rows, layout.words) };
    let barrier = TransactionBarrier(SharedTile::address32(layout.barrier));
    let leader = strip.lane == 0 && strip.warp == 0;
    if leader {
        // SAFETY: the layout's barrier word, used for nothing else; one thread.
        unsafe { barrier.init() };
    }
    sync_threads();
    let steps = strip.steps::<M>();
    // Tensor copies start at 16-byte aligned elements: the staged rows begin `skip` elements
    // before the strip's first input element (`left = M / 2`, so a compile-time constant).
    let skip = (4 - (M / 2) % 4) % 4;
    let aligned_first = strip.first_e - skip as i64;
    let stage = |step: u64| {
        if leader && step < steps {
            let y = (strip.first_y + (step * CHUNK) as i64) as i32;
            // SAFETY: initialised above; the leader arrives once per step; the two regions
            // are 128-byte aligned (`region_words * 4` is a multiple of 128) and hold a box.
            unsafe {
                barrier.arrive_expecting((2 * layout.region_words * 4) as u32);
                for (region, first) in [(0, 0), (1, TMA_SECOND_REGION)] {
                    let target = SharedTile::address32(region * layout.region_words);
                    tensor_copy_2d(
                        tensor_map,
                        target,
                        ((aligned_first + first as i64) as i32, y),
                        barrier,
                    );
                }
            }
        }
    };
    stage(0);
    let row_taps: [f32; M] = core::array::from_fn(|j| ConstantMask.tap(j as u64));
    let column_taps: [f32; M] = core::array::from_fn(|i| ConstantMask.tap((M + i) as u64));
    let mut step_slot = (M as u64 - 1) % layout.ring_rows;
    let mut column_slot = 0;
    for step in 0..steps {
        // SAFETY: initialised; the phase of parity `step % 2` completes when step `step`'s
        // boxes have landed.
        unsafe { barrier.wait((step % 2) as u32) };
        sync_threads();
        row_pass::<M, 1, CHUNK, 1>(
            strip,
            [(layout.ring, &row_taps)],
            step_slot,
            (skip, |row, x0| {
                if x0 < TMA_SECOND_REGION {
                    row * TMA_BOX_WIDTH + x0
                } else {
                    layout.region_words + row * TMA_BOX_WIDTH + x0 - TMA_SECOND_REGION
                }
            }),
        );
        sync_threads();
        stage(step + 1);
        // SAFETY: forwarded contract of `output`.
        unsafe {
            column_pass::<M, f32>(
                strip,
                (step, column_slot),
                layout.ring,
                &column_taps,
                (output, p),
            )
        };
        step_slot = strip.advance(step_slot, CHUNK);
        column_slot = strip.advance(column_slot, CHUNK);
    }
}

/// Declares `conv2d_separable_tma_m{size}_c1` for each size given.
macro_rules! tensor_copy_entry_points {
    ($($size:literal),+) => {$(
        #[doc = concat!("Tensor-copy fused separable 2D kernel, one channel: `separable_tma::<", $size, ">`.")]
        ///
        /// # Safety
        /// As `separable_tma`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn ${concat(conv2d_separable_tma_m, $size, _c1)}(
            tensor_map: *const u64,
            output: *mut f32,
            p: Conv2dParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { separable_tma::<$size>(tensor_map, output, &p) }
        }
    )+};
}

separable_sizes!(tensor_copy_entry_points!());
