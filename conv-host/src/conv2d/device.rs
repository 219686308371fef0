//! 2D operations on device arrays: the planned kernel enqueued on the engine's stream, from one
//! device image into another, without a host copy or a wait.

use super::launch::{Grid2d, ImageShape, enqueue2d, input_map};
use super::register_tiled::native_plan;
use super::{Conv2dOptions, ImageDim};
use crate::device_array::{DeviceArray, DeviceDim};
use crate::element::Element;
use crate::engine::Engine;
use crate::error::Result;
use crate::masks::gaussian2d;
use crate::plan::Launch;
use ndarray::{ArrayBase, Data, Ix2};

impl Engine {
    /// [`Engine::correlate2d`] from one device image into another of the same shape (and any
    /// element type of the same `Real` type), enqueued on the engine's stream: it returns
    /// before the GPU finishes, and the next operation, [`Engine::download`] or
    /// [`Engine::synchronize`] comes after it in stream order. Nothing touches the host but
    /// the mask's upload. `u8`, `u16` and `f16` arrays filtered into their own type by the
    /// streaming kernels (3 x 3 and 5 x 5 masks) are read and written as they are; otherwise
    /// they are widened to `f32` and narrowed back in device temporaries.
    ///
    /// # Errors
    /// As [`Engine::correlate2d`] for the mask and options, [`ConvError::ShapeMismatch`](crate::ConvError::ShapeMismatch) for an
    /// output of another shape, [`ConvError::DeviceMismatch`](crate::ConvError::DeviceMismatch) for an array of another GPU. A
    /// kernel fault shows at the next wait.
    pub fn correlate2d_device<T, M, O, D>(
        &self,
        input: &DeviceArray<D, T>,
        mask: &ArrayBase<M, Ix2>,
        options: &Conv2dOptions,
        output: &mut DeviceArray<D, O>,
    ) -> Result<()>
    where
        T: Element,
        M: Data<Elem = T::Real>,
        O: Element<Real = T::Real>,
        D: ImageDim,
    {
        self.filter2d_device(input, mask, options, false, output)
    }

    /// [`Engine::convolve2d`] on device images, as [`Engine::correlate2d_device`].
    ///
    /// # Errors
    /// As [`Engine::correlate2d_device`].
    pub fn convolve2d_device<T, M, O, D>(
        &self,
        input: &DeviceArray<D, T>,
        mask: &ArrayBase<M, Ix2>,
        options: &Conv2dOptions,
        output: &mut DeviceArray<D, O>,
    ) -> Result<()>
    where
        T: Element,
        M: Data<Elem = T::Real>,
        O: Element<Real = T::Real>,
        D: ImageDim,
    {
        self.filter2d_device(input, mask, options, true, output)
    }

    /// [`Engine::gaussian_filter`] on device images, as [`Engine::correlate2d_device`].
    ///
    /// # Errors
    /// As [`Engine::gaussian_filter`] and [`Engine::correlate2d_device`].
    pub fn gaussian_filter_device<T, O, D>(
        &self,
        input: &DeviceArray<D, T>,
        sigma: f32,
        truncate: f32,
        options: &Conv2dOptions,
        output: &mut DeviceArray<D, O>,
    ) -> Result<()>
    where
        T: Element,
        O: Element<Real = T::Real>,
        D: ImageDim,
    {
        let mask = gaussian2d(sigma, truncate)?.mapv(|w| Element::from_f64(f64::from(w)));
        self.filter2d_device(input, &mask, options, false, output)
    }

    fn filter2d_device<T, M, O, D>(
        &self,
        input: &DeviceArray<D, T>,
        mask: &ArrayBase<M, Ix2>,
        options: &Conv2dOptions,
        flip: bool,
        output: &mut DeviceArray<D, O>,
    ) -> Result<()>
    where
        T: Element,
        M: Data<Elem = T::Real>,
        O: Element<Real = T::Real>,
        D: ImageDim,
    {
        let image = D::image_shape(input.shape());
        self.image2d_device(input, image, (mask, options, flip), output)
    }

    /// Correlates (or, with `flip`, convolves) the device array `input`, read as an image of
    /// `(height, width, channels)` in rows of its pitch, into `output`, as
    /// [`Engine::correlate2d_device`].
    pub(crate) fn image2d_device<T, M, O, D>(
        &self,
        input: &DeviceArray<D, T>,
        (height, width, channels): (usize, usize, usize),
        (mask, options, flip): (&ArrayBase<M, Ix2>, &Conv2dOptions, bool),
        output: &mut DeviceArray<D, O>,
    ) -> Result<()>
    where
        T: Element,
        M: Data<Elem = T::Real>,
        O: Element<Real = T::Real>,
        D: DeviceDim,
    {
        self.check_pair(input, output)?;
        let (mask, plan) =
            self.prepare2d::<T, O, _>(mask, options, flip, (height, width, channels))?;
        let launch = Launch::new(&plan, options.mode, options.clamp)?;
        if input.is_empty() {
            return Ok(());
        }
        let shape = ImageShape {
            height,
            width,
            channels,
            pitch: input.pitch,
        };
        let session = self.session()?;
        // The streaming kernel that reads and writes `T` itself, where one runs; its mask goes
        // to its own module's constant memory.
        let native = native_plan::<T, O>(&plan, &self.info);
        let plan = native.as_ref().unwrap_or(&plan);
        let grid = Grid2d::new(&session, shape, &mask, Launch { plan, ..launch })?;
        let device_mask = session.place_mask(plan, &mask.values)?;
        let elements = height * input.pitch;
        let extent = (elements, native.is_some());
        session.between_arrays(&input.data, &mut output.data, extent, |source, target| {
            let map = input_map(&session, &self.stream, (plan, &mask), shape, source)?;
            // SAFETY: both buffers hold `height` rows of `pitch` elements of the type the
            // kernel reads and writes (same shape, checked above; distinct allocations); the
            // mask is in MASK or in `device_mask`, written on this stream just before; `map`
            // describes `source` (the native kernels take none).
            unsafe {
                enqueue2d(
                    &session,
                    &self.stream,
                    (plan, &grid),
                    (source, map.as_ref()),
                    device_mask.as_ref(),
                    target,
                )
            }
        })
    }
}
