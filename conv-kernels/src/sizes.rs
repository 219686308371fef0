//! The mask sizes each specialised kernel family is compiled for, each list written once.
//!
//! Each macro hands its list to another macro: `separable_sizes!(then!(args))` expands to
//! `then!(args 3, 5, ..., 31)`. The kernel crate declares its entry points this way, the abi's
//! size arrays (`size_array`, `size_count`) come from the same lists, and so do the host's
//! kernel registry and the build script's launch bounds. Adding a size is one edit here.

/// Square masks of the wide fused separable kernels (every element type), their row, column
/// and pair passes, and the tensor-copy separable kernels: every odd size from 3 to 31, which
/// covers SciPy's Gaussians up to sigma 3.75 (`2 int(4 sigma + 0.5) + 1` taps).
macro_rules! separable_sizes {
    ($then:ident!($($a:tt)*)) => { $then! { $($a)* 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31 } };
}

/// Square masks of the streaming register-tiled 2D kernels, in steps of 32 rows, and of their
/// tensor-copy twins.
macro_rules! stream_sizes {
    ($then:ident!($($a:tt)*)) => { $then! { $($a)* 3, 5, 7, 9 } };
}

/// Square masks of the streaming kernels in steps of 16 rows, and of the streaming kernels on
/// narrow element types (`u8`, `u16`, `f16`, `bf16`).
macro_rules! stream_short_step_sizes {
    ($then:ident!($($a:tt)*)) => { $then! { $($a)* 3, 5 } };
}

/// Mask widths of the wide register-tiled 2D kernels (any height; width 1 covers columns).
macro_rules! wide_widths {
    ($then:ident!($($a:tt)*)) => { $then! { $($a)* 1, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31 } };
}

/// Mask lengths of the ring axis kernels (one pass along a row of an N-D array).
macro_rules! ring_sizes {
    ($then:ident!($($a:tt)*)) => { $then! { $($a)* 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31 } };
}

/// Mask lengths of the register-tiled 1D kernels.
macro_rules! register_1d_sizes {
    ($then:ident!($($a:tt)*)) => { $then! { $($a)* 3, 5, 7, 9, 15, 31 } };
}

/// Taps a side of the one-pass separable 3D kernels.
macro_rules! separable3d_sizes {
    ($then:ident!($($a:tt)*)) => { $then! { $($a)* 3, 5, 7, 9 } };
}

/// The sizes given, as an array of `u32`.
macro_rules! size_array {
    ($($size:literal),+) => { [$($size),+] };
}

/// How many sizes are given.
macro_rules! size_count {
    ($($size:literal),+) => { [$(size_count!(@one $size)),+].len() };
    (@one $size:literal) => { () };
}
