//! 2D designs on device arrays: the planned kernel enqueued on the engine's stream, from one
//! device image into another, without a host copy or a wait.

use super::Conv2dOptions;
use super::launch::{Grid2d, ImageShape, enqueue2d, input_map};
use super::register_tiled::native_plan;
use crate::device_array::{DeviceArray, DeviceDim};
use crate::element::Element;
use crate::engine::Engine;
use crate::error::Result;
use crate::plan::Launch;
use ndarray::{ArrayBase, Data, Ix2};

impl Engine {
    /// Correlates (or, with `flip`, convolves) the device array `input`, read as an image of
    /// `(height, width, channels)` in rows of its pitch, into `output`, enqueued on the engine's
    /// stream.
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
