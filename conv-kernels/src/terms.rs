//! Two filter terms, each computed into a buffer of its own, combined into the output: their
//! sum (a Laplacian's terms) or the square root of the sum of their squares (a gradient
//! magnitude's), then clamped. The N-D filters over 2D arrays compute each term in one fused
//! pass and combine them here.
//!
//! Thread mapping: a grid-stride loop, thread `t` of the grid combining elements `t`,
//! `t + threads`, ...; two reads and one write per element, so the kernel is bound by memory
//! bandwidth.

use crate::abi::TERMS_MAGNITUDE;
use crate::element::Real;
use crate::gpu::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};

/// `output[i] = first[i] + second[i]`, or `sqrt(first[i]^2 + second[i]^2)` where `combine` is
/// `TERMS_MAGNITUDE`, limited to `[clamp_lo, clamp_hi]`, for `i < len`. Launch: a 1D grid.
///
/// # Safety
/// The three buffers hold `len` elements each; `output` overlaps neither input.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn combine_terms(
    first: *const f32,
    second: *const f32,
    output: *mut f32,
    len: u64,
    combine: u32,
    clamp_lo: f32,
    clamp_hi: f32,
) {
    let threads = grid_dim_x() * block_dim_x();
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < len {
        // SAFETY: `i < len` (caller's buffers).
        let (a, b) = unsafe { (*first.add(i as usize), *second.add(i as usize)) };
        let value = if combine == TERMS_MAGNITUDE {
            Real::sqrt(<f32 as Real>::fma(b, b, a * a))
        } else {
            a + b
        };
        // SAFETY: as above; this thread alone writes element `i`.
        unsafe { *output.add(i as usize) = value.clamp_to(clamp_lo, clamp_hi) };
        i += threads;
    }
}
