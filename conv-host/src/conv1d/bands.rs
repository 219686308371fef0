//! Host signals through the pipeline: chunks with their halos packed into the slots'
//! page-locked buffers by the rayon pool, the planned kernel launched on each chunk, the kept
//! elements unpacked into the caller's output (see [`crate::pipeline`]).

use super::reference::fold;
use super::{Taps, enqueue1d};
use crate::cache::copy_streaming;
use crate::element::Element;
use crate::engine::Engine;
use crate::error::{ConvError, Result};
use crate::layout::copy_into_view;
use crate::options::BoundaryMode;
use crate::pinned_rows::PinnedRows;
use crate::pipeline::{Band, BandWork, HostCall, InPlace};
use crate::plan::Launch;
use crate::session::Session;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut};
use ndarray::{ArrayView1, ArrayViewMut1, Axis, Slice};
use rayon::prelude::*;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

/// Elements a pack or unpack task takes at least.
const MIN_ELEMENTS_PER_TASK: usize = 1 << 16;

/// One host call's signal, mask and plan, as the pipeline's chunks see them; the output is of
/// type `O`.
struct SignalBands<'i, 'p, I: Element, O> {
    input: ArrayView1<'i, I>,
    taps: &'p Taps<I::Real>,
    launch: Launch<'p>,
    device_mask: Option<CudaSlice<I::Real>>,
    output: PhantomData<O>,
}

impl<I: Element, O: Element<Real = I::Real>> BandWork for SignalBands<'_, '_, I, O> {
    type Input = I;
    type Output = O;

    fn pack(&self, band: &Band, buffer: &mut [I]) {
        pack_chunk(&self.input, self.launch.mode, band, buffer);
    }

    fn launch(
        &self,
        session: &Session<'_>,
        stream: &Arc<CudaStream>,
        (input, output): (&CudaView<'_, u8>, &mut CudaViewMut<'_, u8>),
        band: &Band,
    ) -> Result<()> {
        let len = band.buffer_rows();
        // SAFETY: `input` holds the chunk's `len` elements (uploaded before, in stream order)
        // and `output` as many, distinct 16-byte aligned allocations; the mask is in MASK or in
        // `device_mask`, written on the session's stream, which the slots' streams wait for.
        unsafe {
            enqueue1d(
                session,
                stream,
                (self.launch, self.taps, len),
                input,
                self.device_mask.as_ref(),
                output,
            )
        }
    }

    fn describe(&self, band: &Band) -> String {
        format!(
            "kernel `{}` on elements {}..{} of a signal of {}",
            self.launch.plan.entry,
            band.output.start,
            band.output.end,
            self.input.len()
        )
    }
}

/// Packs the elements of `band` (a chunk and its halos) into `buffer`: input elements where
/// they exist, elements past the input's ends folded by `mode`, or the constant.
fn pack_chunk<T: Element>(
    input: &ArrayView1<'_, T>,
    mode: BoundaryMode,
    band: &Band,
    buffer: &mut [T],
) {
    let len = input.len();
    let first = band.first_buffer_row();
    // Exact for `f32` and `f64`; the device sets the elements again for converted types,
    // whose range may not hold the constant (`HostCall::constant`).
    let ghost = T::from_f64(mode.constant().map_or(0.0, f64::from));
    let contiguous = input.as_slice();
    buffer
        .par_chunks_mut(MIN_ELEMENTS_PER_TASK)
        .enumerate()
        .for_each(|(chunk, destination)| {
            let start = first + (chunk * MIN_ELEMENTS_PER_TASK) as i64;
            let inside = start >= 0 && start as usize + destination.len() <= len;
            match contiguous {
                Some(slice) if inside => {
                    let end = start as usize + destination.len();
                    copy_streaming(destination, &slice[start as usize..end]);
                }
                _ => destination.iter_mut().enumerate().for_each(|(k, d)| {
                    *d = fold(start + k as i64, len, mode).map_or(ghost, |i| input[i]);
                }),
            }
        });
}

impl Engine {
    /// Filters the elements `part` of a host signal into `output` (those elements) through
    /// the pipeline: the planned kernel over chunks, as many as the device memory the engine
    /// may use and the chunk size ask for.
    pub(super) fn filter1d_bands<I: Element, O: Element<Real = I::Real>>(
        &self,
        (input, part): (ArrayView1<'_, I>, Range<usize>),
        taps: &Taps<I::Real>,
        launch: Launch<'_>,
        mut output: ArrayViewMut1<'_, O>,
    ) -> Result<()> {
        let len = input.len();
        if len > i64::MAX as usize / 2 {
            return Err(ConvError::TooLarge { len });
        }
        let call = HostCall {
            mask: Some((launch.plan, &taps.values)),
            constant: launch.mode.constant(),
            rows: len,
            part: part.clone(),
            row_len: 1,
            halo: (taps.left, taps.values.len() - 1 - taps.left),
            work_buffers: 0,
            in_place: InPlace::new::<I>(
                (
                    PinnedRows::of(&input, 0),
                    PinnedRows::of(&output, part.start),
                ),
                launch.mode,
            ),
        };
        let work = |device_mask| SignalBands {
            input,
            taps,
            launch,
            device_mask,
            output: PhantomData::<O>,
        };
        self.run_host_call(call, work, |band, kept| {
            let rows = band.output.start - part.start..band.output.end - part.start;
            let mut out = output.slice_axis_mut(Axis(0), Slice::from(rows));
            match out.as_slice_mut() {
                Some(slice) => slice
                    .par_chunks_mut(MIN_ELEMENTS_PER_TASK)
                    .zip(kept.par_chunks(MIN_ELEMENTS_PER_TASK))
                    .for_each(|(o, k)| o.copy_from_slice(k)),
                None => copy_into_view(&mut out, kept),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array1, s};

    /// A chunk's buffer holds its elements and its halos, folded as the boundary mode says,
    /// for contiguous and strided inputs and chunks longer than one packing task.
    #[test]
    fn chunks_fold_their_halos_as_the_mode_says() {
        let len = MIN_ELEMENTS_PER_TASK + 37;
        let input = Array1::from_shape_fn(len, |i| i as f32);
        let reversed = input.slice(s![..;-1]);
        for mode in [
            BoundaryMode::Constant(-2.0),
            BoundaryMode::Nearest,
            BoundaryMode::Reflect,
            BoundaryMode::Mirror,
            BoundaryMode::Wrap,
        ] {
            for (output, halo) in [(0..100, (40, 3)), (100..len, (5, 60)), (0..len, (2, 2))] {
                let band = Band { output, halo };
                for view in [input.view(), reversed.view()] {
                    let mut buffer = vec![f32::NAN; band.buffer_rows()];
                    pack_chunk(&view, mode, &band, &mut buffer);
                    for (k, &got) in buffer.iter().enumerate() {
                        let i = band.first_buffer_row() + k as i64;
                        let expected = fold(i, len, mode).map_or(-2.0, |i| view[i]);
                        assert_eq!(got, expected, "{mode:?} {band:?} element {i}");
                    }
                }
            }
        }
    }
}
