//! GPU convolution for [`ndarray`] arrays, with the GPU kernels written in Rust.
//!
//! The kernels live in the `conv-kernels` crate, which this crate's build script compiles to PTX
//! with rustc's `nvptx64-nvidia-cuda` target; the [`Engine`] loads that PTX through the CUDA
//! driver (found at run time, so nothing CUDA is needed to build) and launches it.
//!
//! Operations: 1D signals ([`Engine::correlate1d`], [`Engine::convolve1d`]), 2D images `H x W`
//! or interleaved `H x W x C` ([`Engine::correlate2d`], [`Engine::convolve2d`],
//! [`Engine::gaussian_filter`]), each with an `_into` form writing into a caller's view, and mask
//! builders in [`masks`]. The kernel design is chosen by [`Kernel`] (`Auto` by default).
//! Data of every [`Element`] type (`u8`, `u16`, [`f16`](struct@f16), `f32`, `f64`) is filtered in its own
//! type, host arrays and [`DeviceArray`]s alike.
//!
//! Semantics follow SciPy's `scipy.ndimage`: [`Engine::correlate1d`] computes
//! `out[i] = sum_j mask[j] * in[i + j - len(mask) / 2 - origin]`, [`Engine::convolve1d`] flips the
//! mask first, and [`BoundaryMode`] names how the input continues past its ends. Every GPU
//! operation has an f64 CPU twin in [`reference`](mod@reference).
//!
//! ```no_run
//! use conv_host::{Conv1dOptions, Engine, BoundaryMode};
//! use ndarray::array;
//!
//! let engine = Engine::new()?;
//! let signal = array![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
//! let mask = array![3.0f32, 4.0, 5.0, 4.0, 3.0];
//! let out = engine.correlate1d(&signal, &mask, &Conv1dOptions::default())?;
//! assert_eq!(out[1], 38.0);
//! let reflected = Conv1dOptions { mode: BoundaryMode::Reflect, ..Default::default() };
//! let _ = engine.convolve1d(&signal.slice(ndarray::s![..;-1]), &mask, &reflected)?;
//! # Ok::<(), conv_host::ConvError>(())
//! ```

#[allow(dead_code)]
#[path = "../../conv-kernels/src/abi.rs"]
mod abi;
mod axis;
mod cache;
mod conv1d;
mod conv2d;
mod conv3d;
mod cpu;
mod device;
mod device_array;
mod element;
mod engine;
#[cfg(test)]
mod entry_points_test;
mod error;
mod gaussian;
mod kernels;
mod layout;
mod mask;
pub mod masks;
mod multi;
pub mod ndimage;
mod options;
mod pinned;
mod pinned_array;
mod pinned_rows;
mod pipeline;
mod plan;
mod session;
mod staging;
#[cfg(feature = "bench")]
mod timing;

pub use abi::MASK_CAPACITY;
pub use conv1d::Conv1dOptions;
pub use conv2d::{Conv2dOptions, ImageDim, SEPARABLE_TOLERANCE};
pub use cpu::Cpu;
pub use device::DeviceInfo;
pub use device_array::{DeviceArray, DeviceDim};
pub use element::{Element, Real};
pub use engine::{Engine, MAX_LANES};
pub use error::{ConvError, Result};
pub use half::{bf16, f16};
pub use multi::MultiEngine;
pub use options::{BoundaryMode, Clamp, Kernel};
pub use pinned_array::PinnedArray;
pub use plan::LaunchPlan;
pub use staging::HostTimes;
#[cfg(feature = "bench")]
pub use timing::PinnedTransfers;

/// The embedded PTX of all kernels, e.g. to inspect it or assemble it with `ptxas`.
pub const KERNELS_PTX: &str = kernels::KERNELS_PTX;

/// f64-accumulating CPU versions of every operation, with the same options and errors as the
/// GPU path. The tests compare the GPU against these; they also serve machines without a GPU.
pub mod reference {
    pub use crate::conv1d::reference::{convolve1d, correlate1d};
    pub use crate::conv2d::reference::{convolve2d, correlate2d};
    pub use crate::gaussian::gaussian_filter;

    /// CPU twins of the [`Ndimage`](crate::ndimage::Ndimage) operations, with the same
    /// arguments, returning unrounded f64 results.
    pub mod ndimage {
        pub use crate::ndimage::reference::*;
    }
}
