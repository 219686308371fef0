//! Host images through the pipeline: bands of rows packed into the slots' page-locked buffers
//! by the rayon pool, the planned kernel launched on each band, the kept rows unpacked into the
//! caller's output (see [`crate::pipeline`]).

use super::launch::{Grid2d, ImageShape, tensor_box, uses_tensor_copies};
use super::{ImageDim, Mask2d};
use crate::conv1d::reference::fold;
use crate::engine::Engine;
use crate::error::{DriverContext, Result};
use crate::layout::{copy_from_view, copy_into_view};
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
        pack_band(&self.image, self.shape.pitch, self.mode, band, buffer);
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

/// Packs the buffer rows of `band` into `buffer`, rows `pitch` elements apart: image rows
/// where they exist, rows past the image's edges folded by `mode` (the far side of the image
/// for `Wrap`, `Reflect` and `Mirror`), or the constant.
fn pack_band<D: ImageDim>(
    image: &ArrayView<'_, f32, D>,
    pitch: usize,
    mode: BoundaryMode,
    band: &Band,
    buffer: &mut [f32],
) {
    let height = image.len_of(Axis(0));
    let row_len: usize = image.shape()[1..].iter().product();
    let first = band.first_buffer_row();
    let ghost = match mode {
        BoundaryMode::Constant(cval) => cval,
        _ => 0.0,
    };
    buffer
        .par_chunks_mut(pitch)
        .with_min_len(MIN_ROWS_PER_TASK)
        .enumerate()
        .for_each(|(r, destination)| {
            let destination = &mut destination[..row_len];
            match fold(first + r as i64, height, mode) {
                Some(y) => copy_from_view(destination, &image.index_axis(Axis(0), y)),
                None => destination.fill(ghost),
            }
        });
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
        let device_mask = session.place_mask(plan, &mask.values)?;
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
                    .for_each(|(mut row, source)| copy_into_view(&mut row, source));
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
    use ndarray::{Array3, s};

    /// A band's buffer holds its rows and the halo rows beyond them, folded as the boundary
    /// mode says: every row of a 5-row image in bands reaching 4 rows past either edge.
    #[test]
    fn bands_fold_their_halo_rows_as_the_mode_says() {
        let image = Array3::from_shape_fn((5, 3, 2), |(y, x, c)| (100 * y + 10 * x + c) as f32);
        let (row_len, pitch) = (6, 32);
        let modes = [
            BoundaryMode::Constant(-1.5),
            BoundaryMode::Nearest,
            BoundaryMode::Reflect,
            BoundaryMode::Mirror,
            BoundaryMode::Wrap,
        ];
        for mode in modes {
            for (output, halo) in [(0..2, (4, 4)), (2..5, (1, 4)), (4..5, (4, 0))] {
                let band = Band { output, halo };
                let mut buffer = vec![f32::NAN; band.buffer_rows() * pitch];
                pack_band(&image.view(), pitch, mode, &band, &mut buffer);
                for r in 0..band.buffer_rows() {
                    let y = band.first_buffer_row() + r as i64;
                    let got = &buffer[r * pitch..r * pitch + row_len];
                    let expected: Vec<f32> = match fold(y, 5, mode) {
                        Some(y) => image.slice(s![y, .., ..]).iter().copied().collect(),
                        None => vec![-1.5; row_len],
                    };
                    assert_eq!(got, &expected[..], "{mode:?} {band:?} row {y}");
                }
            }
        }
        // A strided view packs the same rows.
        let flipped = image.slice(s![..;-1, .., ..]);
        let band = Band {
            output: 0..5,
            halo: (2, 2),
        };
        let mut buffer = vec![f32::NAN; band.buffer_rows() * pitch];
        pack_band(&flipped, pitch, BoundaryMode::Wrap, &band, &mut buffer);
        assert_eq!(
            &buffer[..row_len],
            &[100.0, 101.0, 110.0, 111.0, 120.0, 121.0]
        );
    }
}
