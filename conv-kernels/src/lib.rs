//! Convolution kernels for NVIDIA GPUs, written in Rust and compiled to PTX.
//!
//! This crate is `#![no_std]` and is built only for `nvptx64-nvidia-cuda`, by the build script of
//! `conv-host`, which embeds the resulting PTX. It is not meant to be compiled for the host.
//!
//! Layout:
//! - [`gpu`]: the device-side layer (thread indices, barrier, constant-memory mask, shared tile);
//! - [`abi`]: launch parameters shared, source for source, with the host launcher;
//! - [`boundary`]: ghost-cell values for SciPy's boundary modes;
//! - [`element`]: the types kernels add in and store; [`convert`]: the device-side conversions
//!   between storage types and `f32`;
//! - [`conv1d`], [`conv2d`]: the kernels, one module per design family (the textbook designs,
//!   register-tiled, separable, and the tensor-copy designs of the `--cfg conv_hopper` build);
//! - [`conv3d`]: volumes and batches of images; [`axis`]: one 1D pass along any axis of an
//!   N-D array, which the separable filters are made of;
//! - [`bandwidth`]: the SM copy kernel the benchmark measures as the SMs' memory roofline.
#![no_std]
#![feature(
    abi_ptx,
    stdarch_nvptx,
    asm_experimental_arch,
    core_intrinsics,
    macro_metavar_expr_concat,
    stmt_expr_attributes
)]
#![allow(internal_features)]

/// Declares the 2D entry points `{prefix}{size}_c{channels}(input, output, p)` that run
/// `$design::<size, channels>`, a design specialised at compile time on a mask size (or width)
/// and the channel count, for each of the sizes given and the channel counts 1, 3 and 4
/// (`abi::REGISTER_CHANNELS`; the host's tables are checked against the abi's sizes).
///
/// `$design[T]` names a design generic over its element type as well, `$design::<T, size,
/// channels>`, on images of `T` (`f32` where no type is given); with a `$suffix`, the entry
/// points are `{prefix}{size}_c{channels}_{suffix}`. With `one channel:` before the sizes,
/// the entry points are `{prefix}{size}`, for one channel only.
macro_rules! specialised_entry_points {
    ($design:ident, $prefix:ident, $doc:literal, one channel: $($size:literal),+ $(,)?) => {$(
        specialised_entry_points!(@one ${concat($prefix, $size)}, $design, [], $doc, $size, 1);
    )+};
    ($design:ident [$t:ty], $prefix:ident, $suffix:ident, $doc:literal: $($size:literal),+ $(,)?) => {$(
        specialised_entry_points!(@one ${concat($prefix, $size, _c1_, $suffix)}, $design, [$t], $doc, $size, 1);
        specialised_entry_points!(@one ${concat($prefix, $size, _c3_, $suffix)}, $design, [$t], $doc, $size, 3);
        specialised_entry_points!(@one ${concat($prefix, $size, _c4_, $suffix)}, $design, [$t], $doc, $size, 4);
    )+};
    ($design:ident, $prefix:ident, $doc:literal: $($size:literal),+ $(,)?) => {
        specialised_entry_points!($design [], $prefix, $doc: $($size),+);
    };
    ($design:ident $types:tt, $prefix:ident, $doc:literal: $($size:literal),+ $(,)?) => {$(
        specialised_entry_points!(@one ${concat($prefix, $size, _c1)}, $design, $types, $doc, $size, 1);
        specialised_entry_points!(@one ${concat($prefix, $size, _c3)}, $design, $types, $doc, $size, 3);
        specialised_entry_points!(@one ${concat($prefix, $size, _c4)}, $design, $types, $doc, $size, 4);
    )+};
    (@one $name:ident, $design:ident, [$($t:ty)?], $doc:literal, $a:literal, $b:literal) => {
        #[doc = concat!($doc, " `", stringify!($design), "::<", $(stringify!($t), ", ",)? $a, ", ", $b, ">`.")]
        ///
        /// # Safety
        #[doc = concat!("As `", stringify!($design), "`.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            input: *const specialised_entry_points!(@element $($t)?),
            output: *mut specialised_entry_points!(@element $($t)?),
            p: crate::abi::Conv2dParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { $design::<$($t,)? $a, $b>(input, output, &p) }
        }
    };
    (@element) => { f32 };
    (@element $t:ty) => { $t };
}

/// Declares the constant-memory and global-memory entry points `$constant(input, output, p)`
/// and `$global(input, mask, output, p)` of a textbook design for the element type `$t` and the
/// launch parameters `$params` (`Conv1dParams` or `Conv2dParams`).
macro_rules! textbook_entry_points {
    ($design:ident, $t:ty, $params:ty, $constant:ident, $global:ident, $doc:literal) => {
        #[doc = concat!($doc, " Mask in constant memory (uploaded before the launch).")]
        ///
        /// # Safety
        /// `input`/`output` hold the signal or pitched image `p` describes and do not overlap;
        /// the mask's taps are in `MASK`; shared memory as the design requires.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $constant(input: *const $t, output: *mut $t, p: $params) {
            // SAFETY: forwarded contract.
            unsafe { $design(input, ConstantMask, output, &p) }
        }

        #[doc = concat!($doc, " Mask in global memory.")]
        ///
        /// # Safety
        /// As the constant-memory variant; `mask` holds the mask's taps.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $global(
            input: *const $t,
            mask: *const $t,
            output: *mut $t,
            p: $params,
        ) {
            // SAFETY: forwarded contract.
            unsafe { $design(input, GlobalMask(mask), output, &p) }
        }
    };
}

#[macro_use]
mod sizes;

pub mod abi;
pub mod axis;
pub mod bandwidth;
pub mod boundary;
pub mod conv1d;
pub mod conv2d;
pub mod conv3d;
pub mod convert;
pub mod element;
pub mod gpu;

/// A kernel that panics has a bug; trap so the host sees a launch failure instead of a wrong result.
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; nothing after it runs.
    unsafe { core::arch::nvptx::trap() }
}

/// Diagnostic kernel that faults on purpose (`trap`), so the host's handling of a kernel fault,
/// which leaves the CUDA context unusable, can be tested. Launch: one thread.
///
/// # Safety
/// Always faults; the context is lost afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn diagnostic_trap() {
    // SAFETY: aborting the kernel is this kernel's purpose.
    unsafe { core::arch::nvptx::trap() }
}
