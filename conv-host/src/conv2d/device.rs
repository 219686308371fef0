//! 2D operations on device arrays: the planned kernel enqueued on the engine's stream, from one
//! device image into another, without a host copy or a wait.

use super::launch::{Grid2d, ImageShape, enqueue2d, input_map};
use super::{Conv2dOptions, ImageDim};
use crate::device_array::DeviceArray;
use crate::engine::Engine;
use crate::error::Result;
use crate::masks::gaussian2d;
use crate::plan::Launch;
use ndarray::{ArrayBase, Data, Ix2};

impl Engine {
    /// [`Engine::correlate2d`] from one device image into another of the same shape, enqueued
    /// on the engine's stream: it returns before the GPU finishes, and the next operation,
    /// [`Engine::download`] or [`Engine::synchronize`] comes after it in stream order. Nothing
    /// touches the host but the mask's upload.
    ///
    /// # Errors
    /// As [`Engine::correlate2d`] for the mask and options, [`ConvError::ShapeMismatch`](crate::ConvError::ShapeMismatch) for an
    /// output of another shape, [`ConvError::DeviceMismatch`](crate::ConvError::DeviceMismatch) for an array of another GPU. A
    /// kernel fault shows at the next wait.
    pub fn correlate2d_device<T, D>(
        &self,
        input: &DeviceArray<D>,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
        output: &mut DeviceArray<D>,
    ) -> Result<()>
    where
        T: Data<Elem = f32>,
        D: ImageDim,
    {
        self.filter2d_device(input, mask, options, false, output)
    }

    /// [`Engine::convolve2d`] on device images, as [`Engine::correlate2d_device`].
    ///
    /// # Errors
    /// As [`Engine::correlate2d_device`].
    pub fn convolve2d_device<T, D>(
        &self,
        input: &DeviceArray<D>,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
        output: &mut DeviceArray<D>,
    ) -> Result<()>
    where
        T: Data<Elem = f32>,
        D: ImageDim,
    {
        self.filter2d_device(input, mask, options, true, output)
    }

    /// [`Engine::gaussian_filter`] on device images, as [`Engine::correlate2d_device`].
    ///
    /// # Errors
    /// As [`Engine::gaussian_filter`] and [`Engine::correlate2d_device`].
    pub fn gaussian_filter_device<D>(
        &self,
        input: &DeviceArray<D>,
        sigma: f32,
        truncate: f32,
        options: &Conv2dOptions,
        output: &mut DeviceArray<D>,
    ) -> Result<()>
    where
        D: ImageDim,
    {
        self.filter2d_device(input, &gaussian2d(sigma, truncate)?, options, false, output)
    }

    fn filter2d_device<T, D>(
        &self,
        input: &DeviceArray<D>,
        mask: &ArrayBase<T, Ix2>,
        options: &Conv2dOptions,
        flip: bool,
        output: &mut DeviceArray<D>,
    ) -> Result<()>
    where
        T: Data<Elem = f32>,
        D: ImageDim,
    {
        self.check_pair(input, output)?;
        let (height, width, channels) = D::image_shape(input.shape());
        let (mask, plan) = self.prepare2d(mask, options, flip, (height, width, channels))?;
        let launch = Launch::new(&plan, options.mode, options.clamp, 1)?;
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
        let grid = Grid2d::new(&session, shape, &mask, launch)?;
        let device_mask = session.place_mask(&plan, &mask.values)?;
        let map = input_map(&session, &self.stream, (&plan, &mask), shape, &input.data)?;
        // SAFETY: both device images hold `height` rows of `pitch` elements (same shape,
        // checked above; distinct allocations, as `&mut` makes them); the mask is in MASK or in
        // `device_mask`, written on this stream just before; `map` describes `input`.
        unsafe {
            enqueue2d(
                &session,
                &self.stream,
                (&plan, &grid),
                (&input.data, map.as_ref()),
                device_mask.as_ref(),
                &mut output.data,
            )
        }
    }
}
