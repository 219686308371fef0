//! The N-D operations on the GPU: the input uploaded whole (flat, in row-major order), the
//! passes or the 3D kernel run on the device in the input's `Real` type, the result downloaded
//! into the caller's array.

use super::filters::{Filter, Terms};
use crate::abi::{TERMS_MAGNITUDE, TERMS_SUM};
use crate::axis::{Combine, Pass};
use crate::conv2d;
use crate::conv2d::Conv2dOptions;
use crate::conv3d;
use crate::device_array::{DeviceArray, DeviceDim};
use crate::element::{Element, Real};
use crate::engine::Engine;
use crate::error::{DriverContext, Result};
use crate::layout::{check_output, copy_into_view, row_major};
use crate::options::{BoundaryMode, Clamp};
use crate::session::Session;
use crate::staging::memory_error;
use cudarc::driver::sys::{self, CUevent_flags, CUmemorytype};
use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr,
};
use ndarray::{Array2, Ix2};
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

impl Engine {
    /// Runs `work` from the device array `input` into `output` (same shape and GPU, checked),
    /// enqueued on the engine's stream without a wait, as [`Engine::on_device`] does from the
    /// host: contiguous arrays are read and written where they are; arrays of padded rows go
    /// through contiguous temporaries.
    pub(crate) fn on_device_arrays<T, O, D>(
        &self,
        input: &DeviceArray<D, T>,
        output: &mut DeviceArray<D, O>,
        work: impl FnOnce(&Session<'_>, &CudaView<'_, u8>, &mut CudaViewMut<'_, u8>) -> Result<()>,
    ) -> Result<()>
    where
        T: Element,
        O: Element<Real = T::Real>,
        D: DeviceDim,
    {
        self.check_pair(input, output)?;
        let len = input.len();
        if len == 0 {
            return Ok(());
        }
        let session = self.session()?;
        let (rows, row_len, pitch) = input.layout();
        let extent = (len, false);
        let run = |source: &CudaView<'_, u8>, target: &mut CudaViewMut<'_, u8>| {
            work(&session, source, target)
        };
        if pitch == row_len || rows == 1 {
            return session.between_arrays(&input.data, &mut output.data, extent, run);
        }
        let stream = &self.stream;
        let failed =
            |bytes: usize| move |error| memory_error(stream.context(), error, bytes, "temporary");
        let (input_bytes, output_bytes) = (len * size_of::<T>(), len * size_of::<O>());
        // SAFETY: written by the row copy or the work, in stream order, before any read.
        let mut packed_input = unsafe { stream.alloc::<T>(len) }.map_err(failed(input_bytes))?;
        // SAFETY: as above.
        let mut packed_output = unsafe { stream.alloc::<O>(len) }.map_err(failed(output_bytes))?;
        let rows_of = |size: usize| (rows, row_len * size, pitch * size);
        copy_device_rows(
            stream,
            &input.data,
            &mut packed_input,
            rows_of(size_of::<T>()),
            true,
        )?;
        session.between_arrays(&packed_input, &mut packed_output, extent, run)?;
        let output_rows = rows_of(size_of::<O>());
        copy_device_rows(stream, &packed_output, &mut output.data, output_rows, false)
    }
}

impl Engine {
    /// Correlates (or, with `flip`, convolves) the device array `input`, an image of
    /// `channels` interleaved channels (`H x W` or `H x W x C`), into `output` with the 2D
    /// designs, which read rows on 128-byte boundaries: a contiguous array of rows off those
    /// boundaries goes through padded temporaries.
    pub(crate) fn plane_device<T, O, D>(
        &self,
        input: &DeviceArray<D, T>,
        work: (&Array2<T::Real>, &Conv2dOptions, bool),
        channels: usize,
        output: &mut DeviceArray<D, O>,
    ) -> Result<()>
    where
        T: Element,
        O: Element<Real = T::Real>,
        D: DeviceDim,
    {
        self.check_pair(input, output)?;
        let (height, width) = (input.shape()[0], input.shape()[1]);
        let (image, row_len) = ((height, width, channels), width * channels);
        if input.pitch == Ix2::pitch(row_len) || input.is_empty() {
            return self.image2d_device(input, image, work, output);
        }
        let mut padded_input = self.alloc_device::<T, _>(Ix2(height, row_len))?;
        let mut padded_output = self.alloc_device::<O, _>(Ix2(height, row_len))?;
        let rows_of = |size: usize| (height, row_len * size, padded_input.pitch * size);
        let stream = &self.stream;
        let input_rows = rows_of(size_of::<T>());
        copy_device_rows(
            stream,
            &input.data,
            &mut padded_input.data,
            input_rows,
            false,
        )?;
        self.image2d_device(&padded_input, image, work, &mut padded_output)?;
        let output_rows = rows_of(size_of::<O>());
        copy_device_rows(
            stream,
            &padded_output.data,
            &mut output.data,
            output_rows,
            true,
        )
    }
}

/// Enqueues on `stream` a copy of `rows` rows of `row_bytes` between a contiguous buffer and
/// one of rows `pitch_bytes` apart: from the padded rows of `source` into `target` (`pack`), or
/// from `source` into the padded rows of `target`.
fn copy_device_rows<A: DeviceRepr, B: DeviceRepr>(
    stream: &CudaStream,
    source: &CudaSlice<A>,
    target: &mut CudaSlice<B>,
    (rows, row_bytes, pitch_bytes): (usize, usize, usize),
    pack: bool,
) -> Result<()> {
    let (source_pointer, _read) = source.device_ptr(stream);
    let (target_pointer, _write) = target.device_ptr_mut(stream);
    let device = CUmemorytype::CU_MEMORYTYPE_DEVICE;
    let (source_pitch, target_pitch) = if pack {
        (pitch_bytes, row_bytes)
    } else {
        (row_bytes, pitch_bytes)
    };
    let copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: device,
        srcHost: std::ptr::null(),
        srcDevice: source_pointer,
        srcArray: std::ptr::null_mut(),
        srcPitch: source_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: device,
        dstHost: std::ptr::null_mut(),
        dstDevice: target_pointer,
        dstArray: std::ptr::null_mut(),
        dstPitch: target_pitch,
        WidthInBytes: row_bytes,
        Height: rows,
    };
    // SAFETY: both buffers hold `rows` rows of their pitch (the padded array's layout, the
    // temporary's `rows * row_bytes` bytes), used in `stream`'s order.
    unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }
        .result()
        .context(|| format!("copying {rows} rows of {row_bytes} bytes on the device"))
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

/// The one pass of `term` along `axis`, if it has exactly one.
fn only_pass(term: &[Pass], axis: usize) -> Option<&Pass> {
    let mut passes = term.iter().filter(|pass| pass.axis == axis);
    passes.next().filter(|_| passes.next().is_none())
}

/// A term's passes along the two axes of the images of an `f32` array, which one 2D
/// separable kernel runs over each of the array's `planes` images of `height x width`
/// (`size`) with `channels` interleaved channels: the last two axes (one channel), or the two
/// before a last axis of channels that no pass filters. Its column pass and row pass have one
/// mode and as many taps; `rest`, the term's passes along the axes before, run after it.
struct FusedTerm<'a> {
    size: [usize; 3],
    channels: usize,
    column: &'a Pass,
    row: &'a Pass,
    rest: Vec<&'a Pass>,
}

/// `term` over an array of `shape` as a [`FusedTerm`], where the wide separable kernel takes
/// it: an `R = f32` array of 2 or more axes, rows of a multiple of 4 elements, at most a grid's
/// planes of images; one pass along each of the image axes, with one mode and as many taps, a
/// wide separable kernel compiled for them and the channels; no constant other than zero in
/// the term (one 2D pass extends the image as two passes do except there, where the second of
/// two passes reads the constant unfiltered, and the passes then run in another order).
fn fused_term<'a, R: Real>(shape: &[usize], term: &'a [Pass]) -> Option<FusedTerm<'a>> {
    let n = shape.len();
    if R::NAME != "f32" || n < 2 {
        return None;
    }
    let along = |axis| only_pass(term, axis);
    // Channels last: no pass along the last axis, and a kernel for that many channels.
    let channels_last =
        n >= 3 && !term.iter().any(|pass| pass.axis == n - 1) && matches!(shape[n - 1], 3 | 4);
    let (first, channels) = if channels_last {
        (n - 3, shape[n - 1])
    } else {
        (n - 2, 1)
    };
    let (column, row) = (along(first)?, along(first + 1)?);
    let nonzero_constant = term
        .iter()
        .any(|pass| matches!(pass.mode, BoundaryMode::Constant(c) if c != 0.0));
    let [height, width] = [shape[first], shape[first + 1]];
    let planes = shape[..first].iter().product::<usize>();
    let side = row.taps.len();
    let fits = column.mode == row.mode
        && !nonzero_constant
        && column.taps.len() == side
        && (width * channels).is_multiple_of(4)
        && planes <= conv2d::MAX_GRID_PLANES
        && conv2d::has_wide_separable_kernel((side, side), channels);
    fits.then(|| FusedTerm {
        size: [planes, height, width],
        channels,
        column,
        row,
        rest: term.iter().filter(|pass| pass.axis < first).collect(),
    })
}

/// A filter that one 2D separable kernel reading and writing the arrays' narrow type itself
/// runs: the `image` (height, width, channels), the rank-1 `mask` and its options.
pub(crate) struct NativeImage {
    pub(crate) image: (usize, usize, usize),
    pub(crate) mask: Array2<f64>,
    pub(crate) options: Conv2dOptions,
}

/// `filter` over a device array of `shape` of `T` into `O` as a [`NativeImage`], where it is
/// one term fused over one image ([`fused_term`]) with nothing after, `T` a type the 2D
/// kernels read and write themselves, rows of a multiple of the pitch alignment: the array is
/// then read and written once in its own type, not widened to `f32` and narrowed around the
/// kernel.
pub(crate) fn native_image<T: Element, O: Element>(
    shape: &[usize],
    filter: &Filter,
) -> Option<NativeImage> {
    let [term] = filter.terms.as_slice() else {
        return None;
    };
    if !conv2d::native_types::<T, O>() {
        return None;
    }
    let fused = fused_term::<f32>(shape, term)?;
    let [planes, height, width] = fused.size;
    if planes != 1 || !fused.rest.is_empty() || !(width * fused.channels).is_multiple_of(32) {
        return None;
    }
    let (column, row) = (&fused.column.taps, &fused.row.taps);
    let mask = Array2::from_shape_fn((column.len(), row.len()), |(i, j)| column[i] * row[j]);
    let origin = |pass: &Pass| pass.left as isize - (pass.taps.len() / 2) as isize;
    let clamp = (filter.clamp != UNCLAMPED).then_some(Clamp {
        lo: filter.clamp.0,
        hi: filter.clamp.1,
    });
    Some(NativeImage {
        image: (height, width, fused.channels),
        mask,
        options: Conv2dOptions {
            mode: fused.row.mode,
            origin: [origin(fused.column), origin(fused.row)],
            clamp,
            ..Default::default()
        },
    })
}

/// A term's passes along the last three axes of an `f32` array, which one separable 3D
/// kernel runs over each of the array's `size[0]` volumes of `size[1..]`: one pass along each
/// of those axes, with one mode and as many taps, a kernel compiled for them on this device;
/// no constant other than zero (as [`fused_term`]); `rest`, the term's passes along the other
/// axes, run after it.
struct VolumeTerm<'a> {
    size: [usize; 4],
    passes: [&'a Pass; 3],
    rest: Vec<&'a Pass>,
}

/// `term` over an array of `shape` as a [`VolumeTerm`], where a separable 3D kernel takes it on
/// a device of compute capability `major.x`.
fn volume_term<'a, R: Real>(
    shape: &[usize],
    term: &'a [Pass],
    major: i32,
) -> Option<VolumeTerm<'a>> {
    let n = shape.len();
    if R::NAME != "f32" || n < 3 {
        return None;
    }
    let along = |axis| only_pass(term, axis);
    let passes = [along(n - 3)?, along(n - 2)?, along(n - 1)?];
    let side = passes[2].taps.len();
    let fits = passes.iter().all(|pass| {
        pass.mode == passes[2].mode
            && pass.taps.len() == side
            && !matches!(pass.mode, BoundaryMode::Constant(c) if c != 0.0)
    }) && conv3d::has_separable3d_kernel(side, major);
    fits.then(|| VolumeTerm {
        size: [
            shape[..n - 3].iter().product(),
            shape[n - 3],
            shape[n - 2],
            shape[n - 1],
        ],
        passes,
        rest: term.iter().filter(|pass| pass.axis < n - 3).collect(),
    })
}

/// One kernel of a term: its fused passes (two or three axes), or one axis pass.
enum Step<'a> {
    Fused(&'a FusedTerm<'a>),
    Volume(&'a VolumeTerm<'a>),
    Axis(&'a Pass),
}

impl Session<'_> {
    /// Enqueues `term` as one 2D separable kernel from `source` into `target`, clamped to
    /// `clamp`: it reads and writes the array once, where two axis passes go through a
    /// temporary (PERFORMANCE.md).
    fn enqueue_fused(
        &self,
        term: &FusedTerm<'_>,
        clamp: (f32, f32),
        source: &CudaView<'_, u8>,
        target: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        let taps = |pass: &Pass| pass.taps.iter().map(|&w| w as f32).collect::<Vec<_>>();
        let (column, row) = (taps(term.column), taps(term.row));
        let fused = self.enqueue_separable(
            (term.size, term.channels),
            [(&column, term.column.left), (&row, term.row.left)],
            (term.row.mode, clamp),
            source,
            target,
        )?;
        debug_assert!(fused, "fused_term admitted a term no separable kernel runs");
        Ok(())
    }

    /// Enqueues `term` as one separable 3D kernel per volume from `source` into `target`,
    /// clamped to `clamp`: it reads and writes each volume once, where the 2D kernel and an
    /// axis pass move it twice (PERFORMANCE.md).
    fn enqueue_volume(
        &self,
        term: &VolumeTerm<'_>,
        clamp: (f32, f32),
        source: &CudaView<'_, u8>,
        target: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        let factors = term
            .passes
            .map(|pass| pass.taps.iter().map(|&w| w as f32).collect::<Vec<_>>());
        let [volumes, depth, height, width] = term.size;
        let bytes = depth * height * width * size_of::<f32>();
        for volume in 0..volumes {
            let range = volume * bytes..(volume + 1) * bytes;
            let enqueued = self.enqueue_separable3d(
                [depth, height, width],
                (
                    factors.each_ref().map(Vec::as_slice),
                    term.passes.map(|pass| pass.left),
                ),
                (term.passes[2].mode, clamp),
                &source.slice(range.clone()),
                &mut target.slice_mut(range),
            )?;
            debug_assert!(enqueued, "volume_term admitted a term no 3D kernel runs");
        }
        Ok(())
    }

    /// Enqueues a 2D filter of two fused terms as one wide separable pair kernel, summed or
    /// taken as a root of squares into `target`, clamped; returns `false`, enqueuing nothing,
    /// where the terms differ in mode or anchor or no pair kernel takes them.
    fn enqueue_fused_pair(
        &self,
        filter: &Filter,
        [a, b]: [&FusedTerm<'_>; 2],
        source: &CudaView<'_, u8>,
        target: &mut CudaViewMut<'_, u8>,
    ) -> Result<bool> {
        let anchor = (a.column.left, a.row.left);
        let one_channel = a.channels == 1 && b.channels == 1;
        if !one_channel || a.row.mode != b.row.mode || anchor != (b.column.left, b.row.left) {
            return Ok(false);
        }
        let taps = |pass: &Pass| pass.taps.iter().map(|&w| w as f32).collect::<Vec<_>>();
        let factors = [taps(a.column), taps(a.row), taps(b.column), taps(b.row)];
        let [column_a, row_a, column_b, row_b] = factors.each_ref().map(Vec::as_slice);
        let combination = match filter.combine {
            Terms::Sum => TERMS_SUM,
            Terms::Magnitude => TERMS_MAGNITUDE,
        };
        self.enqueue_separable_pair(
            a.size,
            ([[column_a, row_a], [column_b, row_b]], anchor),
            (combination, a.row.mode, filter.clamp),
            source,
            target,
        )
    }

    /// Enqueues `step` of a term over the array of `shape` from `input` into `output`,
    /// finished by `finish` (a store, for a fused step).
    fn enqueue_step<R: Real>(
        &self,
        shape: &[usize],
        step: &Step<'_>,
        finish: (Combine, (f32, f32)),
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        match step {
            Step::Fused(term) => {
                debug_assert_eq!(finish.0, Combine::Store, "a fused step stores");
                self.enqueue_fused(term, finish.1, input, output)
            }
            Step::Volume(term) => {
                debug_assert_eq!(finish.0, Combine::Store, "a fused step stores");
                self.enqueue_volume(term, finish.1, input, output)
            }
            Step::Axis(pass) => self.enqueue_pass::<R>(shape, pass, finish, input, output),
        }
    }

    /// Enqueues `filter` over the array of `shape` from `source` into `target` (flat buffers of
    /// `R`, as bytes): each term's steps (its fused passes, where they fuse, then its axis
    /// passes) through two device temporaries, its last step combined into `target`.
    pub(crate) fn enqueue_filter<R: Real>(
        &self,
        shape: &[usize],
        filter: &Filter,
        source: &CudaView<'_, u8>,
        target: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        let stream = self.stream();
        let bytes = shape.iter().product::<usize>() * size_of::<R>();
        let fused: Vec<_> = filter
            .terms
            .iter()
            .map(|term| fused_term::<R>(shape, term))
            .collect();
        // The fused kernel only stores: a term wholly fused whose result is combined into the
        // target runs as axis passes (unless a pair kernel takes the filter).
        let major = self.device().compute_capability.0;
        let volumes: Vec<_> = filter
            .terms
            .iter()
            .map(|term| volume_term::<R>(shape, term, major))
            .collect();
        let steps: Vec<Vec<Step<'_>>> = (filter.terms.iter().zip(&fused).zip(&volumes))
            .enumerate()
            .map(|(index, ((term, fused), volume))| {
                let stores = term_finish(filter, index).0 == Combine::Store;
                match (volume, fused) {
                    (Some(volume), _) if !volume.rest.is_empty() || stores => {
                        std::iter::once(Step::Volume(volume))
                            .chain(volume.rest.iter().map(|pass| Step::Axis(pass)))
                            .collect()
                    }
                    (_, Some(fused)) if !fused.rest.is_empty() || stores => {
                        std::iter::once(Step::Fused(fused))
                            .chain(fused.rest.iter().map(|pass| Step::Axis(pass)))
                            .collect()
                    }
                    _ => term.iter().map(Step::Axis).collect(),
                }
            })
            .collect();
        if let [Some(first), Some(second)] = fused.as_slice()
            && first.rest.is_empty()
            && second.rest.is_empty()
            && self.enqueue_fused_pair(filter, [first, second], source, target)?
        {
            return Ok(());
        }
        let longest = steps.iter().map(Vec::len).max().unwrap_or(0);
        let count = longest.saturating_sub(1).min(2);
        let mut temporaries: Vec<CudaSlice<u8>> = (0..count)
            // SAFETY: each temporary is written by a step, in stream order, before any read.
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
        for (index, term) in steps.iter().enumerate() {
            let finish = term_finish(filter, index);
            let store = (Combine::Store, UNCLAMPED);
            for (i, step) in term.iter().enumerate() {
                let last = i + 1 == term.len();
                // Step `i` reads the source (`i = 0`) or temporary `(i - 1) % 2`, and writes
                // the target (the term's last step) or temporary `i % 2`.
                match (i, last) {
                    (0, true) => self.enqueue_step::<R>(shape, step, finish, source, target)?,
                    (0, false) => {
                        let mut output = temporaries[0].as_view_mut();
                        self.enqueue_step::<R>(shape, step, store, source, &mut output)?;
                    }
                    (_, true) => {
                        let input = temporaries[(i - 1) % 2].as_view();
                        self.enqueue_step::<R>(shape, step, finish, &input, target)?;
                    }
                    (_, false) => {
                        let (first, second) = temporaries.split_at_mut(1);
                        let (read, write) = if i % 2 == 1 {
                            (&first[0], &mut second[0])
                        } else {
                            (&second[0], &mut first[0])
                        };
                        let mut output = write.as_view_mut();
                        let input = read.as_view();
                        self.enqueue_step::<R>(shape, step, store, &input, &mut output)?;
                    }
                }
            }
        }
        Ok(())
    }
}
