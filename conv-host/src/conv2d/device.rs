//! 2D operations on device arrays: the planned kernel enqueued on the engine's stream, from one
//! device image into another, without a host copy or a wait.

use super::launch::{Grid2d, ImageShape, tensor_box, uses_tensor_copies};
use super::{Conv2dOptions, ImageDim, orient2d, separable};
use crate::device_array::DeviceArray;
use crate::engine::Engine;
use crate::error::{ConvError, Result};
use crate::masks::gaussian2d;
use crate::options::Kernel;
use crate::plan::Launch;
use cudarc::driver::PushKernelArg;
use ndarray::{ArrayBase, Data, Ix2};

impl Engine {
    /// [`Engine::correlate2d`] from one device image into another of the same shape, enqueued
    /// on the engine's stream: it returns before the GPU finishes, and the next operation,
    /// [`Engine::download`] or [`Engine::synchronize`] comes after it in stream order. Nothing
    /// touches the host but the mask's upload.
    ///
    /// # Errors
    /// As [`Engine::correlate2d`] for the mask and options, [`ConvError::ShapeMismatch`] for an
    /// output of another shape, [`ConvError::DeviceMismatch`] for an array of another GPU. A
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
        self.check_device(input)?;
        self.check_device(output)?;
        if input.shape() != output.shape() {
            return Err(ConvError::ShapeMismatch {
                expected: input.shape().to_vec(),
                actual: output.shape().to_vec(),
            });
        }
        let mut mask = orient2d(mask, options.origin, flip)?;
        let (height, width, channels) = D::image_shape(input.shape());
        let plan = self.plan_oriented(&mask, (height, width, channels), options)?;
        if matches!(plan.kernel, Kernel::Separable | Kernel::SeparableTma) {
            // The kernel reads the factors in place of the taps (the plan found them).
            mask.values = separable::factor(&mask).ok_or(ConvError::InvalidLaunch {
                kernel: plan.entry_point,
                reason: "the mask is not separable".into(),
            })?;
        }
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
        let map = if uses_tensor_copies(&plan) {
            // Contract of the tensor-copy kernels: the map describes the input image.
            let dims = ((width * channels) as u64, height as u64, shape.pitch as u64);
            let boxes = tensor_box(&plan, &mask, channels);
            Some(session.tensor_map(&self.stream, &input.data, dims, boxes)?)
        } else {
            None
        };
        let mut offset = 0;
        while offset < grid.blocks_y {
            let count = (grid.blocks_y - offset).min(grid.max_grid_y.max(1));
            let (config, params) = grid.grid(offset, count);
            // SAFETY: the grid meets the conv2d kernels' contract (`Grid2d::grid`): both
            // device images hold `height` rows of `pitch` elements (same shape, checked above;
            // distinct allocations, as `&mut` makes them), the mask is in MASK or `device_mask`,
            // written on this stream before, and the tensor map describes `input`.
            unsafe {
                session.launch_async(&self.stream, plan.entry_point, config, |args| {
                    match &map {
                        Some(map) => args.arg(map),
                        None => args.arg(&input.data),
                    };
                    if let Some(mask) = &device_mask {
                        args.arg(mask);
                    }
                    args.arg(&mut output.data);
                    args.arg(&params);
                })?;
            }
            offset += count;
        }
        Ok(())
    }
}
