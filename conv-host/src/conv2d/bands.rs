//! Host images through the pipeline: bands of rows packed into the slots' page-locked buffers
//! by the rayon pool, the planned kernel launched on each band, the kept rows unpacked into the
//! caller's output (see [`crate::pipeline`]).

use super::launch::{Grid2d, ImageShape, tensor_box, uses_tensor_copies};
use super::{ImageDim, Mask2d};
use crate::conv1d::reference::fold;
use crate::engine::Engine;
use crate::error::{DriverContext, Result};
use crate::options::BoundaryMode;
use crate::pipeline::{Band, BandWork, ms_since, plan_bands};
use crate::plan::Launch;
use crate::session::Session;
use crate::staging::{HostTimes, Slot};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, PushKernelArg};
use ndarray::{ArrayView, ArrayViewMut, Axis, Slice};
use rayon::prelude::*;
use std::sync::Mutex;

/// Rows a pack or unpack task takes at least, so that a task moves a few hundred KiB.
const MIN_ROWS_PER_TASK: usize = 16;

/// Device memory left free for the driver and the kernels' modules when the engine has no cap.
const DEVICE_HEADROOM_BYTES: usize = 256 << 20;

/// One host call's image, mask and plan, as the pipeline's bands see them.
struct ImageBands<'i, 'p, D: ImageDim> {
    image: ArrayView<'i, f32, D>,
    shape: ImageShape,
    mode: BoundaryMode,
    mask: &'p Mask2d,
    launch: Launch<'p>,
    device_mask: Option<CudaSlice<f32>>,
    /// Start and end events of every band's kernels, for the call's kernel time.
    timings: Mutex<Vec<(CudaEvent, CudaEvent)>>,
}

impl<D: ImageDim> BandWork for ImageBands<'_, '_, D> {
    fn pack(&self, band: &Band, buffer: &mut [f32]) {
        let (height, pitch) = (self.shape.height, self.shape.pitch);
        let row_len = self.shape.width * self.shape.channels;
        let first = band.first_buffer_row();
        let ghost = match self.mode {
            BoundaryMode::Constant(cval) => cval,
            _ => 0.0,
        };
        buffer
            .par_chunks_mut(pitch)
            .with_min_len(MIN_ROWS_PER_TASK)
            .enumerate()
            .for_each(|(r, destination)| {
                let destination = &mut destination[..row_len];
                match fold(first + r as i64, height, self.mode) {
                    Some(row) => {
                        let source = self.image.index_axis(Axis(0), row);
                        match source.as_slice() {
                            Some(slice) => destination.copy_from_slice(slice),
                            None => destination
                                .iter_mut()
                                .zip(source.iter())
                                .for_each(|(d, &v)| *d = v),
                        }
                    }
                    None => destination.fill(ghost),
                }
            });
    }

    fn launch(&self, session: &Session<'_>, slot: &mut Slot, band: &Band) -> Result<()> {
        let plan = self.launch.plan;
        let shape = ImageShape {
            height: band.buffer_rows(),
            ..self.shape
        };
        let grid = Grid2d::new(session, shape, self.mask, self.launch)?;
        let elements = shape.height * shape.pitch;
        session.poison(&slot.stream, &mut slot.output, elements)?;
        let map = if uses_tensor_copies(plan) {
            // Contract of the tensor-copy kernels: the map describes the band's buffer rows.
            let row = (shape.width * shape.channels) as u64;
            let dims = (row, shape.height as u64, shape.pitch as u64);
            let boxes = tensor_box(plan, self.mask, shape.channels);
            Some(session.tensor_map(&slot.stream, &slot.input, dims, boxes)?)
        } else {
            None
        };
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let describe = || format!("timing {}", self.describe(band));
        let start = slot.stream.record_event(timing).context(describe)?;
        let mut offset = 0;
        while offset < grid.blocks_y {
            let count = (grid.blocks_y - offset).min(grid.max_grid_y.max(1));
            let (config, params) = grid.grid(offset, count);
            let Slot {
                stream,
                input,
                output,
                ..
            } = &mut *slot;
            // SAFETY: the grid meets the conv2d kernels' contract (`Grid2d::grid`): `input`
            // holds the band's buffer rows (uploaded before, in stream order) and `output` as
            // many, both `shape.height * pitch` elements or more; the mask is in MASK or in
            // `device_mask`, written on the engine's stream, which the slots' streams wait for;
            // the tensor map describes `input`.
            unsafe {
                session.launch_async(stream, plan.entry_point, config, |args| {
                    match &map {
                        Some(map) => args.arg(map),
                        None => args.arg(&*input),
                    };
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
            "kernel `{}` on rows {}..{} of a {} x {} x {} image",
            self.launch.plan.entry_point,
            band.output.start,
            band.output.end,
            self.shape.height,
            self.shape.width,
            self.shape.channels
        )
    }
}

impl Engine {
    /// Filters a host image into `output` through the pipeline: the planned kernel over bands
    /// of rows, as many as the device memory the engine may use and the band size ask for.
    pub(super) fn filter2d_bands<D: ImageDim>(
        &self,
        image: ArrayView<'_, f32, D>,
        shape: ImageShape,
        mask: &Mask2d,
        launch: Launch<'_>,
        mut output: ArrayViewMut<'_, f32, D>,
    ) -> Result<()> {
        let started = std::time::Instant::now();
        let plan = launch.plan;
        let mut session = self.session()?;
        let device_mask = if plan.mask_in_constant_memory {
            session.set_constant_mask(plan.entry_point, &mask.values)?;
            None
        } else {
            Some(session.upload(&mask.values)?)
        };
        let mask_bytes = device_mask.as_ref().map_or(0, |_| mask.values.len() * 4);
        let budget = session.pipeline_budget(self.device_memory_limit(), DEVICE_HEADROOM_BYTES)?;
        let halo = (mask.top, mask.rows - 1 - mask.top);
        let (bands, slots, elements) = plan_bands(
            shape.height,
            shape.pitch,
            halo,
            budget.saturating_sub(mask_bytes),
        )?;
        let mut slots = session.take_slots(slots, elements)?;
        // The bands run on the slots' streams: after the mask's upload.
        session.order_after_engine_stream(&slots)?;
        let mut times = HostTimes {
            setup_ms: ms_since(started),
            ..HostTimes::default()
        };
        let work = ImageBands {
            image,
            shape,
            mode: launch.mode,
            mask,
            launch,
            device_mask,
            timings: Mutex::new(Vec::with_capacity(bands.len())),
        };
        let row_len = shape.width * shape.channels;
        let result = session.run_bands(
            &mut slots,
            &bands,
            shape.pitch,
            &work,
            |band, rows| {
                let mut kept = output.slice_axis_mut(Axis(0), Slice::from(band.output.clone()));
                kept.axis_iter_mut(Axis(0))
                    .into_par_iter()
                    .with_min_len(MIN_ROWS_PER_TASK)
                    .zip(rows.par_chunks(shape.pitch))
                    .for_each(|(mut row, source)| match row.as_slice_mut() {
                        Some(slice) => slice.copy_from_slice(&source[..row_len]),
                        None => row.iter_mut().zip(source).for_each(|(o, &v)| *o = v),
                    });
            },
            &mut times,
        );
        session.return_slots(slots);
        result?;
        let timings = work
            .timings
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for (start, end) in &timings {
            let ms = start
                .elapsed_ms(end)
                .context(|| "reading the kernels' time".into())?;
            session.add_kernel_ms(ms);
        }
        self.record_host_times(times);
        Ok(())
    }
}
