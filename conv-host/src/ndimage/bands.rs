//! N-D host arrays through the pipeline: bands of the first axis (each band the rest of the
//! array) with the halo the filter reaches along that axis, packed into the slots' page-locked
//! buffers, the filter's kernels run on each band, the kept rows unpacked into the caller's
//! output (see [`crate::pipeline`]).
//!
//! A band's rows past the array's ends are folded on the host by the first axis's mode, so a
//! band computes its kept rows as the whole array would. That holds where every pass along the
//! first axis reads the input in one mode, and a constant other than zero only where such a
//! pass comes first in its term (a later pass would read the constant filtered by the passes
//! before it, where SciPy reads it unfiltered); other filters run on the whole array.

use super::filters::Filter;
use crate::conv1d::reference::fold;
use crate::conv3d::{Mask3d, VolumeShape};
use crate::element::{Element, Real};
use crate::engine::Engine;
use crate::error::{DriverContext, Result};
use crate::layout::{check_output, copy_from_view, copy_into_view};
use crate::options::BoundaryMode;
use crate::pinned_rows::PinnedRows;
use crate::pipeline::{Band, BandWork, HostCall, InPlace};
use crate::session::Session;
use cudarc::driver::{CudaStream, CudaView, CudaViewMut};
use ndarray::{ArrayBase, ArrayViewD, ArrayViewMut, ArrayViewMutD, Axis, Data, Dimension, Slice};
use rayon::prelude::*;
use std::marker::PhantomData;
use std::sync::Arc;

/// Elements a pack or unpack task moves at least.
const MIN_ELEMENTS_PER_TASK: usize = 1 << 16;

/// What a host call runs on each band: a separable filter's passes, or a dense 3D correlation
/// of a volume with `channels` interleaved channels.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NdWork<'p> {
    Filter(&'p Filter),
    Volume {
        mask: &'p Mask3d,
        mode: BoundaryMode,
        clamp: (f32, f32),
        channels: usize,
    },
}

impl NdWork<'_> {
    /// Enqueues the work over the array of `shape` on `session`'s stream, from `input` into
    /// `output` (flat buffers of `R`, as bytes).
    pub(super) fn enqueue<R: Real>(
        &self,
        session: &Session<'_>,
        shape: &[usize],
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        match *self {
            NdWork::Filter(filter) => session.enqueue_filter::<R>(shape, filter, input, output),
            NdWork::Volume {
                mask,
                mode,
                clamp,
                channels,
            } => {
                let volume: VolumeShape = [shape[0], shape[1], shape[2], channels];
                session.enqueue_conv3d::<R>(volume, mask, (mode, clamp), input, output)
            }
        }
    }

    /// The mode that folds the rows past the array's ends along the first axis, and the rows
    /// the work reaches before and after an output row; `None` where bands cannot reproduce the
    /// work (see the [module](self)'s doc).
    pub(crate) fn first_axis(&self) -> Option<(BoundaryMode, (usize, usize))> {
        match *self {
            NdWork::Volume { mask, mode, .. } => {
                let (depth, front) = (mask.dims[0], mask.anchors[0]);
                Some((mode, (front, depth - 1 - front)))
            }
            NdWork::Filter(filter) => {
                let mut mode = None;
                let mut halo = (0, 0);
                for term in &filter.terms {
                    let mut reach = (0, 0);
                    for (index, pass) in term.iter().enumerate() {
                        if pass.axis != 0 || pass.taps.len() < 2 {
                            continue;
                        }
                        let nonzero = matches!(pass.mode, BoundaryMode::Constant(c) if c != 0.0);
                        if (nonzero && index > 0) || mode.is_some_and(|m| m != pass.mode) {
                            return None;
                        }
                        mode = Some(pass.mode);
                        reach.0 += pass.left;
                        reach.1 += pass.taps.len() - 1 - pass.left;
                    }
                    halo = (halo.0.max(reach.0), halo.1.max(reach.1));
                }
                Some((mode.unwrap_or(BoundaryMode::Nearest), halo))
            }
        }
    }
}

/// One host call's array and work, as the pipeline's bands see them; the output is of type `O`.
struct ArrayBands<'i, 'p, I, O> {
    input: ArrayViewD<'i, I>,
    mode: BoundaryMode,
    work: NdWork<'p>,
    output: PhantomData<O>,
}

impl<I, O> BandWork for ArrayBands<'_, '_, I, O>
where
    I: Element,
    O: Element<Real = I::Real>,
{
    type Input = I;
    type Output = O;

    fn pack(&self, band: &Band, buffer: &mut [I]) {
        pack_rows(&self.input, self.mode, band, buffer);
    }

    fn reuses_rows(&self) -> bool {
        true
    }

    fn launch(
        &self,
        session: &Session<'_>,
        stream: &Arc<CudaStream>,
        (input, output): (&CudaView<'_, u8>, &mut CudaViewMut<'_, u8>),
        band: &Band,
    ) -> Result<()> {
        let mut shape = self.input.shape().to_vec();
        shape[0] = band.buffer_rows();
        let bytes = shape.iter().product::<usize>() * size_of::<I::Real>();
        let (input, mut output) = (input.slice(..bytes), output.slice_mut(..bytes));
        // The kernels run on the session's stream, one band after another: the passes place
        // their taps in constant memory, which the lane's modules share among its streams. The
        // slot's stream hands the uploaded band over and takes the result back by events.
        let describe = || self.describe(band);
        let lane_stream = session.stream();
        lane_stream
            .wait(&stream.record_event(None).context(describe)?)
            .context(describe)?;
        self.work
            .enqueue::<I::Real>(session, &shape, &input, &mut output)?;
        stream
            .wait(&lane_stream.record_event(None).context(describe)?)
            .context(describe)
    }

    fn describe(&self, band: &Band) -> String {
        let what = match self.work {
            NdWork::Filter(_) => "a separable filter",
            NdWork::Volume { .. } => "a 3D correlation",
        };
        format!(
            "{what} on rows {}..{} of a {:?} array",
            band.output.start,
            band.output.end,
            self.input.shape()
        )
    }
}

/// Packs the buffer rows of `band` (each the rest of `input`) into `buffer`, contiguously:
/// the rows inside the array as one run split among tasks, the rows past its ends folded by
/// `mode`, or the constant.
fn pack_rows<T: Element>(
    input: &ArrayViewD<'_, T>,
    mode: BoundaryMode,
    band: &Band,
    buffer: &mut [T],
) {
    let rows = input.len_of(Axis(0));
    let row_len = input.len() / rows.max(1);
    let (first, count) = (band.first_buffer_row(), band.buffer_rows() as i64);
    // Buffer rows `inside` hold input rows `first + r`; the others lie past the input's ends.
    let inside_start = (-first).clamp(0, count);
    let inside_end = (rows as i64 - first).clamp(inside_start, count);
    let (before, rest) = buffer.split_at_mut(inside_start as usize * row_len);
    let (middle, after) = rest.split_at_mut((inside_end - inside_start) as usize * row_len);
    let rows_per_task = MIN_ELEMENTS_PER_TASK.div_ceil(row_len.max(1));
    let first_inside = (first + inside_start) as usize;
    middle
        .par_chunks_mut(rows_per_task * row_len)
        .enumerate()
        .for_each(|(task, destination)| {
            let start = first_inside + task * rows_per_task;
            let run = start..start + destination.len() / row_len;
            copy_from_view(destination, &input.slice_axis(Axis(0), Slice::from(run)));
        });
    // Exact for `f32` and `f64`; the device sets the rows again for converted types, whose
    // range may not hold the constant (`HostCall::constant`).
    let ghost = T::from_f64(mode.constant().map_or(0.0, f64::from));
    let ghosts = before
        .chunks_mut(row_len)
        .enumerate()
        .map(|(r, row)| (first + r as i64, row))
        .chain(
            after
                .chunks_mut(row_len)
                .enumerate()
                .map(|(r, row)| (first + inside_end + r as i64, row)),
        );
    for (y, destination) in ghosts {
        match fold(y, rows, mode) {
            Some(y) => copy_from_view(destination, &input.index_axis(Axis(0), y)),
            None => destination.fill(ghost),
        }
    }
}

/// Copies a band's kept rows (`rows`, contiguous) into `output`, the rows `kept` of the array.
fn unpack_rows<T: Element>(
    output: &mut ArrayViewMutD<'_, T>,
    kept: std::ops::Range<usize>,
    rows: &[T],
) {
    let row_len = rows.len() / kept.len().max(1);
    let rows_per_task = MIN_ELEMENTS_PER_TASK.div_ceil(row_len.max(1));
    let mut kept = output.slice_axis_mut(Axis(0), Slice::from(kept));
    let tasks: Vec<_> = kept
        .axis_chunks_iter_mut(Axis(0), rows_per_task)
        .zip(rows.chunks(rows_per_task * row_len))
        .collect();
    tasks
        .into_par_iter()
        .for_each(|(mut destination, source)| copy_into_view(&mut destination, source));
}

impl Engine {
    /// Runs `work` from the host array `input` into `output` (same shape, checked): through the
    /// pipeline in bands of the first axis where bands reproduce the work, else on the whole
    /// array on the device.
    pub(crate) fn filter_nd<S, O, D>(
        &self,
        input: &ArrayBase<S, D>,
        work: NdWork<'_>,
        output: ArrayViewMut<'_, O, D>,
    ) -> Result<()>
    where
        S: Data<Elem: Element>,
        O: Element<Real = <S::Elem as Element>::Real>,
        D: Dimension,
    {
        type R<S> = <<S as ndarray::RawData>::Elem as Element>::Real;
        check_output(input, &output)?;
        if input.is_empty() {
            return Ok(());
        }
        let Some((mode, halo)) = work.first_axis() else {
            let shape = input.shape().to_vec();
            return self.on_device(input, output, |session, source, target| {
                work.enqueue::<R<S>>(session, &shape, source, target)
            });
        };
        let input = input.view().into_dyn();
        let mut output = output.into_dyn();
        let rows = input.len_of(Axis(0));
        let call = HostCall {
            mask: None,
            constant: mode.constant(),
            rows,
            in_place: InPlace::new::<S::Elem>(
                (PinnedRows::of(&input, 0), PinnedRows::of(&output, 0)),
                mode,
            ),
            part: 0..rows,
            row_len: input.len() / rows,
            halo,
            // A filter's chain of passes goes through up to two temporaries.
            work_buffers: if matches!(work, NdWork::Filter(_)) {
                2
            } else {
                0
            },
        };
        let bands = |_| ArrayBands {
            input: input.view(),
            mode,
            work,
            output: PhantomData::<O>,
        };
        self.run_host_call(call, bands, |band, rows| {
            unpack_rows(&mut output, band.output.clone(), rows)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axis::Pass;
    use crate::ndimage::filters::Terms;
    use ndarray::{ArrayD, IxDyn};

    /// A band's buffer holds its rows and the halo rows beyond them, folded as the mode says.
    #[test]
    fn bands_fold_their_halo_rows_as_the_mode_says() {
        let array = ArrayD::from_shape_fn(IxDyn(&[5, 3, 2]), |i| {
            (100 * i[0] + 10 * i[1] + i[2]) as f32
        });
        let row_len = 6;
        for mode in [
            BoundaryMode::Constant(-1.5),
            BoundaryMode::Nearest,
            BoundaryMode::Reflect,
            BoundaryMode::Mirror,
            BoundaryMode::Wrap,
        ] {
            for (output, halo) in [
                (0..2, (4, 4)),
                (2..5, (1, 4)),
                (4..5, (4, 0)),
                (0..5, (7, 7)),
            ] {
                let band = Band { output, halo };
                let mut buffer = vec![f32::NAN; band.buffer_rows() * row_len];
                pack_rows(&array.view(), mode, &band, &mut buffer);
                for (r, got) in buffer.chunks(row_len).enumerate() {
                    let y = band.first_buffer_row() + r as i64;
                    let expected: Vec<f32> = match fold(y, 5, mode) {
                        Some(y) => array.index_axis(Axis(0), y).iter().copied().collect(),
                        None => vec![-1.5; row_len],
                    };
                    assert_eq!(got, &expected[..], "{mode:?} {band:?} row {y}");
                }
            }
        }
        // A strided view packs and unpacks the same rows.
        let flipped = array.slice_each_axis(|a| {
            if a.axis.index() == 0 {
                Slice::new(0, None, -1)
            } else {
                Slice::from(..)
            }
        });
        let band = Band {
            output: 1..4,
            halo: (0, 0),
        };
        let mut buffer = vec![f32::NAN; 3 * row_len];
        pack_rows(&flipped, BoundaryMode::Wrap, &band, &mut buffer);
        assert_eq!(&buffer[..2], &[300.0, 301.0]);
        let mut back = ArrayD::<f32>::zeros(IxDyn(&[5, 3, 2]));
        let mut view = back.view_mut();
        let mut flipped_back = view.slice_each_axis_mut(|a| {
            if a.axis.index() == 0 {
                Slice::new(0, None, -1)
            } else {
                Slice::from(..)
            }
        });
        unpack_rows(&mut flipped_back, 1..4, &buffer);
        assert_eq!(back.index_axis(Axis(0), 2), array.index_axis(Axis(0), 2));
    }

    fn pass(axis: usize, taps: usize, left: usize, mode: BoundaryMode) -> Pass {
        Pass {
            axis,
            taps: vec![1.0; taps],
            left,
            mode,
        }
    }

    /// The first axis's halo adds up along a term and takes the largest term; passes in other
    /// modes, or a nonzero constant read after a first pass, keep the array whole.
    #[test]
    fn first_axis_halos_and_the_filters_bands_cannot_run() {
        let filter = |terms: Vec<Vec<Pass>>| Filter {
            terms,
            combine: Terms::Sum,
            clamp: (f32::MIN, f32::MAX),
        };
        let reflect = BoundaryMode::Reflect;
        let sobel = filter(vec![vec![
            pass(1, 3, 1, reflect),
            pass(0, 3, 1, reflect),
            pass(2, 3, 1, reflect),
        ]]);
        assert_eq!(NdWork::Filter(&sobel).first_axis(), Some((reflect, (1, 1))));
        let terms = filter(vec![
            vec![pass(0, 5, 1, reflect)],
            vec![pass(0, 9, 4, reflect), pass(1, 3, 1, BoundaryMode::Wrap)],
        ]);
        assert_eq!(NdWork::Filter(&terms).first_axis(), Some((reflect, (4, 4))));
        let mixed = filter(vec![
            vec![pass(0, 3, 1, reflect)],
            vec![pass(0, 3, 1, BoundaryMode::Wrap)],
        ]);
        assert_eq!(NdWork::Filter(&mixed).first_axis(), None);
        let constant = BoundaryMode::Constant(2.0);
        let late = filter(vec![vec![pass(1, 3, 1, constant), pass(0, 3, 1, constant)]]);
        assert_eq!(NdWork::Filter(&late).first_axis(), None);
        let first = filter(vec![vec![pass(0, 3, 1, constant), pass(1, 3, 1, constant)]]);
        assert_eq!(
            NdWork::Filter(&first).first_axis(),
            Some((constant, (1, 1)))
        );
        let rows_only = filter(vec![
            vec![pass(1, 7, 3, reflect)],
            vec![pass(0, 1, 0, BoundaryMode::Nearest)],
        ]);
        assert_eq!(
            NdWork::Filter(&rows_only).first_axis(),
            Some((BoundaryMode::Nearest, (0, 0)))
        );
    }
}
