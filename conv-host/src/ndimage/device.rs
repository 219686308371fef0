//! The N-D operations on the GPU: the input uploaded whole (flat, in row-major order), the
//! passes or the 3D kernel run on the device in the input's `Real` type, the result downloaded
//! into the caller's array.

use super::filters::{Filter, Terms};
use crate::axis::{Combine, Pass};
use crate::element::{Element, Real};
use crate::engine::Engine;
use crate::error::{DriverContext, Result};
use crate::layout::{check_output, copy_into_view, row_major};
use crate::options::BoundaryMode;
use crate::session::Session;
use crate::staging::memory_error;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DevicePtrMut};
use ndarray::{ArrayBase, ArrayView1, ArrayViewMut, ArrayViewMut1, Data, Dimension, Ix1};

/// The clamp bounds that leave a value alone (passes before a filter's last).
pub(crate) const UNCLAMPED: (f32, f32) = (f32::NEG_INFINITY, f32::INFINITY);

impl Engine {
    /// Runs `work` on the device from `input` into `output` (same shape, checked): `work`
    /// receives the session and the input and output as flat buffers of the input's `Real`
    /// type (widened and narrowed on the device around it), and enqueues its kernels on the
    /// engine's stream. The device time of the work is the engine's
    /// [`last_kernel_time_ms`](Engine::last_kernel_time_ms).
    pub(crate) fn on_device<S, O, D>(
        &self,
        input: &ArrayBase<S, D>,
        mut output: ArrayViewMut<'_, O, D>,
        work: impl FnOnce(&Session<'_>, &CudaView<'_, u8>, &mut CudaViewMut<'_, u8>) -> Result<()>,
    ) -> Result<()>
    where
        S: Data<Elem: Element>,
        O: Element<Real = <S::Elem as Element>::Real>,
        D: Dimension,
    {
        check_output(input, &output)?;
        let len = input.len();
        if len == 0 {
            return Ok(());
        }
        let elements = row_major(input);
        let device_input = self.upload(&ArrayView1::from(&elements[..]))?;
        drop(elements);
        let mut device_output = self.alloc_device::<O, _>(Ix1(len))?;
        let (start, end) = {
            let session = self.session()?;
            let describe = || "timing the device work".to_string();
            let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
            let start = self.stream.record_event(timing).context(describe)?;
            session.between_arrays(
                &device_input.data,
                &mut device_output.data,
                (len, false),
                |source, target| work(&session, source, target),
            )?;
            (start, self.stream.record_event(timing).context(describe)?)
        };
        match output.as_slice_mut() {
            Some(slice) => self.download_into(&device_output, ArrayViewMut1::from(slice))?,
            None => {
                let host = self.download(&device_output)?;
                copy_into_view(&mut output, host.as_slice().unwrap_or(&[]));
            }
        }
        let ms = start
            .elapsed_ms(&end)
            .context(|| "reading the device time".into())?;
        *self
            .last_kernel_ms
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(ms);
        Ok(())
    }
}

/// The combination and clamp of the last pass of term `index` of `count` terms.
pub(crate) fn term_finish(filter: &Filter, index: usize) -> (Combine, (f32, f32)) {
    let last = index + 1 == filter.terms.len();
    let combine = match (filter.combine, index, last) {
        (Terms::Sum, 0, _) => Combine::Store,
        (Terms::Sum, _, _) => Combine::Add,
        (Terms::Magnitude, _, false) => Combine::AddSquare,
        (Terms::Magnitude, _, true) => Combine::AddSquareRoot,
    };
    (combine, if last { filter.clamp } else { UNCLAMPED })
}

impl Session<'_> {
    /// Enqueues a term of two passes over a 2D `f32` array, both with one mode and as many
    /// taps, as one 2D separable kernel that stores its result in `target`, clamped to
    /// `clamp`; returns `false`, enqueuing nothing, for any other term or where no such
    /// kernel applies. One fused pass reads and writes the array once, where two axis passes
    /// go through a temporary (PERFORMANCE.md).
    fn enqueue_fused_term<R: Real>(
        &self,
        shape: &[usize],
        term: &[Pass],
        clamp: (f32, f32),
        source: &CudaView<'_, u8>,
        target: &mut CudaViewMut<'_, u8>,
    ) -> Result<bool> {
        let (&[height, width], [first, second]) = (shape, term) else {
            return Ok(false);
        };
        let (column, row) = if first.axis == 0 {
            (first, second)
        } else {
            (second, first)
        };
        // One 2D pass extends the image as two passes do, except under a constant other than
        // zero, which the second of two passes reads unfiltered.
        let nonzero_constant = matches!(row.mode, BoundaryMode::Constant(c) if c != 0.0);
        if R::NAME != "f32"
            || column.axis != 0
            || row.axis != 1
            || column.mode != row.mode
            || nonzero_constant
        {
            return Ok(false);
        }
        let taps = |pass: &Pass| pass.taps.iter().map(|&w| w as f32).collect::<Vec<_>>();
        let (column_taps, row_taps) = (taps(column), taps(row));
        self.enqueue_separable(
            [height, width],
            [(&column_taps, column.left), (&row_taps, row.left)],
            (row.mode, clamp),
            source,
            target,
        )
    }

    /// Enqueues `filter` over the array of `shape` from `source` into `target` (flat buffers of
    /// `R`, as bytes): each term's passes through two device temporaries, its last pass
    /// combined into `target`.
    pub(crate) fn enqueue_filter<R: Real>(
        &self,
        shape: &[usize],
        filter: &Filter,
        source: &CudaView<'_, u8>,
        target: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        let stream = self.stream();
        let bytes = shape.iter().product::<usize>() * size_of::<R>();
        let longest = filter.terms.iter().map(Vec::len).max().unwrap_or(0);
        let mut temporaries: Vec<CudaSlice<u8>> = (0..longest.saturating_sub(1).min(2))
            // SAFETY: each temporary is written by a pass, in stream order, before any read.
            .map(|_| unsafe { stream.alloc::<u8>(bytes) })
            .collect::<std::result::Result<_, _>>()
            .map_err(|error| memory_error(stream.context(), error, bytes, "temporary"))?;
        if filter.combine == Terms::Magnitude {
            let len = target.len();
            let (pointer, _record) = target.device_ptr_mut(stream);
            // SAFETY: `pointer` addresses `target`'s bytes, used in `stream`'s order; the
            // magnitude's terms add their squares to zeros.
            unsafe { cudarc::driver::result::memset_d8_async(pointer, 0, len, stream.cu_stream()) }
                .context(|| "zeroing a gradient magnitude's sum".into())?;
        }
        for (index, term) in filter.terms.iter().enumerate() {
            let finish = term_finish(filter, index);
            if finish.0 == Combine::Store
                && self.enqueue_fused_term::<R>(shape, term, finish.1, source, target)?
            {
                continue;
            }
            for (i, pass) in term.iter().enumerate() {
                let last = i + 1 == term.len();
                let step = (Combine::Store, UNCLAMPED);
                // Pass `i` reads the source (`i = 0`) or temporary `(i - 1) % 2`, and writes
                // the target (the term's last pass) or temporary `i % 2`.
                match (i, last) {
                    (0, true) => self.enqueue_pass::<R>(shape, pass, finish, source, target)?,
                    (0, false) => {
                        let mut output = temporaries[0].as_view_mut();
                        self.enqueue_pass::<R>(shape, pass, step, source, &mut output)?;
                    }
                    (_, true) => {
                        let input = temporaries[(i - 1) % 2].as_view();
                        self.enqueue_pass::<R>(shape, pass, finish, &input, target)?;
                    }
                    (_, false) => {
                        let (first, second) = temporaries.split_at_mut(1);
                        let (read, write) = if i % 2 == 1 {
                            (&first[0], &mut second[0])
                        } else {
                            (&second[0], &mut first[0])
                        };
                        let mut output = write.as_view_mut();
                        self.enqueue_pass::<R>(shape, pass, step, &read.as_view(), &mut output)?;
                    }
                }
            }
        }
        Ok(())
    }
}
