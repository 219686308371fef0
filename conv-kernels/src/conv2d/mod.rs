//! 2D correlation kernels for pitched, interleaved images: the four designs of the textbook
//! chapter (section 7.6), the tutorial and the course report.
//!
//! A row holds `width * channels` interleaved elements; every kernel maps threads to elements,
//! thread `(tx, ty)` of block `(bx, by)` along a row and down the rows, so a warp reads
//! consecutive addresses whatever the channel count. A mask tap `j` columns to the right is
//! `j * channels` elements away, in the same channel. Every thread owns at most one output.
//!
//! One module per design family:
//! - [`textbook`]: the four designs of the textbook chapter (section 7.6), the tutorial and the
//!   course report: basic, constant mask, tiled, tiled through L2;
//! - [`register_tiled`]: several outputs per thread in registers (wide masks, and the streaming
//!   kernels for square masks up to 9 x 9);
//! - [`separable`], [`separable_wide`]: the fused two-pass kernels for rank-1 masks;
//!   [`separable_wide_pair`]: two rank-1 terms combined (Laplacians, gradient magnitudes);
//! - `register_tiled_tma` and `separable_tma`: the same designs staged by Hopper's tensor
//!   copies (only in the `--cfg conv_hopper` build for sm_90);
//! - [`strip`] and [`wide`]: the building blocks the wide and streaming designs share.

use crate::abi::Conv2dParams;
use crate::element::Real;

pub mod register_tiled;
#[cfg(conv_hopper)]
pub mod register_tiled_tma;
pub mod separable;
#[cfg(conv_hopper)]
pub mod separable_tma;
pub mod separable_wide;
pub mod separable_wide_pair;
pub mod strip;
pub mod textbook;
pub mod wide;

/// The output clamp of these parameters.
#[inline(always)]
fn clamp<T: Real>(value: T, p: &Conv2dParams) -> T {
    value.clamp_to(p.clamp_lo, p.clamp_hi)
}

/// Elements per row.
#[inline(always)]
fn row_elements(p: &Conv2dParams) -> u64 {
    u64::from(p.width) * u64::from(p.channels)
}
