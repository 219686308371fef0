//! 1D operations on device arrays: the planned kernel enqueued on the engine's stream, from one
//! device signal into another, without a host copy or a wait.

use super::{Conv1dOptions, enqueue1d, orient};
use crate::device_array::DeviceArray;
use crate::engine::Engine;
use crate::error::{ConvError, Result};
use crate::layout::row_major;
use crate::plan::Launch;
use ndarray::{ArrayBase, Data, Ix1};

impl Engine {
    /// [`Engine::correlate1d`] from one device signal into another of the same length,
    /// enqueued on the engine's stream as [`Engine::correlate2d_device`] is.
    ///
    /// # Errors
    /// As [`Engine::correlate1d`] for the mask and options, [`ConvError::ShapeMismatch`],
    /// [`ConvError::DeviceMismatch`]. A kernel fault shows at the next wait.
    pub fn correlate1d_device<T: Data<Elem = f32>>(
        &self,
        input: &DeviceArray<Ix1>,
        mask: &ArrayBase<T, Ix1>,
        options: &Conv1dOptions,
        output: &mut DeviceArray<Ix1>,
    ) -> Result<()> {
        self.filter1d_device(input, mask, options, false, output)
    }

    /// [`Engine::convolve1d`] on device signals, as [`Engine::correlate1d_device`].
    ///
    /// # Errors
    /// As [`Engine::correlate1d_device`].
    pub fn convolve1d_device<T: Data<Elem = f32>>(
        &self,
        input: &DeviceArray<Ix1>,
        mask: &ArrayBase<T, Ix1>,
        options: &Conv1dOptions,
        output: &mut DeviceArray<Ix1>,
    ) -> Result<()> {
        self.filter1d_device(input, mask, options, true, output)
    }

    fn filter1d_device<T: Data<Elem = f32>>(
        &self,
        input: &DeviceArray<Ix1>,
        mask: &ArrayBase<T, Ix1>,
        options: &Conv1dOptions,
        flip: bool,
        output: &mut DeviceArray<Ix1>,
    ) -> Result<()> {
        self.check_pair(input, output)?;
        let taps = orient(&row_major(mask), options.origin, flip)?;
        let len = input.len();
        let plan = self.plan1d(len, taps.values.len(), options)?;
        let launch = Launch::new(&plan, options.mode, options.clamp, 1)?;
        if len == 0 {
            return Ok(());
        }
        if len > i64::MAX as usize / 2 {
            return Err(ConvError::TooLarge { len });
        }
        let session = self.session()?;
        let device_mask = session.place_mask(&plan, &taps.values)?;
        // SAFETY: both signals hold `len` elements (same shape, checked above; distinct
        // allocations, as `&mut` makes them, 16-byte aligned); the mask is in MASK or in
        // `device_mask`, written on this stream just before.
        unsafe {
            enqueue1d(
                &session,
                &self.stream,
                (launch, &taps, len),
                &input.data,
                device_mask.as_ref(),
                &mut output.data,
            )
        }
    }
}
