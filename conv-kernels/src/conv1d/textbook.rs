//! The four 1D designs of the textbook chapter and tutorial, one thread per output element:
//! thread `t` of block `b` owns output `(block_offset + b) * blockDim.x + t`. The bodies are
//! generic over where the mask lives ([`Mask`]) and over the type they read, add in and write
//! ([`Real`]: `f32`, and `f64`, whose entry points end in `_f64`), so each design exists once in
//! source and four times in PTX.

use super::{clamp, tile_start};
use crate::abi::Conv1dParams;
use crate::boundary::Line;
use crate::element::Real;
use crate::gpu::{
    ConstantMask, GlobalMask, Mask, SharedTile, block_dim_x, sync_threads, thread_idx_x,
};

/// Basic design (textbook Fig. 7.6/7.8): each thread reads its `mask_len` inputs straight from
/// global memory, ghost cells through the boundary mode.
///
/// # Safety
/// `input` and `output` hold `p.len >= 1` elements and do not overlap.
#[inline(always)]
unsafe fn direct<T: Real, M: Mask<T>>(input: *const T, mask: M, output: *mut T, p: &Conv1dParams) {
    let i = tile_start(p) + thread_idx_x();
    if i >= p.len {
        return;
    }
    // SAFETY: `input` holds `p.len` elements (caller).
    let line = unsafe { Line::new(input, p.len, p.mode, p.cval) };
    let first = i as i64 - p.left as i64;
    let mut acc = T::ZERO;
    for j in 0..p.mask_len {
        acc = T::fma(mask.tap(j), line.at(first + j as i64), acc);
    }
    // SAFETY: `i < p.len`.
    unsafe { *output.add(i as usize) = clamp(acc, p) };
}

/// Tiled design with halo cells in shared memory (textbook Fig. 7.11). The block stages the
/// `blockDim.x + mask_len - 1` inputs its outputs need (left halo, tile, right halo; ghost cells
/// take their boundary value) in shared memory, in strides of `blockDim.x`, so a halo wider than
/// the tile is loaded in several steps. One barrier, then every tap is read from shared memory.
///
/// # Safety
/// As [`direct`]; the launch reserves `(blockDim.x + mask_len - 1) * size_of::<T>()` bytes of
/// shared memory.
#[inline(always)]
unsafe fn tiled<T: Real, M: Mask<T>>(input: *const T, mask: M, output: *mut T, p: &Conv1dParams) {
    let threads = block_dim_x();
    let tid = thread_idx_x();
    let start = tile_start(p);
    // SAFETY: `input` holds `p.len` elements (caller).
    let line = unsafe { Line::new(input, p.len, p.mode, p.cval) };
    let span = threads + p.mask_len - 1;
    let first = start as i64 - p.left as i64;
    let mut s = tid;
    while s < span {
        // SAFETY: `s < span`, the reserved element count.
        unsafe { SharedTile::store_real(s, line.at(first + s as i64)) };
        s += threads;
    }
    sync_threads();
    let i = start + tid;
    if i >= p.len {
        return;
    }
    let mut acc = T::ZERO;
    for j in 0..p.mask_len {
        // SAFETY: `tid + j < threads + mask_len - 1 = span`, stored before the barrier.
        acc = T::fma(mask.tap(j), unsafe { SharedTile::load_real(tid + j) }, acc);
    }
    // SAFETY: `i < p.len`.
    unsafe { *output.add(i as usize) = clamp(acc, p) };
}

/// Tiled design with general caching (textbook Fig. 7.14): shared memory holds only the block's
/// own inputs, one per thread; taps that fall outside the tile (halo and ghost cells) are read
/// from global memory, where the neighbouring block's loads have most likely left them in L2.
///
/// # Safety
/// As [`direct`]; the launch reserves `blockDim.x * size_of::<T>()` bytes of shared memory.
#[inline(always)]
unsafe fn tiled_l2<T: Real, M: Mask<T>>(
    input: *const T,
    mask: M,
    output: *mut T,
    p: &Conv1dParams,
) {
    let tid = thread_idx_x();
    let start = tile_start(p);
    let i = start + tid;
    // Every thread stores (threads past the end a copy of element 0, never read): with no branch
    // before it, the compiler cannot duplicate the barrier into divergent paths.
    let source = if i < p.len { i } else { 0 };
    // SAFETY: `tid < blockDim.x`, the reserved count; `source < p.len`.
    unsafe { SharedTile::store_real(tid, *input.add(source as usize)) };
    sync_threads();
    if i >= p.len {
        return;
    }
    // SAFETY: `input` holds `p.len` elements (caller).
    let line = unsafe { Line::new(input, p.len, p.mode, p.cval) };
    let end = (start + block_dim_x()).min(p.len);
    let first = i as i64 - p.left as i64;
    let mut acc = T::ZERO;
    for j in 0..p.mask_len {
        let k = first + j as i64;
        let value = if k >= start as i64 && k < end as i64 {
            // SAFETY: `k - start < blockDim.x`, stored before the barrier since `k < p.len`.
            unsafe { SharedTile::load_real(k as u64 - start) }
        } else {
            line.at(k)
        };
        acc = T::fma(mask.tap(j), value, acc);
    }
    // SAFETY: `i < p.len`.
    unsafe { *output.add(i as usize) = clamp(acc, p) };
}

textbook_entry_points!(
    direct,
    f32,
    Conv1dParams,
    conv1d_constant_mask,
    conv1d_basic,
    "Basic 1D kernel."
);
textbook_entry_points!(
    direct,
    f64,
    Conv1dParams,
    conv1d_constant_mask_f64,
    conv1d_basic_f64,
    "Basic 1D kernel, `f64`."
);
textbook_entry_points!(
    tiled,
    f32,
    Conv1dParams,
    conv1d_tiled,
    conv1d_tiled_global_mask,
    "Tiled 1D kernel, halo in shared memory."
);
textbook_entry_points!(
    tiled,
    f64,
    Conv1dParams,
    conv1d_tiled_f64,
    conv1d_tiled_global_mask_f64,
    "Tiled 1D kernel, halo in shared memory, `f64`."
);
textbook_entry_points!(
    tiled_l2,
    f32,
    Conv1dParams,
    conv1d_tiled_l2,
    conv1d_tiled_l2_global_mask,
    "Tiled 1D kernel, halo through L2."
);
textbook_entry_points!(
    tiled_l2,
    f64,
    Conv1dParams,
    conv1d_tiled_l2_f64,
    conv1d_tiled_l2_global_mask_f64,
    "Tiled 1D kernel, halo through L2, `f64`."
);
