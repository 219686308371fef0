//! The register-tiled 1D design: each thread keeps 4 or 8 consecutive outputs in registers,
//! specialised at compile time on the mask length.

use super::clamp;
use crate::abi::Conv1dParams;
use crate::boundary::Line;
use crate::gpu::{
    ConstantMask, Mask, Quad, SharedTile, block_idx_x, fma, prefetch_l2, sync_threads, thread_idx_x,
};

/// How far ahead of its own tile a register-tiled 1D block prefetches into L2.
const PREFETCH_AHEAD_ELEMENTS: usize = 1 << 20;

/// Whether the register-tiled 1D kernel for `M` taps prefetches ahead into L2: all but 15
/// taps, where it costs more than it hides (measured: PERFORMANCE.md, Designs: what bounds
/// each, and its limits).
const fn prefetches_ahead(mask_len: usize) -> bool {
    mask_len != 15
}

/// Register-tiled design, specialised at compile time on the mask length `M`. A block of
/// `REGISTER_THREADS_1D` = 256 threads produces `256 * P` outputs, `P = register_outputs_1d(M)`
/// (4 or 8): it stages its input span (tile plus halo; no boundary checks when the span lies
/// inside the input, and every load issued before any store) in shared memory; then thread `t`
/// reads the `M + P - 1` values its `P` consecutive outputs `Pt..Pt + P` need with 16-byte shared
/// loads, keeps them in registers, applies the taps as compile-time constant-memory operands and
/// writes its outputs with 16-byte stores. Except at 15 taps, blocks first ask L2 for a later
/// block's span.
///
/// # Safety
/// As [`direct`]; `p.mask_len = M`, the mask in `MASK`, a 256-thread launch with
/// `register_shared_words_1d(M) * 4` bytes of shared memory; `output` 16-byte aligned.
#[inline(always)]
unsafe fn register_tiled<const M: usize>(input: *const f32, output: *mut f32, p: &Conv1dParams) {
    use crate::abi::{REGISTER_THREADS_1D, register_outputs_1d, register_word_1d};
    const THREADS: usize = REGISTER_THREADS_1D as usize;
    const MAX_PER_THREAD: usize = 8;
    const MAX_STEPS: usize = (THREADS * MAX_PER_THREAD + 30).div_ceil(THREADS);
    let per_thread = const { register_outputs_1d(M as u64) as usize };
    const { assert!(M <= 31 && (register_outputs_1d(M as u64) as usize).is_multiple_of(4)) };
    const { assert!(register_outputs_1d(M as u64) as usize <= MAX_PER_THREAD) };
    let tile = THREADS * per_thread;
    let span = tile + M - 1;
    let tid = thread_idx_x() as usize;
    let start = (p.block_offset + block_idx_x()) as usize * tile;
    let first = start as i64 - p.left as i64;
    let len = p.len as usize;
    if const { prefetches_ahead(M) } {
        // Ask L2 for the span of the tile 2^20 elements (4 MiB) ahead, which a block starting
        // about when this one ends will stage (one 128-byte line per thread of the first
        // `tile / 32`): its loads then wait on L2, not device memory. Distances of a few MiB
        // do alike; a whole wave ahead does worse (measured: PERFORMANCE.md, Designs: what
        // bounds each, and its limits).
        let ahead = start + PREFETCH_AHEAD_ELEMENTS + 32 * tid;
        if tid < tile / 32 && ahead < len {
            // SAFETY: `ahead < len`: inside the input buffer.
            unsafe { prefetch_l2(input.add(ahead)) };
        }
    }
    if first >= 0 && first as usize + span <= len {
        let mut values = [0.0f32; MAX_STEPS];
        for (step, value) in values.iter_mut().enumerate().take(span.div_ceil(THREADS)) {
            let k = step * THREADS + tid;
            if k < span {
                // SAFETY: the whole span lies inside the input.
                *value = unsafe { *input.add(first as usize + k) };
            }
        }
        for (step, &value) in values.iter().enumerate().take(span.div_ceil(THREADS)) {
            let k = step * THREADS + tid;
            if k < span {
                // SAFETY: `k < span`: its word is within the reserved count.
                unsafe { SharedTile::store(register_word_1d(k as u64, M as u64), value) };
            }
        }
    } else {
        // SAFETY: `input` holds `p.len` elements (caller).
        let line = unsafe { Line::new(input, p.len, p.mode, p.cval) };
        let mut k = tid;
        while k < span {
            let word = register_word_1d(k as u64, M as u64);
            // SAFETY: `k < span`: its word is within the reserved count.
            unsafe { SharedTile::store(word, line.at(first + k as i64)) };
            k += THREADS;
        }
    }
    sync_threads();
    let base = tid * per_thread;
    let first_word = register_word_1d(base as u64, M as u64);
    let mut window = [0.0f32; MAX_PER_THREAD + 32];
    for q in 0..(per_thread + M - 1).div_ceil(4) {
        // `base` is a multiple of 8 where the span is padded, so the quad's word is a
        // compile-time offset from the window's first word.
        let offset = register_word_1d(4 * q as u64, M as u64);
        // SAFETY: the quad lies within `register_shared_words_1d(M)`, the reserved count; the
        // values past the span are never used.
        let quad = unsafe { SharedTile::load4(first_word + offset) };
        window[4 * q..4 * q + 4].copy_from_slice(&quad);
    }
    let mut acc = [0.0f32; MAX_PER_THREAD];
    for (r, sum) in acc.iter_mut().enumerate().take(per_thread) {
        for j in 0..M {
            *sum = fma(ConstantMask.tap(j as u64), window[r + j], *sum);
        }
        *sum = clamp(*sum, p);
    }
    let i = start + base;
    if i + per_thread <= len {
        for q in 0..per_thread / 4 {
            let quad = Quad([acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]]);
            // SAFETY: `i + 4q + 4 <= len`; `i` is a multiple of 4, `output` 16-byte aligned.
            unsafe { *(output.add(i + 4 * q) as *mut Quad) = quad };
        }
    } else {
        // Constant indices keep `acc` in registers.
        for (r, &sum) in acc.iter().enumerate().take(per_thread) {
            if i + r < len {
                // SAFETY: `i + r < len`.
                unsafe { *output.add(i + r) = sum };
            }
        }
    }
}

/// Declares the register-tiled 1D entry points `conv1d_register_tiled_m{taps}`, one per mask
/// length.
macro_rules! register_entry_points {
    ($($m:literal),+) => {$(
        #[doc = concat!("Register-tiled 1D kernel for ", $m, "-tap masks.")]
        ///
        /// # Safety
        /// As `register_tiled`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn ${concat(conv1d_register_tiled_m, $m)}(
            input: *const f32,
            output: *mut f32,
            p: Conv1dParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { register_tiled::<$m>(input, output, &p) }
        }
    )+};
}

register_1d_sizes!(register_entry_points!());
