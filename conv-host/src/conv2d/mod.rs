//! 2D correlation and convolution of images: single-channel `H x W` arrays and interleaved
//! `H x W x C` arrays, one mask applied to every channel.

mod auto;
mod bands;
mod device;
mod launch;
pub(crate) mod reference;
mod register_tiled;
mod register_tiled_tma;
mod separable;
mod separable_tma;
mod tensor_copy;
mod textbook;

pub(crate) use launch::MAX_GRID_PLANES;
pub(crate) use register_tiled::native_types;
pub(crate) use separable::Along;
pub use separable::SEPARABLE_TOLERANCE;
pub(crate) use separable::factor;
pub(crate) use separable::has_wide_kernel as has_wide_separable_kernel;

use crate::abi::Conv2dParams;
use crate::device_array::DeviceDim;
use crate::element::{Element, Real};
use crate::engine::Engine;
use crate::error::{ConvError, Result};
use crate::mask::anchor;
use crate::options::{BoundaryMode, Clamp, Kernel};
use crate::plan::{Launch, LaunchPlan};
use cudarc::driver::DeviceRepr;
use launch::ImageShape;
use ndarray::{ArrayBase, ArrayView, ArrayViewMut, Data, Ix2, Ix3, s};
use std::any::Any;

// SAFETY: `Conv2dParams` is `repr(C)`, `Copy`, plain integers and floats, declared identically
// by the kernels (same source file).
unsafe impl DeviceRepr for Conv2dParams {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for ndarray::Ix2 {}
    impl Sealed for ndarray::Ix3 {}
}

/// The array shapes the 2D operations take: `Ix2` (`H x W`, one channel) and `Ix3`
/// (`H x W x C`, interleaved channels such as RGB or RGBA).
pub trait ImageDim: DeviceDim + sealed::Sealed {
    /// `(height, width, channels)` of an array of this shape.
    fn image_shape(shape: &[usize]) -> (usize, usize, usize);
}

impl ImageDim for Ix2 {
    fn image_shape(shape: &[usize]) -> (usize, usize, usize) {
        (shape[0], shape[1], 1)
    }
}

impl ImageDim for Ix3 {
    fn image_shape(shape: &[usize]) -> (usize, usize, usize) {
        (shape[0], shape[1], shape[2])
    }
}

/// Options of a 2D correlation or convolution.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Conv2dOptions {
    /// How the image continues past its edges (each axis extended independently).
    pub mode: BoundaryMode,
    /// SciPy's origin per axis, `[rows, columns]`.
    pub origin: [isize; 2],
    /// Kernel design; `Auto` picks one.
    pub kernel: Kernel,
    /// Threads per block `(x, y)`: x along a row (pixels x channels), y down the rows.
    pub tile: Option<(u32, u32)>,
    /// Clamp every output to a range.
    pub clamp: Option<Clamp>,
}

/// A mask in correlation order with its anchor.
pub(crate) struct Mask2d<R = f32> {
    pub(crate) values: Vec<R>,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) top: usize,
    pub(crate) left: usize,
}

/// Validates the origins and orients the mask (flipped on both axes for convolution).
pub(crate) fn orient2d<R: Real, T: Data<Elem = R>>(
    mask: &ArrayBase<T, Ix2>,
    origin: [isize; 2],
    flip: bool,
) -> Result<Mask2d<R>> {
    let (rows, cols) = mask.dim();
    let top = anchor(rows, origin[0], flip)?;
    let left = anchor(cols, origin[1], flip)?;
    let oriented = if flip {
        mask.slice(s![..;-1, ..;-1])
    } else {
        mask.view()
    };
    Ok(Mask2d {
        values: oriented.iter().copied().collect(),
        rows,
        cols,
        top,
        left,
    })
}

impl Engine {
    fn plan_oriented(
        &self,
        mask: &Mask2d,
        (height, width, channels): (usize, usize, usize),
        options: &Conv2dOptions,
        native: bool,
    ) -> Result<LaunchPlan> {
        auto::plan(
            self.device(),
            mask,
            (height, width, channels.max(1)),
            (options.kernel, options.mode, native),
            options.tile,
        )
    }

    /// Benchmark support (cargo feature `bench`): a 2D design's correlation, with the kernel run
    /// `runs` times on the same device buffers. Returns the output and each run's kernel time in
    /// milliseconds (CUDA events); the output buffer is poisoned with NaN once, before the runs.
    ///
    /// # Errors
    /// As the call.
    #[cfg(feature = "bench")]
    pub(crate) fn time_correlate2d<S, T, D>(
        &self,
        image: &ArrayBase<S, D>,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
        runs: usize,
    ) -> Result<(ndarray::Array<f32, D>, Vec<f32>)>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
        D: ImageDim,
    {
        let mut output = crate::layout::try_zeros(image.raw_dim())?;
        let (height, width, channels) = D::image_shape(image.shape());
        let (mask, plan) =
            self.prepare2d::<f32, f32, _>(mask, options, false, (height, width, channels))?;
        let launch = Launch::new(&plan, options.mode, options.clamp)?;
        if image.is_empty() {
            return Ok((output, Vec::new()));
        }
        let shape = ImageShape::of::<D>((height, width, channels));
        let pitch = shape.pitch;
        let mask_bytes = if plan.mask_in_constant_memory {
            0
        } else {
            mask.values.len() * 4
        };
        self.ensure_free_memory(
            height
                .saturating_mul(pitch)
                .saturating_mul(8)
                .saturating_add(mask_bytes),
        )?;
        let packed = crate::layout::pack_pitched(image, pitch);
        let mut result = vec![0.0f32; height * pitch];
        let times = self.launch2d(&packed, shape, &mask, (launch, runs.max(1)), &mut result)?;
        crate::layout::unpack_pitched(&result, pitch, output.view_mut());
        Ok((output, times))
    }

    /// The plan of `mask` (in correlation order) on an image of `(height, width, channels)`
    /// of `f32` (or `f64` for `R = f64`) in and out.
    pub(crate) fn plan_image<R: Real>(
        &self,
        mask: &ndarray::Array2<R>,
        image: (usize, usize, usize),
        options: &Conv2dOptions,
    ) -> Result<LaunchPlan> {
        let mask = orient2d(mask, options.origin, false)?;
        self.plan2d_real(&mask, image, options, false)
    }

    /// The plan of an oriented mask of the real type `R` on an image of `(height, width,
    /// channels)`: every design for `f32`; for `f64`, the 3D design one slice deep for square
    /// masks of 3 and 5 taps (as `RegisterTiled`), else the textbook designs.
    fn plan2d_real<R: Real>(
        &self,
        mask: &Mask2d<R>,
        image: (usize, usize, usize),
        options: &Conv2dOptions,
        native: bool,
    ) -> Result<LaunchPlan> {
        match (mask as &dyn Any).downcast_ref::<Mask2d<f32>>() {
            Some(mask) => self.plan_oriented(mask, image, options, native),
            None => match crate::conv3d::image::plan(
                self.device(),
                (mask.rows, mask.cols),
                image,
                options.kernel,
            ) {
                Some(plan) => Ok(plan),
                None => textbook::plan_f64(
                    self.device(),
                    (mask.rows, mask.cols),
                    image.2.max(1),
                    options.kernel,
                    options.tile,
                ),
            },
        }
    }

    /// The oriented mask (the factors in place of the taps for the separable designs) and the
    /// plan of one operation from an image of `I` of `(height, width, channels)` into one of
    /// `O`.
    fn prepare2d<I: Element, O: Element, T: Data<Elem = I::Real>>(
        &self,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
        flip: bool,
        image: (usize, usize, usize),
    ) -> Result<(Mask2d<I::Real>, LaunchPlan)> {
        let mut mask = orient2d(mask, options.origin, flip)?;
        let native = register_tiled::native_types::<I, O>();
        let plan = self.plan2d_real(&mask, image, options, native)?;
        if let Some(mask) = (&mut mask as &mut dyn Any).downcast_mut::<Mask2d<f32>>()
            && matches!(plan.kernel, Kernel::Separable | Kernel::SeparableTma)
        {
            // The kernel reads the factors in place of the taps (the plan found them).
            mask.values = separable::factor(mask).ok_or(ConvError::InvalidLaunch {
                kernel: plan.entry.entry_point(),
                reason: "the mask is not separable".into(),
            })?;
        }
        Ok((mask, plan))
    }

    /// Filters the rows `part` of a host image into `output`, a view of those rows (checked by
    /// the caller not to overlap the image): one engine's share of a [`crate::MultiEngine`]
    /// call, or the whole image.
    pub(crate) fn filter2d_part<M, I, O, D>(
        &self,
        image: ArrayView<'_, I, D>,
        (mask, options, flip): (&ArrayBase<M, Ix2>, &Conv2dOptions, bool),
        part: std::ops::Range<usize>,
        output: ArrayViewMut<'_, O, D>,
    ) -> Result<()>
    where
        I: Element,
        M: Data<Elem = I::Real>,
        O: Element<Real = I::Real>,
        D: ImageDim,
    {
        let (height, width, channels) = D::image_shape(image.shape());
        let (mask, plan) =
            self.prepare2d::<I, O, _>(mask, options, flip, (height, width, channels))?;
        let launch = Launch::new(&plan, options.mode, options.clamp)?;
        if image.is_empty() || part.is_empty() {
            return Ok(());
        }
        let shape = ImageShape::of::<D>((height, width, channels));
        self.filter2d_bands(image, (shape, part), &mask, launch, output)
    }
}
