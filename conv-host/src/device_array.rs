//! Arrays that stay on the GPU: uploaded once, filtered any number of times by the `_device`
//! operations without touching the host, downloaded at the end.
//!
//! The `_device` operations enqueue their kernels on the engine's stream and return at once;
//! [`Engine::download`], [`Engine::download_into`] and [`Engine::synchronize`] wait for them.
//! Device memory comes from the device's stream-ordered pool, which the engine keeps from
//! returning freed blocks to the driver, so arrays of a recurring size cost no allocation.

use crate::cache;
use crate::element::{Element, narrowing, widening};
use crate::engine::Engine;
use crate::error::{ConvError, DriverContext, Result};
use crate::layout::{copy_from_view, copy_into_view, try_filled};
use crate::pipeline::plan_bands;
use crate::session::Session;
use crate::staging::{SlotBytes, memory_error};
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DevicePtrMut, DriverError};
use ndarray::{
    Array, ArrayBase, ArrayViewMut, Axis, Data, Dimension, Ix1, Ix2, Ix3, IxDyn, RemoveAxis, Slice,
};
use rayon::prelude::*;
use std::mem::ManuallyDrop;

/// Rows of device images start on 128-byte boundaries, so every row starts on a memory
/// transaction (the textbook's padded format, Fig. 7.15).
pub(crate) const PITCH_ALIGNMENT: usize = 32;

/// Bytes a staged copy of a device array moves per band.
const COPY_BAND_BYTES: usize = 32 << 20;

/// The bands, slots and elements per slot of a staged copy of `rows` rows `pitch` elements of
/// `T` apart: bands of about [`COPY_BAND_BYTES`], each slot's two device buffers unused (the
/// copies go straight to and from the array).
fn copy_bands<T: Element>(
    rows: usize,
    pitch: usize,
) -> Result<(Vec<crate::pipeline::Band>, usize, usize)> {
    let bytes = size_of::<T>();
    plan_bands(
        rows,
        pitch,
        (0, 0),
        COPY_BAND_BYTES * 2 * 3,
        (2 * bytes, bytes),
        (true, false),
    )
}

/// The error of a device array too short for the `bytes` bytes viewed.
fn view_error(bytes: usize) -> ConvError {
    ConvError::Driver {
        context: format!("viewing a device array as {bytes} bytes"),
        source: cudarc::driver::DriverError(
            cudarc::driver::sys::CUresult::CUDA_ERROR_INVALID_VALUE,
        ),
    }
}

impl Session<'_> {
    /// Runs `kernel` from `input` (`elements` of `T`) into `output` (as many of `O`), all on the
    /// engine's stream. A `native` kernel reads `T` and writes `O` themselves: it gets views of
    /// the arrays' own bytes. Any other kernel reads and writes their `Real` type: views of the
    /// arrays where they hold it, device temporaries (from the stream-ordered pool) where `T`
    /// is widened before and `O` narrowed after.
    pub(crate) fn between_arrays<T: Element, O: Element<Real = T::Real>>(
        &self,
        input: &CudaSlice<T>,
        output: &mut CudaSlice<O>,
        (elements, native): (usize, bool),
        kernel: impl FnOnce(&CudaView<'_, u8>, &mut CudaViewMut<'_, u8>) -> Result<()>,
    ) -> Result<()> {
        let stream = self.stream();
        let (widen, narrow) = if native {
            (None, None)
        } else {
            (widening::<T>(), narrowing::<O>())
        };
        let bytes = elements * size_of::<T::Real>();
        let temporary = || -> Result<CudaSlice<u8>> {
            // SAFETY: written by a conversion or a kernel, in stream order, before any read.
            unsafe { stream.alloc::<u8>(bytes.max(1)) }
                .map_err(|error| memory_error(stream.context(), error, bytes, "temporary"))
        };
        let widened = match widen {
            Some(entry) => {
                let mut wide = temporary()?;
                self.convert(
                    stream,
                    entry,
                    (&input.as_view(), &mut wide.as_view_mut()),
                    elements,
                )?;
                Some(wide)
            }
            None => None,
        };
        let mut narrowed = narrow.map(|_| temporary()).transpose()?;
        {
            // An array the kernel reads or writes itself: native, or of the `Real` type.
            let (input_bytes, output_bytes) =
                (elements * size_of::<T>(), elements * size_of::<O>());
            let source = match &widened {
                Some(wide) => wide.as_view(),
                // SAFETY: the `elements` of `T` are the bytes viewed; every bit pattern of `u8`
                // is valid.
                None => unsafe { input.transmute::<u8>(input_bytes) }
                    .ok_or_else(|| view_error(input_bytes))?,
            };
            let mut target = match &mut narrowed {
                Some(narrow) => narrow.as_view_mut(),
                None => {
                    // SAFETY: as above, for `O`.
                    let view = unsafe { output.transmute_mut::<u8>(output_bytes) };
                    view.ok_or_else(|| view_error(output_bytes))?
                }
            };
            kernel(&source, &mut target)?;
        }
        if let (Some(entry), Some(narrow)) = (narrow, &narrowed) {
            self.convert(
                stream,
                entry,
                (&narrow.as_view(), &mut output.as_view_mut()),
                elements,
            )?;
        }
        Ok(())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for ndarray::Ix1 {}
    impl Sealed for ndarray::Ix2 {}
    impl Sealed for ndarray::Ix3 {}
    impl Sealed for ndarray::IxDyn {}
}

/// The shapes a [`DeviceArray`] takes: a signal (`Ix1`), an image `H x W` (`Ix2`) or an image
/// `H x W x C` with interleaved channels (`Ix3`), their rows padded to 128-byte boundaries; or
/// an array of any rank (`IxDyn`), contiguous in row-major order (the layout of CuPy arrays and
/// PyTorch tensors, and of the N-D operations' buffers).
pub trait DeviceDim: Dimension + RemoveAxis + sealed::Sealed {
    /// Rows and elements per row of an array of this shape on the device (a signal is rows of
    /// one element).
    fn rows_and_row_len(shape: &[usize]) -> (usize, usize);
    /// Elements from one row's start to the next on the device.
    fn pitch(row_len: usize) -> usize {
        row_len.next_multiple_of(PITCH_ALIGNMENT)
    }
}

impl DeviceDim for Ix1 {
    fn rows_and_row_len(shape: &[usize]) -> (usize, usize) {
        (shape[0], 1)
    }
    fn pitch(_row_len: usize) -> usize {
        1
    }
}

impl DeviceDim for Ix2 {
    fn rows_and_row_len(shape: &[usize]) -> (usize, usize) {
        (shape[0], shape[1])
    }
}

impl DeviceDim for Ix3 {
    fn rows_and_row_len(shape: &[usize]) -> (usize, usize) {
        (shape[0], shape[1] * shape[2])
    }
}

impl DeviceDim for IxDyn {
    fn rows_and_row_len(shape: &[usize]) -> (usize, usize) {
        match shape.split_first() {
            Some((&rows, rest)) => (rows, rest.iter().product()),
            None => (1, 1),
        }
    }
    fn pitch(row_len: usize) -> usize {
        row_len
    }
}

/// An array of element type `T` (`f32` unless named) in the device memory of one GPU, in the
/// layout the kernels read: a signal contiguous, an image in rows of `pitch` elements. Create
/// it with [`Engine::upload`] or [`Engine::alloc_device`]; read it back with
/// [`Engine::download`]. Its copies move `T`'s bytes; operations on `u8`, `u16` and `f16`
/// arrays convert to `f32` and back on the device.
///
/// ```no_run
/// use conv_host::{Engine, masks, ndimage::NdOptions};
/// let engine = Engine::new()?;
/// let image = ndarray::Array2::<f32>::ones((1080, 1920));
/// let mut a = engine.upload(&image)?;
/// let mut b = engine.alloc_device::<f32, _>(image.raw_dim())?;
/// let (nd, options) = (engine.ndimage(), NdOptions::default());
/// nd.correlate_into(&a, &masks::box2d(5, 5)?, &options, &mut b)?;   // returns at once
/// nd.correlate_into(&b, &masks::sharpen(), &options, &mut a)?;      // never on the host
/// let result = engine.download(&a)?;                                // waits
/// # Ok::<(), conv_host::ConvError>(())
/// ```
pub struct DeviceArray<D: DeviceDim, T: Element = f32> {
    /// The elements; dropped as `owned` says.
    pub(crate) data: ManuallyDrop<CudaSlice<T>>,
    dim: D,
    pub(crate) pitch: usize,
    ordinal: usize,
    /// Whether dropping the array frees its memory (not for a caller's memory, see
    /// [`Engine::borrow_device`]).
    owned: bool,
}

impl<D: DeviceDim, T: Element> Drop for DeviceArray<D, T> {
    fn drop(&mut self) {
        // SAFETY: `data` is not used after this.
        let data = unsafe { ManuallyDrop::take(&mut self.data) };
        if self.owned {
            drop(data);
        } else {
            // The memory is the caller's: forget it, freeing nothing.
            let _ = data.leak();
        }
    }
}

impl<D: DeviceDim, T: Element> std::fmt::Debug for DeviceArray<D, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray")
            .field("element", &T::NAME)
            .field("shape", &self.shape())
            .field("device", &self.ordinal)
            .finish_non_exhaustive()
    }
}

impl<D: DeviceDim, T: Element> DeviceArray<D, T> {
    /// The array's shape.
    pub fn shape(&self) -> &[usize] {
        self.dim.slice()
    }

    /// The array's shape, as a dimension.
    pub fn raw_dim(&self) -> D {
        self.dim.clone()
    }

    /// Elements (without the row padding).
    pub fn len(&self) -> usize {
        self.dim.size()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ordinal of the GPU that holds the array.
    pub fn device_ordinal(&self) -> usize {
        self.ordinal
    }

    /// Rows, elements per row and pitch.
    pub(crate) fn layout(&self) -> (usize, usize, usize) {
        let (rows, row_len) = D::rows_and_row_len(self.shape());
        (rows, row_len, self.pitch)
    }
}

impl Engine {
    /// [`ConvError::DeviceMismatch`] unless `array` lives on this engine's GPU.
    pub(crate) fn check_device<D: DeviceDim, T: Element>(
        &self,
        array: &DeviceArray<D, T>,
    ) -> Result<()> {
        if array.ordinal == self.device().ordinal {
            Ok(())
        } else {
            Err(ConvError::DeviceMismatch {
                engine: self.device().ordinal,
                array: array.ordinal,
            })
        }
    }

    /// [`ConvError::DeviceMismatch`] unless both arrays live on this engine's GPU,
    /// [`ConvError::ShapeMismatch`] unless `output` has `input`'s shape.
    pub(crate) fn check_pair<D: DeviceDim, T: Element, O: Element>(
        &self,
        input: &DeviceArray<D, T>,
        output: &DeviceArray<D, O>,
    ) -> Result<()> {
        self.check_device(input)?;
        self.check_device(output)?;
        if input.shape() == output.shape() {
            Ok(())
        } else {
            Err(ConvError::ShapeMismatch {
                expected: input.shape().to_vec(),
                actual: output.shape().to_vec(),
            })
        }
    }

    /// A device array of `dim` elements of `T`, every element 0.
    ///
    /// # Errors
    /// [`ConvError::OutOfMemory`], [`ConvError::Driver`].
    pub fn alloc_device<T: Element, D: DeviceDim>(&self, dim: D) -> Result<DeviceArray<D, T>> {
        let (rows, row_len) = D::rows_and_row_len(dim.slice());
        let pitch = D::pitch(row_len);
        let elements = rows
            .checked_mul(pitch)
            .ok_or(ConvError::TooLarge { len: usize::MAX })?;
        let session = self.session()?;
        let stream = &self.stream;
        // SAFETY: the buffer is zeroed below, in stream order, before any use.
        let mut data = unsafe { stream.alloc::<T>(elements.max(1)) }.map_err(|error| {
            memory_error(&self.context, error, elements * size_of::<T>(), "array")
        })?;
        {
            let (pointer, _record) = data.device_ptr_mut(stream);
            // SAFETY: `pointer` addresses `elements.max(1)` elements of `T` of `data`, on
            // `stream`; zero bytes are zeros of every element type.
            unsafe {
                cudarc::driver::result::memset_d8_async(
                    pointer,
                    0,
                    elements.max(1) * size_of::<T>(),
                    stream.cu_stream(),
                )
            }
            .context(|| "zeroing a device array".into())?;
        }
        drop(session);
        Ok(DeviceArray {
            data: ManuallyDrop::new(data),
            dim,
            pitch,
            ordinal: self.device().ordinal,
            owned: true,
        })
    }

    /// A device array of `shape` over memory the caller owns (a CuPy array's or a PyTorch
    /// tensor's, say), contiguous in row-major order at `address` in this engine's context
    /// (the device's primary context, which the CUDA runtime shares). Dropping it frees
    /// nothing.
    ///
    /// # Safety
    /// `address` holds `shape`'s elements of `T` and stays allocated while the array lives;
    /// nothing else writes them while an operation reads the array, nor reads them while one
    /// writes it (order the caller's streams with [`Engine::wait_for_stream`] and
    /// [`Engine::signal_stream`]).
    ///
    /// # Errors
    /// [`ConvError::TooLarge`] where the shape's elements overflow; [`ConvError::InvalidParameter`]
    /// for a null address with elements, or one not aligned for `T`.
    pub unsafe fn borrow_device<T: Element>(
        &self,
        address: u64,
        shape: &[usize],
    ) -> Result<DeviceArray<IxDyn, T>> {
        let len = shape
            .iter()
            .try_fold(1usize, |len, &extent| len.checked_mul(extent))
            .ok_or(ConvError::TooLarge { len: usize::MAX })?;
        if len > 0 && (address == 0 || !address.is_multiple_of(align_of::<T>() as u64)) {
            return Err(ConvError::InvalidParameter {
                name: "address",
                value: address as f64,
                expected: "a device address of the element type's alignment",
            });
        }
        // SAFETY: as the caller promises, `address` holds `len` elements of `T`; the slice is
        // leaked, not freed, when the array drops (`owned: false`).
        let data = unsafe { self.stream.upgrade_device_ptr::<T>(address, len) };
        Ok(DeviceArray {
            data: ManuallyDrop::new(data),
            dim: IxDyn(shape),
            pitch: IxDyn::pitch(IxDyn::rows_and_row_len(shape).1),
            ordinal: self.device().ordinal,
            owned: false,
        })
    }

    /// Copies `array` (any layout, views included) to a new device array, through the
    /// engine's page-locked staging buffers in bands of 32 MiB. Returns when the copy is done:
    /// `array` may change afterwards.
    ///
    /// # Errors
    /// [`ConvError::OutOfMemory`], [`ConvError::HostOutOfMemory`], [`ConvError::Driver`].
    pub fn upload<S, D>(&self, array: &ArrayBase<S, D>) -> Result<DeviceArray<D, S::Elem>>
    where
        S: Data<Elem: Element>,
        D: DeviceDim,
    {
        let mut target = self.alloc_device(array.raw_dim())?;
        let (rows, row_len, pitch) = target.layout();
        if rows * row_len == 0 {
            return Ok(target);
        }
        let view = array.view();
        let mut session = self.session()?;
        let (bands, slots, elements) = copy_bands::<S::Elem>(rows, pitch)?;
        let mut slots = session.take_slots(
            slots,
            SlotBytes::uniform(elements * size_of::<S::Elem>()),
            false,
        )?;
        let count = slots.len();
        let result = (|| {
            for (i, band) in bands.iter().enumerate() {
                let slot = &mut slots[i % count];
                if i >= count {
                    session.finish(&slot.stream, || "uploading an array".into())?;
                }
                let buffer =
                    &mut slot.upload.as_mut_slice::<S::Elem>()[..band.output.len() * pitch];
                pack_rows(&view, band.output.clone(), row_len, pitch, buffer);
                cache::evict_small(buffer);
                let range = band.output.start * pitch..band.output.end * pitch;
                slot.stream
                    .memcpy_htod(&*buffer, &mut target.data.slice_mut(range))
                    .context(|| "uploading an array".into())?;
            }
            for slot in slots.iter() {
                session.finish(&slot.stream, || "uploading an array".into())?;
            }
            Ok(())
        })();
        if result.is_err() {
            for slot in slots.iter() {
                let _ = slot.stream.synchronize();
            }
        }
        session.return_slots(slots);
        result.map(|()| target)
    }

    /// Copies `array` back into a new host array, once the work enqueued on it is done.
    ///
    /// # Errors
    /// As [`Engine::download_into`], and [`ConvError::HostOutOfMemory`].
    pub fn download<D: DeviceDim, T: Element>(
        &self,
        array: &DeviceArray<D, T>,
    ) -> Result<Array<T, D>> {
        try_filled(array.raw_dim(), |output| self.download_into(array, output))
    }

    /// Copies `array` back into `output` (a view of its shape), once the work enqueued on it
    /// is done.
    ///
    /// # Errors
    /// [`ConvError::ShapeMismatch`], [`ConvError::DeviceMismatch`], [`ConvError::Driver`], a
    /// kernel fault of the work enqueued before.
    pub fn download_into<D: DeviceDim, T: Element>(
        &self,
        array: &DeviceArray<D, T>,
        mut output: ArrayViewMut<'_, T, D>,
    ) -> Result<()> {
        self.check_device(array)?;
        if output.shape() != array.shape() {
            return Err(ConvError::ShapeMismatch {
                expected: array.shape().to_vec(),
                actual: output.shape().to_vec(),
            });
        }
        let (rows, row_len, pitch) = array.layout();
        if rows * row_len == 0 {
            return Ok(());
        }
        let mut session = self.session()?;
        let (bands, slots, elements) = copy_bands::<T>(rows, pitch)?;
        let mut slots =
            session.take_slots(slots, SlotBytes::uniform(elements * size_of::<T>()), false)?;
        let count = slots.len();
        let describe = || "downloading an array (or the work enqueued before)".to_string();
        let result = (|| {
            let mut unpack = |band: &crate::pipeline::Band, slot: &crate::staging::Slot| {
                let source = &slot.download.as_slice::<T>()[..band.output.len() * pitch];
                unpack_rows(&mut output, band.output.clone(), pitch, source);
                cache::evict_small(source);
            };
            for (i, band) in bands.iter().enumerate() {
                if i >= count {
                    let slot = &slots[i % count];
                    session.finish(&slot.stream, describe)?;
                    unpack(&bands[i - count], slot);
                }
                let slot = &mut slots[i % count];
                let range = band.output.start * pitch..band.output.end * pitch;
                let len = range.len();
                slot.stream
                    .memcpy_dtoh(
                        &array.data.slice(range),
                        &mut slot.download.as_mut_slice::<T>()[..len],
                    )
                    .context(describe)?;
            }
            let first = bands.len().saturating_sub(count);
            for (i, band) in bands.iter().enumerate().skip(first) {
                let slot = &slots[i % count];
                session.finish(&slot.stream, describe)?;
                unpack(band, slot);
            }
            Ok(())
        })();
        if result.is_err() {
            for slot in slots.iter() {
                let _ = slot.stream.synchronize();
            }
        }
        session.return_slots(slots);
        result
    }

    /// Orders the engine's later device work after the work enqueued so far on a caller's
    /// stream (a `CUstream` handle of this engine's context: CuPy's
    /// `cupy.cuda.get_current_stream().ptr`, PyTorch's `torch.cuda.current_stream().cuda_stream`,
    /// or 0 for the legacy default stream), without waiting on the host.
    ///
    /// # Safety
    /// `stream` is a live stream of this engine's context, or 0, 1 (the legacy default stream)
    /// or 2 (the per-thread default stream).
    ///
    /// # Errors
    /// [`ConvError::Driver`].
    pub unsafe fn wait_for_stream(&self, stream: u64) -> Result<()> {
        let describe = || format!("ordering the engine after stream {stream:#x}");
        self.with_handoff(|handoff| {
            let event = &handoff.caller_done;
            // SAFETY: as the caller promises, `stream` is a stream of the event's context.
            unsafe { cudarc::driver::sys::cuEventRecord(event.cu_event(), stream as _) }
                .result()?;
            self.stream.wait(event)
        })
        .context(describe)
    }

    /// Orders the later work of a caller's stream after the device work enqueued on this
    /// engine so far, without waiting on the host: the caller's next kernel on `stream` reads
    /// what the engine's operations wrote.
    ///
    /// # Safety
    /// As [`Engine::wait_for_stream`].
    ///
    /// # Errors
    /// [`ConvError::Driver`].
    pub unsafe fn signal_stream(&self, stream: u64) -> Result<()> {
        let describe = || format!("ordering stream {stream:#x} after the engine");
        self.with_handoff(|handoff| {
            let event = &handoff.engine_done;
            event.record(&self.stream)?;
            // SAFETY: as the caller promises, `stream` is a stream of the event's context.
            unsafe { cudarc::driver::sys::cuStreamWaitEvent(stream as _, event.cu_event(), 0) }
                .result()
        })
        .context(describe)
    }

    /// Runs `step` with the engine's handoff events (made on first use), one caller at a time:
    /// each step records an event and enqueues the wait for it before another may record it.
    fn with_handoff(
        &self,
        step: impl FnOnce(&crate::engine::Handoff) -> std::result::Result<(), DriverError>,
    ) -> std::result::Result<(), DriverError> {
        let mut slot = self
            .handoff
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let handoff = match slot.take() {
            Some(handoff) => handoff,
            None => crate::engine::Handoff {
                caller_done: self.context.new_event(None)?,
                engine_done: self.context.new_event(None)?,
            },
        };
        let result = step(&handoff);
        *slot = Some(handoff);
        result
    }

    /// Waits until every `_device` operation enqueued on this engine is done.
    ///
    /// # Errors
    /// A kernel fault of that work ([`ConvError::Driver`], then [`ConvError::ContextLost`]).
    pub fn synchronize(&self) -> Result<()> {
        let session = self.session()?;
        session.finish(&self.stream, || {
            "the device operations enqueued on the engine".into()
        })
    }
}

/// Packs rows `rows` of `view` (`row_len` elements each, in logical order) into `buffer`, rows
/// `pitch` apart.
fn pack_rows<T: Element, D: DeviceDim>(
    view: &ndarray::ArrayView<'_, T, D>,
    rows: std::ops::Range<usize>,
    row_len: usize,
    pitch: usize,
    buffer: &mut [T],
) {
    if view.ndim() == 0 {
        copy_from_view(buffer, view);
        return;
    }
    if view.ndim() == 1 {
        copy_from_view(buffer, &view.slice_axis(Axis(0), Slice::from(rows)));
        return;
    }
    buffer
        .par_chunks_mut(pitch)
        .with_min_len(16)
        .enumerate()
        .for_each(|(r, destination)| {
            let source = view.index_axis(Axis(0), rows.start + r);
            copy_from_view(&mut destination[..row_len], &source);
        });
}

/// Unpacks rows `rows` of `output` from `buffer` (rows `pitch` apart).
fn unpack_rows<T: Element, D: DeviceDim>(
    output: &mut ArrayViewMut<'_, T, D>,
    rows: std::ops::Range<usize>,
    pitch: usize,
    buffer: &[T],
) {
    if output.ndim() == 0 {
        copy_into_view(output, buffer);
        return;
    }
    let mut target = output.slice_axis_mut(Axis(0), Slice::from(rows));
    if target.ndim() == 1 {
        copy_into_view(&mut target, buffer);
        return;
    }
    target
        .axis_iter_mut(Axis(0))
        .into_par_iter()
        .with_min_len(16)
        .zip(buffer.par_chunks(pitch))
        .for_each(|(mut row, source)| copy_into_view(&mut row, source));
}
