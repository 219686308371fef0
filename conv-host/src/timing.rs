//! Benchmark support (cargo feature `bench`): the copy rooflines the benchmark measures beside
//! the kernels, timed with CUDA events on the engine's stream, and the host's copies of a host
//! call alone.

use crate::abi::{SM_COPY_QUADS_PER_THREAD, SM_COPY_THREADS};
use crate::cache::copy_streaming;
use crate::element::Element;
use crate::engine::Engine;
use crate::error::{ConvError, DriverContext, Result};
use crate::layout::{copy_unpacked, try_zeros};
use crate::pinned::PinnedBuffer;
use crate::pipeline::{TARGET_BAND_BYTES, ms_since};
use crate::registry::{Family, KernelId};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use ndarray::Ix1;
use rayon::prelude::*;
use std::time::Instant;

/// One run of [`Engine::time_pinned_transfers`], in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct PinnedTransfers {
    /// The upload alone.
    pub upload_ms: f32,
    /// The download alone.
    pub download_ms: f32,
    /// Both at once, on two streams: from the start of the first to the end of the last. This
    /// is the transfer floor of a host -> host call that uploads and downloads those bytes.
    pub overlapped_ms: f32,
}

impl Engine {
    /// Benchmark support: the device time of `runs` calls of `call`, operations on device
    /// arrays that enqueue their work on the engine's stream, each between two CUDA events.
    ///
    /// # Errors
    /// The first error of `call`; [`ConvError::Driver`] for the events and the wait.
    pub fn time_device_calls(
        &self,
        runs: usize,
        mut call: impl FnMut() -> Result<()>,
    ) -> Result<Vec<f32>> {
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let event = || {
            self.stream
                .record_event(timing)
                .context(|| "timing device calls".into())
        };
        let mut events = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = event()?;
            call()?;
            events.push((start, event()?));
        }
        self.synchronize()?;
        events
            .iter()
            .map(|(start, end)| {
                start
                    .elapsed_ms(end)
                    .context(|| "reading the device calls' times".into())
            })
            .collect()
    }

    /// Benchmark support: times `runs` rounds of copies through page-locked host memory with
    /// CUDA events: an upload of `upload_len` `f32`, a download of `download_len`, then both
    /// at once on two streams.
    ///
    /// # Errors
    /// [`ConvError::OutOfMemory`], [`ConvError::HostOutOfMemory`], [`ConvError::Driver`].
    pub fn time_pinned_transfers(
        &self,
        upload_len: usize,
        download_len: usize,
        runs: usize,
    ) -> Result<Vec<PinnedTransfers>> {
        let session = self.session()?;
        session.reserve((upload_len + download_len) * size_of::<f32>())?;
        let source = PinnedBuffer::new(&self.context, upload_len * size_of::<f32>())?;
        let mut target = PinnedBuffer::new(&self.context, download_len * size_of::<f32>())?;
        let mut device_in = session.alloc_poisoned(upload_len.max(1))?;
        let device_out = session.alloc_poisoned(download_len.max(1))?;
        self.stream
            .synchronize()
            .context(|| "allocating the transfer buffers".into())?;
        let describe = || format!("pinned transfers of {upload_len} and {download_len} floats");
        let up = self.context.new_stream().context(describe)?;
        let down = self.context.new_stream().context(describe)?;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = up.record_event(timing).context(describe)?;
            up.memcpy_htod(
                source.as_slice::<f32>(),
                &mut device_in.slice_mut(..upload_len),
            )
            .context(describe)?;
            let end = up.record_event(timing).context(describe)?;
            end.synchronize().context(describe)?;
            let upload_ms = start.elapsed_ms(&end).context(describe)?;
            let start = down.record_event(timing).context(describe)?;
            down.memcpy_dtoh(
                &device_out.slice(..download_len),
                target.as_mut_slice::<f32>(),
            )
            .context(describe)?;
            let end = down.record_event(timing).context(describe)?;
            end.synchronize().context(describe)?;
            let download_ms = start.elapsed_ms(&end).context(describe)?;
            let start = up.record_event(timing).context(describe)?;
            down.wait(&start).context(describe)?;
            up.memcpy_htod(
                source.as_slice::<f32>(),
                &mut device_in.slice_mut(..upload_len),
            )
            .context(describe)?;
            down.memcpy_dtoh(
                &device_out.slice(..download_len),
                target.as_mut_slice::<f32>(),
            )
            .context(describe)?;
            let downloaded = down.record_event(timing).context(describe)?;
            up.wait(&downloaded).context(describe)?;
            let end = up.record_event(timing).context(describe)?;
            end.synchronize().context(describe)?;
            times.push(PinnedTransfers {
                upload_ms,
                download_ms,
                overlapped_ms: start.elapsed_ms(&end).context(describe)?,
            });
        }
        Ok(times)
    }

    /// Benchmark support: the host's share of a host -> host call whose input and output are
    /// `input`'s size, timed without the GPU: bands of the pipeline's size packed into
    /// page-locked memory with the pipeline's copies, each while the band before is unpacked
    /// into the output, on the thread pool, as the host
    /// calls do; into a new output each run (its pages faulted in by the unpacking) when
    /// `new_output`, else into one output reused. Milliseconds per run.
    ///
    /// # Errors
    /// [`ConvError::HostOutOfMemory`], [`ConvError::Driver`] (the page-locked buffers).
    pub fn time_host_copies<T: Element>(
        &self,
        input: &[T],
        new_output: bool,
        runs: usize,
    ) -> Result<Vec<f32>> {
        const TASK_BYTES: usize = 512 << 10;
        let band = (TARGET_BAND_BYTES / size_of::<T>()).max(1);
        let task = (TASK_BYTES / size_of::<T>()).max(1);
        let mut staging = [
            PinnedBuffer::new(&self.context, band * size_of::<T>())?,
            PinnedBuffer::new(&self.context, band * size_of::<T>())?,
        ];
        let mut reused = match new_output {
            true => None,
            false => Some(try_zeros::<T, _>(Ix1(input.len()))?),
        };
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let started = Instant::now();
            let mut fresh;
            let output = match reused.as_mut() {
                Some(output) => output,
                None => {
                    fresh = try_zeros::<T, _>(Ix1(input.len()))?;
                    &mut fresh
                }
            };
            let output = output.as_slice_mut().unwrap_or_default();
            let mut kept = output.chunks_mut(band);
            let bands = input.chunks(band);
            for (i, packed) in bands.map(Some).chain([None]).enumerate() {
                let [even, odd] = &mut staging;
                let (packing, unpacking) = match i % 2 {
                    0 => (even, &*odd),
                    _ => (odd, &*even),
                };
                let unpacked = if i > 0 { kept.next() } else { None };
                rayon::join(
                    || {
                        if let Some(source) = packed {
                            packing.as_mut_slice::<T>()[..source.len()]
                                .par_chunks_mut(task)
                                .zip(source.par_chunks(task))
                                .for_each(|(to, from)| copy_streaming(to, from));
                        }
                    },
                    || {
                        if let Some(target) = unpacked {
                            let from = &unpacking.as_slice::<T>()[..target.len()];
                            target
                                .par_chunks_mut(task)
                                .zip(from.par_chunks(task))
                                .for_each(|(to, from)| copy_unpacked(to, from));
                        }
                    },
                );
            }
            times.push(ms_since(started));
        }
        Ok(times)
    }

    /// Benchmark support: times `runs` device-to-device copies of `len` `f32` (one buffer to
    /// another, on the engine's stream) with CUDA events, in milliseconds. The copy bandwidth,
    /// `2 * 4 * len / time` (bytes read plus bytes written), is the memory roofline a
    /// convolution kernel, which reads its input and writes its output once, can approach.
    ///
    /// # Errors
    /// [`ConvError::OutOfMemory`], [`ConvError::Driver`].
    pub fn time_device_copy(&self, len: usize, runs: usize) -> Result<Vec<f32>> {
        let session = self.session()?;
        session.reserve(2 * len * size_of::<f32>())?;
        let source = session.alloc_poisoned(len)?;
        let mut destination = session.alloc_poisoned(len)?;
        let stream = &self.stream;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let describe = || format!("device-to-device copy of {len} floats");
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = stream.record_event(timing).context(describe)?;
            stream
                .memcpy_dtod(&source, &mut destination)
                .context(describe)?;
            let end = stream.record_event(timing).context(describe)?;
            end.synchronize().context(describe)?;
            times.push(start.elapsed_ms(&end).context(describe)?);
        }
        Ok(times)
    }

    /// Benchmark support: copies `input` to the device, then copies it on the device `runs`
    /// times with the SM copy kernel (`sm_copy`: each element read once and written once by
    /// 16-byte accesses, nothing else), timed with CUDA events. Returns the copy, downloaded,
    /// and each run's time in milliseconds. `2 * 4 * len / time` is the memory roofline of a
    /// kernel on the SMs, beside [`Engine::time_device_copy`]'s copy engines.
    ///
    /// # Errors
    /// [`ConvError::InvalidLaunch`] if `input.len()` is not a multiple of 4 or needs more
    /// blocks than one grid holds; [`ConvError::OutOfMemory`], [`ConvError::Driver`].
    pub fn time_sm_copy(&self, input: &[f32], runs: usize) -> Result<(Vec<f32>, Vec<f32>)> {
        let invalid = ConvError::invalid_launch("sm_copy");
        if !input.len().is_multiple_of(4) {
            return Err(invalid(format!(
                "copies whole 16-byte quads; {} floats is not a multiple of 4",
                input.len()
            )));
        }
        let quads = (input.len() / 4) as u64;
        let per_block = u64::from(SM_COPY_THREADS * SM_COPY_QUADS_PER_THREAD);
        let blocks = u32::try_from(quads.div_ceil(per_block))
            .ok()
            .filter(|&blocks| blocks <= self.info.max_grid_dim.0)
            .ok_or_else(|| invalid(format!("{} floats need more than one grid", input.len())))?;
        let session = self.session()?;
        session.reserve(2 * size_of_val(input))?;
        let source = session.upload(input)?;
        let mut destination = session.alloc_poisoned(input.len())?;
        let config = LaunchConfig {
            grid_dim: (blocks.max(1), 1, 1),
            block_dim: (SM_COPY_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let before = session.kernel_ms();
            // SAFETY: the contract of `sm_copy`: both buffers hold `quads` quads (cudarc
            // allocations are 256-byte aligned), distinct allocations, `blocks` cover the quads.
            unsafe {
                session.launch(KernelId::plain(Family::SmCopy), config, |args| {
                    args.arg(&source);
                    args.arg(&mut destination);
                    args.arg(&quads);
                })?;
            }
            times.push(session.kernel_ms() - before);
        }
        let mut copy = vec![0.0; input.len()];
        session.download(&destination, &mut copy)?;
        Ok((copy, times))
    }
}
