//! 1D correlation kernels, one module per design family:
//!
//! - [`textbook`]: the four designs of the textbook chapter ("Parallel Patterns: Convolution")
//!   and the tutorial: basic, constant mask, tiled with halo cells in shared memory, tiled with
//!   halo cells through L2;
//! - [`register_tiled`]: several outputs per thread in registers, specialised per mask length;
//! - [`register_tiled_any`]: the same for masks of any length, read at run time in chunks.
//!
//! Every kernel computes `out[i] = clamp(sum_j mask[j] * ext(i + j - left))` for one launch's
//! blocks, `ext` being the input extended by the boundary mode ([`Line::at`]).

use crate::abi::Conv1dParams;
#[cfg(doc)]
use crate::boundary::Line;
use crate::element::Real;
use crate::gpu::{block_dim_x, block_idx_x};

pub mod register_tiled;
pub mod register_tiled_any;
pub mod textbook;

/// First output index of this thread's block.
#[inline(always)]
fn tile_start(p: &Conv1dParams) -> u64 {
    (p.block_offset + block_idx_x()) * block_dim_x()
}

/// The output clamp of these parameters.
#[inline(always)]
fn clamp<T: Real>(value: T, p: &Conv1dParams) -> T {
    value.clamp_to(p.clamp_lo, p.clamp_hi)
}
