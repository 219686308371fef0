//! Element conversions on the device: an input of a storage type widened to `f32` before an
//! `f32` design runs, and its `f32` result narrowed to the output's type after, so that the
//! host's transfers move only the storage type's bytes.
//!
//! Thread mapping: a grid-stride loop, thread `t` of the grid converting elements `t`,
//! `t + threads`, ...; each element read and written once, so the kernels are bound by memory
//! bandwidth.

use crate::element::{Bf16, Element, Half};
use crate::gpu::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};

/// `output[i] = O::narrow(input[i].widen())` for `i < len`.
///
/// # Safety
/// `input` and `output` hold `len` elements each and do not overlap.
#[inline(always)]
unsafe fn convert<I: Element, O: Element<Real = I::Real>>(
    input: *const I,
    output: *mut O,
    len: u64,
) {
    let threads = grid_dim_x() * block_dim_x();
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < len {
        // SAFETY: `i < len` (caller's buffers).
        unsafe { *output.add(i as usize) = O::narrow((*input.add(i as usize)).widen()) };
        i += threads;
    }
}

/// Declares the entry point `convert_{from}_{to}(input, output, len)` of [`convert`].
macro_rules! conversion {
    ($($name:ident: $from:ty => $to:ty),+ $(,)?) => {$(
        #[doc = concat!("Converts `", stringify!($from), "` to `", stringify!($to), "`. Launch: a 1D grid.")]
        ///
        /// # Safety
        /// `input` and `output` hold `len` elements each and do not overlap.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(input: *const $from, output: *mut $to, len: u64) {
            // SAFETY: forwarded contract.
            unsafe { convert(input, output, len) }
        }
    )+};
}

conversion!(
    convert_u8_f32: u8 => f32,
    convert_u16_f32: u16 => f32,
    convert_f16_f32: Half => f32,
    convert_bf16_f32: Bf16 => f32,
    convert_f32_u8: f32 => u8,
    convert_f32_u16: f32 => u16,
    convert_f32_f16: f32 => Half,
    convert_f32_bf16: f32 => Bf16,
);
