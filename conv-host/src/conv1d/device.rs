//! 1D operations on device arrays: the planned kernel enqueued on the engine's stream, from one
//! device signal into another, without a host copy or a wait.

use super::{Conv1dOptions, enqueue1d, orient};
use crate::device_array::{DeviceArray, DeviceDim};
use crate::element::Element;
use crate::engine::Engine;
use crate::error::{ConvError, Result};
use crate::layout::row_major;
use crate::plan::Launch;
use ndarray::{ArrayBase, Data, Ix1};

impl Engine {
    /// Correlates (or, with `flip`, convolves) the 1D device array `input` with `mask` into
    /// `output`, enqueued on the engine's stream.
    pub(crate) fn filter1d_device<T, M, O, D>(
        &self,
        input: &DeviceArray<D, T>,
        mask: &ArrayBase<M, Ix1>,
        options: &Conv1dOptions,
        flip: bool,
        output: &mut DeviceArray<D, O>,
    ) -> Result<()>
    where
        T: Element,
        M: Data<Elem = T::Real>,
        O: Element<Real = T::Real>,
        D: DeviceDim,
    {
        self.check_pair(input, output)?;
        let taps = orient(&row_major(mask), options.origin, flip)?;
        let len = input.len();
        let plan = self.plan_signal::<T::Real>(len, taps.values.len(), options)?;
        let launch = Launch::new(&plan, options.mode, options.clamp)?;
        if len == 0 {
            return Ok(());
        }
        if len > i64::MAX as usize / 2 {
            return Err(ConvError::TooLarge { len });
        }
        let session = self.session()?;
        let device_mask = session.place_mask(&plan, &taps.values)?;
        session.between_arrays(
            &input.data,
            &mut output.data,
            (len, false),
            |source, target| {
                // SAFETY: both buffers hold `len` elements of the kernels' type (same shape,
                // checked above; distinct allocations, 16-byte aligned); the mask is in MASK or in
                // `device_mask`, written on this stream just before.
                unsafe {
                    enqueue1d(
                        &session,
                        &self.stream,
                        (launch, &taps, len),
                        source,
                        device_mask.as_ref(),
                        target,
                    )
                }
            },
        )
    }
}
