//! GPU convolution for [`ndarray`] arrays, with the GPU kernels written in Rust.
//!
//! The kernels live in the `conv-kernels` crate, which this crate's build script compiles to PTX
//! with rustc's `nvptx64-nvidia-cuda` target; the [`Engine`] loads that PTX through the CUDA
//! driver (found at run time, so nothing CUDA is needed to build) and launches it.
//!
//! Every operation has `scipy.ndimage`'s name, parameters, defaults and results, on arrays of
//! any rank and every [`Element`] type (`u8`, `u16`, [`f16`](struct@f16), [`bf16`](struct@bf16),
//! `f32`, `f64`): [`Ndimage`](ndimage::Ndimage) holds them, and where it runs is where it came
//! from: [`Engine::ndimage`] (one GPU), [`MultiEngine::ndimage`] (several), [`Cpu`]`.ndimage()`
//! (all cores, no GPU). Each call has an `_into` form writing into a caller's host view or,
//! with device arrays ([`DeviceArray`]), enqueued on the GPU without a host copy. Correlations
//! of 1D signals and 2D images run on the seeds' designs ([`Kernel`], `Auto` by default;
//! [`Ndimage::plan_correlate`](ndimage::Ndimage::plan_correlate) says which). Every operation
//! has an f64 CPU twin in [`reference`](mod@reference), the tests' oracle.
//!
//! ```no_run
//! use conv_host::{BoundaryMode, Engine, ndimage::NdOptions};
//! use ndarray::array;
//!
//! let engine = Engine::new()?;
//! let nd = engine.ndimage();
//! let signal = array![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
//! let mask = array![3.0f32, 4.0, 5.0, 4.0, 3.0];
//! let zero = NdOptions { mode: BoundaryMode::Constant(0.0).into(), ..Default::default() };
//! let out = nd.correlate1d(&signal, &mask, 0, &zero)?;
//! assert_eq!(out[1], 38.0);
//! // SciPy's default mode, reflect, on a reversed view.
//! let _ = nd.convolve1d(&signal.slice(ndarray::s![..;-1]), &mask, 0, &NdOptions::default())?;
//! # Ok::<(), conv_host::ConvError>(())
//! ```

#[macro_use]
#[path = "../../conv-kernels/src/sizes.rs"]
mod sizes;

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
mod error;
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
pub mod registry;
mod session;
mod staging;
#[cfg(feature = "bench")]
mod timing;

pub use abi::MASK_CAPACITY;
pub use conv2d::SEPARABLE_TOLERANCE;
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
pub use registry::KernelId;
pub use staging::HostTimes;
#[cfg(feature = "bench")]
pub use timing::PinnedTransfers;

/// The embedded PTX of all kernels, e.g. to inspect it or assemble it with `ptxas`.
pub const KERNELS_PTX: &str = kernels::KERNELS_PTX;

/// f64-accumulating CPU twins of every [`Ndimage`](crate::ndimage::Ndimage) operation, with
/// the same arguments and errors, returning unrounded f64 results: the tests' oracle.
pub mod reference {
    pub use crate::ndimage::reference::*;
}
