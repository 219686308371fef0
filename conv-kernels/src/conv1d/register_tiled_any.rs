//! The register-tiled 1D design for masks of any length, read at run time from global memory:
//! the long masks (FIR filters of hundreds to thousands of taps) the specialised kernels do not
//! cover.

use super::clamp;
use crate::abi::{
    Conv1dParams, LONG_CHUNK_1D, LONG_THREADS_1D, long_chunk_1d, long_outputs_1d, long_word_1d,
};
use crate::boundary::Line;
use crate::element::Real;
use crate::gpu::{SharedTile, block_idx_x, sync_threads, thread_idx_x};

/// Register-tiled design for any mask length, `P` consecutive outputs a thread
/// (`long_outputs_1d`: 16 `f32`, 8 `f64`).
///
/// Thread mapping: a block of `LONG_THREADS_1D` = 256 threads owns `256 P` consecutive outputs;
/// thread `t` owns outputs `P t..P t + P` and keeps their sums in registers.
///
/// Tiling: the mask is applied in chunks of at most `LONG_CHUNK_1D` taps. For each chunk the
/// block stages the chunk's taps and the input span its outputs need (tile plus chunk, padded
/// by [`long_word_1d`] so that the threads of a warp read distinct banks) in shared memory;
/// then each thread walks the chunk `P` taps at a time with a window of `2P` inputs in
/// registers: `P` shared loads of inputs and `P` broadcast loads of taps feed `P^2`
/// multiply-adds. The sums leave through shared memory, so the stores are coalesced.
///
/// Bound: the FMA issue rate; per `P^2` multiply-adds a thread also issues `2P` shared loads
/// and `P` moves of its window. A chunk's last partial step skips the taps past the mask
/// instead of multiplying by zero, so an infinity beyond an output's reach cannot make it NaN.
///
/// # Safety
/// `input` and `output` hold `p.len >= 1` elements and do not overlap; `mask` holds
/// `p.mask_len >= 1` taps; a 256-thread launch with `long_shared_elements_1d(p.mask_len, P)`
/// elements of `T` of shared memory.
#[inline(always)]
unsafe fn register_tiled_any<T: Real, const P: usize>(
    input: *const T,
    mask: *const T,
    output: *mut T,
    p: &Conv1dParams,
) {
    const { assert!(P as u64 == long_outputs_1d(size_of::<T>() as u64)) };
    const THREADS: u64 = LONG_THREADS_1D as u64;
    let per = P as u64;
    let tile = THREADS * per;
    let tid = thread_idx_x();
    let start = (p.block_offset + block_idx_x()) * tile;
    let taps_at = long_word_1d(tile + long_chunk_1d(p.mask_len, per), per);
    let mut sums = [T::ZERO; P];
    let mut chunk_start = 0;
    while chunk_start < p.mask_len {
        let taps = (p.mask_len - chunk_start).min(LONG_CHUNK_1D);
        if chunk_start > 0 {
            // The previous chunk's reads are done before its span is overwritten.
            sync_threads();
        }
        // SAFETY: the span and the taps fit the reserved elements (the caller's contract and
        // `long_shared_elements_1d`); `input` and `mask` hold what the caller says.
        unsafe { stage::<T, P>(input, mask, p, (start, chunk_start, taps), taps_at) };
        sync_threads();
        // SAFETY: staged before the barrier.
        unsafe { apply_chunk::<T, P>(&mut sums, taps, taps_at) };
        chunk_start += taps;
    }
    sync_threads();
    for (r, &sum) in sums.iter().enumerate() {
        let k = tid * per + r as u64;
        // SAFETY: `k < tile`, within the span's reserved elements; the span is read no more.
        unsafe { SharedTile::store_real(long_word_1d(k, per), clamp(sum, p)) };
    }
    sync_threads();
    let mut k = tid;
    while k < tile && start + k < p.len {
        // SAFETY: `start + k < p.len`; the element was stored before the barrier.
        unsafe { *output.add((start + k) as usize) = SharedTile::load_real(long_word_1d(k, per)) };
        k += THREADS;
    }
}

/// Stages the input span of the block starting at output `start` for the `taps` taps from
/// `chunk_start` on (`tile + ceil(taps / P) P` elements at their padded words), and the taps at
/// element `taps_at`.
///
/// # Safety
/// As [`register_tiled_any`]; `taps_at + taps` and the padded span lie within the reserved
/// shared memory.
#[inline(always)]
unsafe fn stage<T: Real, const P: usize>(
    input: *const T,
    mask: *const T,
    p: &Conv1dParams,
    (start, chunk_start, taps): (u64, u64, u64),
    taps_at: u64,
) {
    const THREADS: u64 = LONG_THREADS_1D as u64;
    let per = P as u64;
    let tid = thread_idx_x();
    let span = THREADS * per + taps.next_multiple_of(per);
    let first = start as i64 - p.left as i64 + chunk_start as i64;
    let mut k = tid;
    if first >= 0 && first as u64 + span <= p.len {
        while k < span {
            // SAFETY: the whole span lies inside the input; the word within the reservation.
            unsafe {
                let value = *input.add((first as u64 + k) as usize);
                SharedTile::store_real(long_word_1d(k, per), value);
            }
            k += THREADS;
        }
    } else {
        // SAFETY: `input` holds `p.len` elements (caller).
        let line = unsafe { Line::new(input, p.len, p.mode, p.cval) };
        while k < span {
            // SAFETY: the word lies within the reservation.
            unsafe { SharedTile::store_real(long_word_1d(k, per), line.at(first + k as i64)) };
            k += THREADS;
        }
    }
    let mut j = tid;
    while j < taps {
        // SAFETY: `chunk_start + j < p.mask_len`; `taps_at + j` within the reservation.
        unsafe { SharedTile::store_real(taps_at + j, *mask.add((chunk_start + j) as usize)) };
        j += THREADS;
    }
}

/// Adds the staged chunk of `taps` taps to this thread's `P` sums: whole steps of `P` taps,
/// then the partial one.
///
/// # Safety
/// The chunk was staged by [`stage`] before the last barrier.
#[inline(always)]
unsafe fn apply_chunk<T: Real, const P: usize>(sums: &mut [T; P], taps: u64, taps_at: u64) {
    let per = P as u64;
    let tid = thread_idx_x();
    // Thread `t`'s window of step `s` starts at span element `P (t + s)`, whose padded word is
    // `(P + 1)(t + s)`; its `P` elements follow it unpadded.
    let window = |step: u64| -> [T; P] {
        let word = (per + 1) * (tid + step);
        // SAFETY: within the staged span (caller).
        core::array::from_fn(|r| unsafe { SharedTile::load_real(word + r as u64) })
    };
    let mut low = window(0);
    let steps = taps / per;
    for step in 0..steps {
        let high = window(step + 1);
        let at = taps_at + step * per;
        // SAFETY: taps `at..at + P` are staged (caller); all threads read the same word.
        let weights: [T; P] =
            core::array::from_fn(|u| unsafe { SharedTile::load_real(at + u as u64) });
        for (u, &weight) in weights.iter().enumerate() {
            multiply_add(sums, weight, (&low, &high), u);
        }
        low = high;
    }
    let rest = taps - steps * per;
    if rest > 0 {
        let high = window(steps + 1);
        let at = taps_at + steps * per;
        for u in 0..P {
            if (u as u64) < rest {
                // SAFETY: tap `at + u` is staged, `u < rest`.
                let weight = unsafe { SharedTile::load_real(at + u as u64) };
                multiply_add(sums, weight, (&low, &high), u);
            }
        }
    }
}

/// `sums[r] += weight * x[r + u]` for the window `x` = `low` then `high`.
#[inline(always)]
fn multiply_add<T: Real, const P: usize>(
    sums: &mut [T; P],
    weight: T,
    (low, high): (&[T; P], &[T; P]),
    u: usize,
) {
    for (r, sum) in sums.iter_mut().enumerate() {
        let x = if r + u < P {
            low[r + u]
        } else {
            high[r + u - P]
        };
        *sum = T::fma(weight, x, *sum);
    }
}

/// Declares an any-length register-tiled 1D entry point over `$t`, `$per` outputs a thread.
macro_rules! any_length_entry_point {
    ($name:ident, $t:ty, $per:literal, $doc:literal) => {
        #[doc = $doc]
        ///
        /// # Safety
        /// As `register_tiled_any`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            input: *const $t,
            mask: *const $t,
            output: *mut $t,
            p: Conv1dParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { register_tiled_any::<$t, $per>(input, mask, output, &p) }
        }
    };
}

any_length_entry_point!(
    conv1d_register_tiled,
    f32,
    16,
    "Register-tiled 1D kernel for masks of any length."
);
any_length_entry_point!(
    conv1d_register_tiled_f64,
    f64,
    8,
    "Register-tiled 1D kernel for masks of any length, `f64`."
);
