//! Host images through the pipeline: bands of rows packed into the slots' page-locked buffers
//! by the rayon pool, the planned kernel launched on each band, the kept rows unpacked into the
//! caller's output (see [`crate::pipeline`]).

use super::launch::{Grid2d, ImageShape, enqueue2d, input_map};
use super::register_tiled::native_plan;
use super::{ImageDim, Mask2d};
use crate::conv1d::reference::fold;
use crate::element::Element;
use crate::engine::Engine;
use crate::error::Result;
use crate::layout::{copy_from_view, copy_into_view};
use crate::options::BoundaryMode;
use crate::pinned_rows::PinnedRows;
use crate::pipeline::{Band, BandWork, HostCall, InPlace};
use crate::plan::{Launch, LaunchPlan};
use crate::session::Session;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut};
use ndarray::{ArrayView, ArrayViewMut, Axis, Slice};
use rayon::prelude::*;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

/// Rows a pack or unpack task takes at least, so that a task moves a few hundred KiB.
const MIN_ROWS_PER_TASK: usize = 16;

/// One host call's image, mask and plan, as the pipeline's bands see them; the output is of
/// type `O`.
struct ImageBands<'i, 'p, I: Element, O, D: ImageDim> {
    image: ArrayView<'i, I, D>,
    shape: ImageShape,
    mask: &'p Mask2d<I::Real>,
    launch: Launch<'p>,
    /// The plan of the kernel that reads `I` and writes `O` itself, where one runs.
    native: Option<&'p LaunchPlan>,
    device_mask: Option<CudaSlice<I::Real>>,
    output: PhantomData<O>,
}

impl<I, O, D> BandWork for ImageBands<'_, '_, I, O, D>
where
    I: Element,
    O: Element<Real = I::Real>,
    D: ImageDim,
{
    type Input = I;
    type Output = O;

    fn pack(&self, band: &Band, buffer: &mut [I]) {
        pack_band(
            &self.image,
            self.shape.pitch,
            self.launch.mode,
            band,
            buffer,
        );
    }

    fn native(&self) -> bool {
        self.native.is_some()
    }

    fn launch(
        &self,
        session: &Session<'_>,
        stream: &Arc<CudaStream>,
        (input, output): (&CudaView<'_, u8>, &mut CudaViewMut<'_, u8>),
        band: &Band,
    ) -> Result<()> {
        // The grid of the `f32` kernel: a native one has its block, tile and shared memory.
        let plan = self.native.unwrap_or(self.launch.plan);
        let shape = ImageShape {
            height: band.buffer_rows(),
            ..self.shape
        };
        let grid = Grid2d::new(
            session,
            shape,
            self.mask,
            Launch {
                plan,
                ..self.launch
            },
        )?;
        let map = input_map(session, stream, (plan, self.mask), shape, input)?;
        // SAFETY: `input` holds the band's buffer rows (uploaded before, in stream order) and
        // `output` as many, `shape.height * pitch` elements or more, distinct buffers; the mask
        // is in MASK or in `device_mask`, written on the session's stream, which the slots'
        // streams wait for; `map` describes `input`.
        unsafe {
            enqueue2d(
                session,
                stream,
                (plan, &grid),
                (input, map.as_ref()),
                self.device_mask.as_ref(),
                output,
            )
        }
    }

    fn describe(&self, band: &Band) -> String {
        format!(
            "kernel `{}` on rows {}..{} of a {} x {} x {} image",
            self.native.unwrap_or(self.launch.plan).entry,
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
fn pack_band<T: Element, D: ImageDim>(
    image: &ArrayView<'_, T, D>,
    pitch: usize,
    mode: BoundaryMode,
    band: &Band,
    buffer: &mut [T],
) {
    let height = image.len_of(Axis(0));
    let row_len: usize = image.shape()[1..].iter().product();
    let first = band.first_buffer_row();
    // Exact for `f32` and `f64`; the device sets the rows again for converted types, whose
    // range may not hold the constant (`HostCall::constant`).
    let ghost = T::from_f64(mode.constant().map_or(0.0, f64::from));
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
    /// Filters the rows `part` of a host image into `output` (those rows) through the
    /// pipeline: the planned kernel over bands of rows, as many as the device memory the engine
    /// may use and the band size ask for.
    pub(super) fn filter2d_bands<I: Element, O: Element<Real = I::Real>, D: ImageDim>(
        &self,
        image: ArrayView<'_, I, D>,
        (shape, part): (ImageShape, Range<usize>),
        mask: &Mask2d<I::Real>,
        launch: Launch<'_>,
        mut output: ArrayViewMut<'_, O, D>,
    ) -> Result<()> {
        let first = part.start;
        // Ghost rows that bands pack hold the constant in `I`: a native kernel runs where `I`
        // holds it exactly.
        let constant_fits = launch
            .mode
            .constant()
            .is_none_or(|c| I::from_f64(f64::from(c)).to_f64() == f64::from(c));
        let native = native_plan::<I, O>(launch.plan, &self.info).filter(|_| constant_fits);
        let call = HostCall {
            // The mask goes to the constant memory of the kernel that runs.
            mask: Some((native.as_ref().unwrap_or(launch.plan), &mask.values)),
            constant: launch.mode.constant(),
            rows: shape.height,
            work_buffers: 0,
            in_place: InPlace::new::<I>(
                (
                    PinnedRows::of(&image, 0),
                    PinnedRows::of(&output, part.start),
                ),
                launch.mode,
            ),
            part,
            row_len: shape.pitch,
            halo: (mask.top, mask.rows - 1 - mask.top),
        };
        let work = |device_mask| ImageBands {
            image,
            shape,
            mask,
            launch,
            native: native.as_ref(),
            device_mask,
            output: PhantomData::<O>,
        };
        self.run_host_call(call, work, |band, rows| {
            let kept = band.output.start - first..band.output.end - first;
            let mut kept = output.slice_axis_mut(Axis(0), Slice::from(kept));
            kept.axis_iter_mut(Axis(0))
                .into_par_iter()
                .with_min_len(MIN_ROWS_PER_TASK)
                .zip(rows.par_chunks(shape.pitch))
                .for_each(|(mut row, source)| copy_into_view(&mut row, source));
        })
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
