//! The host pipeline: an input split into bands (rows with their halos in 2D, chunks with
//! their halos in 1D) that flow through the engine's slots, so that while band `i` computes,
//! band `i + 1` is packed and uploaded and band `i - 1` downloads and is unpacked.
//!
//! A band's buffer holds its output rows and the mask's halo rows on either side, the rows past
//! the input's ends folded by the boundary mode on the host, so the kernel never needs a row
//! outside the buffer for the rows the band keeps: every boundary mode works, `Wrap`, `Reflect`
//! and `Mirror` included, and a mask may be taller than a band. An input that fits one band runs
//! as one buffer of exactly its rows, the boundary left to the kernel.

use crate::cache;
use crate::element::{Element, Real, narrowing, widening};
use crate::engine::Engine;
use crate::error::{ConvError, DriverContext, Result};
use crate::options::BoundaryMode;
use crate::pinned_rows::{self, Fill, PinnedRows};
use crate::plan::LaunchPlan;
use crate::registry::KernelId;
use crate::session::Session;
use crate::staging::{HostTimes, Slot, SlotBytes};
use cudarc::driver::{
    CudaEvent, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtrMut, LaunchConfig,
    PushKernelArg,
};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// Device memory left free for the driver and the kernels' modules when the engine has no cap.
const DEVICE_HEADROOM_BYTES: usize = 256 << 20;

/// Rows of one band: it keeps `output` (rows of the input) and computes them from buffer rows
/// `output.start - halo.0 .. output.end + halo.1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Band {
    pub(crate) output: Range<usize>,
    pub(crate) halo: (usize, usize),
}

impl Band {
    /// Rows of the band's buffer.
    pub(crate) fn buffer_rows(&self) -> usize {
        self.halo.0 + self.output.len() + self.halo.1
    }

    /// The input row (possibly outside the input) of buffer row 0.
    pub(crate) fn first_buffer_row(&self) -> i64 {
        self.output.start as i64 - self.halo.0 as i64
    }
}

/// Bytes of input a band aims at: large enough that a band's copies run at full speed and its
/// kernel fills the GPU, small enough that an image of a few hundred MiB splits into enough
/// bands to overlap packing, copies and unpacking.
pub(crate) const TARGET_BAND_BYTES: usize = 32 << 20;

/// Slots the pipeline cycles through: one band packing, one computing, one unpacking.
pub(crate) const PIPELINE_SLOTS: usize = 3;

/// How a host call splits `rows` rows of `row_len` elements for a mask with `halo` rows before
/// and after the output row: the bands, and the slots and elements per slot they take. A
/// `whole` input that fits one band runs as one buffer of exactly its rows; a part of an input
/// always takes its halo rows.
/// `budget` is the device memory the call may hold (every device buffer of every slot), each
/// element taking `device_bytes` bytes across a slot's device buffers and `input_bytes` in the
/// upload. Bands whose work `shares_rows` (copies its halo rows from the previous band's
/// buffer) take half of `TARGET_BAND_BYTES` in output rows, others all of it in output and halo
/// rows together.
///
/// # Errors
/// [`ConvError::OutOfMemory`] when not even one output row and its halo fit the budget.
pub(crate) fn plan_bands(
    rows: usize,
    row_len: usize,
    halo: (usize, usize),
    budget: usize,
    (device_bytes, input_bytes): (usize, usize),
    (whole, shares_rows): (bool, bool),
) -> Result<(Vec<Band>, usize, usize)> {
    let row_bytes = row_len.max(1).saturating_mul(device_bytes);
    let rows_in = |slots: usize| budget / slots / row_bytes;
    let target_rows = (TARGET_BAND_BYTES / row_len.max(1) / input_bytes.max(1)).max(1);
    if whole && rows <= target_rows && rows <= rows_in(1) {
        let band = Band {
            output: 0..rows,
            halo: (0, 0),
        };
        return Ok((vec![band], 1, rows * row_len));
    }
    let halo_rows = halo.0 + halo.1;
    for slots in (1..=PIPELINE_SLOTS).rev() {
        let fit = rows_in(slots).saturating_sub(halo_rows);
        if fit == 0 {
            continue;
        }
        // Bands that share rows upload only their own: half the target keeps enough bands
        // in flight (PERFORMANCE.md, N-D host calls).
        let target = if shares_rows {
            (target_rows / 2).max(1)
        } else {
            target_rows.saturating_sub(halo_rows).max(1)
        };
        let band_rows = fit.min(target);
        let bands: Vec<Band> = (0..rows)
            .step_by(band_rows)
            .map(|start| Band {
                output: start..(start + band_rows).min(rows),
                halo,
            })
            .collect();
        let slots = slots.min(bands.len());
        return Ok((bands, slots, (band_rows + halo_rows) * row_len));
    }
    Err(ConvError::OutOfMemory {
        requested: (halo_rows + 1).saturating_mul(row_bytes),
        free: budget,
        total: budget,
    })
}

/// The host arrays a call copies in place ([`crate::PinnedArray`] views: no packing, no
/// unpacking), and the boundary mode that folds the rows past the input's ends for them, its
/// constant in the input's type.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InPlace {
    pub(crate) input: Option<PinnedRows>,
    pub(crate) output: Option<PinnedRows>,
    pub(crate) mode: BoundaryMode,
    pub(crate) constant: Fill,
}

impl InPlace {
    /// `input` and `output` (page-locked rows or not) of a call in `mode` on `I`, the input
    /// only where `cuMemset` can write the mode's constant in `I` (an `f64` constant: zero).
    pub(crate) fn new<I: Element>(
        (input, output): (Option<PinnedRows>, Option<PinnedRows>),
        mode: BoundaryMode,
    ) -> Self {
        let value = I::from_f64(mode.constant().map_or(0.0, f64::from));
        let constant = Fill::of(value);
        Self {
            input: input.filter(|_| constant.is_some()),
            output,
            mode,
            constant: constant.unwrap_or(Fill::ZERO),
        }
    }
}

/// What one host call does to each band.
pub(crate) trait BandWork: Sync {
    /// The element type of the input, packed into the upload buffers.
    type Input: Element;
    /// The element type of the output, unpacked from the download buffers.
    type Output: Element<Real = <Self::Input as Element>::Real>;
    /// Fills `buffer` (the band's buffer rows, `row_len` elements each) from the input; rows
    /// past the input's ends folded by the boundary mode, or its constant.
    fn pack(&self, band: &Band, buffer: &mut [Self::Input]);
    /// Whether a band copies the rows its buffer shares with the previous band's on the device
    /// rather than packing and uploading them again (worth it where halos are many rows of a
    /// band: the N-D filters' bands of large rows).
    fn reuses_rows(&self) -> bool {
        false
    }
    /// Whether the kernels read `Input` and write `Output` themselves; else they read and
    /// write the `Real` type, and narrower types are converted on the device.
    fn native(&self) -> bool {
        false
    }
    /// Enqueues the kernels of `band` on `stream`, reading `input` (the band's buffer rows, of
    /// the input's `Real` type, or of `Input` where [`BandWork::native`]) and writing `output`
    /// (the same rows, of the `Real` type or `Output`, poisoned with NaN before).
    fn launch(
        &self,
        session: &Session<'_>,
        stream: &Arc<CudaStream>,
        buffers: (&CudaView<'_, u8>, &mut CudaViewMut<'_, u8>),
        band: &Band,
    ) -> Result<()>;
    /// Describes the band's work for an error message.
    fn describe(&self, band: &Band) -> String;
}

/// The rows of band `index` that the previous band's buffer holds too, which the band copies on
/// the device instead of uploading them again (where the work asks for it and the two bands
/// are in different slots): buffer rows `0..kept`, the previous buffer's rows `from..`; and
/// the rows it uploads, as a band of their own.
#[derive(Clone, Debug)]
struct Fresh {
    kept: usize,
    from: usize,
    rows: Band,
}

fn fresh_rows(bands: &[Band], index: usize, reuse: bool) -> Fresh {
    let band = &bands[index];
    let (first, end) = (
        band.first_buffer_row(),
        band.first_buffer_row() + band.buffer_rows() as i64,
    );
    let whole = Fresh {
        kept: 0,
        from: 0,
        rows: band.clone(),
    };
    let Some(previous) = index.checked_sub(1).map(|i| &bands[i]).filter(|_| reuse) else {
        return whole;
    };
    let previous_first = previous.first_buffer_row();
    let previous_end = previous_first + previous.buffer_rows() as i64;
    if first < previous_first || previous_end <= first {
        return whole;
    }
    let shared_end = previous_end.min(end);
    Fresh {
        kept: (shared_end - first) as usize,
        from: (first - previous_first) as usize,
        rows: Band {
            output: shared_end as usize..end as usize,
            halo: (0, 0),
        },
    }
}

/// Slot `a` to fill and slot `b` to read from (distinct).
fn slot_pair(slots: &mut [Slot], a: usize, b: usize) -> (&mut Slot, &Slot) {
    if a < b {
        let (low, high) = slots.split_at_mut(b);
        (&mut low[a], &high[0])
    } else {
        let (low, high) = slots.split_at_mut(a);
        (&mut high[0], &low[b])
    }
}

impl Session<'_> {
    /// Runs `work` over `bands` of an input of `rows` rows (extended by `constant` under a
    /// `Constant` boundary mode) through `slots`; `unpack(band, rows)`
    /// receives each band's output rows (`band.output.len() * row_len` elements), in band order. A slot's band is
    /// unpacked while the next band packs into the same slot's upload buffer, on the thread pool;
    /// `in_place` arrays are copied instead of packed or unpacked. Where the work asks for it,
    /// a band copies the rows its buffer shares with the previous band's on the device and
    /// packs and uploads only the others.
    ///
    /// # Errors
    /// Driver errors and kernel faults (recorded as the device's fault when sticky). Every slot's
    /// stream is idle when this returns, whatever happened.
    pub(crate) fn run_bands<W: BandWork>(
        &self,
        slots: &mut [Slot],
        (bands, rows, constant): (&[Band], usize, Option<f32>),
        row_len: usize,
        work: &W,
        mut unpack: impl FnMut(&Band, &[W::Output]) + Send,
        (in_place, times): (InPlace, &mut HostTimes),
    ) -> Result<()> {
        let count = slots.len().max(1);
        let reuse = work.reuses_rows() && count > 1;
        // Beside a call on every other lane, a call copies on its lane's thread, and leaves its
        // staging in the caches: they hold the other calls' staging too.
        let copies = in_place.input.is_none() || in_place.output.is_none();
        let copier = copies.then(|| self.copier()).flatten();
        let on_copier = |job: &mut (dyn FnMut() + Send)| match copier {
            Some(pool) => pool.install(job),
            None => job(),
        };
        let evict = copier.is_none();
        // A page-locked array's band is copied in place: nothing to pack, unpack or evict.
        let mut unpack = |band: &Band, rows: &[W::Output]| {
            if in_place.output.is_none() {
                unpack(band, rows);
                if evict {
                    cache::evict_small(rows);
                }
            }
        };
        let pack = |band: &Band, buffer: &mut [W::Input]| {
            if in_place.input.is_none() {
                work.pack(band, buffer);
                if evict {
                    cache::evict_small(buffer);
                }
            }
        };
        times.bands = bands.len();
        let result = (|| {
            for i in 0..bands.len() {
                let fresh = fresh_rows(bands, i, reuse);
                let elements = fresh.rows.buffer_rows() * row_len;
                let slot = &mut slots[i % count];
                if i >= count {
                    let done = &bands[i - count];
                    let waited = Instant::now();
                    self.finish(&slot.stream, || work.describe(done))?;
                    times.wait_ms += ms_since(waited);
                    self.add_kernel_time(&slot.timing)?;
                    let started = Instant::now();
                    let (upload, download) = (&mut slot.upload, &slot.download);
                    let kept = &download.as_slice::<W::Output>()[..done.output.len() * row_len];
                    let packed = &mut upload.as_mut_slice::<W::Input>()[..elements];
                    on_copier(&mut || {
                        rayon::join(|| pack(&fresh.rows, packed), || unpack(done, kept));
                    });
                    times.pack_unpack_ms += ms_since(started);
                } else {
                    let started = Instant::now();
                    let packed = &mut slot.upload.as_mut_slice::<W::Input>()[..elements];
                    on_copier(&mut || pack(&fresh.rows, packed));
                    times.first_pack_ms += ms_since(started);
                }
                let (slot, previous) = match fresh.kept {
                    0 => (&mut slots[i % count], None),
                    _ => {
                        let (slot, previous) = slot_pair(slots, i % count, (i - 1) % count);
                        (slot, Some(previous))
                    }
                };
                // A later band copies rows from this one's input only where rows are reused.
                let feeds_next = reuse && i + 1 < bands.len();
                let band = (&bands[i], &fresh, rows, constant);
                let read =
                    self.submit((slot, previous), band, row_len, work, in_place, feeds_next)?;
                if read.is_some() {
                    slots[(i - 1) % count].input_read = read;
                }
            }
            let first = bands.len().saturating_sub(count);
            for (i, done) in bands.iter().enumerate().skip(first) {
                let slot = &slots[i % count];
                let waited = Instant::now();
                self.finish(&slot.stream, || work.describe(done))?;
                times.wait_ms += ms_since(waited);
                self.add_kernel_time(&slot.timing)?;
                let started = Instant::now();
                let kept = &slot.download.as_slice::<W::Output>()[..done.output.len() * row_len];
                on_copier(&mut || unpack(done, kept));
                times.last_unpack_ms += ms_since(started);
            }
            Ok(())
        })();
        if result.is_err() {
            // Nothing may still read or write a slot's buffers when the slots go back (work
            // that runs its kernels on the session's stream included).
            let _ = self.stream().synchronize();
            for slot in slots.iter() {
                let _ = slot.stream.synchronize();
            }
        }
        result
    }

    /// Enqueues on `slot` the band's input: the rows it shares with the `previous` slot's band
    /// copied from there, the others uploaded (packed in `slot`'s upload buffer, or from a
    /// page-locked input in place) and converted to the kernels' type where the input is
    /// narrower; where `feeds_next`, an event the next band's copy of shared rows waits for.
    fn enqueue_input<W: BandWork>(
        &self,
        (slot, previous): (&mut Slot, Option<&Slot>),
        (band, fresh, rows, constant): (&Band, &Fresh, usize, Option<f32>),
        row_len: usize,
        work: &W,
        in_place: InPlace,
        feeds_next: bool,
    ) -> Result<()> {
        let stream = slot.stream.clone();
        let input_size = size_of::<W::Input>();
        let widen = (!work.native()).then(widening::<W::Input>).flatten();
        // Bytes of an element in `slot.input`: the kernels read `W::Input` natively, else `Real`.
        let kernel_size = if widen.is_some() {
            size_of::<<W::Input as Element>::Real>()
        } else {
            input_size
        };
        // This slot's buffers were last read by the next band of the previous round.
        if let Some(read) = slot.input_read.take() {
            stream.wait(&read).context(|| work.describe(band))?;
        }
        if let Some(previous) = previous {
            // Recorded when the previous band was enqueued, just before this one.
            if let Some(ready) = &previous.input_ready {
                stream.wait(ready).context(|| work.describe(band))?;
            }
            let bytes = fresh.kept * row_len * kernel_size;
            let from = fresh.from * row_len * kernel_size;
            stream
                .memcpy_dtod(
                    &previous.input.slice(from..from + bytes),
                    &mut slot.input.slice_mut(..bytes),
                )
                .context(|| format!("copying the shared rows of {}", work.describe(band)))?;
        }
        let offset = fresh.kept * row_len;
        let elements = fresh.rows.buffer_rows() * row_len;
        let landing = match (widen, slot.scratch.as_mut()) {
            (Some(_), Some(scratch)) => scratch,
            _ => &mut slot.input,
        };
        let mut landing = landing.slice_mut(offset * input_size..(offset + elements) * input_size);
        match in_place.input {
            // Every row of the band's buffer was copied from the previous band's.
            _ if elements == 0 => {}
            // SAFETY: the call's input array, page-locked, borrowed until the call returns,
            // after every slot's stream is synchronised; `landing` holds the fresh rows.
            Some(host) => unsafe {
                let pitch = row_len * input_size;
                let rows = (&fresh.rows, rows, in_place.mode, in_place.constant);
                pinned_rows::upload(&stream, host, rows, &mut landing, pitch)?
            },
            None => stream
                .memcpy_htod(
                    &slot.upload.as_slice::<u8>()[..elements * input_size],
                    &mut landing,
                )
                .context(|| format!("uploading {}", work.describe(band)))?,
        }
        if let (Some(widen), Some(scratch), true) = (widen, slot.scratch.as_ref(), elements > 0) {
            let (from, to) = (offset * input_size, offset * kernel_size);
            let source = scratch.slice(from..from + elements * input_size);
            let mut target = slot.input.slice_mut(to..to + elements * kernel_size);
            self.convert(&stream, widen, (&source, &mut target), elements)?;
            // An input converted on the device gets its rows past the input's ends set to the
            // constant after the conversion: the input's type may not hold it (-1.5 in `u8`).
            if let Some(constant) = constant {
                let first = band.first_buffer_row();
                let before = (-first).clamp(0, band.buffer_rows() as i64) as usize;
                let after = (first + band.buffer_rows() as i64 - rows as i64).max(0) as usize;
                let after = after.min(band.buffer_rows() - before);
                for ghost in [0..before, band.buffer_rows() - after..band.buffer_rows()] {
                    let range = ghost.start * row_len * 4..ghost.end * row_len * 4;
                    self.fill_f32(&stream, &mut slot.input, range, constant)?;
                }
            }
        }
        slot.input_ready = match feeds_next {
            true => Some(stream.record_event(None).context(|| work.describe(band))?),
            false => None,
        };
        Ok(())
    }

    /// Enqueues band `band` on `slot`: its input ([`Session::enqueue_input`]), its kernels
    /// between the slot's timing events, the output's conversion to its type where narrower,
    /// and the download of the rows it keeps. Returns, where the band copied rows from the
    /// `previous` slot, an event after that copy, which that slot's next upload waits for.
    fn submit<W: BandWork>(
        &self,
        (slot, previous): (&mut Slot, Option<&Slot>),
        (band, fresh, rows, constant): (&Band, &Fresh, usize, Option<f32>),
        row_len: usize,
        work: &W,
        in_place: InPlace,
        feeds_next: bool,
    ) -> Result<Option<CudaEvent>> {
        let elements = band.buffer_rows() * row_len;
        let kept = band.halo.0 * row_len..(band.halo.0 + band.output.len()) * row_len;
        let real_bytes = elements * size_of::<<W::Input as Element>::Real>();
        let narrow = (!work.native()).then(narrowing::<W::Output>).flatten();
        // The slot's stream was synchronised since its buffers were last used, so nothing
        // reads or writes them; the copies below are the next users, in stream order.
        let shared = (band, fresh, rows, constant);
        self.enqueue_input(
            (slot, previous),
            shared,
            row_len,
            work,
            in_place,
            feeds_next,
        )?;
        let read = match previous {
            Some(_) => Some(
                slot.stream
                    .record_event(None)
                    .context(|| work.describe(band))?,
            ),
            None => None,
        };
        let stream = &slot.stream;
        self.poison(stream, &mut slot.output, real_bytes)?;
        let describe = || format!("timing {}", work.describe(band));
        slot.timing.0.record(stream).context(describe)?;
        work.launch(
            self,
            stream,
            (&slot.input.as_view(), &mut slot.output.as_view_mut()),
            band,
        )?;
        slot.timing.1.record(stream).context(describe)?;
        let output_size = size_of::<W::Output>();
        let leaving = match (narrow, slot.scratch.as_mut()) {
            (Some(narrow), Some(scratch)) => {
                let source = slot.output.slice(..real_bytes);
                self.convert(
                    stream,
                    narrow,
                    (&source, &mut scratch.as_view_mut()),
                    elements,
                )?;
                &*scratch
            }
            _ => &slot.output,
        };
        let kept_bytes = kept.start * output_size..kept.end * output_size;
        let kept_len = kept_bytes.len();
        match in_place.output {
            // SAFETY: the call's output array, page-locked, borrowed until the call returns,
            // after every slot's stream is synchronised; `leaving` holds the band's rows.
            Some(host) => unsafe {
                pinned_rows::download(stream, host, band, leaving, row_len * output_size)?
            },
            None => stream
                .memcpy_dtoh(
                    &leaving.slice(kept_bytes),
                    &mut slot.download.as_mut_slice::<u8>()[..kept_len],
                )
                .context(|| format!("downloading {}", work.describe(band)))?,
        }
        Ok(read)
    }

    /// Sets the bytes `range` of `buffer` to the `f32` value `value`, in `stream`'s order.
    fn fill_f32(
        &self,
        stream: &Arc<CudaStream>,
        buffer: &mut CudaSlice<u8>,
        range: Range<usize>,
        value: f32,
    ) -> Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        let words = range.len() / size_of::<f32>();
        let mut rows = buffer.slice_mut(range);
        let (pointer, _record) = rows.device_ptr_mut(stream);
        // SAFETY: `pointer` addresses the `words * 4` bytes of `rows`, inside `buffer`, used in
        // `stream`'s order; the range starts at a multiple of 4 bytes.
        unsafe {
            cudarc::driver::sys::cuMemsetD32Async(
                pointer,
                value.to_bits(),
                words,
                stream.cu_stream(),
            )
        }
        .result()
        .context(|| "setting the constant's rows".into())
    }

    /// Enqueues the conversion kernel `entry` of `elements` elements from `from` into `to`.
    pub(crate) fn convert<A, B>(
        &self,
        stream: &Arc<CudaStream>,
        entry: KernelId,
        (from, to): (&CudaView<'_, A>, &mut CudaViewMut<'_, B>),
        elements: usize,
    ) -> Result<()> {
        const THREADS: u32 = 256;
        let blocks = elements.div_ceil(THREADS as usize).clamp(1, 1 << 16) as u32;
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let len = elements as u64;
        // SAFETY: `from` holds `elements` elements of the entry point's source type and `to` as
        // many of its target type (the callers' buffers hold `elements` of the kernels' `f32`
        // or of the element type converted); distinct buffers, used in `stream`'s order.
        unsafe {
            self.launch_async(stream, entry, config, |args| {
                args.arg(from);
                args.arg(&mut *to);
                args.arg(&len);
            })
        }
    }
}

/// One host call as the pipeline sees it: the plan and taps of its kernel (none where the work
/// places its own masks, as the N-D filters' passes do), and its input as
/// `rows` rows of `row_len` elements (a signal: rows of one element) with a mask reaching
/// `halo` rows before and after an output row, of which the call computes the rows `part`;
/// `constant` is the boundary mode's constant, for `Constant`.
pub(crate) struct HostCall<'a, R> {
    pub(crate) mask: Option<(&'a LaunchPlan, &'a [R])>,
    pub(crate) constant: Option<f32>,
    pub(crate) rows: usize,
    pub(crate) part: Range<usize>,
    pub(crate) row_len: usize,
    pub(crate) halo: (usize, usize),
    pub(crate) in_place: InPlace,
    /// Device buffers of a band's size in the `Real` type that the work allocates besides the
    /// slots' (the N-D filters' temporaries), counted against the budget.
    pub(crate) work_buffers: usize,
}

impl Engine {
    /// Runs a host call through the pipeline: places the mask, splits the input into as many
    /// bands as the device memory the engine may use and the band size ask for, and runs the
    /// work `work(device_mask)` makes over them; `unpack` receives each band's kept rows.
    /// Records the call's kernel time and [`HostTimes`].
    ///
    /// # Errors
    /// [`ConvError::OutOfMemory`] when not even one row and the halo fit; as
    /// [`Session::run_bands`].
    pub(crate) fn run_host_call<R: Real, W: BandWork<Input: Element<Real = R>>>(
        &self,
        call: HostCall<'_, R>,
        work: impl FnOnce(Option<CudaSlice<R>>) -> W,
        unpack: impl FnMut(&Band, &[W::Output]) + Send,
    ) -> Result<()> {
        let started = Instant::now();
        let mut session = self.host_session()?;
        let device_mask = match call.mask {
            Some((plan, taps)) => session.place_mask(plan, taps)?,
            None => None,
        };
        let mask_bytes = match (&device_mask, call.mask) {
            (Some(_), Some((_, taps))) => size_of_val(taps),
            _ => 0,
        };
        let limit = self
            .device_memory_limit()
            .map(|limit| limit / self.open_lanes());
        let work = work(device_mask);
        // Input and output in the kernels' type, and a conversion buffer where either is
        // narrower and converted.
        let converts = !work.native()
            && (widening::<W::Input>().is_some() || narrowing::<W::Output>().is_some());
        let buffers = 2 + usize::from(converts) + call.work_buffers;
        // The page-locked buffers carry the band in the types that cross the host link.
        let link_bytes = size_of::<W::Input>().max(size_of::<W::Output>());
        let plan = |budget: usize| -> Result<(Vec<Band>, usize, SlotBytes)> {
            let (bands, slots, elements) = plan_bands(
                call.part.len(),
                call.row_len,
                call.halo,
                budget.saturating_sub(mask_bytes),
                (buffers * size_of::<R>(), size_of::<W::Input>()),
                (call.part == (0..call.rows), work.reuses_rows()),
            )?;
            let bytes = SlotBytes {
                host: elements * link_bytes,
                device: elements * size_of::<R>(),
            };
            Ok((bands, slots, bytes))
        };
        // The device's free memory bounds the plan only where the staging must grow: a call
        // that the staging holds already asks the driver nothing.
        let (mut bands, slots, bytes) = match plan(limit.unwrap_or(usize::MAX))? {
            (bands, slots, bytes) if session.holds_slots(slots, bytes, converts) => {
                (bands, slots, bytes)
            }
            _ => plan(session.pipeline_budget(limit, DEVICE_HEADROOM_BYTES)?)?,
        };
        for band in &mut bands {
            band.output = band.output.start + call.part.start..band.output.end + call.part.start;
        }
        let mut slots = session.take_slots(slots, bytes, converts)?;
        // The bands run on the slots' streams: after the mask's upload.
        session.order_after_session_stream(&slots)?;
        let mut times = HostTimes {
            setup_ms: ms_since(started),
            ..HostTimes::default()
        };
        let in_place = call.in_place;
        times.in_place = (in_place.input.is_some(), in_place.output.is_some());
        let result = session.run_bands(
            &mut slots,
            (&bands, call.rows, call.constant),
            call.row_len,
            &work,
            unpack,
            (in_place, &mut times),
        );
        session.return_slots(slots);
        result?;
        self.record_host_times(times);
        Ok(())
    }
}

/// Milliseconds since `start`.
pub(crate) fn ms_since(start: Instant) -> f32 {
    start.elapsed().as_secs_f32() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bands cover every row once, each buffer within the slot size and the budget.
    #[test]
    fn bands_cover_the_rows_within_the_budget() {
        for (rows, row_len, halo, budget) in [
            (8192, 8192, (2, 2), usize::MAX),
            (100, 64, (15, 15), 3 * 2 * 4 * 64 * 40),
            (10, 64, (40, 40), 2 * 4 * 64 * 100),
            (5000, 1, (3, 3), 1000),
        ] {
            let (bands, slots, elements) =
                plan_bands(rows, row_len, halo, budget, (8, 4), (true, false)).unwrap();
            assert!((1..=PIPELINE_SLOTS).contains(&slots));
            assert!(slots * 2 * elements * 4 <= budget, "{rows} x {row_len}");
            let mut next = 0;
            for band in &bands {
                assert_eq!(band.output.start, next);
                assert!(band.buffer_rows() * row_len <= elements);
                next = band.output.end;
            }
            assert_eq!(next, rows);
        }
        // One band: the whole input, the boundary left to the kernel; a part keeps its halo.
        let (bands, slots, _) =
            plan_bands(512, 512 * 3, (2, 2), usize::MAX, (8, 4), (true, false)).unwrap();
        assert_eq!((bands.len(), slots, bands[0].halo), (1, 1, (0, 0)));
        let (bands, _, _) =
            plan_bands(512, 512 * 3, (2, 2), usize::MAX, (8, 4), (false, false)).unwrap();
        assert_eq!((bands.len(), bands[0].halo), (1, (2, 2)));
        // Bands that copy the rows they share with the previous one upload every buffer row
        // once: kept rows come from the previous buffer's matching rows.
        let (bands, _, _) =
            plan_bands(100, 64, (7, 5), 3 * 8 * 64 * 30, (8, 4), (true, false)).unwrap();
        assert!(bands.len() > 3);
        let mut uploaded = Vec::new();
        for i in 0..bands.len() {
            let fresh = fresh_rows(&bands, i, true);
            let (band, rows) = (&bands[i], &fresh.rows);
            assert_eq!(
                fresh.kept + rows.buffer_rows(),
                band.buffer_rows(),
                "{band:?}"
            );
            assert_eq!(
                rows.first_buffer_row(),
                band.first_buffer_row() + fresh.kept as i64
            );
            if i > 0 && fresh.kept > 0 {
                let previous = bands[i - 1].first_buffer_row();
                assert_eq!(previous + fresh.from as i64, band.first_buffer_row());
            }
            uploaded.extend(
                rows.first_buffer_row()..rows.first_buffer_row() + rows.buffer_rows() as i64,
            );
            assert_eq!(fresh_rows(&bands, i, false).kept, 0);
        }
        assert_eq!(uploaded, (-7..105).collect::<Vec<_>>());
        // Not even one row and its halo: out of memory.
        assert!(matches!(
            plan_bands(100, 1000, (10, 10), 1000, (8, 4), (true, false)),
            Err(ConvError::OutOfMemory { .. })
        ));
    }
}
