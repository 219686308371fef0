//! Benchmark support (cargo feature `bench`): the copy rooflines the benchmark measures beside
//! the kernels, timed with CUDA events on the engine's stream.

use crate::abi::{SM_COPY_QUADS_PER_THREAD, SM_COPY_THREADS};
use crate::engine::Engine;
use crate::error::{ConvError, DriverContext, Result};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{LaunchConfig, PushKernelArg};

impl Engine {
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
                session.launch("sm_copy", config, |args| {
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
