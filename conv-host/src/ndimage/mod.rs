//! N-dimensional filtering with `scipy.ndimage`'s names, parameters and results, on arrays of
//! any number of dimensions and every element type: correlation along any axis, correlation
//! and convolution of 1D to 3D data (volumes, batches of images, channels last), and the
//! separable filter family (Gaussian with derivatives, uniform, Sobel, Prewitt, Laplace and
//! their Gaussian forms). Reach it through [`Engine::ndimage`]; the f64 CPU twins are in
//! [`reference`](crate::reference).
//!
//! ```no_run
//! use conv_host::{BoundaryMode, Engine, ndimage::NdOptions};
//! let engine = Engine::new()?;
//! let volume = ndarray::Array3::<f32>::ones((64, 256, 256));
//! let nd = engine.ndimage();
//! // A different sigma in depth, SciPy's default mode (reflect).
//! let smooth = nd.gaussian_filter(&volume, [1.0, 2.0, 2.0], 0, &NdOptions::default())?;
//! let edges = nd.sobel(&smooth, 2, &NdOptions::default())?;
//! let rows = nd.correlate1d(&volume, &ndarray::array![1.0f32, 2.0, 1.0], 0, &NdOptions {
//!     mode: BoundaryMode::Nearest.into(),
//!     ..Default::default()
//! })?;
//! # Ok::<(), conv_host::ConvError>(())
//! ```
//!
//! Host arrays run through the engine's pipeline in bands of their first axis, each with the
//! halo the filter reaches along it, so arrays larger than the device's memory (or the engine's
//! cap) run too; filters whose passes along the first axis differ in mode run on the whole
//! array, which then needs its bytes, the output's and up to three `Real` copies in device
//! memory ([`crate::ConvError::OutOfMemory`] otherwise). Intermediate passes keep the input's
//! `Real` type (`f32`, or `f64` for `f64` data), where SciPy rounds each pass to the output's
//! type; integer outputs are rounded and saturated once, at the end.

mod bands;
mod dense;
mod design;
mod device;
mod filters;
mod operands;
pub(crate) mod reference;
mod run;

use crate::cpu::Cpu;
use crate::element::{Element, Real};
use crate::engine::Engine;
use crate::error::{ConvError, Result};
use crate::layout::try_filled;
use crate::multi::MultiEngine;
use crate::options::{BoundaryMode, Clamp, Kernel};
pub(crate) use dense::Dense;
use design::Design;
pub use design::Runs;
pub(crate) use device::{UNCLAMPED, term_finish};
pub(crate) use filters::{Filter, Terms};
use ndarray::{Array, ArrayBase, Data, Dimension, Ix1};
pub use operands::Operands;
use operands::sealed::{Planned, Run as _};

/// A parameter given once for every axis or once per axis, as SciPy's scalar-or-sequence
/// arguments: `2.0.into()`, `[1.0, 2.0, 2.0].into()`, `vec![..].into()`.
#[derive(Clone, Debug, PartialEq)]
pub enum PerAxis<T> {
    /// The same value on every axis.
    All(T),
    /// One value per axis, in axis order.
    Each(Vec<T>),
}

impl<T> From<T> for PerAxis<T> {
    fn from(value: T) -> Self {
        PerAxis::All(value)
    }
}

impl<T> From<Vec<T>> for PerAxis<T> {
    fn from(values: Vec<T>) -> Self {
        PerAxis::Each(values)
    }
}

impl<T, const N: usize> From<[T; N]> for PerAxis<T> {
    fn from(values: [T; N]) -> Self {
        PerAxis::Each(values.into())
    }
}

impl<T: Clone> From<&[T]> for PerAxis<T> {
    fn from(values: &[T]) -> Self {
        PerAxis::Each(values.to_vec())
    }
}

/// Options of the N-D operations. `Default` gives SciPy's defaults: mode `Reflect` on every
/// axis, origin 0, truncate 4, the radius from truncate, no clamp.
#[derive(Clone, Debug, PartialEq)]
pub struct NdOptions {
    /// How the input continues past its edges, once or per axis (`correlate` and `convolve`
    /// take one mode, as SciPy's).
    pub mode: PerAxis<BoundaryMode>,
    /// SciPy's origin, once or per axis, for the operations that take one (`correlate1d`,
    /// `convolve1d`, `correlate`, `convolve`, the uniform filters).
    pub origin: PerAxis<isize>,
    /// Gaussian masks reach `int(truncate * sigma + 0.5)` taps each side.
    pub truncate: f64,
    /// Gaussian mask radius, once or per axis, in place of the one from `truncate`.
    pub radius: Option<PerAxis<usize>>,
    /// Clamp every output to a range.
    pub clamp: Option<Clamp>,
    /// SciPy's `axes`: the axes the operations that take it filter along (`correlate`,
    /// `convolve`, `gaussian_filter`, `uniform_filter`, `laplace`, `gaussian_laplace`,
    /// `gaussian_gradient_magnitude`), negative counting from the end; the per-axis options
    /// and the mask's dimensions then go with these axes, in this order. `None`: every axis.
    /// An image `H x W x C` filtered per channel is `Some(vec![0, 1])`.
    pub axes: Option<Vec<isize>>,
    /// The GPU design of `correlate`, `convolve`, `correlate1d` and `convolve1d` on a 1D
    /// signal or a 2D image (`H x W`, or `H x W x C` of up to 4 channels with the mask along the
    /// first two axes): one of the seeds' designs, or `Auto`'s choice
    /// ([`Ndimage::plan_correlate`] says which). Other calls on the GPU take `Auto` only; the
    /// CPU backend has one design and ignores it.
    pub kernel: Kernel,
    /// Threads per block `(x, y)` of that design, `x` along a row, `y` down the rows (1 for a
    /// signal); `None`: the design's own.
    pub tile: Option<(u32, u32)>,
}

impl NdOptions {
    /// The design options.
    fn design(&self) -> Design {
        Design {
            kernel: self.kernel,
            tile: self.tile,
        }
    }
}

impl Default for NdOptions {
    fn default() -> Self {
        Self {
            mode: PerAxis::All(BoundaryMode::Reflect),
            origin: PerAxis::All(0),
            truncate: 4.0,
            radius: None,
            clamp: None,
            axes: None,
            kernel: Kernel::Auto,
            tile: None,
        }
    }
}

/// The N-D operations of an engine or of the CPU backend (see the [module](self)'s doc).
#[derive(Clone, Copy, Debug)]
pub struct Ndimage<'e> {
    runs_on: RunsOn<'e>,
}

/// Where an [`Ndimage`]'s operations run.
#[derive(Clone, Copy, Debug)]
enum RunsOn<'e> {
    Gpu(&'e Engine),
    Multi(&'e MultiEngine),
    Cpu,
}

impl Engine {
    /// The N-D operations with `scipy.ndimage`'s names, on this engine's GPU.
    pub fn ndimage(&self) -> Ndimage<'_> {
        Ndimage {
            runs_on: RunsOn::Gpu(self),
        }
    }
}

impl MultiEngine {
    /// The N-D operations with `scipy.ndimage`'s names, on these GPUs: correlations of 1D
    /// signals and 2D images split into one part per GPU (contiguous rows, or elements of a
    /// signal), each with its halo; the other calls on the first GPU; device arrays on the
    /// engine of their GPU.
    pub fn ndimage(&self) -> Ndimage<'_> {
        Ndimage {
            runs_on: RunsOn::Multi(self),
        }
    }
}

impl Cpu {
    /// The N-D operations with `scipy.ndimage`'s names, on this machine's cores.
    pub fn ndimage(&self) -> Ndimage<'static> {
        Ndimage {
            runs_on: RunsOn::Cpu,
        }
    }
}

/// The mask's taps as f64, row-major, and its shape.
fn taps<M: Data<Elem: Real>, D: Dimension>(weights: &ArrayBase<M, D>) -> (Vec<f64>, Vec<usize>) {
    (
        weights.iter().map(|w| w.to_f64()).collect(),
        weights.shape().to_vec(),
    )
}

/// Declares, for each separable operation `name(input, args.., options)` whose filter
/// `build(shape, options)` makes (as a [`Dense::Line`]), `$callback!`'s items: the engine's
/// methods, or the CPU twins.
macro_rules! separable_operations {
    ($callback:ident) => {
        $callback! {
            []
            [
                /// [`ConvError::InvalidParameter`] for a bad axis, sigma, order, size, truncate
                /// or radius, or a per-axis list of the wrong length;
                /// [`ConvError::InvalidClamp`]; [`ConvError::OutOfMemory`],
                /// [`ConvError::HostOutOfMemory`], [`ConvError::Driver`].
            ]
            /// `scipy.ndimage.gaussian_filter1d`: a Gaussian of `sigma` (or its `order`-th
            /// derivative, `order` 0 to 2) along `axis`.
            gaussian_filter1d, gaussian_filter1d_into(sigma: f64, axis: isize, order: u32)
                => |shape: &[usize], options| {
                    filters::gaussian_filter1d(shape.len(), sigma, axis, order, options).map(Dense::Line)
                };
            /// `scipy.ndimage.gaussian_filter`: a Gaussian along every axis, with a sigma and an
            /// order (0 to 2) once or per axis; axes of sigma 0 are left alone.
            gaussian_filter, gaussian_filter_into(sigma: impl Into<PerAxis<f64>>, order: impl Into<PerAxis<u32>>)
                => |shape: &[usize], options| {
                    filters::along_axes(shape.len(), options, |n| filters::gaussian_filter(n, &sigma.into(), &order.into(), options)).map(Dense::Line)
                };
            /// `scipy.ndimage.uniform_filter1d`: the mean of `size` neighbours along `axis`.
            uniform_filter1d, uniform_filter1d_into(size: usize, axis: isize)
                => |shape: &[usize], options| {
                    filters::uniform_filter1d(shape.len(), size, axis, options).map(Dense::Line)
                };
            /// `scipy.ndimage.uniform_filter`: the mean over a box of `size` (once or per axis).
            uniform_filter, uniform_filter_into(size: impl Into<PerAxis<usize>>)
                => |shape: &[usize], options| {
                    filters::along_axes(shape.len(), options, |n| filters::uniform_filter(n, &size.into(), options)).map(Dense::Line)
                };
            /// `scipy.ndimage.sobel`: the derivative along `axis`, smoothed `[1, 2, 1]` along
            /// the others.
            sobel, sobel_into(axis: isize)
                => |shape: &[usize], options| {
                    filters::edge(shape.len(), axis, [1.0, 2.0, 1.0], options).map(Dense::Line)
                };
            /// `scipy.ndimage.prewitt`: the derivative along `axis`, smoothed `[1, 1, 1]` along
            /// the others.
            prewitt, prewitt_into(axis: isize)
                => |shape: &[usize], options| {
                    filters::edge(shape.len(), axis, [1.0, 1.0, 1.0], options).map(Dense::Line)
                };
            /// `scipy.ndimage.laplace`: the sum of the second differences along every axis.
            laplace, laplace_into()
                => |shape: &[usize], options| {
                    filters::along_axes(shape.len(), options, |n| filters::laplace(n, options)).map(Dense::Line)
                };
            /// `scipy.ndimage.gaussian_laplace`: the sum over the axes of the Gaussian's second
            /// derivative along each.
            gaussian_laplace, gaussian_laplace_into(sigma: impl Into<PerAxis<f64>>)
                => |shape: &[usize], options| {
                    filters::along_axes(shape.len(), options, |n| filters::gaussian_derivatives(n, &sigma.into(), 2, options)).map(Dense::Line)
                };
            /// `scipy.ndimage.gaussian_gradient_magnitude`: the root of the sum of the squared
            /// Gaussian first derivatives along every axis.
            gaussian_gradient_magnitude, gaussian_gradient_magnitude_into(sigma: impl Into<PerAxis<f64>>)
                => |shape: &[usize], options| {
                    filters::along_axes(shape.len(), options, |n| filters::gaussian_derivatives(n, &sigma.into(), 1, options)).map(Dense::Line)
                };
        }
    };
}

pub(crate) use separable_operations;

/// Declares, for each operation with a mask `name(input, weights, args.., options)` whose plan
/// `build(input_shape, options)` makes, `$callback!`'s items: the engine's methods, or the CPU
/// twins.
macro_rules! weighted_operations {
    ($callback:ident) => {
        $callback! {
            [M: Data<Elem: Real>,]
            [
                /// [`ConvError::EmptyMask`], [`ConvError::InvalidOrigin`],
                /// [`ConvError::InvalidClamp`]; [`ConvError::InvalidRank`] for a mask of other
                /// dimensions or an input of more than 4; [`ConvError::InvalidParameter`] for
                /// an axis out of range, a mask across the channels or modes that differ per
                /// axis; [`ConvError::InvalidLaunch`] for
                /// a mask slice too large to stage; [`ConvError::OutOfMemory`],
                /// [`ConvError::HostOutOfMemory`], [`ConvError::Driver`].
            ]
            /// `scipy.ndimage.correlate1d`: correlation with `weights` (of either float type)
            /// along `axis` (negative counts from the end); that axis's mode and origin apply.
            correlate1d, correlate1d_into(weights: &ArrayBase<M, Ix1>, axis: isize)
                => |shape: &[usize], options| {
                    filters::filter1d(shape.len(), taps(weights).0, axis, false, options)
                        .map(Dense::Line)
                };
            /// `scipy.ndimage.convolve1d`: [`Ndimage::correlate1d`] with the weights reversed
            /// (and SciPy's origin rule for even lengths).
            convolve1d, convolve1d_into(weights: &ArrayBase<M, Ix1>, axis: isize)
                => |shape: &[usize], options| {
                    filters::filter1d(shape.len(), taps(weights).0, axis, true, options)
                        .map(Dense::Line)
                };
            /// `scipy.ndimage.correlate` with a mask of the input's dimensions (one mode for
            /// every axis, an origin once or per axis): a signal, an image `H x W`, a volume
            /// `D x H x W`, a batch `N x H x W` (a mask `1 x h x w` filters each image on its
            /// own, in one launch), or either with channels last (a mask of extent 1 along them).
            correlate, correlate_into(weights: &ArrayBase<M, D>)
                => |shape: &[usize], options| {
                    let (weights, weights_shape) = taps(weights);
                    dense::plan(shape, weights, &weights_shape, false, options)
                };
            /// `scipy.ndimage.convolve`: [`Ndimage::correlate`] with the mask flipped on every
            /// axis.
            convolve, convolve_into(weights: &ArrayBase<M, D>)
                => |shape: &[usize], options| {
                    let (weights, weights_shape) = taps(weights);
                    dense::plan(shape, weights, &weights_shape, true, options)
                };
        }
    };
}

/// The engine's methods for a list of operations: `[generics] [errors]` (the generic
/// parameters the operations' arguments add, and the errors' documentation), then each
/// operation `name, name_into(args..) => build`, `build(input_shape, options)` planning it.
macro_rules! engine_methods {
    ($generics:tt $errors:tt $($(#[$doc:meta])* $name:ident, $into:ident($($arg:ident: $ty:ty),*) => $build:expr;)+) => {$(
        engine_methods!(@one $generics $errors [$(#[$doc])*] $name, $into($($arg: $ty),*) => $build);
    )+};
    (@one [$($generic:tt)*] [$($errors:tt)*] [$($doc:tt)*] $name:ident, $into:ident($($arg:ident: $ty:ty),*) => $build:expr) => {
        $($doc)*
        ///
        /// Returns an array of the input's shape and element type.
        ///
        /// # Errors
        $($errors)*
        pub fn $name<S, $($generic)* D>(
            &self,
            input: &ArrayBase<S, D>,
            $($arg: $ty,)*
            options: &NdOptions,
        ) -> Result<Array<S::Elem, D>>
        where
            S: Data<Elem: Element>,
            D: Dimension,
        {
            let plan = ($build)(input.shape(), options)?;
            try_filled(input.raw_dim(), |output| self.dense(input, Planned(plan, options.design()), output))
        }

        #[doc = concat!("[`Ndimage::", stringify!($name), "`] into a caller's output: a host view of the input's shape, or a device array for a device input (see [`Operands`]), of any element type of the same `Real` type (a `u8` image into `f32`, say).")]
        ///
        /// # Errors
        #[doc = concat!("As [`Ndimage::", stringify!($name), "`], plus [`ConvError::ShapeMismatch`], [`ConvError::OverlappingOutput`] and [`ConvError::DeviceMismatch`].")]
        pub fn $into<I, O, $($generic)* D>(
            &self,
            input: I,
            $($arg: $ty,)*
            options: &NdOptions,
            output: O,
        ) -> Result<()>
        where
            (I, O): Operands<Dim = D>,
            D: Dimension,
        {
            let operands = (input, output);
            let plan = ($build)(operands.shape(), options)?;
            operands.run(self, Planned(plan, options.design()))
        }
    };
}

pub(crate) use weighted_operations;

impl Ndimage<'_> {
    separable_operations!(engine_methods);

    weighted_operations!(engine_methods);
}

/// The error of a view of `ndim` dimensions, which the plan checked, failing to convert to
/// the plan's (not expected).
pub(crate) fn ndim_error(ndim: usize) -> impl Fn(ndarray::ShapeError) -> ConvError {
    move |_| ConvError::InvalidRank {
        array: "input",
        ndim,
        expected: "the plan's dimensions",
    }
}
