//! Host signals through the pipeline: chunks with their halos packed into the slots'
//! page-locked buffers by the rayon pool, the planned kernel launched on each chunk, the kept
//! elements unpacked into the caller's output (see [`crate::pipeline`]).

use super::reference::fold;
use super::{Taps, grid1d};
use crate::engine::Engine;
use crate::error::{ConvError, DriverContext, Result};
use crate::layout::copy_into_view;
use crate::options::BoundaryMode;
use crate::pipeline::{Band, BandWork, ms_since, plan_bands};
use crate::plan::Launch;
use crate::session::Session;
use crate::staging::{HostTimes, Slot};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, PushKernelArg};
use ndarray::{ArrayView1, ArrayViewMut1, Slice};
use rayon::prelude::*;
use std::sync::Mutex;

/// Elements a pack or unpack task takes at least.
const MIN_ELEMENTS_PER_TASK: usize = 1 << 16;

/// Device memory left free for the driver and the kernels' modules when the engine has no cap.
const DEVICE_HEADROOM_BYTES: usize = 256 << 20;

/// One host call's signal, mask and plan, as the pipeline's chunks see them.
struct SignalBands<'i, 'p> {
    input: ArrayView1<'i, f32>,
    taps: &'p Taps,
    launch: Launch<'p>,
    device_mask: Option<CudaSlice<f32>>,
    /// Start and end events of every chunk's kernels, for the call's kernel time.
    timings: Mutex<Vec<(CudaEvent, CudaEvent)>>,
}

impl BandWork for SignalBands<'_, '_> {
    fn pack(&self, band: &Band, buffer: &mut [f32]) {
        pack_chunk(&self.input, self.launch.mode, band, buffer);
    }

    fn launch(&self, session: &Session<'_>, slot: &mut Slot, band: &Band) -> Result<()> {
        let plan = self.launch.plan;
        let len = band.buffer_rows();
        session.poison(&slot.stream, &mut slot.output, len)?;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let describe = || format!("timing {}", self.describe(band));
        let start = slot.stream.record_event(timing).context(describe)?;
        let blocks = len.div_ceil(plan.output_tile.0 as usize) as u64;
        let max_grid = u64::from(session.device().max_grid_dim.0).max(1);
        let mut offset = 0;
        while offset < blocks {
            let count = (blocks - offset).min(max_grid);
            let (config, params) = grid1d(self.launch, len, self.taps, offset, count);
            let Slot {
                stream,
                input,
                output,
                ..
            } = &mut *slot;
            // SAFETY: the grid meets the conv1d kernels' contract (`grid1d`): `input` holds the
            // chunk's `len` elements (uploaded before, in stream order) and `output` as many, a
            // 16-byte aligned allocation; the mask is in MASK or in `device_mask`, written on
            // the engine's stream, which the slots' streams wait for.
            unsafe {
                session.launch_async(stream, plan.entry_point, config, |args| {
                    args.arg(&*input);
                    if let Some(mask) = &self.device_mask {
                        args.arg(mask);
                    }
                    args.arg(output);
                    args.arg(&params);
                })?;
            }
            offset += count;
        }
        let end = slot.stream.record_event(timing).context(describe)?;
        self.timings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((start, end));
        Ok(())
    }

    fn describe(&self, band: &Band) -> String {
        format!(
            "kernel `{}` on elements {}..{} of a signal of {}",
            self.launch.plan.entry_point,
            band.output.start,
            band.output.end,
            self.input.len()
        )
    }
}

/// Packs the elements of `band` (a chunk and its halos) into `buffer`: input elements where
/// they exist, elements past the input's ends folded by `mode`, or the constant.
fn pack_chunk(input: &ArrayView1<'_, f32>, mode: BoundaryMode, band: &Band, buffer: &mut [f32]) {
    let len = input.len();
    let first = band.first_buffer_row();
    let ghost = match mode {
        BoundaryMode::Constant(cval) => cval,
        _ => 0.0,
    };
    let contiguous = input.as_slice();
    buffer
        .par_chunks_mut(MIN_ELEMENTS_PER_TASK)
        .enumerate()
        .for_each(|(chunk, destination)| {
            let start = first + (chunk * MIN_ELEMENTS_PER_TASK) as i64;
            let inside = start >= 0 && start as usize + destination.len() <= len;
            match contiguous {
                Some(slice) if inside => destination
                    .copy_from_slice(&slice[start as usize..start as usize + destination.len()]),
                _ => destination.iter_mut().enumerate().for_each(|(k, d)| {
                    *d = fold(start + k as i64, len, mode).map_or(ghost, |i| input[i]);
                }),
            }
        });
}

impl Engine {
    /// Filters a host signal into `output` through the pipeline: the planned kernel over
    /// chunks, as many as the device memory the engine may use and the chunk size ask for.
    pub(super) fn filter1d_bands(
        &self,
        input: ArrayView1<'_, f32>,
        taps: &Taps,
        launch: Launch<'_>,
        mut output: ArrayViewMut1<'_, f32>,
    ) -> Result<()> {
        let len = input.len();
        if len > i64::MAX as usize / 2 {
            return Err(ConvError::TooLarge { len });
        }
        let started = std::time::Instant::now();
        let plan = launch.plan;
        let mut session = self.session()?;
        let device_mask = session.place_mask(plan, &taps.values)?;
        let mask_bytes = device_mask.as_ref().map_or(0, |_| taps.values.len() * 4);
        let budget = session.pipeline_budget(self.device_memory_limit(), DEVICE_HEADROOM_BYTES)?;
        let halo = (taps.left, taps.values.len() - 1 - taps.left);
        let (bands, slots, elements) = plan_bands(len, 1, halo, budget.saturating_sub(mask_bytes))?;
        let mut slots = session.take_slots(slots, elements)?;
        // The bands run on the slots' streams: after the mask's upload.
        session.order_after_engine_stream(&slots)?;
        let mut times = HostTimes {
            setup_ms: ms_since(started),
            ..HostTimes::default()
        };
        let work = SignalBands {
            input,
            taps,
            launch,
            device_mask,
            timings: Mutex::new(Vec::with_capacity(bands.len())),
        };
        let result = session.run_bands(
            &mut slots,
            &bands,
            1,
            &work,
            |band, kept| {
                let mut out =
                    output.slice_axis_mut(ndarray::Axis(0), Slice::from(band.output.clone()));
                match out.as_slice_mut() {
                    Some(slice) => slice
                        .par_chunks_mut(MIN_ELEMENTS_PER_TASK)
                        .zip(kept.par_chunks(MIN_ELEMENTS_PER_TASK))
                        .for_each(|(o, k)| o.copy_from_slice(k)),
                    None => copy_into_view(&mut out, kept),
                }
            },
            &mut times,
        );
        session.return_slots(slots);
        result?;
        let timings = work
            .timings
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        session.add_kernel_times(&timings)?;
        self.record_host_times(times);
        Ok(())
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
